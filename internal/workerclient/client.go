// Package workerclient is the pulling client of a remote worker (lark worker, and the Go worker
// SDK): it long-polls the server for tasks, verifies the signed envelopes, runs Starlark tasks
// through the run stage (package run: the same sandbox and limits as the server) or hands them to
// registered handlers, heartbeats the tasks it runs, and posts their results to the signed callback
// path. It never links the store (a test on go list -deps proves it).
package workerclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/workerproto"
)

// BasePath is the API base path the worker routes live under.
const BasePath = "/api/serverless-runtime/v1"

// Config configures a Client.
type Config struct {
	// Servers are the base URLs (http://host:port) of the servers to take work from. Each server
	// hands out the attempts its own dispatcher claimed, so a worker of a cluster polls every node;
	// heartbeats and results go to the server that handed the task out.
	Servers []string
	// Server, when set, is one more entry of Servers (the common case of one server).
	Server string
	// Keys signs requests and verifies answers.
	Keys *workerproto.Keyset
	// WorkerID names this worker (unique per process).
	WorkerID string
	// Concurrency bounds the tasks run at once (default 4).
	Concurrency int
	// PollWait is the long poll's wait (default 20 s).
	PollWait time.Duration
	// HTTP is the client (default: one without a timeout; each request has its own).
	HTTP   *http.Client
	Logger *slog.Logger
	// Starlark runs Starlark function tasks (lark worker); false only serves Handlers.
	Starlark bool
	// Handlers are the worker-provided implementations this worker serves, by
	// adapter_ref.definition_id (the Go worker SDK fills it).
	Handlers map[string]Handler
	// Egress performs the outbound requests (r_http_*) of Starlark tasks under the same rules as
	// the server's, with the tenant allowlist each task carries (default: egress.New with its
	// defaults, which refuse private and loopback addresses).
	Egress *egress.Client
	// TracerProvider records the worker's spans: one worker.execute span per task, a child of the
	// server's attempt span (the task's traceparent), and an r_http span per outbound request
	// (default: OpenTelemetry's global provider, a no-op unless the program set one).
	TracerProvider trace.TracerProvider
}

// SpanExecute is the name of a task's span on the worker (004 §9.2).
const SpanExecute = "worker.execute"

// Handler runs one task of a worker-provided implementation: it returns the result (encoded as
// JSON) or an error; a *sandbox.Error keeps its type and category, any other error is a
// non-retryable runtime error.
type Handler func(ctx context.Context, t workerproto.Task) (any, error)

// Client is a pulling worker.
type Client struct {
	cfg     Config
	runner  *run.Runner
	tracer  trace.Tracer
	mu      sync.Mutex
	running map[string]*running
	beat    time.Duration // the server's heartbeat interval (0 until the first poll answers)
	keysMu  sync.Mutex
	keyOf   map[string]int // server → the index of the key it last accepted (call)
}

type running struct {
	server      string // the base URL of the server that handed the task out
	cancel      context.CancelFunc
	interrupted bool // stopped by shutdown: reported as interrupted
	dropped     bool // the server no longer knows it: no result
}

// New returns a Client.
func New(cfg Config) *Client {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.PollWait <= 0 {
		cfg.PollWait = 20 * time.Second
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Egress == nil {
		cfg.Egress = egress.New(egress.Options{})
	}
	if cfg.Server != "" {
		cfg.Servers = append([]string{cfg.Server}, cfg.Servers...)
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	return &Client{cfg: cfg, running: map[string]*running{}, tracer: cfg.TracerProvider.Tracer(tracing.Name),
		runner: &run.Runner{Programs: sandbox.NewCache(256), Clock: clock.Real{}}}
}

// Run polls every server and runs tasks until ctx ends; then it stops polling, stops the tasks
// it runs, reports them interrupted (eligible for retry under their retry policy) and returns.
func (c *Client) Run(ctx context.Context) error {
	if len(c.cfg.Servers) == 0 {
		return errors.New("workerclient: no server to poll")
	}
	var tasks, pollers sync.WaitGroup
	hbCtx, stopHB := context.WithCancel(context.Background())
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); c.heartbeats(hbCtx) }()
	slots := make(chan struct{}, c.cfg.Concurrency)
	for _, server := range c.cfg.Servers {
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			c.poll(ctx, server, slots, &tasks)
		}()
	}
	pollers.Wait()
	// Shutdown: stop every running task and report it interrupted.
	c.mu.Lock()
	for _, r := range c.running {
		r.interrupted = true
		r.cancel()
	}
	c.mu.Unlock()
	tasks.Wait()
	stopHB()
	<-hbDone
	return nil
}

// poll long-polls one server until ctx ends. The slots are shared by the pollers of every server:
// a poll first holds one free slot (so an idle server's poll holds no more than one) and, when
// the last poll of this server brought work, as many more as are free; the slots a poll did not
// fill are given back at once. A server that cannot be reached is tried again with a backoff of
// up to 5 s, so a restarted node gets its pollers back within seconds.
func (c *Client) poll(ctx context.Context, server string, slots chan struct{}, tasks *sync.WaitGroup) {
	busy := false
	backoff := 250 * time.Millisecond
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		held := 1
		for busy && held < c.cfg.Concurrency && tryAcquire(slots) {
			held++
		}
		var reply workerproto.PollReply
		err := c.call(ctx, server, workerproto.PathPoll, workerproto.PollRequest{WorkerID: c.cfg.WorkerID, MaxTasks: held,
			WaitMS: c.cfg.PollWait.Milliseconds(), Starlark: c.cfg.Starlark, Definitions: c.definitions()}, &reply, c.cfg.PollWait+30*time.Second)
		got := 0
		if err == nil {
			got = min(len(reply.Tasks), held)
		}
		for range held - got {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.cfg.Logger.Warn("worker: poll failed; retrying", "server", server, "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 250 * time.Millisecond
		busy = got > 0
		if reply.HeartbeatIntervalMS > 0 {
			c.mu.Lock()
			if iv := time.Duration(reply.HeartbeatIntervalMS) * time.Millisecond; c.beat == 0 || iv < c.beat {
				c.beat = iv
			}
			c.mu.Unlock()
		}
		for _, t := range reply.Tasks[:got] {
			tctx, cancel := context.WithCancel(context.Background())
			r := &running{server: server, cancel: cancel}
			c.mu.Lock()
			c.running[t.ID] = r
			c.mu.Unlock()
			tasks.Add(1)
			go func() {
				defer func() { <-slots; tasks.Done() }()
				c.runTask(tctx, t, r)
			}()
		}
	}
}

// tryAcquire takes a free slot if there is one.
func tryAcquire(slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// heartbeats reports the running tasks to the servers that handed them out, every heartbeat
// interval (the shortest the servers asked for), one request per server, concurrently.
func (c *Client) heartbeats(ctx context.Context) {
	for {
		c.mu.Lock()
		wait := c.beat
		c.mu.Unlock()
		if wait <= 0 {
			wait = 100 * time.Millisecond // not known yet: nothing runs before the first poll answers
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		byServer := map[string][]string{}
		c.mu.Lock()
		for id, r := range c.running {
			byServer[r.server] = append(byServer[r.server], id)
		}
		c.mu.Unlock()
		var wg sync.WaitGroup
		for server, ids := range byServer {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.heartbeat(ctx, server, ids)
			}()
		}
		wg.Wait()
	}
}

// heartbeat reports ids to server and applies its answer: the tasks to cancel are stopped, those
// it no longer knows (its lease moved, or the server restarted) are stopped and dropped.
func (c *Client) heartbeat(ctx context.Context, server string, ids []string) {
	sort.Strings(ids)
	for len(ids) > 0 {
		n := min(len(ids), workerproto.MaxTasksPerHeartbeat)
		var reply workerproto.HeartbeatReply
		if err := c.call(ctx, server, workerproto.PathHeartbeat, workerproto.Heartbeat{WorkerID: c.cfg.WorkerID, Tasks: ids[:n]}, &reply, 30*time.Second); err != nil {
			c.cfg.Logger.Warn("worker: heartbeat failed", "server", server, "err", err)
			return
		}
		ids = ids[n:]
		c.mu.Lock()
		for _, id := range reply.Cancel {
			if r, ok := c.running[id]; ok {
				r.cancel()
			}
		}
		for _, id := range reply.Unknown {
			if r, ok := c.running[id]; ok {
				r.dropped = true
				r.cancel()
			}
		}
		c.mu.Unlock()
	}
}

// runTask runs t and posts its result.
func (c *Client) runTask(ctx context.Context, t workerproto.Task, r *running) {
	defer func() {
		c.mu.Lock()
		delete(c.running, t.ID)
		c.mu.Unlock()
	}()
	log := c.cfg.Logger.With("tenant_id", t.TenantID, "invocation_id", t.InvocationID, "task_id", t.ID)
	log.Info("worker: task started", "kind", t.Kind)
	ctx, span := c.startTask(ctx, t)
	res := workerproto.Result{TaskID: t.ID, WorkerID: c.cfg.WorkerID, LeaseOwner: t.LeaseOwner}
	var interrupted, dropped bool
	defer func() { endTask(span, res, dropped) }()
	if out, rerr, metrics, timeline, err := c.execute(ctx, r.server, t); err != nil {
		res.Error = &workerproto.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "worker: " + err.Error()}
	} else {
		res.Output, res.Metrics, res.Timeline = out, metrics, timeline
		if rerr != nil {
			res.Output = nil
			res.Error = &workerproto.Error{TypeID: rerr.TypeID, Category: rerr.Category, Message: rerr.Message, Details: rerr.Details}
		}
	}
	c.mu.Lock()
	interrupted, dropped = r.interrupted, r.dropped
	c.mu.Unlock()
	if dropped {
		log.Info("worker: task dropped (the server no longer holds it)")
		return
	}
	if interrupted {
		res.Interrupted, res.Output, res.Error = true, nil, nil
	}
	c.report(t, r.server, res, log)
}

// taskAttrs are the attributes of a task's spans: ids only, never params, results or payloads.
func (c *Client) taskAttrs(t workerproto.Task) []attribute.KeyValue {
	var rec struct {
		Attempt int `json:"attempt"`
	}
	attrs := []attribute.KeyValue{tracing.AttrTenant.String(t.TenantID), tracing.AttrEntrypoint.String(t.EntrypointID),
		tracing.AttrInvocation.String(t.InvocationID)}
	if json.Unmarshal(t.Record, &rec) == nil && rec.Attempt > 0 {
		attrs = append(attrs, tracing.AttrAttempt.Int(rec.Attempt))
	}
	return attrs
}

// startTask starts a task's worker.execute span, a child of the server's attempt span (the
// task's trace context): its r_http spans are its children, and its outbound requests carry
// its traceparent.
func (c *Client) startTask(ctx context.Context, t workerproto.Task) (context.Context, trace.Span) {
	ctx = tracing.Continue(ctx, t.TraceParent, t.TraceState)
	ctx, span := c.tracer.Start(ctx, SpanExecute, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(append(c.taskAttrs(t), tracing.AttrTask.String(t.ID), tracing.AttrWorker.String(c.cfg.WorkerID))...)
	}
	return ctx, span
}

// endTask ends a task's span with the outcome the worker reports (lark.status: succeeded,
// failed, interrupted) or dropped, when the server no longer held the task and no result was
// posted.
func endTask(span trace.Span, res workerproto.Result, dropped bool) {
	if !span.IsRecording() {
		return
	}
	switch {
	case dropped:
		span.SetAttributes(tracing.AttrStatus.String("dropped"))
	case res.Interrupted:
		span.SetAttributes(tracing.AttrStatus.String("interrupted"))
		span.SetStatus(codes.Error, "interrupted")
	case res.Error != nil:
		span.SetAttributes(tracing.AttrStatus.String("failed"))
		span.SetStatus(codes.Error, res.Error.TypeID)
	case res.Output != nil:
		span.SetAttributes(tracing.AttrStatus.String("succeeded"))
	}
	span.End()
}

// report posts a task's result to the server that handed it out. A failure to reach it (or its
// 503) is tried again a few times over about 3 s; after that, or on a refusal, the result is
// given up: the server's lease on the attempt runs out and the attempt is reclaimed and run again,
// so a lost result costs a re-run, never a lost invocation.
func (c *Client) report(t workerproto.Task, server string, res workerproto.Result, log *slog.Logger) {
	wait := 250 * time.Millisecond
	for try := 1; ; try++ {
		var ack map[string]any
		err := c.call(context.Background(), server, t.ResultPath, res, &ack, 30*time.Second)
		if err == nil {
			return
		}
		var se *StatusError
		if (errors.As(err, &se) && se.Status != http.StatusServiceUnavailable) || try == 4 {
			log.Warn("worker: result not accepted", "server", server, "err", err)
			return
		}
		time.Sleep(wait)
		wait *= 2
	}
}

func (c *Client) definitions() []string {
	out := make([]string, 0, len(c.cfg.Handlers))
	for id := range c.cfg.Handlers {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// handle runs a task of a worker-provided implementation with its handler, within its timeout.
func (c *Client) handle(ctx context.Context, t workerproto.Task) (out json.RawMessage, rerr *sandbox.Error, metrics, timeline json.RawMessage, err error) {
	h, ok := c.cfg.Handlers[t.DefinitionID]
	if !ok {
		return nil, nil, nil, nil, fmt.Errorf("definition %q is not served here", t.DefinitionID)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(t.Limits.TimeoutMS)*time.Millisecond)
	defer cancel()
	start := time.Now()
	v, herr := h(ctx, t)
	m, err := json.Marshal(run.Metrics(time.Since(start), sandbox.Result{}, t.Limits.MemoryMB, 0))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if herr != nil {
		if !errors.As(herr, &rerr) {
			rerr = &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: herr.Error()}
		}
		return nil, rerr, m, nil, nil
	}
	if ctx.Err() != nil {
		return nil, &sandbox.Error{TypeID: sandbox.ErrTimeout, Category: sandbox.CategoryTimeout, Message: "the handler ran past the timeout"}, m, nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "result is not JSON: " + err.Error()}, m, nil, nil
	}
	return b, nil, m, nil, nil
}

// execute runs a task of server: a Starlark one through the run stage, a worker-provided one with
// its handler.
func (c *Client) execute(ctx context.Context, server string, t workerproto.Task) (out json.RawMessage, rerr *sandbox.Error, metrics, timeline json.RawMessage, err error) {
	if t.Kind == workerproto.KindAdapterRef {
		return c.handle(ctx, t)
	}
	if t.Kind != workerproto.KindStarlark || !c.cfg.Starlark {
		return nil, nil, nil, nil, fmt.Errorf("task kind %q is not served here", t.Kind)
	}
	var rec invocation.Record
	if err := json.Unmarshal(t.Record, &rec); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("record: %w", err)
	}
	var retry outcome.RetryPolicy
	if len(t.Retry) > 0 {
		if err := json.Unmarshal(t.Retry, &retry); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("retry: %w", err)
		}
	}
	lim := sandbox.Limits{Timeout: time.Duration(t.Limits.TimeoutMS) * time.Millisecond, CPU: t.Limits.CPU, MemoryMB: t.Limits.MemoryMB,
		MaxPayloadBytes: t.Limits.MaxPayloadBytes}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	h := &host{c: c, task: t, server: server}
	if trace.SpanFromContext(ctx).IsRecording() {
		h.attrs = c.taskAttrs(t)
	}
	// The server checks the returns schema again when it decides the outcome; here only the bound.
	r := c.runner.Function(ctx, run.Job{Record: rec, ProgramKey: t.EntrypointID, Source: t.Source, Limits: lim, Retry: retry}, h)
	m, err := json.Marshal(r.Outcome.Metrics)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tl, err := json.Marshal(r.Timeline)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return r.Outcome.Output, r.Outcome.Err, m, tl, nil
}

// call signs body, posts it to path on server and decodes the verified answer into out. It signs
// with the key that server last accepted (the keyset's first at the start); a server that does
// not know that key (a rotation that reached the workers first) is asked again with the next key
// of the keyset, which is then the one used with it.
func (c *Client) call(ctx context.Context, server, path string, body, out any, timeout time.Duration) error {
	ids := c.cfg.Keys.IDs()
	start := c.keyFor(server, len(ids))
	var err error
	for i := range ids {
		kid := ids[(start+i)%len(ids)]
		err = c.callWith(ctx, kid, server, path, body, out, timeout)
		var se *StatusError
		if !errors.As(err, &se) || se.Status != http.StatusUnauthorized || !strings.Contains(se.Body, "unknown key id") {
			if err == nil && i > 0 {
				c.useKey(server, (start+i)%len(ids))
			}
			return err
		}
	}
	return err
}

// keyFor is the index of the key server last accepted (0: the keyset's first).
func (c *Client) keyFor(server string, n int) int {
	c.keysMu.Lock()
	defer c.keysMu.Unlock()
	if i, ok := c.keyOf[server]; ok && i < n {
		return i
	}
	return 0
}

// useKey remembers that server accepts the key at index i.
func (c *Client) useKey(server string, i int) {
	c.keysMu.Lock()
	defer c.keysMu.Unlock()
	if c.keyOf == nil {
		c.keyOf = map[string]int{}
	}
	c.keyOf[server] = i
}

// callWith is call signed with key kid.
func (c *Client) callWith(ctx context.Context, kid, server, path string, body, out any, timeout time.Duration) error {
	env, err := c.cfg.Keys.SignWith(kid, body, time.Now(), workerproto.DefaultLifetime)
	if err != nil {
		return err
	}
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(server, "/")+BasePath+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, workerproto.MaxBodyBytes+1))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Status: resp.StatusCode, Body: string(rb)}
	}
	var renv workerproto.Envelope
	if err := json.Unmarshal(rb, &renv); err != nil {
		return fmt.Errorf("answer is not an envelope: %w", err)
	}
	if err := c.cfg.Keys.Verify(renv, time.Now(), nil); err != nil {
		return fmt.Errorf("answer refused: %w", err)
	}
	return json.Unmarshal(renv.Body, out)
}

// StatusError is a non-200 answer of the server (its body is a problem document).
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Status, e.Body) }

// host is a worker's sandbox host: logs and outbound calls are collected for the result's
// timeline; outbound HTTP goes through the egress layer with the task's tenant allowlist, and its
// secret references are resolved by the server that handed the task out; child invocations are not
// available on a remote worker (docs/workers.md).
type host struct {
	c        *Client
	task     workerproto.Task
	server   string
	mu       sync.Mutex
	timeline []invocation.Event
	egress   int64
	attrs    []attribute.KeyValue // of the task's r_http spans
}

var errNotOnWorker = errors.New("not available on a remote worker")

func (h *host) HTTP(ctx context.Context, req sandbox.HTTPRequest) (sandbox.HTTPResponse, error) {
	ctx, span := run.HTTPSpan(ctx, h.c.tracer, req, h.attrs...)
	call := run.DoHTTP(ctx, h.c.cfg.Egress, req, h.task.AllowedOutboundDomains, secretResolver{h})
	call.EndSpan(span)
	h.add(invocation.EventHTTPCall, call.Data)
	if call.Err != nil {
		return sandbox.HTTPResponse{}, call.Err
	}
	h.mu.Lock()
	h.egress += int64(call.EgressBytes)
	h.mu.Unlock()
	return call.Response, nil
}

// secretResolver resolves a task's secret references through the server that handed it out
// (workerproto.PathSecret). Values stay in memory for the one request; errors never hold one.
type secretResolver struct{ h *host }

func (r secretResolver) ResolveSecret(ctx context.Context, name string) (egress.Secret, error) {
	h := r.h
	if h.task.SecretPath == "" {
		return egress.Secret{}, egress.ErrSecretsUnavailable
	}
	var reply workerproto.SecretReply
	err := h.c.call(ctx, h.server, h.task.SecretPath, workerproto.SecretRequest{TaskID: h.task.ID, WorkerID: h.c.cfg.WorkerID,
		LeaseOwner: h.task.LeaseOwner, Name: name}, &reply, 30*time.Second)
	var se *StatusError
	switch {
	case errors.As(err, &se) && se.Status == http.StatusNotFound:
		return egress.Secret{}, egress.ErrUnknownSecret
	case err != nil:
		return egress.Secret{}, egress.ErrSecretsUnavailable
	}
	return egress.Secret{Value: reply.Value, AllowedHosts: reply.AllowedHosts}, nil
}

func (h *host) Invoke(context.Context, sandbox.InvokeRequest) (sandbox.InvokeResult, error) {
	return sandbox.InvokeResult{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "r_invoke_v1: " + errNotOnWorker.Error()}
}

// add appends a timeline entry (at most 1000 of them) of type typ, with data as its Data.
func (h *host) add(typ invocation.EventType, data invocation.Payload) {
	e, err := invocation.Event{Type: typ, At: time.Now().UTC()}.WithData(data)
	if err != nil {
		return // the entries are strings and numbers; nothing to record otherwise
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.timeline) < 1000 {
		h.timeline = append(h.timeline, e)
	}
}

func (h *host) Log(_ context.Context, msg string, fields map[string]any) {
	h.add(invocation.EventLog, invocation.Log{Message: outcome.Cut(msg, sandbox.MaxLogEntryBytes), Fields: fields})
}

func (h *host) Now() time.Time { return time.Now() }

func (h *host) Drain() []invocation.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.timeline
	h.timeline = nil
	return t
}

func (h *host) TakeEgress() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.egress
	h.egress = 0
	return n
}

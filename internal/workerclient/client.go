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

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/workerproto"
)

// BasePath is the API base path the worker routes live under.
const BasePath = "/api/serverless-runtime/v1"

// Config configures a Client.
type Config struct {
	// Server is the server's base URL (http://host:port).
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
}

// Handler runs one task of a worker-provided implementation: it returns the result (encoded as
// JSON) or an error; a *sandbox.Error keeps its type and category, any other error is a
// non-retryable runtime error.
type Handler func(ctx context.Context, t workerproto.Task) (any, error)

// Client is a pulling worker.
type Client struct {
	cfg     Config
	runner  *run.Runner
	mu      sync.Mutex
	running map[string]*running
	beat    time.Duration // the server's heartbeat interval (0 until the first poll answers)
}

type running struct {
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
	return &Client{cfg: cfg, running: map[string]*running{},
		runner: &run.Runner{Programs: sandbox.NewCache(256), Clock: clock.Real{}}}
}

// Run polls and runs tasks until ctx ends; then it stops polling, stops the tasks it runs,
// reports them interrupted (eligible for retry under their retry policy) and returns.
func (c *Client) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	hbCtx, stopHB := context.WithCancel(context.Background())
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); c.heartbeats(hbCtx) }()
	slots := make(chan struct{}, c.cfg.Concurrency)
	for ctx.Err() == nil {
		free := c.cfg.Concurrency - len(slots)
		if free == 0 {
			select { // wait for a slot
			case slots <- struct{}{}:
				<-slots
			case <-ctx.Done():
			}
			continue
		}
		var reply workerproto.PollReply
		err := c.call(ctx, workerproto.PathPoll, workerproto.PollRequest{WorkerID: c.cfg.WorkerID, MaxTasks: free,
			WaitMS: c.cfg.PollWait.Milliseconds(), Starlark: c.cfg.Starlark, Definitions: c.definitions()}, &reply, c.cfg.PollWait+30*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			c.cfg.Logger.Warn("worker: poll failed; retrying", "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		if reply.HeartbeatIntervalMS > 0 {
			c.mu.Lock()
			c.beat = time.Duration(reply.HeartbeatIntervalMS) * time.Millisecond
			c.mu.Unlock()
		}
		for _, t := range reply.Tasks {
			slots <- struct{}{}
			tctx, cancel := context.WithCancel(context.Background())
			r := &running{cancel: cancel}
			c.mu.Lock()
			c.running[t.ID] = r
			c.mu.Unlock()
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				c.runTask(tctx, t, r)
			}()
		}
	}
	// Shutdown: stop every running task and report it interrupted.
	c.mu.Lock()
	for _, r := range c.running {
		r.interrupted = true
		r.cancel()
	}
	c.mu.Unlock()
	wg.Wait()
	stopHB()
	<-hbDone
	return nil
}

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
		c.mu.Lock()
		ids := make([]string, 0, len(c.running))
		for id := range c.running {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		var reply workerproto.HeartbeatReply
		if err := c.call(ctx, workerproto.PathHeartbeat, workerproto.Heartbeat{WorkerID: c.cfg.WorkerID, Tasks: ids}, &reply, 30*time.Second); err != nil {
			c.cfg.Logger.Warn("worker: heartbeat failed", "err", err)
			continue
		}
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
	res := workerproto.Result{TaskID: t.ID, WorkerID: c.cfg.WorkerID, LeaseOwner: t.LeaseOwner}
	if out, rerr, metrics, timeline, err := c.execute(ctx, t); err != nil {
		res.Error = &workerproto.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "worker: " + err.Error()}
	} else {
		res.Output, res.Metrics, res.Timeline = out, metrics, timeline
		if rerr != nil {
			res.Output = nil
			res.Error = &workerproto.Error{TypeID: rerr.TypeID, Category: rerr.Category, Message: rerr.Message, Details: rerr.Details}
		}
	}
	c.mu.Lock()
	interrupted, dropped := r.interrupted, r.dropped
	c.mu.Unlock()
	if dropped {
		log.Info("worker: task dropped (the server no longer holds it)")
		return
	}
	if interrupted {
		res.Interrupted, res.Output, res.Error = true, nil, nil
	}
	var ack map[string]any
	if err := c.call(context.Background(), t.ResultPath, res, &ack, 30*time.Second); err != nil {
		log.Warn("worker: result not accepted", "err", err)
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

// execute runs a task: a Starlark one through the run stage, a worker-provided one with its handler.
func (c *Client) execute(ctx context.Context, t workerproto.Task) (out json.RawMessage, rerr *sandbox.Error, metrics, timeline json.RawMessage, err error) {
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
	h := &host{}
	// The server checks the returns schema again when it decides the outcome; here only the bound.
	r := c.runner.Function(ctx, run.Attempt{Record: rec, ProgramKey: t.EntrypointID, Source: t.Source, Limits: lim, Retry: retry}, h)
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

// call signs body, posts it to path and decodes the verified answer into out.
func (c *Client) call(ctx context.Context, path string, body, out any, timeout time.Duration) error {
	env, err := c.cfg.Keys.Sign(body, time.Now(), 5*time.Minute)
	if err != nil {
		return err
	}
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.cfg.Server, "/")+BasePath+path, bytes.NewReader(b))
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

// host is a worker's sandbox host: logs are collected for the result; outbound HTTP and child
// invocations are not available on a remote worker (docs/workers.md).
type host struct {
	mu       sync.Mutex
	timeline []invocation.Event
}

var errNotOnWorker = errors.New("not available on a remote worker")

func (h *host) HTTP(context.Context, sandbox.HTTPRequest) (sandbox.HTTPResponse, error) {
	return sandbox.HTTPResponse{}, &sandbox.Error{TypeID: sandbox.ErrHTTPTransport, Category: "non_retryable", Message: "r_http_*: " + errNotOnWorker.Error()}
}

func (h *host) Invoke(context.Context, sandbox.InvokeRequest) (sandbox.InvokeResult, error) {
	return sandbox.InvokeResult{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "r_invoke_v1: " + errNotOnWorker.Error()}
}

func (h *host) Log(_ context.Context, msg string, fields map[string]any) {
	d := map[string]any{"message": outcome.Cut(msg, sandbox.MaxLogEntryBytes)}
	if len(fields) > 0 {
		d["fields"] = fields
	}
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.timeline) < 1000 {
		h.timeline = append(h.timeline, invocation.Event{Type: invocation.EventLog, Data: b, At: time.Now().UTC()})
	}
}

func (h *host) Now() time.Time { return time.Now() }

func (h *host) Drain() []invocation.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.timeline
	h.timeline = nil
	return t
}

func (h *host) TakeEgress() int64 { return 0 }

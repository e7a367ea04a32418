// Package workerclient is the pulling client of a remote worker (lark worker, and the Go worker
// SDK): it long-polls the servers for tasks, verifies the signed envelopes, hands each task to the
// injected Executor (Starlark tasks: lark worker injects internal/workerexec, which runs them
// through the run stage) or to a registered Handler (worker-provided implementations), heartbeats
// the tasks it runs, and posts their results to the signed callback path of the server that handed
// each one out. It links neither the store nor the interpreter, nor an OpenTelemetry exporter (a
// test on go list -deps proves it), so the Go worker SDK built on it stays small.
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
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/tracing/tracekey"
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
	// Version is what the worker runs (at most 128 bytes; "" for none). It and Concurrency are
	// sent with each poll, for GET /workers, to a server that takes them (describedPollRefused).
	Version string
	// PollWait is the long poll's wait (default 20 s).
	PollWait time.Duration
	// HTTP is the client (default: one without a timeout; each request has its own).
	HTTP *http.Client
	// Logger receives the client's logs (default slog.Default()).
	Logger *slog.Logger
	// Starlark runs Starlark function tasks (lark worker injects workerexec's); nil: the worker
	// does not take them and serves only Handlers.
	Starlark Executor
	// Handlers are the worker-provided implementations this worker serves, by
	// adapter_ref.definition_id (the Go worker SDK fills it).
	Handlers map[string]Handler
	// TracerProvider records the worker's spans: one worker.execute span per task, a child of the
	// server's attempt span (the task's traceparent); an executor records its own under it
	// (default: OpenTelemetry's global provider, a no-op unless the program set one).
	TracerProvider trace.TracerProvider
}

// SpanExecute is the name of a task's span on the worker (004 §9.2).
const SpanExecute = "worker.execute"

// Handler runs one task of a worker-provided implementation: it returns the result (encoded as
// JSON) or an error; a *workerproto.Error keeps its type and category, any other error is a
// non-retryable runtime error.
type Handler func(ctx context.Context, t workerproto.Task) (any, error)

// Executor runs the tasks of kind starlark. ctx carries the task's worker.execute span and ends
// on cancellation and shutdown; the executor enforces the task's timeout itself.
type Executor interface {
	Execute(ctx context.Context, t workerproto.Task, s Session) Outcome
}

// Session is what an executor may ask of the server that handed its task out.
type Session interface {
	// Secret resolves a secret reference of the task (workerproto.PathSecret): a *StatusError
	// with status 404 when the server does not give it, ErrNoSecretPath when the task has no
	// secret path.
	Secret(ctx context.Context, name string) (workerproto.SecretReply, error)
}

// Outcome is what an executor reports of a task: Output (the result as JSON) or Error, with the
// execution's metrics and timeline entries (both JSON).
type Outcome struct {
	Output   json.RawMessage
	Error    *workerproto.Error
	Metrics  json.RawMessage
	Timeline json.RawMessage
}

// Client is a pulling worker.
type Client struct {
	cfg     Config
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
	cfg.Version = truncateUTF8(cfg.Version, MaxVersionBytes)
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Server != "" {
		cfg.Servers = append([]string{cfg.Server}, cfg.Servers...)
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	return &Client{cfg: cfg, running: map[string]*running{}, tracer: cfg.TracerProvider.Tracer(tracekey.Name)}
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
	describe := true // send Concurrency and Version until the server refuses them
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
		req := workerproto.PollRequest{WorkerID: c.cfg.WorkerID, MaxTasks: held, WaitMS: c.cfg.PollWait.Milliseconds(),
			Starlark: c.cfg.Starlark != nil, Definitions: c.definitions()}
		if describe {
			req.Concurrency, req.Version = c.cfg.Concurrency, c.cfg.Version
		}
		err := c.call(ctx, server, workerproto.PathPoll, req, &reply, c.cfg.PollWait+30*time.Second)
		got := 0
		if err == nil {
			got = min(len(reply.Tasks), held)
		}
		for range held - got {
			<-slots
		}
		if err != nil && describe && describedPollRefused(err) {
			describe = false
			c.cfg.Logger.Info("worker: the server does not take a poll's concurrency and version (a Lark older than them); polling without them", "server", server)
			continue
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

// MaxVersionBytes bounds Config.Version as the server does a poll's version; a longer one is cut.
const MaxVersionBytes = 128

// truncateUTF8 is s cut to at most n bytes, at a character's boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// describedPollRefused reports whether err is a server's refusal of a poll's unknown members: a
// server older than the poll's concurrency and version answers 422 "unknown field" (the poll's
// other members are as old as the protocol).
func describedPollRefused(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == http.StatusUnprocessableEntity && strings.Contains(se.Body, "unknown field")
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

// ParseServers returns the server base URLs of values, each one URL or several comma-separated
// (lark worker --server a,b --server c): trimmed, empty entries skipped, repeated ones once, in
// order. Each must be an absolute http or https URL with a host and no query; an empty list is an
// error.
func ParseServers(values ...string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSuffix(strings.TrimSpace(s), "/")
			if s == "" || seen[s] {
				continue
			}
			u, err := url.Parse(s)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
				return nil, fmt.Errorf("server URL %q: want http(s)://host[:port]", s)
			}
			seen[s] = true
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no server URL")
	}
	return out, nil
}

// Package workerhub is the server side of remote workers: it takes the function attempts the
// dispatcher claims (execution.Remote), hands them to workers that long-poll for work, keeps their
// heartbeats in memory, passes cancellations back in the heartbeat answers, and turns a worker's
// result into the run stage's result for the completion (package complete, with the lease check).
//
// Claims, leases, fairness and limits stay where they are: the dispatcher's claim stage claims the
// attempt under this node's lease and its slot stays busy while a worker runs it. Heartbeats never
// write: the claim's lease already covers the attempt's timeout plus the lease grace, so a live
// worker needs no extension, and a worker that stops heartbeating past the heartbeat timeout is
// dropped and its attempt's lease runs out and is reclaimed by the claim stage (retried or failed
// under the retry policy) like a crashed node's.
package workerhub

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/execution"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/workerproto"
)

// Defaults of Config.
const (
	DefaultHeartbeatInterval = 30 * time.Second
	DefaultHeartbeatTimeout  = 5 * time.Minute
	// MaxTimelineEntries bounds the timeline entries of one result.
	MaxTimelineEntries = 1000
)

// Config configures a Service.
type Config struct {
	// Functions sends Starlark function attempts to workers (lark serve --remote-workers); without
	// it the service takes nothing and every function runs in the server.
	Functions bool
	// HeartbeatInterval is how often a worker heartbeats; HeartbeatTimeout how long without one
	// before its tasks are given up (defaults 30 s and 5 min).
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// Runner checks results (payload bound, returns schema) and Clock decides retries.
	Runner *run.Runner
	Clock  clock.Clock
	Logger *slog.Logger
	// Secrets resolves the secret references of the outbound requests of a task, for the worker it
	// is assigned to (PathSecret); nil refuses them (the request fails as on a server without a
	// master key).
	Secrets SecretSource
	// Bindings restricts worker keys to tenants (nil: every key takes every tenant's tasks).
	Bindings Bindings
	// Node names this node in the workers it records; Store is where RunRecorder writes them every
	// RecordEvery (default DefaultRecordEvery) and Workers lists them from (nil: not recorded, and
	// Workers answers 503).
	Node        string
	Store       WorkerStore
	RecordEvery time.Duration
}

// Bindings restricts worker keys to tenants: a key it names takes, reports on and resolves secrets
// for the tasks of its tenants only; a key it does not name, every tenant's.
type Bindings map[string]map[string]bool

// Allows reports whether the worker key kid may handle a task of tenantID.
func (b Bindings) Allows(kid, tenantID string) bool {
	ts, ok := b[kid]
	return !ok || ts[tenantID]
}

// ParseBindings reads bindings written "kid=tenant1,tenant2" (one per key; a key given twice adds
// the tenants): the form of lark serve's --worker-key-tenants.
func ParseBindings(specs []string) (Bindings, error) {
	b := Bindings{}
	for _, spec := range specs {
		kid, list, ok := strings.Cut(strings.TrimSpace(spec), "=")
		if !ok || kid == "" || list == "" {
			return nil, fmt.Errorf("worker key tenants %q: want kid=tenant1,tenant2", spec)
		}
		if b[kid] == nil {
			b[kid] = map[string]bool{}
		}
		for _, t := range strings.Split(list, ",") {
			if t = strings.TrimSpace(t); t != "" {
				b[kid][t] = true
			}
		}
	}
	return b, nil
}

type keyCtx struct{}

// WithKey returns ctx carrying the id of the worker key a request was signed with (the API's
// envelope check sets it); the service holds the request to that key's Bindings.
func WithKey(ctx context.Context, kid string) context.Context {
	return context.WithValue(ctx, keyCtx{}, kid)
}

// allows reports whether the key of ctx may handle a task of tenantID.
func (s *Service) allows(ctx context.Context, tenantID string) bool {
	kid, _ := ctx.Value(keyCtx{}).(string)
	return s.cfg.Bindings.Allows(kid, tenantID)
}

// SecretSource resolves a tenant's secrets for one invocation (internal/secrets implements it).
type SecretSource interface {
	ForTenant(tenantID, invocationID string) egress.SecretResolver
}

// Stats are the service's counters.
type Stats struct {
	// Heartbeats counts heartbeats received and HeartbeatTasks the task reports they carried.
	Heartbeats, HeartbeatTasks int64
	// HeartbeatWrites counts database writes caused by heartbeats (none: they are kept in memory).
	HeartbeatWrites int64
	// Lost counts tasks given up because their worker stopped heartbeating.
	Lost int64
	// Recorded counts the worker rows written by Record (at most one per worker per write).
	Recorded int64
}

// Service is the worker service. It is safe for concurrent use.
type Service struct {
	cfg   Config
	mu    sync.Mutex
	queue []*task          // waiting for a worker, oldest first
	tasks map[string]*task // by task id, queued or assigned
	ready chan struct{}    // closed and replaced when a task is queued
	stop  chan struct{}    // closed by Close: polls answer at once
	once  sync.Once
	seen  map[string]*sighting // by worker id: the workers that polled or heartbeat here
	stats struct{ heartbeats, heartbeatTasks, writes, lost, recorded atomic.Int64 }
}

type task struct {
	id       string
	ra       execution.RemoteAttempt
	wire     workerproto.Task
	worker   string
	lastBeat time.Time
	canceled bool
	done     chan run.Result // buffered 1
	beat     chan struct{}   // buffered 1: a heartbeat arrived
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RecordEvery <= 0 {
		cfg.RecordEvery = DefaultRecordEvery
	}
	return &Service{cfg: cfg, tasks: map[string]*task{}, ready: make(chan struct{}), stop: make(chan struct{}), seen: map[string]*sighting{}}
}

// Close makes every poll, waiting or to come, answer at once with what is queued (nothing, in
// practice), so that a server shutting down is not held by long polls. Heartbeats and results are
// still taken while the server drains.
func (s *Service) Close() { s.once.Do(func() { close(s.stop) }) }

// Stats returns the counters.
func (s *Service) Stats() Stats {
	return Stats{Heartbeats: s.stats.heartbeats.Load(), HeartbeatTasks: s.stats.heartbeatTasks.Load(),
		HeartbeatWrites: s.stats.writes.Load(), Lost: s.stats.lost.Load(), Recorded: s.stats.recorded.Load()}
}

// Takes reports whether attempts of e go to workers: Starlark functions when Config.Functions.
func (s *Service) Takes(e entrypoint.Entrypoint) bool {
	return s.cfg.Functions && e.Kind == entrypoint.KindFunction
}

func newID() string {
	var b [18]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return "wt_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// StopGrace is how long, once the node stops (Close), an attempt a worker runs waits for its
// result before it is left to its lease.
const StopGrace = 3 * time.Second

// Run queues a claimed attempt for the workers and waits for its result (execution.Remote). An
// attempt no worker took before its lease would no longer cover its timeout, or whose worker
// stopped heartbeating, answers ok=false. When ctx ends (the invocation was canceled) the task is
// marked canceled for its worker's next heartbeat answer and the result is still awaited, to be
// recorded as a late result. When the node stops (Close), a task no worker took answers ok=false
// at once and one a worker runs after StopGrace: the drain does not wait for results that could
// no longer reach this node, and the lease brings the attempt back elsewhere.
func (s *Service) Run(ctx context.Context, ra execution.RemoteAttempt) (run.Result, bool) {
	t := newTask(ctx, ra)
	s.enqueue(t)
	defer s.forget(t)
	return s.await(ctx, t)
}

// newTask builds the task for an attempt: the wire form a worker polls, with the trace context
// of ctx, the record and the retry policy.
func newTask(ctx context.Context, ra execution.RemoteAttempt) *task {
	rec := ra.Attempt.Invocation
	t := &task{id: newID(), ra: ra, done: make(chan run.Result, 1), beat: make(chan struct{}, 1)}
	lim := ra.Run.Limits
	t.wire = workerproto.Task{ID: t.id, TenantID: rec.TenantID, InvocationID: rec.ID, EntrypointID: rec.EntrypointID,
		Kind: workerproto.KindStarlark, Params: rec.Params, Source: ra.Run.Source, Returns: ra.Returns, DefinitionID: ra.DefinitionID,
		Limits:     workerproto.Limits{TimeoutMS: lim.Timeout.Milliseconds(), CPU: lim.CPU, MemoryMB: lim.MemoryMB, MaxPayloadBytes: lim.MaxPayloadBytes},
		LeaseOwner: ra.Attempt.Lease.Owner, LeaseExpiresAt: ra.Attempt.Lease.ExpiresAt.UTC().Format(time.RFC3339Nano),
		ResultPath:             strings.Replace(workerproto.PathResult, "{task_id}", t.id, 1),
		SecretPath:             strings.Replace(workerproto.PathSecret, "{task_id}", t.id, 1),
		AllowedOutboundDomains: append([]string{}, ra.AllowedOutboundDomains...)}
	t.wire.TraceParent, t.wire.TraceState = tracing.Carry(ctx)
	if ra.DefinitionID != "" {
		t.wire.Kind, t.wire.Source = workerproto.KindAdapterRef, ""
	}
	if b, err := json.Marshal(rec); err == nil {
		t.wire.Record = b
	}
	if b, err := json.Marshal(ra.Run.Retry); err == nil {
		t.wire.Retry = b
	}
	return t
}

// enqueue registers t and queues it for the workers, waking the polls that wait.
func (s *Service) enqueue(t *task) {
	s.mu.Lock()
	s.tasks[t.id] = t
	s.queue = append(s.queue, t)
	close(s.ready)
	s.ready = make(chan struct{})
	s.mu.Unlock()
}

// await waits for the result of the queued task t and gives up (ok=false) as Run describes: when
// the node stops (at once if no worker took t, else after StopGrace), when ctx ends before a
// worker took t, and when alive finds the attempt lost. It checks alive on every wake-up.
func (s *Service) await(ctx context.Context, t *task) (run.Result, bool) {
	rec := t.ra.Attempt.Invocation
	log := s.cfg.Logger.With("tenant_id", rec.TenantID, "invocation_id", rec.ID, "task_id", t.id)
	tick := time.NewTicker(min(s.cfg.HeartbeatInterval, time.Second))
	defer tick.Stop()
	done := ctx.Done()
	stopping := s.stop
	var giveUp <-chan time.Time
	for {
		select {
		case res := <-t.done:
			return res, true
		case <-stopping:
			// The node stops: a task no worker took is left to the lease; one a worker runs gets
			// a short grace for its result, which can still arrive while the API drains.
			stopping = nil
			if s.dequeueUnassigned(t) {
				return run.Result{}, false
			}
			grace := time.NewTimer(StopGrace)
			defer grace.Stop()
			giveUp = grace.C
		case <-giveUp:
			log.Warn("workers: the node stops before its worker's result came; the attempt's lease runs out and it is reclaimed")
			return run.Result{}, false
		case <-done:
			done = nil
			if s.markCanceled(t) {
				return run.Result{}, false // nothing ran; the cancel already ended the invocation
			}
		case <-t.beat:
		case <-tick.C:
		}
		if !s.alive(t, log) {
			return run.Result{}, false
		}
	}
}

// dequeueUnassigned reports whether no worker has taken t, removing it from the queue if so.
func (s *Service) dequeueUnassigned(t *task) bool {
	s.mu.Lock()
	unassigned := t.worker == ""
	if unassigned {
		s.dequeue(t)
	}
	s.mu.Unlock()
	return unassigned
}

// markCanceled marks t canceled for its worker's next heartbeat answer and reports whether no
// worker has taken it.
func (s *Service) markCanceled(t *task) bool {
	s.mu.Lock()
	t.canceled = true
	unassigned := t.worker == ""
	s.mu.Unlock()
	return unassigned
}

// alive reports whether t can still produce a result. It is lost (logged, and false) when no
// worker took it and its lease would no longer cover its timeout (it is dequeued), or when its
// worker stopped heartbeating (counted in the lost stat).
func (s *Service) alive(t *task, log *slog.Logger) bool {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	worker, last := t.worker, t.lastBeat
	if worker == "" && t.ra.Attempt.Lease.ExpiresAt.Sub(now) < t.ra.Run.Limits.Timeout {
		s.dequeue(t)
		s.mu.Unlock()
		log.Warn("workers: no worker took the attempt in time; its lease runs out and it is reclaimed")
		return false
	}
	s.mu.Unlock()
	if worker != "" && now.Sub(last) > s.cfg.HeartbeatTimeout {
		s.stats.lost.Add(1)
		log.Warn("workers: worker stopped heartbeating; its attempt's lease runs out and it is reclaimed", "worker_id", worker)
		return false
	}
	return true
}

func (s *Service) forget(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, t.id)
	s.dequeue(t)
}

// dequeue removes t from the queue; s.mu is held.
func (s *Service) dequeue(t *task) {
	for i, q := range s.queue {
		if q == t {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			return
		}
	}
}

// Poll gives worker req.WorkerID up to req.MaxTasks queued tasks, waiting up to req.WaitMS for
// the first (or until ctx ends). The worker is noted as seen, in memory (Record writes it later).
func (s *Service) Poll(ctx context.Context, req workerproto.PollRequest) (workerproto.PollReply, error) {
	if err := checkWorkerID(req.WorkerID); err != nil {
		return workerproto.PollReply{}, err
	}
	if req.MaxTasks < 1 || req.MaxTasks > workerproto.MaxTasksPerPoll || req.WaitMS < 0 || req.WaitMS > workerproto.MaxWaitMS ||
		len(req.Definitions) > workerproto.MaxDefinitions || len(req.Version) > 128 || req.Concurrency < 0 {
		return workerproto.PollReply{}, problem.Validation("invalid poll", []problem.Issue{{Path: "$.body.max_tasks", Code: "OUT_OF_RANGE",
			Message: fmt.Sprintf("max_tasks must be 1..%d, wait_ms 0..%d, definitions at most %d, concurrency not negative and version at most 128 bytes", workerproto.MaxTasksPerPoll,
				workerproto.MaxWaitMS, workerproto.MaxDefinitions)}})
	}
	s.mu.Lock()
	seen := s.see(ctx, req.WorkerID, &req, s.cfg.Clock.Now())
	seen.polling++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		seen.polling--
		seen.last, seen.dirty = s.cfg.Clock.Now(), true
		s.mu.Unlock()
	}()
	serves := map[string]bool{}
	for _, d := range req.Definitions {
		serves[d] = true
	}
	reply := workerproto.PollReply{Tasks: []workerproto.Task{}, HeartbeatIntervalMS: s.cfg.HeartbeatInterval.Milliseconds(),
		HeartbeatTimeoutMS: s.cfg.HeartbeatTimeout.Milliseconds()}
	timer := time.NewTimer(time.Duration(req.WaitMS) * time.Millisecond)
	defer timer.Stop()
	for {
		s.mu.Lock()
		now := s.cfg.Clock.Now()
		kept := s.queue[:0]
		for _, t := range s.queue {
			// A worker gets Starlark tasks when it runs Starlark, and worker-provided ones only
			// when it serves their definition.
			fits := (t.wire.Kind == workerproto.KindStarlark && req.Starlark) || (t.wire.Kind == workerproto.KindAdapterRef && serves[t.wire.DefinitionID])
			// A task whose lease no longer covers its timeout is not handed out (Run gives it up).
			fits = fits && t.ra.Attempt.Lease.ExpiresAt.Sub(now) >= t.ra.Run.Limits.Timeout && s.allows(ctx, t.wire.TenantID)
			if !fits || len(reply.Tasks) >= req.MaxTasks {
				kept = append(kept, t)
				continue
			}
			t.worker, t.lastBeat = req.WorkerID, now
			reply.Tasks = append(reply.Tasks, t.wire)
		}
		clear(s.queue[len(kept):])
		s.queue = kept
		ready := s.ready
		s.mu.Unlock()
		if len(reply.Tasks) > 0 {
			return reply, nil
		}
		select {
		case <-ready:
		case <-timer.C:
			return reply, nil
		case <-ctx.Done():
			return reply, nil
		case <-s.stop:
			return reply, nil
		}
	}
}

// Heartbeat records that worker hb.WorkerID runs hb.Tasks, in memory only, and answers which of
// them to cancel and which the server no longer knows.
func (s *Service) Heartbeat(ctx context.Context, hb workerproto.Heartbeat) (workerproto.HeartbeatReply, error) {
	if err := checkWorkerID(hb.WorkerID); err != nil {
		return workerproto.HeartbeatReply{}, err
	}
	if len(hb.Tasks) > workerproto.MaxTasksPerHeartbeat {
		return workerproto.HeartbeatReply{}, problem.Validation("too many tasks", []problem.Issue{{Path: "$.body.tasks", Code: "TOO_MANY_ITEMS",
			Message: fmt.Sprintf("at most %d tasks", workerproto.MaxTasksPerHeartbeat)}})
	}
	s.stats.heartbeats.Add(1)
	s.stats.heartbeatTasks.Add(int64(len(hb.Tasks)))
	reply := workerproto.HeartbeatReply{Cancel: []string{}, Unknown: []string{}}
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.see(ctx, hb.WorkerID, nil, now)
	for _, id := range hb.Tasks {
		t, ok := s.tasks[id]
		if !ok || t.worker != hb.WorkerID || !s.allows(ctx, t.wire.TenantID) {
			reply.Unknown = append(reply.Unknown, id)
			continue
		}
		t.lastBeat = now
		select {
		case t.beat <- struct{}{}:
		default:
		}
		if t.canceled {
			reply.Cancel = append(reply.Cancel, id)
		}
	}
	return reply, nil
}

// Result takes a worker's result of task res.TaskID: the server decides the outcome from it (the
// output checked against the payload bound and the returns schema, an error under the retry
// policy), and execution completes it with the lease check. A task the server no longer knows
// answers 404 (its attempt was given up; the lease moved or runs out).
func (s *Service) Result(ctx context.Context, taskID string, res workerproto.Result) error {
	s.mu.Lock()
	t, ok := s.tasks[taskID]
	if ok && (t.worker != res.WorkerID || res.TaskID != taskID || t.ra.Attempt.Lease.Owner != res.LeaseOwner || !s.allows(ctx, t.wire.TenantID)) {
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		return problem.NotFound("task %s not found", taskID)
	}
	out, err := s.decide(t, res)
	if err != nil {
		return err
	}
	out.Outcome.Metrics.Worker = res.WorkerID // the record names the worker that ran it
	select {
	case t.done <- out:
		return nil
	default:
		return problem.Conflict("already_reported", "task %s already has a result", taskID)
	}
}

// Secret resolves secret req.Name for the outbound request of task taskID, run by req.WorkerID
// under the task's lease. The value goes only to the worker the task is assigned to; a task this
// server does not hold, or holds for another worker or lease, answers 404 like an unknown secret,
// so that nothing tells a caller which tenants' secrets exist.
func (s *Service) Secret(ctx context.Context, taskID string, req workerproto.SecretRequest) (workerproto.SecretReply, error) {
	if err := checkWorkerID(req.WorkerID); err != nil {
		return workerproto.SecretReply{}, err
	}
	s.mu.Lock()
	t, ok := s.tasks[taskID]
	ok = ok && req.TaskID == taskID && t.worker == req.WorkerID && t.ra.Attempt.Lease.Owner == req.LeaseOwner && !t.canceled &&
		s.allows(ctx, t.wire.TenantID)
	s.mu.Unlock()
	if !ok {
		return workerproto.SecretReply{}, problem.NotFound("task %s not found", taskID)
	}
	if s.cfg.Secrets == nil {
		return workerproto.SecretReply{}, problem.New(problem.TypeUnavailable, "secrets are not available on this server")
	}
	rec := t.ra.Attempt.Invocation
	sec, err := s.cfg.Secrets.ForTenant(rec.TenantID, rec.ID).ResolveSecret(ctx, req.Name)
	switch {
	case errors.Is(err, egress.ErrUnknownSecret):
		return workerproto.SecretReply{}, problem.NotFound("secret not found")
	case errors.Is(err, egress.ErrSecretsUnavailable):
		return workerproto.SecretReply{}, problem.New(problem.TypeUnavailable, "secrets are not available on this server")
	case err != nil:
		return workerproto.SecretReply{}, problem.Internal(err)
	}
	return workerproto.SecretReply{Value: sec.Value, AllowedHosts: append([]string{}, sec.AllowedHosts...)}, nil
}

// decide turns a worker's report into the run stage's result.
func (s *Service) decide(t *task, res workerproto.Result) (run.Result, error) {
	a := t.ra.Run
	rec := a.Record
	var metrics invocation.Metrics
	if len(res.Metrics) > 0 {
		if err := json.Unmarshal(res.Metrics, &metrics); err != nil {
			return run.Result{}, problem.Validation("invalid metrics", []problem.Issue{{Path: "$.body.metrics", Code: "INVALID", Message: err.Error()}})
		}
	}
	timeline, err := s.timeline(rec, res.Timeline)
	if err != nil {
		return run.Result{}, err
	}
	var rerr *sandbox.Error
	var output json.RawMessage
	switch {
	case res.Interrupted:
		rerr = &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "the worker was stopped before the attempt ended"}
	case res.Error != nil:
		rerr = &sandbox.Error{TypeID: res.Error.TypeID, Category: res.Error.Category, Message: res.Error.Message, Details: res.Error.Details}
		if rerr.TypeID == "" || rerr.Category == "" {
			return run.Result{}, problem.Validation("invalid error", []problem.Issue{{Path: "$.body.error", Code: "MISSING_FIELD", Message: "type_id and category are required"}})
		}
	default:
		var v any
		if err := invocation.DecodeJSON(res.Output, &v); err != nil {
			return run.Result{}, problem.Validation("invalid output", []problem.Issue{{Path: "$.body.output", Code: "INVALID_JSON", Message: err.Error()}})
		}
		output, rerr = s.cfg.Runner.CheckOutput(a, v)
	}
	o := outcome.Decide(rec, a.Retry, output, rerr, false, s.cfg.Clock.Now())
	o.Metrics = metrics
	return run.Result{Outcome: o, Timeline: timeline}, nil
}

// timeline accepts a worker's informational entries ({"type":"log"|"http_call","data":{...}}), at most
// MaxTimelineEntries, and gives them server-side keys and attempts.
func (s *Service) timeline(rec invocation.Record, raw json.RawMessage) ([]invocation.Event, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var in []struct {
		Type invocation.EventType `json:"type"`
		Data json.RawMessage      `json:"data"`
		At   time.Time            `json:"at"`
	}
	if err := json.Unmarshal(raw, &in); err != nil || len(in) > MaxTimelineEntries {
		return nil, problem.Validation("invalid timeline", []problem.Issue{{Path: "$.body.timeline", Code: "INVALID",
			Message: fmt.Sprintf("an array of at most %d log entries", MaxTimelineEntries)}})
	}
	out := make([]invocation.Event, 0, len(in))
	for i, e := range in {
		if e.Type != invocation.EventLog && e.Type != invocation.EventHTTPCall {
			continue // only the informational entries are taken from a worker
		}
		out = append(out, invocation.Event{Type: e.Type, Data: e.Data, At: e.At, EngineAttempt: rec.EngineAttempt, LogicalAttempt: rec.Attempt,
			IdempotencyKey: invocation.IdempotencyKey(rec.ID, fmt.Sprintf("worker-%d-%d", rec.EngineAttempt, i), rec.Attempt, e.Type, "")})
	}
	return out, nil
}

func checkWorkerID(id string) error {
	if id == "" || len(id) > 128 {
		return problem.Validation("invalid worker_id", []problem.Issue{{Path: "$.body.worker_id", Code: "INVALID", Message: "worker_id is required, at most 128 bytes"}})
	}
	return nil
}

// Collectors are the service's Prometheus counters (lark_worker_*), read from Stats at scrape time.
func (s *Service) Collectors() []prometheus.Collector {
	counter := func(name, help string, f func(Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(s.Stats())) })
	}
	return []prometheus.Collector{
		counter("lark_worker_heartbeats_total", "Heartbeats received from remote workers.", func(st Stats) int64 { return st.Heartbeats }),
		counter("lark_worker_heartbeat_tasks_total", "Task reports carried by remote workers' heartbeats.", func(st Stats) int64 { return st.HeartbeatTasks }),
		counter("lark_worker_heartbeat_writes_total", "Database writes caused by heartbeats (none: heartbeats are kept in memory).", func(st Stats) int64 { return st.HeartbeatWrites }),
		counter("lark_worker_records_total", "Rows of seen workers written by this node (at most one per worker per record interval).", func(st Stats) int64 { return st.Recorded }),
		counter("lark_worker_tasks_lost_total", "Tasks given up because their worker stopped heartbeating (each ends its lease: one write).", func(st Stats) int64 { return st.Lost }),
	}
}

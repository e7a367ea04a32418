// Package invoke starts work and applies control actions: it accepts invocations (sync, async,
// dry-run), deduplicates them by Idempotency-Key, serves cached results, plans and queues the
// runtime's own starts (schedules, triggers, webhooks) in their callers' transactions, and carries
// out control actions (cancel, retry, replay, suspend, resume). It builds the engine below it from
// one Config (catalog, writer, spawn, complete, and execution with the workflow engine), which runs
// what it starts: sync calls on the request, queued work through the dispatcher (package dispatch,
// given Runner and ClaimConfig). Every state change is an event appended to the invocation's log;
// the queue and leases live in the store.
package invoke

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/admission"
	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/bulklane"
	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/complete"
	"github.com/larkrun/lark/internal/cost"
	"github.com/larkrun/lark/internal/dagrun"
	"github.com/larkrun/lark/internal/dispatch"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/execution"
	"github.com/larkrun/lark/internal/host"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/ratelimit"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/spawn"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/waits"
	"github.com/larkrun/lark/internal/workflow"
	"github.com/larkrun/lark/internal/writer"
)

// Store is the store methods the invocation service and the stages it builds use (store.Store has
// them all): those of the claim stage it configures (dispatch.Store), the catalog's, the writer's,
// the workflow engine's, and the invocation, log, list and response-cache reads of its own.
type Store interface {
	dispatch.Store
	catalog.Store
	store.IdempotencyReader
	Invocation(ctx context.Context, tenantID, id string) (invocation.Record, error)
	Events(ctx context.Context, q store.EventLogQuery) ([]invocation.Event, error)
	StatusAt(ctx context.Context, tenantID, invocationID string, seq int64) (invocation.Status, error)
	ListInvocations(ctx context.Context, v invocation.Viewer, q store.ListQuery) (store.Page[invocation.Record], error)
	CountTenantRunning(ctx context.Context, tenantID string) (int64, error)
	LatestMaterialization(ctx context.Context, tenantID, assetKey, partitionKey string) (asset.Materialization, error)
	// Enqueue queues fn like Update and returns at once (store.Store.Enqueue).
	Enqueue(ctx context.Context, fn func(store.Tx) error) (wait func() error)
}

// Config wires a Service.
type Config struct {
	Store    Store
	Schemas  *schema.Registry
	Programs *sandbox.Cache
	Egress   *egress.Client
	// Secrets resolves the {{secret:NAME}} references of outbound request headers, per tenant
	// (internal/secrets); nil refuses requests that have any.
	Secrets host.SecretSource
	Clock   clock.Clock
	IDs     idgen.Generator
	Logger  *slog.Logger
	// Node names this process in leases; unique per process start.
	Node string
	// Remote, when set, runs the function attempts it takes (Remote.Takes) in remote workers;
	// the dispatcher's claims and the completion stay here.
	Remote execution.Remote
	// LeaseGrace is added to an attempt's timeout to form its lease (default 30 s).
	LeaseGrace time.Duration
	// Wake is called when new work is queued (the dispatcher's wake-up); it must not block.
	Wake func()
	// Announce, when set, is called too when a committed write queued work, to wake the other nodes
	// sharing the store (internal/wakeup); it must not block. Freed slots wake this node only.
	Announce func()
	// AnnounceFinished, when set, is called with the id of a sync invocation whose end a write of
	// this process committed after the transaction that started it (a sync workflow's later
	// activation), so that the node whose request waits for it is woken (wakeup.Hub.Finished).
	AnnounceFinished func(id string)
	// AnnounceStop, when set, is called with the id of an invocation whose execution a control
	// action (cancel, suspend) stopped here, so that the other nodes stop theirs (wakeup.Hub.Stop):
	// the attempt may run on any node, or in a worker another node handed it to.
	AnnounceStop func(id string)
	// EndHook, when set, hears of every invocation a write leaves in a terminal status, inside that
	// write's transaction (writer.EndHook): the event triggers service records there the outcome of
	// the invocations its triggers started.
	EndHook writer.EndHook
	// RateLimiters are the RateLimiter plugins by strategy (default: ratelimit.Default()).
	RateLimiters *ratelimit.Registry
	// SyncStartDelay is how long a sync function or workflow call runs before its start is written
	// on its own (default DefaultSyncStartDelay; negative: at once). A call that ends sooner, the
	// rule, is written once, start and outcome together (syncrun.go; a workflow's with its journal
	// unless it calls out or waits first: workflow.Claim.HoldStart); a longer one becomes visible
	// (GET, list, cancel) this long after it began, plus one group commit.
	SyncStartDelay time.Duration
	// MaxDepth bounds r_invoke_v1 nesting (default 8): an invocation started through the API (or a
	// schedule, a trigger, a replay) is at depth 0, its children at 1; a child deeper than MaxDepth
	// is refused. It holds for function children and workflow children alike.
	MaxDepth int
	// MaxChildren bounds the r_invoke_v1 children one invocation starts (default 100): per
	// execution attempt for calls from function code (and from a workflow's steps), and over the
	// whole current journal for a workflow's own (durable) children. The call over it fails with a
	// non-retryable error result; the children already started are not affected.
	MaxChildren int
	// MaxChildrenInFlight bounds the sync children of one invocation running at the same time
	// (default 4): a call beyond it waits for one of them to end, as in a pool (within the
	// execution's deadline). It keeps one tenant's fan-out from flooding the shared store.
	MaxChildrenInFlight int
	// MaxSyncChildren bounds the sync children running at once in this process, over all
	// invocations and tenants (default 256): they run in their parents' goroutines, outside the
	// dispatcher's pool, so this is their pool. A call over it fails at once with a retryable
	// error result.
	MaxSyncChildren int
	// LiveWait is how long a suspended workflow's execution stays in memory waiting to continue
	// without a replay (default 1 min; negative: never). A timer due later than that, and any wait
	// that lasts longer, end the execution; the next activation replays its journal.
	LiveWait time.Duration
	// MaxLive bounds the workflow executions waiting in memory (default 1000).
	MaxLive int
	// MaxJournalEntries and MaxJournalBytes bound one journal of a workflow (the entries since its
	// start or its last r_continue_as_new_v1, and their encoded size): the call that would exceed
	// them fails the workflow with a non-retryable error that says to continue as new. Defaults
	// 100,000 entries and 64 MiB.
	MaxJournalEntries int
	MaxJournalBytes   int
	// MaxPayloadBytes bounds params (checked when an invocation starts: 413 payload_too_large),
	// results, workflow step inputs and outputs, helper arguments (r_http_post_v1 bodies,
	// r_invoke_v1 params) and published event payloads, encoded as JSON (default
	// DefaultMaxPayloadBytes, 2 MiB). A result over it fails the attempt with the non-retryable
	// payload_too_large error; it is never stored truncated.
	MaxPayloadBytes int
	// CPU shares the CPU between the tenants' executions (cpushare.Scheduler); nil runs them
	// unscheduled, each competing for the Go scheduler alone.
	CPU sandbox.CPUScheduler
	// Gate admits executions when they can run well (admission: runnable executions per tenant,
	// memory); nil starts them at once. Their timeouts start once admitted. A sync call waits for
	// admission before anything is written, at most its timeout, and is refused with 503 (and
	// Retry-After) when it cannot be admitted in that time.
	Gate *admission.Gate
	// Pricing prices executions and invocations (nil: everything costs 0). Each execution's cost is
	// recorded in the event that closes it, each invocation's price in its created event.
	Pricing *cost.Pricing
	// Observer hears of invocations created, dequeued and finished, and of starts refused by a rate
	// limit or a quota (default: writer.NopObserver).
	Observer writer.Observer
	// SyncPoll is how often a sync invocation of a workflow that waits for its end reads the store,
	// for an end this process was not told of (default 1 s). Ends committed here wake it at once.
	SyncPoll time.Duration
	// Sleep, when set, is the wait between two attempts of an r_http_* call's retry (default: a
	// real timer). `lark test` advances its fake clock with it instead of waiting.
	Sleep func(ctx context.Context, d time.Duration) error
	// Publisher publishes the events code emits with r_emit_v1, in the transaction that records
	// what emitted them (nil: waits.Publisher, which stores the event and resolves the waits of
	// suspended workflows; the server gives the event bus, which also matches triggers).
	Publisher writer.Publisher
	// Tracing starts the spans of attempts, workflow steps, r_http_* calls and r_invoke_v1 children
	// (nil: off; records still carry trace ids).
	Tracing *tracing.Tracing
	// Blobs holds DAG tasks' outputs (docs/dag.md, "Runs"); a DAG run with an asset task fails
	// its task without one.
	Blobs blob.Store
}

// DefaultMaxPayloadBytes is the default Config.MaxPayloadBytes: 2 MiB, as Temporal's payload limit.
const DefaultMaxPayloadBytes = sandbox.DefaultMaxPayloadBytes

// Service implements the invocation use cases: starts and control. It builds the stages below it
// (catalog, writer, spawn, completion, execution with the workflow engine) from its Config.
type Service struct {
	cfg       Config
	catalog   *catalog.Catalog
	writer    *writer.Writer
	spawn     *spawn.Spawner
	completer *complete.Completer
	exec      *execution.Executor
	closing   chan struct{} // closed by Close
	closeOnce sync.Once
}

// DefaultSyncStartDelay is Config.SyncStartDelay's default: longer than nearly every sync call,
// short enough that a long one shows up at once to whoever looks.
const DefaultSyncStartDelay = 500 * time.Millisecond

// Defaults of Config's child budget (docs/starlark.md, "Child invocations").
const (
	DefaultMaxChildren         = 100
	DefaultMaxChildrenInFlight = 4
	DefaultMaxSyncChildren     = execution.DefaultMaxSyncChildren
)

// NewService returns a Service.
func NewService(cfg Config) *Service {
	cfg = withDefaults(cfg)
	s := &Service{cfg: cfg, closing: make(chan struct{})}
	s.catalog = catalog.New(catalog.Config{Store: cfg.Store, Schemas: cfg.Schemas, Clock: cfg.Clock, MaxPayloadBytes: cfg.MaxPayloadBytes})
	s.writer = writer.New(writer.Config{Store: cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger, Observer: cfg.Observer, Wake: cfg.Wake,
		Announce: cfg.Announce, AnnounceFinished: cfg.AnnounceFinished, EndHook: cfg.EndHook, Publisher: cfg.Publisher, SyncPoll: cfg.SyncPoll})
	s.spawn = spawn.New(spawn.Config{Catalog: s.catalog, Clock: cfg.Clock, IDs: cfg.IDs, Node: cfg.Node, LeaseGrace: cfg.LeaseGrace,
		Pricing: cfg.Pricing, RateLimiters: cfg.RateLimiters, Observer: s.writer.Observer(), MaxDepth: cfg.MaxDepth})
	dags := dagrun.New(dagrun.Config{Store: cfg.Store, Blobs: cfg.Blobs, Catalog: s.catalog, Spawn: s.spawn, Clock: cfg.Clock,
		Logger: cfg.Logger, Observer: dagObserver(cfg.Observer)})
	s.completer = complete.New(complete.Config{Writer: s.writer, Spawn: s.spawn, Pricing: cfg.Pricing, Clock: cfg.Clock, Runs: dags})
	publisher := cfg.Publisher
	if publisher == nil {
		publisher = waits.Publisher{}
	}
	s.exec = execution.New(execution.Config{Store: cfg.Store, Catalog: s.catalog, Writer: s.writer, Spawn: s.spawn, Completer: s.completer,
		Runner: &run.Runner{Programs: cfg.Programs, CPU: cfg.CPU, Gate: cfg.Gate, Schemas: cfg.Schemas, Clock: cfg.Clock},
		Host: host.Env{Clock: cfg.Clock, Egress: cfg.Egress, Secrets: cfg.Secrets, Catalog: s.catalog, Writer: s.writer, Spawn: s.spawn,
			Publisher: publisher, Sleep: cfg.Sleep, MaxChildren: cfg.MaxChildren, MaxChildrenInFlight: cfg.MaxChildrenInFlight},
		Tracing: cfg.Tracing,
		Workflow: workflow.Config{Store: cfg.Store, CPU: cfg.CPU, Gate: cfg.Gate, LiveWait: cfg.LiveWait, MaxLive: cfg.MaxLive,
			MaxJournalEntries: cfg.MaxJournalEntries, MaxJournalBytes: cfg.MaxJournalBytes, MaxChildren: cfg.MaxChildren,
			MaxPayloadBytes: cfg.MaxPayloadBytes},
		Remote: cfg.Remote, DAGs: dags, Clock: cfg.Clock, Logger: cfg.Logger, LeaseGrace: cfg.LeaseGrace, MaxSyncChildren: cfg.MaxSyncChildren})
	return s
}

// dagObserver is o as the DAG engine's observer, when it is one (package metrics).
func dagObserver(o writer.Observer) dagrun.Observer {
	if d, ok := o.(dagrun.Observer); ok {
		return d
	}
	return nil
}

// withDefaults is cfg with the defaults of the settings the service reads itself.
func withDefaults(cfg Config) Config {
	if cfg.LeaseGrace <= 0 {
		cfg.LeaseGrace = 30 * time.Second
	}
	if cfg.SyncStartDelay == 0 {
		cfg.SyncStartDelay = DefaultSyncStartDelay
	}
	if cfg.MaxChildren <= 0 {
		cfg.MaxChildren = DefaultMaxChildren
	}
	if cfg.MaxChildrenInFlight <= 0 {
		cfg.MaxChildrenInFlight = DefaultMaxChildrenInFlight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Node == "" {
		cfg.Node = cfg.IDs.New("node")
	}
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	return cfg
}

// Close ends the workflow executions waiting in memory (their invocations are suspended, durably;
// the next activation replays) and the sync requests waiting for workflows' ends. Call it before
// closing the store.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.exec.Close()
	})
}

// WakeFinished wakes this process's sync requests waiting for the invocations ids, whose end
// another node committed (wakeup.Options.Finished).
func (s *Service) WakeFinished(ids []string) {
	for _, id := range ids {
		s.writer.Finished(id)
	}
}

// ClaimConfig is the configuration of the claim stage that feeds the Runner (dispatch.NewStoreClaimer):
// its store and clock, the catalog's answers (tenants' policies, parsed definitions), and the node
// and lease grace its leases are taken under, which Run's completions check.
func (s *Service) ClaimConfig() dispatch.ClaimConfig {
	return dispatch.ClaimConfig{Store: s.cfg.Store, Catalog: s.catalog.ForClaims(), Clock: s.cfg.Clock, Node: s.cfg.Node,
		LeaseGrace: s.cfg.LeaseGrace}
}

// Runner is the dispatcher's runner (dispatch.Runner): the executor this service runs sync calls
// with, so that both share the executions running here (cancel) and the live workflows. At
// start-up on an exclusive store, its RecoverLeases reclaims what a previous process held.
func (s *Service) Runner() *execution.Executor { return s.exec }

// StartRequest is the body of POST /invocations.
type StartRequest struct {
	EntrypointID string          `json:"entrypoint_id"`
	Mode         string          `json:"mode,omitempty"`
	Params       json.RawMessage `json:"params,omitempty"`
	DryRun       bool            `json:"dry_run,omitempty"`
}

// StartOptions carry the request headers that matter.
type StartOptions struct {
	IdempotencyKey string
	CorrelationID  string
	TraceParent    string // W3C traceparent, if the caller sent one
}

// Result is 000's InvocationResult.
type Result struct {
	Record invocation.Record
	DryRun bool
	Cached bool
}

// Started says what Start did.
type Started struct {
	Result
	// Replayed: an Idempotency-Key matched an earlier identical request; Record is that invocation.
	Replayed bool
	// Queued: an async invocation was accepted (202).
	Queued bool
	// Unfinished: a sync invocation of a workflow was still not terminal when its wait ended
	// (traits.limits.timeout_seconds after the start, or the request's end): 202 like async, with
	// the current record.
	Unfinished bool
}

func viewer(sc auth.SecurityContext) entrypoint.Viewer {
	return entrypoint.Viewer{TenantID: sc.TenantID, SubjectID: sc.SubjectID, Operator: sc.Operator}
}

// admitSync waits until a call of d in mode may start, when it is a sync call (Config.Gate), at
// most d's timeout, and returns ctx carrying the ticket for its execution and the ticket's Leave.
// A call that cannot start in that time is refused with 503 and a Retry-After: nothing was
// written, and the same request may be sent again.
func (s *Service) admitSync(ctx context.Context, mode, tenantID string, d catalog.Definition) (context.Context, func(), error) {
	if s.cfg.Gate == nil || mode != string(invocation.ModeSync) {
		return ctx, func() {}, nil
	}
	wctx, cancel := context.WithTimeout(ctx, d.Timeout())
	defer cancel()
	t, err := s.cfg.Gate.Enter(wctx, tenantID, d.Traits.Limits.MemoryMB<<20)
	if err == nil {
		return admission.Admitted(ctx, t), t.Leave, nil
	}
	if ctx.Err() != nil {
		return ctx, nil, ctx.Err() // the caller went away
	}
	s.cfg.Logger.WarnContext(ctx, "sync call refused: not admitted within its timeout", "tenant_id", tenantID, "timeout", d.Timeout())
	pe := problem.New(problem.TypeUnavailable, "the runtime is busy: this sync call could not start within its timeout (%v); nothing was started, retry later or invoke it async", d.Timeout())
	pe.RetryAfter = 1
	return ctx, nil, pe
}

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// cacheKey is 000's response-cache key: (subject or tenant, entrypoint id, version, idempotency key),
// always within the caller's tenant, plus the hash of the request (entrypoint id as given, mode and
// canonical params) so that a cached result is served only to the request that produced it: the
// same key with another request misses the cache and meets the Idempotency-Key check (422
// IDEMPOTENCY_KEY_REUSED within the deduplication window).
func cacheKey(sc auth.SecurityContext, e entrypoint.Entrypoint, key, reqHash string) string {
	scope := "tenant:" + sc.TenantID
	if e.Owner.OwnerType == entrypoint.OwnerUser {
		scope = "subject:" + sc.SubjectID
	}
	return hashOf(sc.TenantID, scope, e.GTSID, e.Version, key, reqHash)
}

// Start accepts an invocation (POST /invocations): validation, dry-run, response cache,
// Idempotency-Key deduplication, quota, then a durable record; sync invocations run before it
// returns, async ones are queued.
func (s *Service) Start(ctx context.Context, sc auth.SecurityContext, req StartRequest, opt StartOptions) (Started, error) {
	var out Started
	e, d, mode, err := s.startTarget(ctx, sc, req)
	if err != nil {
		return out, err
	}
	// 3. Params match the schema.
	params, canon, err := s.catalog.ValidateParams(d, req.Params)
	if err != nil {
		return out, err
	}
	policy, err := s.catalog.Policy(ctx, sc.TenantID)
	if err != nil {
		return out, problem.Internal(err)
	}
	now := s.cfg.Clock.Now()
	correlation := s.startCorrelation(ctx, opt)
	if err := s.startQuota(ctx, sc.TenantID, policy); err != nil {
		return out, err
	}
	if req.DryRun {
		out.Record, out.DryRun = s.startDryRun(sc.TenantID, req, e, d, mode, canon, correlation, now), true
		return out, nil
	}
	// The request an Idempotency-Key stands for: the entrypoint id as given, the mode and the
	// canonical params (schema defaults applied). Only a request with a key needs it.
	reqHash := ""
	if opt.IdempotencyKey != "" {
		reqHash = hashOf(req.EntrypointID, mode, string(canon))
	}
	ckey, cached, hit := s.startCached(ctx, sc, e, d, opt.IdempotencyKey, reqHash, now)
	if hit {
		out.Record, out.Cached = cached, true
		return out, nil
	}
	// Rate limit (000): after dry-run and cache hits, which do not count; a refused request creates
	// nothing; the permit of a request that turns out to replay an Idempotency-Key is given back.
	permit, err := s.spawn.RateLimit(sc.TenantID, e.GTSID, d, now)
	if err != nil {
		return out, err
	}
	// The request's bulk lane (a large body) is given up while the call is admitted, written and
	// run, and taken again for its answer: the call's execution has a CPU share of its own.
	defer bulklane.Pause(ctx)()
	// A sync call starts only when it can run: it waits for admission before anything is written.
	ctx, leave, err := s.admitSync(ctx, mode, sc.TenantID, d)
	if err != nil {
		permit.Release()
		return out, err
	}
	defer leave()
	rec := s.spawn.NewRecord(e, d, sc.TenantID, sc.SubjectID, invocation.Mode(mode), canon, now)
	rec.CorrelationID, rec.CacheKey = correlation, ckey
	rec.TraceID, rec.SpanID = spawn.RecordIDs(ctx, opt.TraceParent)
	// A plain sync call (no Idempotency-Key, no concurrency quota) has nothing to check in its start's
	// transaction, so it runs while its start is held back: its outcome usually joins that write
	// (runSync; a workflow's with its journal, workflow.Claim.HoldStart).
	plain := mode == string(invocation.ModeSync) && opt.IdempotencyKey == "" && policy.Quotas.MaxConcurrentExecutions == nil
	if plain {
		return s.startPlain(ctx, rec, params, e, d, now, permit)
	}
	v, err := s.startAccept(ctx, sc, opt.IdempotencyKey, policy, rec, d, reqHash, now, permit)
	if err != nil {
		return out, err
	}
	return s.startAccepted(ctx, sc.TenantID, mode, v, e, d, now)
}

// startTarget is Start's first phase: the caller may invoke (a tenant operator), the entrypoint
// exists and is callable from outside, and the mode asked for (or the entrypoint's default) is one
// it supports. It returns the entrypoint, its definition and the mode.
func (s *Service) startTarget(ctx context.Context, sc auth.SecurityContext, req StartRequest) (entrypoint.Entrypoint, catalog.Definition, string, error) {
	if !sc.Has(auth.RoleOperator) {
		return entrypoint.Entrypoint{}, catalog.Definition{}, "", problem.Forbidden("invoking entrypoints needs the operator role")
	}
	if sc.Operator {
		return entrypoint.Entrypoint{}, catalog.Definition{}, "", problem.Forbidden("the platform operator has no tenant to invoke in; use a tenant token")
	}
	// 1. Entrypoint exists; 2. it is callable.
	e, err := s.catalog.Resolve(ctx, viewer(sc), req.EntrypointID)
	if err != nil {
		return e, catalog.Definition{}, "", err
	}
	d, err := s.catalog.Definition(e)
	if err != nil {
		return e, d, "", problem.Internal(err)
	}
	if d.Traits.Entrypoint != nil && !*d.Traits.Entrypoint {
		return e, d, "", problem.Forbidden("entrypoint %s is internal (traits.entrypoint: false): it can only be called from other entrypoints with r_invoke_v1", e.GTSID)
	}
	mode := req.Mode
	if mode == "" {
		mode = d.Traits.Invocation.Default
	}
	supported := false
	for _, m := range d.Traits.Invocation.Supported {
		supported = supported || m == mode
	}
	if !supported {
		return e, d, mode, problem.Validation("mode not supported", []problem.Issue{{Path: "$.mode", Code: "INVALID_VALUE",
			Message: fmt.Sprintf("mode %q is not in traits.invocation.supported %v", mode, d.Traits.Invocation.Supported)}})
	}
	if d.IsDAG() && mode != string(invocation.ModeAsync) {
		return e, d, mode, problem.Validation("mode not supported", []problem.Issue{{Path: "$.mode", Code: "INVALID_VALUE",
			Message: "a DAG run is async: start it with mode \"async\" and follow its tasks (GET /invocations/{id}/tasks)"}})
	}
	return e, d, mode, nil
}

// startCorrelation is a start's correlation id: the caller's (the request header), else the
// request context's, else a new one.
func (s *Service) startCorrelation(ctx context.Context, opt StartOptions) string {
	correlation := opt.CorrelationID
	if correlation == "" {
		correlation = obs.CorrelationID(ctx)
	}
	if correlation == "" {
		correlation = s.cfg.IDs.New("corr")
	}
	return correlation
}

// startQuota is Start's early check of the tenant's concurrency quota, before anything is written
// (the start's transaction checks it again when it writes).
func (s *Service) startQuota(ctx context.Context, tenantID string, policy tenant.Policy) error {
	// 4. Tenant quota: at capacity when as many invocations run as max_concurrent_executions allows.
	err := s.spawn.CheckRunning(tenantID, policy.Quotas.MaxConcurrentExecutions, func() (int64, error) {
		return s.cfg.Store.CountTenantRunning(ctx, tenantID)
	})
	if _, quota := errors.AsType[*problem.Error](err); err != nil && !quota {
		return problem.Internal(err)
	} else if quota {
		s.spawn.QuotaRefused(tenantID)
	}
	return err
}

// startDryRun is the record a dry-run start answers with.
func (s *Service) startDryRun(tenantID string, req StartRequest, e entrypoint.Entrypoint, d catalog.Definition, mode string,
	canon json.RawMessage, correlation string, now time.Time) invocation.Record {
	// 000: a synthetic record; nothing persisted or executed; no cache, quota use or key effects.
	return invocation.Record{ID: "dryrun_" + strings.TrimPrefix(s.cfg.IDs.New("x"), "x_"), TenantID: tenantID,
		EntrypointID: req.EntrypointID, EntrypointVersion: e.Version, Status: invocation.StatusQueued,
		Mode: invocation.Mode(mode), Params: canon, CorrelationID: correlation, CreatedAt: now,
		Metrics: invocation.Metrics{MemoryLimitMB: &d.Traits.Limits.MemoryMB}, Warnings: spawn.Warnings(e)}
}

// startCached looks a start up in the response cache. It returns the cache key the new invocation
// carries ("" when the request is not cacheable) and, on a hit, the cached succeeded invocation.
func (s *Service) startCached(ctx context.Context, sc auth.SecurityContext, e entrypoint.Entrypoint, d catalog.Definition,
	idempotencyKey, reqHash string, now time.Time) (string, invocation.Record, bool) {
	// Response cache (000): Idempotency-Key + is_idempotent + max_age_seconds > 0, for this request only.
	ckey := ""
	if idempotencyKey != "" && d.Traits.IsIdempotent && d.Traits.Caching.MaxAgeSeconds > 0 {
		ckey = cacheKey(sc, e, idempotencyKey, reqHash)
		if ten, id, err := s.cfg.Store.CachedInvocation(ctx, ckey, now); err == nil && ten == sc.TenantID {
			if rec, err := s.cfg.Store.Invocation(ctx, ten, id); err == nil && rec.Status == invocation.StatusSucceeded {
				return ckey, rec, true
			}
		}
	}
	return ckey, invocation.Record{}, false
}

// startPlain runs a plain sync call while its start is written: a workflow's through
// startWorkflowSync, a function's through runSync.
func (s *Service) startPlain(ctx context.Context, rec invocation.Record, params any, e entrypoint.Entrypoint, d catalog.Definition,
	now time.Time, permit ratelimit.Decision) (Started, error) {
	if e.Kind == entrypoint.KindWorkflow {
		return s.startWorkflowSync(ctx, rec, e, d, now, permit)
	}
	var out Started
	final, err := s.runSync(context.WithoutCancel(ctx), rec, params, e, d, now)
	if err != nil {
		permit.Release()
		return out, problem.Internal(err)
	}
	out.Record = final
	return out, nil
}

// startVerdict is what a start's transaction came to: the invocation it created, or the earlier
// invocation its Idempotency-Key replays, or the refusal (a key reused for a different request, the
// concurrency quota) that undid its writes.
type startVerdict struct {
	created  invocation.Record
	replayOf string
	refused  error
}

// startKey is a start's Idempotency-Key ("" for none): the key as given, the scope it is kept in,
// the hash of the request it stands for, and how long it is kept.
type startKey struct {
	key, scope, reqHash string
	window              time.Duration
}

// startAccept writes a start that has something to check in its transaction (an Idempotency-Key,
// the concurrency quota, or an async call) and reports what it came to. The rate-limit permit is
// given back when nothing new was accepted; a refusal is returned as is, a failure as internal.
func (s *Service) startAccept(ctx context.Context, sc auth.SecurityContext, idempotencyKey string, policy tenant.Policy,
	rec invocation.Record, d catalog.Definition, reqHash string, now time.Time, permit ratelimit.Decision) (startVerdict, error) {
	window := time.Duration(policy.Idempotency.DeduplicationWindowSeconds) * time.Second
	if window <= 0 {
		window = 24 * time.Hour
	}
	// Keys are scoped to the caller (tenant and subject), as API idempotency keys usually are: one
	// user's key never replays another user's invocation.
	k := startKey{key: idempotencyKey, scope: "invoke:" + sc.SubjectID, reqHash: reqHash, window: window}
	var v startVerdict
	accept := func(tx store.Tx) error {
		var err error
		v, err = s.startAcceptTx(tx, k, policy.Quotas.MaxConcurrentExecutions, rec, d, now)
		return err
	}
	// A key another request committed after this one read it (on another node, or on another
	// writer connection) refuses the put and undoes this request's writes; the second try reads
	// that request's key and replays its invocation or refuses a different request.
	var err error
	for try := 1; ; try++ {
		err = s.writer.Update(ctx, accept)
		if !errors.Is(err, store.ErrConflict) || idempotencyKey == "" || try == 3 {
			break
		}
	}
	if v.refused != nil || err != nil || v.replayOf != "" {
		permit.Release()
	}
	if v.refused != nil {
		if pe, ok := errors.AsType[*problem.Error](v.refused); ok && pe.Type == problem.TypeQuotaExceeded {
			s.spawn.QuotaRefused(rec.TenantID)
		}
		return v, v.refused
	}
	if err != nil {
		return v, problem.Internal(err)
	}
	return v, nil
}

// startAcceptTx is one try of a start's transaction: the Idempotency-Key replays an earlier
// identical request (or refuses a different one), the concurrency quota refuses, or the invocation
// is created (started at once when sync) and its key recorded. A refusal is also returned as the
// error, so that the transaction writes nothing.
func (s *Service) startAcceptTx(tx store.Tx, k startKey, quota *int64, rec invocation.Record, d catalog.Definition, now time.Time) (startVerdict, error) {
	var v startVerdict
	if k.key != "" {
		prev, err := tx.IdempotencyKey(store.IdempotencyKeyQuery{TenantID: rec.TenantID, Scope: k.scope, Key: k.key, Now: now})
		if err == nil {
			if prev.RequestHash != k.reqHash {
				v.refused = problem.Validation("Idempotency-Key reused with a different request", []problem.Issue{{Path: "$", Code: "IDEMPOTENCY_KEY_REUSED",
					Message: "this Idempotency-Key was used for a different request within the deduplication window"}})
				return v, v.refused
			}
			v.replayOf = prev.InvocationID
			return v, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return v, err
		}
	}
	err := s.spawn.CheckRunning(rec.TenantID, quota, func() (int64, error) { return tx.CountTenantRunning(rec.TenantID) })
	if pe, ok := errors.AsType[*problem.Error](err); ok {
		v.refused = pe
	}
	if err != nil {
		return v, err
	}
	if v.created, err = s.spawn.Create(tx, rec, rec.Mode == invocation.ModeSync, d, now); err != nil {
		return v, err
	}
	if k.key != "" {
		return v, tx.PutIdempotencyKey(store.IdempotencyRecord{TenantID: rec.TenantID, Scope: k.scope, Key: k.key,
			RequestHash: k.reqHash, InvocationID: rec.ID, CreatedAt: now, ExpiresAt: now.Add(k.window)})
	}
	return v, nil
}

// startAccepted is Start's last phase after its transaction: a replay answers with the earlier
// invocation, an async call is queued, and a sync call runs now.
func (s *Service) startAccepted(ctx context.Context, tenantID, mode string, v startVerdict, e entrypoint.Entrypoint, d catalog.Definition,
	now time.Time) (Started, error) {
	var out Started
	if v.replayOf != "" {
		prev, err := s.cfg.Store.Invocation(ctx, tenantID, v.replayOf)
		if err != nil {
			return out, problem.Internal(err)
		}
		out.Record, out.Replayed = prev, true
		return out, nil
	}
	if mode == string(invocation.ModeAsync) {
		out.Record, out.Queued = v.created, true
		return out, nil
	}
	// Sync: run now, on this request's goroutine. The caller going away does not cancel accepted work.
	if e.Kind == entrypoint.KindWorkflow {
		return s.runWorkflowSync(ctx, workflow.NewClaim(v.created), e, d, now)
	}
	final, err := s.exec.Execute(context.WithoutCancel(ctx), v.created, e, d, time.Time{})
	if err != nil {
		return out, problem.Internal(err)
	}
	out.Record = final
	return out, nil
}

// startWorkflowSync starts a plain sync call of a workflow: its start (created, started, the lease)
// is held back (workflow.Claim.HoldStart: written with the outcome, or before the first side
// effect, wait or SyncStartDelay) and the first activation runs at once with the record the start
// leaves (runWorkflowSync).
func (s *Service) startWorkflowSync(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d catalog.Definition, now time.Time,
	permit ratelimit.Decision) (Started, error) {
	events, lease, err := s.spawn.StartEvents(rec, d, now)
	if err == nil {
		rec, err = spawn.StartedRecord(events)
	}
	if err != nil {
		permit.Release()
		return Started{}, problem.Internal(err)
	}
	c := workflow.NewClaim(rec).HoldStart(events, lease, s.cfg.SyncStartDelay)
	out, err := s.runWorkflowSync(ctx, c, e, d, now)
	if err != nil {
		permit.Release()
	}
	return out, err
}

// runWorkflowSync runs the first activation of a sync workflow call (claim c) on the request's
// goroutine and, when it did not end (it suspended on a timer, an event or a child, or scheduled a
// retry), waits for its end up to timeout_seconds after the start, holding no slot or sandbox. The
// wait is registered before the workflow runs.
func (s *Service) runWorkflowSync(ctx context.Context, c workflow.Claim, e entrypoint.Entrypoint, d catalog.Definition, now time.Time) (Started, error) {
	var out Started
	woken, stop := s.writer.WatchFinish(c.Invocation().ID)
	defer stop()
	final, err := s.exec.Workflows().Activate(context.WithoutCancel(ctx), c, e, d)
	if err != nil {
		return out, problem.Internal(err)
	}
	out.Record = final
	if !final.Status.Terminal() {
		rec, done, err := s.writer.AwaitFinish(ctx, s.closing, final, now.Add(d.Timeout()), woken)
		if err != nil {
			return out, problem.Internal(err)
		}
		out.Record, out.Unfinished = rec, !done
	}
	return out, nil
}

// Get returns an invocation of the caller's tenant.
func (s *Service) Get(ctx context.Context, sc auth.SecurityContext, id string) (invocation.Record, error) {
	rec, err := s.cfg.Store.Invocation(ctx, sc.TenantID, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !rec.VisibleTo(InvocationViewer(sc))) {
		// An invocation the caller may not see answers as one that does not exist.
		return invocation.Record{}, problem.NotFound("invocation %s not found", id)
	}
	if err != nil {
		return rec, problem.Internal(err)
	}
	return rec, nil
}

// InvocationViewer is who sc is when it looks at invocations: tenant admins and the platform
// operator see all of the tenant's invocations; everyone else what invocation.Record.VisibleTo allows.
func InvocationViewer(sc auth.SecurityContext) invocation.Viewer {
	return invocation.Viewer{TenantID: sc.TenantID, SubjectID: sc.SubjectID, All: sc.Operator || sc.Has(auth.RoleAdmin)}
}

// List lists the caller's tenant's invocations that the caller may see.
func (s *Service) List(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[invocation.Record], error) {
	return s.cfg.Store.ListInvocations(ctx, InvocationViewer(sc), q)
}

// Events returns an invocation's event log (for the timeline).
func (s *Service) Events(ctx context.Context, sc auth.SecurityContext, id string) (invocation.Record, []invocation.Event, error) {
	rec, err := s.Get(ctx, sc, id)
	if err != nil {
		return rec, nil, err
	}
	all, err := s.allEvents(ctx, sc.TenantID, id)
	if err != nil {
		return rec, nil, problem.Internal(err)
	}
	return rec, all, nil
}

// timelineCursor is the opaque cursor of a timeline page: the seq the next page starts after, or
// (Prev) the one the previous page ends before. Seqs are dense (1..last_seq), so a page is a seq range.
type timelineCursor struct {
	Seq  int64 `json:"s"`
	Prev bool  `json:"p,omitempty"`
}

func (c timelineCursor) encode() string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"s":%d,"p":%t}`, c.Seq, c.Prev))
}

// TimelinePage returns one page of an invocation's log for its timeline (GET
// /invocations/{id}/timeline, rendered by the API): up to q.Limit entries in seq order, from the start, after the seq of a next cursor, or ending
// before that of a prev cursor, and no more data bytes than q.MaxBytes (store.PageBytes) unless one
// entry alone is bigger. q.Filter and q.OrderBy are not supported (the caller refuses them).
func (s *Service) TimelinePage(ctx context.Context, sc auth.SecurityContext, id string, q store.ListQuery) (invocation.Record, LogPage, error) {
	var page LogPage
	rec, err := s.Get(ctx, sc, id)
	if err != nil {
		return rec, page, err
	}
	limit := int64(min(max(q.Limit, 1), store.MaxLimit))
	from, to := int64(1), limit // the page's seq range
	prev := false               // the page ends before a prev cursor
	if q.Cursor != "" {
		var c timelineCursor
		b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil || json.Unmarshal(b, &c) != nil || c.Seq < 0 || (c.Prev && c.Seq < 1) {
			return rec, page, &store.QueryError{Err: fmt.Errorf("cursor: %w", store.ErrBadCursor)}
		}
		if prev = c.Prev; prev {
			from, to = max(c.Seq-limit, 1), c.Seq-1
		} else {
			from, to = c.Seq+1, c.Seq+limit
		}
	}
	to = min(to, rec.LastSeq)
	page.Items = []invocation.Event{}
	if from > to {
		return rec, page, nil
	}
	evs, err := s.timelineEvents(ctx, sc.TenantID, id, from, to, q.MaxBytes, prev)
	if err != nil {
		return rec, page, problem.Internal(err)
	}
	if len(evs) > 0 {
		from = evs[0].Seq
	}
	status, err := s.cfg.Store.StatusAt(ctx, sc.TenantID, id, from-1)
	if err != nil {
		return rec, page, problem.Internal(err)
	}
	page.Items, page.StatusBefore = evs, status
	if n := len(evs); n > 0 {
		first, last := evs[0].Seq, evs[n-1].Seq
		page.HasMore = last < rec.LastSeq
		if page.HasMore {
			page.NextCursor = timelineCursor{Seq: last}.encode()
		}
		if first > 1 {
			page.PrevCursor = timelineCursor{Seq: first, Prev: true}.encode()
		}
	}
	return rec, page, nil
}

// timelineEvents reads the events of seqs from..to for a timeline page, within the page's byte
// budget (maxBytes, store.ListQuery.MaxBytes): a page read forwards ends where the budget does; a
// page before a prev cursor must end at to, so its start moves forwards until the budget reaches
// to (each read holds at most one budget; a walk back over large entries reads them again).
func (s *Service) timelineEvents(ctx context.Context, tenantID, id string, from, to int64, maxBytes int, prev bool) ([]invocation.Event, error) {
	for {
		evs, err := s.cfg.Store.Events(ctx, store.EventLogQuery{TenantID: tenantID, InvocationID: id, AfterSeq: from - 1,
			Limit: int(to - from + 1), MaxBytes: store.PageBytes(maxBytes)})
		if err != nil || !prev || len(evs) == 0 || evs[len(evs)-1].Seq >= to {
			return evs, err
		}
		from = evs[len(evs)-1].Seq + 1
	}
}

// LogPage is one page of an invocation's event log for its timeline: the events and the status the
// invocation had before the first of them (the API renders the status after each).
type LogPage struct {
	store.Page[invocation.Event]
	StatusBefore invocation.Status
}

// allEvents reads an invocation's whole log, in pages.
func (s *Service) allEvents(ctx context.Context, tenantID, id string) ([]invocation.Event, error) {
	return store.EventsAfter(ctx, s.cfg.Store, tenantID, id, 0)
}

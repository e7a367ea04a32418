// Package invoke runs entrypoints: it accepts invocations (sync, async, dry-run), deduplicates them
// by Idempotency-Key, serves cached results, executes them in the Starlark sandbox, applies the retry
// policy, and carries out control actions (cancel, retry, replay). Every state change is an event
// appended to the invocation's log; the queue and leases live in the store (package dispatch runs the
// claim loop).
package invoke

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/admission"
	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/bulklane"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/cost"
	"github.com/larkrun/lark/internal/dispatch"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/ratelimit"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
	"github.com/larkrun/lark/internal/tracing"
)

// Store is the store methods the invocation service uses (store.Store has them all): those of the
// claim stage it configures (dispatch.Store), the invocation, catalog, tenant and response-cache
// reads, the catalog generation its caches key on, and Enqueue for its queued writes.
type Store interface {
	dispatch.Store
	store.TenantReader
	store.IdempotencyReader
	Invocation(ctx context.Context, tenantID, id string) (invocation.Record, error)
	Events(ctx context.Context, q store.EventLogQuery) ([]invocation.Event, error)
	StatusAt(ctx context.Context, tenantID, invocationID string, seq int64) (invocation.Status, error)
	ListInvocations(ctx context.Context, v invocation.Viewer, q store.ListQuery) (store.Page[invocation.Record], error)
	CountTenantRunning(ctx context.Context, tenantID string) (int64, error)
	Entrypoint(ctx context.Context, v entrypoint.Viewer, id string) (entrypoint.Entrypoint, error)
	EntrypointVersions(ctx context.Context, v entrypoint.Viewer, family string) ([]entrypoint.Entrypoint, error)
	LatestActive(ctx context.Context, v entrypoint.Viewer, family string, major int) (entrypoint.Entrypoint, error)
	// CatalogGeneration moves after every committed catalog write (store.Store.CatalogGeneration).
	CatalogGeneration() uint64
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
	Secrets SecretSource
	Clock   clock.Clock
	IDs     idgen.Generator
	Logger  *slog.Logger
	// Node names this process in leases; unique per process start.
	Node string
	// Remote, when set, runs the function attempts it takes (Remote.Takes) in remote workers;
	// the dispatcher's claims and the completion stay here.
	Remote Remote
	// LeaseGrace is added to an attempt's timeout to form its lease (default 30 s).
	LeaseGrace time.Duration
	// Wake is called when new work is queued (the dispatcher's wake-up).
	Wake func()
	// Announce, when set, is called too when a committed write queued work, to wake the other nodes
	// sharing the store (internal/wakeup); it must not block. Freed slots wake this node only.
	Announce func()
	// AnnounceFinished, when set, is called with the id of a sync invocation whose end a write of
	// this process committed after the transaction that started it (a sync workflow's later
	// activation), so that the node whose request waits for it is woken (wakeup.Hub.Finished).
	AnnounceFinished func(id string)
	// RateLimiters are the RateLimiter plugins by strategy (default: ratelimit.Default()).
	RateLimiters *ratelimit.Registry
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
	// limit or a quota (default: NopObserver).
	Observer Observer
	// SyncPoll is how often a sync invocation of a workflow that waits for its end reads the store,
	// for an end this process was not told of (default 1 s). Ends committed here wake it at once.
	SyncPoll time.Duration
	// Sleep, when set, is the wait between two attempts of an r_http_* call's retry (default: a
	// real timer). `lark test` advances its fake clock with it instead of waiting.
	Sleep func(ctx context.Context, d time.Duration) error
	// Publisher publishes the events code emits with r_emit_v1, in the transaction that records
	// what emitted them (nil: the default, which stores the event and resolves the waits of
	// suspended workflows, as Publish does; the server may give an event bus that also matches
	// triggers).
	Publisher EventPublisher
	// Tracing starts the spans of attempts, workflow steps, r_http_* calls and r_invoke_v1 children
	// (nil: off; records still carry trace ids).
	Tracing *tracing.Tracing
}

// SecretSource gives the egress layer one tenant's secrets (secrets.Service implements it). The
// sandbox never sees a value: the egress layer substitutes it after the sandbox.
type SecretSource interface {
	ForTenant(tenantID, invocationID string) egress.SecretResolver
}

// DefaultMaxPayloadBytes is the default Config.MaxPayloadBytes: 2 MiB, as Temporal's payload limit.
const DefaultMaxPayloadBytes = sandbox.DefaultMaxPayloadBytes

// tooLarge is the 413 problem of a payload over its limit.
func tooLarge(what string, size, limit int) *problem.Error {
	return problem.New(problem.TypePayloadTooLarge, "%s: %d bytes, more than the limit of %d bytes", what, size, limit).
		With("limit_bytes", limit)
}

// Service implements the invocation use cases.
type Service struct {
	cfg       Config
	defs      definitionCache
	mu        sync.Mutex
	running   map[string]context.CancelFunc // invocations executing in this process
	workflows map[string]*sandbox.Program   // compiled workflows by version
	runner    *run.Runner                   // the run stage of function attempts
	live      map[string]*liveRun           // suspended workflow executions waiting in memory
	closing   chan struct{}                 // closed by Close
	closeOnce sync.Once
	// syncChildren counts the sync r_invoke_v1 children running in this process (MaxSyncChildren).
	syncChildren atomic.Int64
	policies     policyCache  // tenants' policies (catalog.go)
	resolved     resolveCache // resolve's answers (catalog.go)
	// noObserver: Config.Observer is the no-op one, so writes skip noting what they change unless
	// a sync invocation waits for an end (finish).
	noObserver bool
	finish     finishWaiters  // sync invocations of workflows waiting for their end (finish.go)
	publisher  EventPublisher // Config.Publisher (SetPublisher), or waitPublisher
	endHook    EndHook        // hears of ended invocations inside their transaction (SetEndHook)
	tracer     trace.Tracer   // Config.Tracing's tracer (no-op when off)
	traced     bool           // Config.Tracing records spans
}

// Defaults of Config's child budget (docs/starlark.md, "Child invocations").
const (
	DefaultMaxChildren         = 100
	DefaultMaxChildrenInFlight = 4
	DefaultMaxSyncChildren     = 256
)

// NewService returns a Service.
func NewService(cfg Config) *Service {
	if cfg.LeaseGrace <= 0 {
		cfg.LeaseGrace = 30 * time.Second
	}
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = 8
	}
	if cfg.MaxChildren <= 0 {
		cfg.MaxChildren = DefaultMaxChildren
	}
	if cfg.MaxChildrenInFlight <= 0 {
		cfg.MaxChildrenInFlight = DefaultMaxChildrenInFlight
	}
	if cfg.MaxSyncChildren <= 0 {
		cfg.MaxSyncChildren = DefaultMaxSyncChildren
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RateLimiters == nil {
		cfg.RateLimiters = ratelimit.Default()
	}
	if cfg.Wake == nil {
		cfg.Wake = func() {}
	}
	if cfg.Node == "" {
		cfg.Node = cfg.IDs.New("node")
	}
	tracer, traced := cfg.Tracing.Tracer(), cfg.Tracing.Enabled()
	if cfg.LiveWait == 0 {
		cfg.LiveWait = time.Minute
	}
	if cfg.MaxJournalEntries <= 0 {
		cfg.MaxJournalEntries = 100_000
	}
	if cfg.MaxJournalBytes <= 0 {
		cfg.MaxJournalBytes = 64 << 20
	}
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if cfg.MaxLive <= 0 {
		cfg.MaxLive = 1000
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	if cfg.SyncPoll <= 0 {
		cfg.SyncPoll = time.Second
	}
	_, nop := cfg.Observer.(NopObserver)
	s := &Service{cfg: cfg, running: map[string]context.CancelFunc{}, workflows: map[string]*sandbox.Program{},
		live: map[string]*liveRun{}, closing: make(chan struct{}), noObserver: nop, tracer: tracer, traced: traced,
		runner: &run.Runner{Programs: cfg.Programs, CPU: cfg.CPU, Gate: cfg.Gate, Schemas: cfg.Schemas, Clock: cfg.Clock}}
	s.publisher = cfg.Publisher
	if s.publisher == nil {
		s.publisher = waitPublisher{s}
	}
	return s
}

// Close ends the workflow executions waiting in memory (their invocations are suspended, durably;
// the next activation replays). Call it before closing the store.
func (s *Service) Close() { s.closeOnce.Do(func() { close(s.closing) }) }

// SetWake sets the dispatcher wake-up (the dispatcher is built after the service).
func (s *Service) SetWake(f func()) { s.cfg.Wake = f }

// SetAnnounce sets Config.Announce (the server builds the wake-up hub after the service).
func (s *Service) SetAnnounce(f func()) { s.cfg.Announce = f }

// SetAnnounceFinished sets Config.AnnounceFinished.
func (s *Service) SetAnnounceFinished(f func(id string)) { s.cfg.AnnounceFinished = f }

// WakeFinished wakes this process's sync requests waiting for the invocations ids, whose end
// another node committed (wakeup.Options.Finished).
func (s *Service) WakeFinished(ids []string) {
	for _, id := range ids {
		s.finished(id)
	}
}

// EndHook hears of every invocation a write of invoke's leaves in a terminal status, inside that
// write's transaction (before it commits): the event triggers service records there the outcome of
// the invocations its triggers started (dead letters, metrics). An error fails the write. It must
// be quick and cheap for the invocations it does not care about.
type EndHook interface {
	InvocationEnded(tx store.Tx, rec invocation.Record) error
}

// SetEndHook sets the EndHook (while wiring, before the service runs anything).
func (s *Service) SetEndHook(h EndHook) { s.endHook = h }

// SetPublisher sets the EventPublisher of r_emit_v1's events after construction (the events
// service is built on top of this one); call it before the service runs work.
func (s *Service) SetPublisher(p EventPublisher) {
	if p != nil {
		s.publisher = p
	}
}

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

// definition is the part of a stored entrypoint definition execution needs.
type definition struct {
	Schema struct {
		Params  json.RawMessage `json:"params"`
		Returns json.RawMessage `json:"returns"`
	} `json:"schema"`
	Traits struct {
		Invocation struct {
			Supported []string `json:"supported"`
			Default   string   `json:"default"`
		} `json:"invocation"`
		IsIdempotent bool `json:"is_idempotent"`
		Caching      struct {
			MaxAgeSeconds int64 `json:"max_age_seconds"`
		} `json:"caching"`
		Limits struct {
			TimeoutSeconds int64   `json:"timeout_seconds"`
			MemoryMB       int64   `json:"memory_mb"`
			CPU            float64 `json:"cpu"`
			MaxConcurrent  int64   `json:"max_concurrent"`
		} `json:"limits"`
		Retry      outcome.RetryPolicy `json:"retry"`
		Entrypoint *bool               `json:"entrypoint"`
		RateLimit  *struct {
			Strategy string          `json:"strategy"`
			Config   json.RawMessage `json:"config"`
		} `json:"rate_limit"`
		Workflow *struct {
			MaxSuspensionDays int `json:"max_suspension_days"`
			Checkpointing     struct {
				Strategy string `json:"strategy"`
			} `json:"checkpointing"`
			Compensation struct {
				OnFailure *string `json:"on_failure"`
				OnCancel  *string `json:"on_cancel"`
			} `json:"compensation"`
		} `json:"workflow"`
	} `json:"traits"`
	Implementation struct {
		Adapter string `json:"adapter"`
		Kind    string `json:"kind"`
		Code    struct {
			Source string `json:"source"`
		} `json:"code"`
		AdapterRef struct {
			DefinitionID string `json:"definition_id"`
		} `json:"adapter_ref"`
	} `json:"implementation"`
	schemas *compiledSchemas // shared by copies of one parsed definition
}

// compiledSchemas holds a definition's params and returns schemas, compiled once on first use.
type compiledSchemas struct {
	params, returns       sync.Once
	paramsS, returnsS     *jsonschema.Schema
	paramsErr, returnsErr error
	defaults              sync.Once     // the defaults the params schema declares (params.go)
	defaultsN             *defaultsNode // nil: none
	defaultsErr           error
}

func (s *Service) compileStored(path string, raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var sch any
	if err := invocation.DecodeJSON(raw, &sch); err != nil {
		return nil, err
	}
	compiled, issues := s.cfg.Schemas.CompileUserSchema(path, sch)
	if len(issues) > 0 {
		return nil, &storedSchemaError{path: path, issues: issues}
	}
	return compiled, nil
}

// storedSchemaError is a stored schema that no longer compiles: one registered before today's
// limits (docs/security.md) and over them. Starting the entrypoint answers 409 (register a new
// version), not 500.
type storedSchemaError struct {
	path   string
	issues []schema.Issue
}

func (e *storedSchemaError) Error() string {
	return fmt.Sprintf("stored schema at %s does not compile: %v", e.path, e.issues)
}

func (s *Service) paramsSchema(d definition) (*jsonschema.Schema, error) {
	if d.schemas == nil {
		return s.compileStored("$.schema.params", d.Schema.Params)
	}
	d.schemas.params.Do(func() { d.schemas.paramsS, d.schemas.paramsErr = s.compileStored("$.schema.params", d.Schema.Params) })
	return d.schemas.paramsS, d.schemas.paramsErr
}

func (s *Service) returnsSchema(d definition) (*jsonschema.Schema, error) {
	if d.schemas == nil {
		return s.compileStored("$.schema.returns", d.Schema.Returns)
	}
	d.schemas.returns.Do(func() {
		d.schemas.returnsS, d.schemas.returnsErr = s.compileStored("$.schema.returns", d.Schema.Returns)
	})
	return d.schemas.returnsS, d.schemas.returnsErr
}

// definitionCache keeps parsed definitions (and their compiled schemas) by entrypoint version.
// Only non-draft versions are ever invoked, and those are immutable (PUT changes drafts only), so
// an entry can never be stale; the bound only limits memory.
type definitionCache struct {
	mu sync.RWMutex
	m  map[string]cachedEntrypoint
}

type cachedEntrypoint struct {
	e entrypoint.Entrypoint
	d definition
}

const definitionCacheMax = 4096

// definition parses e's definition, from the cache when e is not a draft.
func (s *Service) definition(e entrypoint.Entrypoint) (definition, error) {
	if e.Status != entrypoint.StatusDraft {
		s.defs.mu.RLock()
		c, ok := s.defs.m[e.ID]
		s.defs.mu.RUnlock()
		if ok {
			return c.d, nil
		}
	}
	d, err := parseDefinition(e)
	if err != nil {
		return d, err
	}
	d.schemas = &compiledSchemas{}
	if e.Status != entrypoint.StatusDraft {
		s.defs.mu.Lock()
		if s.defs.m == nil || len(s.defs.m) >= definitionCacheMax {
			s.defs.m = map[string]cachedEntrypoint{}
		}
		s.defs.m[e.ID] = cachedEntrypoint{e: e, d: d}
		s.defs.mu.Unlock()
	}
	return d, nil
}

// cachedByRef returns a version seen before (its definition is immutable; its status may have
// changed since, which pinned invocations ignore).
func (s *Service) cachedByRef(ref string) (entrypoint.Entrypoint, definition, bool) {
	s.defs.mu.RLock()
	defer s.defs.mu.RUnlock()
	c, ok := s.defs.m[ref]
	return c.e, c.d, ok
}

func parseDefinition(e entrypoint.Entrypoint) (definition, error) {
	var d definition
	if err := json.Unmarshal(e.Definition, &d); err != nil {
		return d, fmt.Errorf("entrypoint %s definition: %w", e.ID, err)
	}
	if d.Traits.Limits.TimeoutSeconds <= 0 {
		d.Traits.Limits.TimeoutSeconds = 30
	}
	if d.Traits.Limits.MemoryMB <= 0 {
		d.Traits.Limits.MemoryMB = 128
	}
	if d.Traits.Limits.CPU <= 0 {
		d.Traits.Limits.CPU = 0.2
	}
	return d, nil
}

// admitSync waits until a call of d in mode may start, when it is a sync call (Config.Gate), at
// most d's timeout, and returns ctx carrying the ticket for its execution and the ticket's Leave.
// A call that cannot start in that time is refused with 503 and a Retry-After: nothing was
// written, and the same request may be sent again.
func (s *Service) admitSync(ctx context.Context, mode, tenantID string, d definition) (context.Context, func(), error) {
	if s.cfg.Gate == nil || mode != string(invocation.ModeSync) {
		return ctx, func() {}, nil
	}
	wctx, cancel := context.WithTimeout(ctx, d.timeout())
	defer cancel()
	t, err := s.cfg.Gate.Enter(wctx, tenantID, d.Traits.Limits.MemoryMB<<20)
	if err == nil {
		return admission.Admitted(ctx, t), t.Leave, nil
	}
	if ctx.Err() != nil {
		return ctx, nil, ctx.Err() // the caller went away
	}
	s.cfg.Logger.WarnContext(ctx, "sync call refused: not admitted within its timeout", "tenant_id", tenantID, "timeout", d.timeout())
	pe := problem.New(problem.TypeUnavailable, "the runtime is busy: this sync call could not start within its timeout (%v); nothing was started, retry later or invoke it async", d.timeout())
	pe.RetryAfter = 1
	return ctx, nil, pe
}

func (d definition) timeout() time.Duration {
	return time.Duration(d.Traits.Limits.TimeoutSeconds) * time.Second
}

// limits are the sandbox limits of an execution of the version, with the payload bound maxPayload.
func (d definition) limits(maxPayload int) sandbox.Limits {
	return sandbox.Limits{Timeout: d.timeout(), CPU: d.Traits.Limits.CPU, MemoryMB: int(d.Traits.Limits.MemoryMB),
		MaxPayloadBytes: int64(maxPayload)}
}

// resolve finds the entrypoint an invocation names: an exact GTS id (or opaque id) pins that
// version; a major-only id resolves to the latest active minor of the major (falling back to the
// latest deprecated one, which is still callable). 404 when nothing is visible, 409 not_active when
// it exists but is not callable. Answers are cached (catalog.go).
func (s *Service) resolve(ctx context.Context, v entrypoint.Viewer, id string) (entrypoint.Entrypoint, error) {
	if id == "" {
		return entrypoint.Entrypoint{}, problem.Validation("entrypoint_id is required", []problem.Issue{{Path: "$.entrypoint_id", Code: "MISSING_FIELD", Message: "entrypoint_id is required"}})
	}
	k, gen, now := resolveKey{v: v, id: id}, s.cfg.Store.CatalogGeneration(), s.cfg.Clock.Now()
	if e, ok := s.resolved.get(k, gen, now); ok {
		return e, nil
	}
	e, err := s.resolveStored(ctx, v, id)
	if err == nil {
		s.resolved.put(k, e, gen, now)
	}
	return e, err
}

// resolveStored is resolve reading the store.
func (s *Service) resolveStored(ctx context.Context, v entrypoint.Viewer, id string) (entrypoint.Entrypoint, error) {
	gid, perr := gts.Parse(id)
	if perr == nil && gid.MajorOnly() {
		e, err := s.cfg.Store.LatestActive(ctx, v, gid.Family(), gid.Last().Major)
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return e, problem.Internal(err)
		}
		versions, err := s.cfg.Store.EntrypointVersions(ctx, v, gid.Family())
		if err != nil {
			return e, problem.Internal(err)
		}
		var best *entrypoint.Entrypoint
		found := false
		for i := range versions {
			if versions[i].Major != gid.Last().Major {
				continue
			}
			found = true
			if versions[i].Status == entrypoint.StatusDeprecated {
				best = &versions[i]
			}
		}
		if best != nil {
			return *best, nil
		}
		if found {
			return e, problem.New(problem.TypeNotActive, "entrypoint %s has no active version", id)
		}
		return e, problem.NotFound("entrypoint %s not found", id)
	}
	e, err := s.cfg.Store.Entrypoint(ctx, v, id)
	if errors.Is(err, store.ErrNotFound) {
		return e, problem.NotFound("entrypoint %s not found", id)
	}
	if err != nil {
		return e, problem.Internal(err)
	}
	if !e.Status.Callable() {
		return e, problem.New(problem.TypeNotActive, "entrypoint %s is %s; only active or deprecated entrypoints can be invoked", id, e.Status).With("current_status", e.Status)
	}
	return e, nil
}

// policy returns the tenant's policy (defaults when it has none, e.g. the platform), cached
// (catalog.go).
func (s *Service) policy(ctx context.Context, tenantID string) (tenant.Policy, error) {
	now := s.cfg.Clock.Now()
	return s.policies.get(tenantID, s.cfg.Store.CatalogGeneration(), now, func() (tenant.Policy, error) {
		p, err := s.cfg.Store.Tenant(ctx, tenantID)
		if errors.Is(err, store.ErrNotFound) {
			return tenant.New(tenantID, now), nil
		}
		return p, err
	})
}

// validateParams fills in the `default`s schema.params declares (params.go) and checks the params
// against it; absent params are {}. It returns the params and their canonical JSON, defaults
// applied, which is what every invocation records and runs with.
func (s *Service) validateParams(d definition, raw json.RawMessage) (any, json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if len(raw) > s.cfg.MaxPayloadBytes {
		return nil, nil, tooLarge("params", len(raw), s.cfg.MaxPayloadBytes)
	}
	var params any
	if err := invocation.DecodeJSON(raw, &params); err != nil {
		return nil, nil, problem.BadRequest("params: malformed JSON")
	}
	if _, ok := params.(map[string]any); !ok {
		return nil, nil, problem.Validation("params must be a JSON object", []problem.Issue{{Path: "$.params", Code: "SCHEMA_MISMATCH", Message: "params must be a JSON object"}})
	}
	if path, deep := invocation.TooDeep("$.params", params); deep {
		msg := fmt.Sprintf("params are nested more than %d levels deep", invocation.MaxJSONDepth)
		return nil, nil, problem.Validation(msg, []problem.Issue{{Path: path, Code: "TOO_DEEP", Message: msg}})
	}
	defaults, err := s.paramsDefaults(d)
	if err != nil {
		return nil, nil, problem.Internal(err)
	}
	if err := defaults.apply(params); err != nil {
		return nil, nil, problem.Internal(err)
	}
	compiled, err := s.paramsSchema(d)
	if se, ok := errors.AsType[*storedSchemaError](err); ok {
		return nil, nil, problem.Conflict("schema_not_compilable", "the entrypoint's %s no longer passes the schema limits (%v): register a new version with a smaller schema", se.path, se.issues[0].Message)
	}
	if err != nil {
		return nil, nil, problem.Internal(err)
	}
	if compiled != nil {
		if issues := s.cfg.Schemas.ValidateValue(compiled, "$.params", params); len(issues) > 0 {
			return nil, nil, problem.Validation("params do not match the entrypoint's schema", schemaIssues(issues))
		}
	}
	canon, err := json.Marshal(params)
	if err != nil {
		return nil, nil, problem.Internal(err)
	}
	return params, canon, nil
}

func schemaIssues(in []schema.Issue) []problem.Issue {
	out := make([]problem.Issue, 0, len(in))
	for _, is := range in {
		out = append(out, problem.Issue{Path: is.Path, Message: is.Message, Code: strings.ToUpper(is.Code)})
	}
	return out
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// traceIDs returns the trace and a new span id, continuing a W3C traceparent when given.
func traceIDs(traceparent string) (string, string) {
	parts := strings.Split(traceparent, "-")
	if len(parts) == 4 && len(parts[1]) == 32 && parts[1] != strings.Repeat("0", 32) {
		if _, err := hex.DecodeString(parts[1]); err == nil {
			return parts[1], randomHex(8)
		}
	}
	return randomHex(16), randomHex(8)
}

func i64(v int64) *int64 { return &v }

func eventKey(id, step string, attempt int, t invocation.EventType) string {
	return invocation.IdempotencyKey(id, step, attempt, t, "")
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
	params, canon, err := s.validateParams(d, req.Params)
	if err != nil {
		return out, err
	}
	policy, err := s.policy(ctx, sc.TenantID)
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
	// canonical params (schema defaults applied).
	reqHash := hashOf(req.EntrypointID, mode, string(canon))
	ckey, cached, hit := s.startCached(ctx, sc, e, d, opt.IdempotencyKey, reqHash, now)
	if hit {
		out.Record, out.Cached = cached, true
		return out, nil
	}
	// Rate limit (000): after dry-run and cache hits, which do not count; a refused request creates
	// nothing; the permit of a request that turns out to replay an Idempotency-Key is given back.
	permit, err := s.rateLimit(sc.TenantID, e.GTSID, d, now)
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
	rec := invocation.Record{ID: s.cfg.IDs.New("inv"), TenantID: sc.TenantID, EntrypointRef: e.ID, EntrypointID: e.GTSID,
		EntrypointVersion: e.Version, SubjectID: sc.SubjectID, Mode: invocation.Mode(mode), Params: canon,
		CorrelationID: correlation, Metrics: invocation.Metrics{MemoryLimitMB: i64(d.Traits.Limits.MemoryMB)}, Attempt: 1,
		CreatedAt: now, CacheKey: ckey, EntrypointOwner: entrypointOwner(e)}
	rec.TraceID, rec.SpanID = recordIDs(ctx, opt.TraceParent)
	// A plain sync call (no Idempotency-Key, no concurrency quota) has nothing to check in its start's
	// transaction, so it runs while its start is written: a function's outcome usually joins that
	// write (runSync); a workflow's first journal write and side effect wait for it (enqueueJournal).
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
func (s *Service) startTarget(ctx context.Context, sc auth.SecurityContext, req StartRequest) (entrypoint.Entrypoint, definition, string, error) {
	if !sc.Has(auth.RoleOperator) {
		return entrypoint.Entrypoint{}, definition{}, "", problem.Forbidden("invoking entrypoints needs the operator role")
	}
	if sc.Operator {
		return entrypoint.Entrypoint{}, definition{}, "", problem.Forbidden("the platform operator has no tenant to invoke in; use a tenant token")
	}
	// 1. Entrypoint exists; 2. it is callable.
	e, err := s.resolve(ctx, viewer(sc), req.EntrypointID)
	if err != nil {
		return e, definition{}, "", err
	}
	d, err := s.definition(e)
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
	if max := policy.Quotas.MaxConcurrentExecutions; max != nil {
		n, err := s.cfg.Store.CountTenantRunning(ctx, tenantID)
		if err != nil {
			return problem.Internal(err)
		}
		if n >= *max {
			s.cfg.Observer.QuotaExceeded(tenantID, quotaConcurrent)
			return quotaExceeded(tenantID, *max)
		}
	}
	return nil
}

// startDryRun is the record a dry-run start answers with.
func (s *Service) startDryRun(tenantID string, req StartRequest, e entrypoint.Entrypoint, d definition, mode string,
	canon json.RawMessage, correlation string, now time.Time) invocation.Record {
	// 000: a synthetic record; nothing persisted or executed; no cache, quota use or key effects.
	return invocation.Record{ID: "dryrun_" + strings.TrimPrefix(s.cfg.IDs.New("x"), "x_"), TenantID: tenantID,
		EntrypointID: req.EntrypointID, EntrypointVersion: e.Version, Status: invocation.StatusQueued,
		Mode: invocation.Mode(mode), Params: canon, CorrelationID: correlation, CreatedAt: now,
		Metrics: invocation.Metrics{MemoryLimitMB: i64(d.Traits.Limits.MemoryMB)}}
}

// startCached looks a start up in the response cache. It returns the cache key the new invocation
// carries ("" when the request is not cacheable) and, on a hit, the cached succeeded invocation.
func (s *Service) startCached(ctx context.Context, sc auth.SecurityContext, e entrypoint.Entrypoint, d definition,
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
func (s *Service) startPlain(ctx context.Context, rec invocation.Record, params any, e entrypoint.Entrypoint, d definition,
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
	created   invocation.Record
	replayOf  string
	refused   error
	overQuota bool
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
	rec invocation.Record, d definition, reqHash string, now time.Time, permit ratelimit.Decision) (startVerdict, error) {
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
		err = s.update(ctx, accept)
		if !errors.Is(err, store.ErrConflict) || idempotencyKey == "" || try == 3 {
			break
		}
	}
	if v.refused != nil || err != nil || v.replayOf != "" {
		permit.Release()
	}
	if v.overQuota {
		s.cfg.Observer.QuotaExceeded(sc.TenantID, quotaConcurrent)
	}
	if v.refused != nil {
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
func (s *Service) startAcceptTx(tx store.Tx, k startKey, quota *int64, rec invocation.Record, d definition, now time.Time) (startVerdict, error) {
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
	if quota != nil {
		n, err := tx.CountTenantRunning(rec.TenantID)
		if err != nil {
			return v, err
		}
		if n >= *quota {
			v.refused, v.overQuota = quotaExceeded(rec.TenantID, *quota), true
			return v, v.refused
		}
	}
	var err error
	if v.created, err = s.create(tx, rec, rec.Mode == invocation.ModeSync, d, now); err != nil {
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
func (s *Service) startAccepted(ctx context.Context, tenantID, mode string, v startVerdict, e entrypoint.Entrypoint, d definition,
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
		return s.runWorkflowSync(ctx, newClaim(v.created), e, d, now)
	}
	final, err := s.execute(context.WithoutCancel(ctx), v.created, e, d, time.Time{})
	if err != nil {
		return out, problem.Internal(err)
	}
	out.Record = final
	return out, nil
}

// startWorkflowSync starts a plain sync call of a workflow: its start (created, started, the lease)
// is enqueued, not awaited, and the first activation runs at once with the record the start leaves
// (runWorkflowSync).
func (s *Service) startWorkflowSync(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d definition, now time.Time,
	permit ratelimit.Decision) (Started, error) {
	events, lease, err := s.startEvents(rec, d, now)
	if err == nil {
		rec, err = startedRecord(events)
	}
	if err != nil {
		permit.Release()
		return Started{}, problem.Internal(err)
	}
	c := newClaim(rec)
	c.start = s.enqueue(context.WithoutCancel(ctx), func(tx store.Tx) error {
		_, err := tx.StartInvocation(events, lease)
		return err
	})
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
func (s *Service) runWorkflowSync(ctx context.Context, c claim, e entrypoint.Entrypoint, d definition, now time.Time) (Started, error) {
	var out Started
	woken, stop := s.watchFinish(c.rec.ID)
	defer stop()
	final, err := s.activate(context.WithoutCancel(ctx), c, e, d)
	if err != nil {
		return out, problem.Internal(err)
	}
	out.Record = final
	if !final.Status.Terminal() {
		rec, done, err := s.awaitFinish(ctx, final, now.Add(d.timeout()), woken)
		if err != nil {
			return out, problem.Internal(err)
		}
		out.Record, out.Unfinished = rec, !done
	}
	return out, nil
}

// rateLimit applies the entrypoint's traits.rate_limit through its strategy's plugin, per tenant
// and entrypoint: refused → 429 rate_limited with Retry-After (whole seconds, at least 1).
func (s *Service) rateLimit(tenantID, entrypointID string, d definition, now time.Time) (ratelimit.Decision, error) {
	rl := d.Traits.RateLimit
	if rl == nil || rl.Strategy == "" {
		return ratelimit.Decision{Allowed: true}, nil
	}
	p, ok := s.cfg.RateLimiters.Lookup(rl.Strategy)
	if !ok {
		return ratelimit.Decision{}, problem.Internal(fmt.Errorf("no rate limiter plugin handles strategy %s", rl.Strategy))
	}
	dec := p.Allow(tenantID+"|"+entrypointID, rl.Config, now)
	if dec.Allowed {
		return dec, nil
	}
	s.cfg.Observer.RateLimited(tenantID, entrypointID)
	secs := int(math.Ceil(dec.RetryAfter.Seconds()))
	secs = max(secs, 1)
	pe := problem.New(problem.TypeRateLimited, "Entrypoint rate limit exceeded for tenant %s. Retry after %d seconds.", tenantID, secs)
	pe.RetryAfter = secs
	return dec, pe
}

// quotaConcurrent names the max_concurrent_executions quota (the problem's quota member, and the
// Observer's quota).
const quotaConcurrent = "max_concurrent_executions"

func quotaExceeded(tenantID string, max int64) *problem.Error {
	pe := problem.New(problem.TypeQuotaExceeded, "tenant %s has %d executions running, its max_concurrent_executions quota", tenantID, max).
		With("quota", quotaConcurrent)
	pe.RetryAfter = 1
	return pe
}

// create writes a new invocation inside tx in one insert: the created event, then either queued
// work (async) or a started attempt leased to this process (sync).
func (s *Service) create(tx store.Tx, rec invocation.Record, runNow bool, d definition, now time.Time) (invocation.Record, error) {
	if !runNow {
		return s.createAt(tx, rec, now, now)
	}
	events, sched, err := s.startEvents(rec, d, now)
	if err != nil {
		return rec, err
	}
	return tx.StartInvocation(events, sched)
}

// startEvents are the events of a new invocation whose first attempt starts at once (created,
// started) and the lease of this process that goes with them, outliving the attempt's timeout.
func (s *Service) startEvents(rec invocation.Record, d definition, now time.Time) ([]invocation.Event, store.Scheduling, error) {
	events, err := s.createdEvent(rec, now)
	if err != nil {
		return nil, store.Scheduling{}, err
	}
	events = append(events, invocation.Event{InvocationID: rec.ID, Type: invocation.EventStarted, EngineAttempt: 1, LogicalAttempt: 1,
		At: now, IdempotencyKey: eventKey(rec.ID, "", 1, invocation.EventStarted)})
	until := now.Add(d.timeout() + s.cfg.LeaseGrace)
	started := rec
	started.EngineAttempt = 1
	return events, store.Scheduling{LeaseOwner: s.leaseOwner(started), LeaseExpiresAt: &until}, nil
}

// createAt writes a new invocation inside tx as queued work that becomes runnable at `at`.
func (s *Service) createAt(tx store.Tx, rec invocation.Record, now, at time.Time) (invocation.Record, error) {
	events, err := s.createdEvent(rec, now)
	if err != nil {
		return rec, err
	}
	return tx.StartInvocation(events, store.Scheduling{AvailableAt: &at})
}

// createdEvent is a new invocation's first event, carrying its initial record and price.
func (s *Service) createdEvent(rec invocation.Record, now time.Time) ([]invocation.Event, error) {
	rec.Cost = s.cfg.Pricing.For(rec.TenantID).PerInvocation // charged once, carried by the created event
	if rec.Via != invocation.ViaTrigger {
		rec.Via = invocation.ViaOther
	}
	if rec.TraceID == "" {
		// Started by a schedule, a trigger, a webhook or a handler: a trace of its own, which every
		// attempt of it continues (tracing.Parent), retries and restarts included.
		rec.TraceID, rec.SpanID = traceIDs("")
	}
	data, err := invocation.EncodeRecord(rec) // json.Marshal(rec), without re-scanning the params
	if err != nil {
		return nil, err
	}
	return []invocation.Event{{InvocationID: rec.ID, Type: invocation.EventCreated, Data: data, Initial: &rec,
		IdempotencyKey: eventKey(rec.ID, "", 1, invocation.EventCreated), LogicalAttempt: 1, At: now}}, nil
}

// leaseOwner identifies this process's run of one engine attempt (attempt.LeaseOwner, as the
// claim names it).
func (s *Service) leaseOwner(r invocation.Record) string { return attempt.LeaseOwner(s.cfg.Node, r) }

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

// entrypointOwner is what an invocation of e records as its EntrypointOwner: the owning subject of a
// user-owned entrypoint, "" otherwise.
func entrypointOwner(e entrypoint.Entrypoint) string {
	if e.Owner.OwnerType == entrypoint.OwnerUser {
		return e.Owner.ID
	}
	return ""
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
	return s.eventsAfter(ctx, tenantID, id, 0)
}

// eventsAfter reads an invocation's events with a seq above after, in order.
func (s *Service) eventsAfter(ctx context.Context, tenantID, id string, after int64) ([]invocation.Event, error) {
	var all []invocation.Event
	for {
		evs, err := s.cfg.Store.Events(ctx, store.EventLogQuery{TenantID: tenantID, InvocationID: id, AfterSeq: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
		if len(evs) < 1000 {
			return all, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

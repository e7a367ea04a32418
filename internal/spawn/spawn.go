// Package spawn writes new invocations: the record and its first events (created, priced at the
// tenant's prices; and started, under this node's lease, for one whose first attempt runs at
// once), the records of r_invoke_v1 children and compensation handlers, and the checks every start
// passes: the entrypoint's rate limit and the tenant's max_concurrent_executions quota (their one
// owner).
package spawn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/cost"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/ratelimit"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
)

// Config wires a Spawner.
type Config struct {
	Catalog *catalog.Catalog
	Clock   clock.Clock
	IDs     idgen.Generator
	// Node names this process in leases (attempt.LeaseOwner).
	Node string
	// LeaseGrace is added to an attempt's timeout to form its lease (default 30 s).
	LeaseGrace time.Duration
	// Pricing prices invocations (nil: everything costs 0).
	Pricing *cost.Pricing
	// RateLimiters are the RateLimiter plugins by strategy (default: ratelimit.Default()).
	RateLimiters *ratelimit.Registry
	// Observer hears of starts refused by a rate limit or a quota (default: none).
	Observer Refusals
	// MaxDepth bounds r_invoke_v1 nesting (default 8).
	MaxDepth int
}

// Refusals hears of starts refused by a rate limit or a quota (writer.Observer has both).
type Refusals interface {
	RateLimited(tenantID, entrypointID string)
	QuotaExceeded(tenantID, quota string)
}

type noRefusals struct{}

func (noRefusals) RateLimited(string, string)   {}
func (noRefusals) QuotaExceeded(string, string) {}

// Spawner builds and writes new invocations.
type Spawner struct {
	catalog      *catalog.Catalog
	clock        clock.Clock
	ids          idgen.Generator
	node         string
	leaseGrace   time.Duration
	pricing      *cost.Pricing
	rateLimiters *ratelimit.Registry
	observer     Refusals
	maxDepth     int
}

// New returns a Spawner.
func New(cfg Config) *Spawner {
	if cfg.LeaseGrace <= 0 {
		cfg.LeaseGrace = 30 * time.Second
	}
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = 8
	}
	if cfg.RateLimiters == nil {
		cfg.RateLimiters = ratelimit.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = noRefusals{}
	}
	return &Spawner{catalog: cfg.Catalog, clock: cfg.Clock, ids: cfg.IDs, node: cfg.Node, leaseGrace: cfg.LeaseGrace,
		pricing: cfg.Pricing, rateLimiters: cfg.RateLimiters, observer: cfg.Observer, maxDepth: cfg.MaxDepth}
}

// Node is the node this process's leases name.
func (s *Spawner) Node() string { return s.node }

// LeaseGrace is how long a lease outlives its attempt's timeout.
func (s *Spawner) LeaseGrace() time.Duration { return s.leaseGrace }

// LeaseOwner identifies this process's run of one engine attempt of r (attempt.LeaseOwner).
func (s *Spawner) LeaseOwner(r invocation.Record) string { return attempt.LeaseOwner(s.node, r) }

// NewID returns a new invocation id.
func (s *Spawner) NewID() string { return s.ids.New("inv") }

// NewRecord is the record of a new invocation of e (parsed as d) by subjectID in tenantID: its
// first attempt, created now, with the memory limit it runs with; the caller fills in the rest
// (correlation, trace, links).
func (s *Spawner) NewRecord(e entrypoint.Entrypoint, d catalog.Definition, tenantID, subjectID string, mode invocation.Mode,
	params json.RawMessage, now time.Time) invocation.Record {
	return invocation.Record{ID: s.NewID(), TenantID: tenantID, EntrypointRef: e.ID, EntrypointID: e.GTSID,
		EntrypointVersion: e.Version, SubjectID: subjectID, EntrypointOwner: EntrypointOwner(e), Mode: mode, Params: params,
		Metrics: invocation.Metrics{MemoryLimitMB: i64(d.Traits.Limits.MemoryMB)}, Attempt: 1, CreatedAt: now,
		Warnings: Warnings(e)}
}

// Warnings are the warnings an invocation of e carries: ENTRYPOINT_DEPRECATED, with 001's
// deprecation (when, why, the successor and the sunset date), when e is deprecated.
func Warnings(e entrypoint.Entrypoint) []invocation.Warning {
	if e.Status != entrypoint.StatusDeprecated {
		return nil
	}
	w := invocation.Warning{Code: invocation.WarningDeprecated, Message: "entrypoint " + e.GTSID + " is deprecated"}
	if d := e.Deprecation; d != nil {
		at := d.DeprecatedAt
		w.DeprecatedAt, w.SunsetDate, w.SuccessorID, w.Reason = &at, d.SunsetDate, d.SuccessorID, d.Reason
		if d.SuccessorID != "" {
			w.Message += "; use " + d.SuccessorID
		}
		if d.SunsetDate != nil {
			w.Message += "; it stops being served at " + d.SunsetDate.UTC().Format(time.RFC3339)
		}
	}
	return []invocation.Warning{w}
}

// CheckRunning is the tenant's max_concurrent_executions quota (max; nil: none) against the
// executions it has running (count): a 429 quota_exceeded problem when as many run as it allows;
// count's error as it is. It reports nothing, since it may run in a transaction that runs again:
// the caller reports the refusal it answers with (QuotaRefused).
func (s *Spawner) CheckRunning(tenantID string, max *int64, count func() (int64, error)) error {
	if max == nil {
		return nil
	}
	n, err := count()
	if err != nil {
		return err
	}
	if n >= *max {
		return QuotaExceeded(tenantID, *max)
	}
	return nil
}

// QuotaRefused reports to the Observer a start refused by CheckRunning.
func (s *Spawner) QuotaRefused(tenantID string) { s.observer.QuotaExceeded(tenantID, QuotaConcurrent) }

func i64(v int64) *int64 { return &v }

// Create writes a new invocation inside tx in one insert: the created event, then either queued
// work (async) or a started attempt leased to this process (sync).
func (s *Spawner) Create(tx store.Tx, rec invocation.Record, runNow bool, d catalog.Definition, now time.Time) (invocation.Record, error) {
	if !runNow {
		return s.CreateAt(tx, rec, now, now)
	}
	events, sched, err := s.StartEvents(rec, d, now)
	if err != nil {
		return rec, err
	}
	return tx.StartInvocation(events, sched)
}

// StartEvents are the events of a new invocation whose first attempt starts at once (created,
// started) and the lease of this process that goes with them, outliving the attempt's timeout.
func (s *Spawner) StartEvents(rec invocation.Record, d catalog.Definition, now time.Time) ([]invocation.Event, store.Scheduling, error) {
	events, err := s.createdEvent(rec, now)
	if err != nil {
		return nil, store.Scheduling{}, err
	}
	ev, err := invocation.Event{InvocationID: rec.ID, Type: invocation.EventStarted, EngineAttempt: 1, LogicalAttempt: 1,
		At: now, IdempotencyKey: invocation.IdempotencyKey(rec.ID, "", 1, invocation.EventStarted, "")}.WithData(invocation.Started{Node: s.node})
	if err != nil {
		return nil, store.Scheduling{}, err
	}
	events = append(events, ev)
	until := now.Add(d.Timeout() + s.leaseGrace)
	started := rec
	started.EngineAttempt = 1
	return events, store.Scheduling{LeaseOwner: attempt.LeaseOwner(s.node, started), LeaseExpiresAt: &until}, nil
}

// CreateAt writes a new invocation inside tx as queued work that becomes runnable at `at`.
func (s *Spawner) CreateAt(tx store.Tx, rec invocation.Record, now, at time.Time) (invocation.Record, error) {
	events, err := s.createdEvent(rec, now)
	if err != nil {
		return rec, err
	}
	return tx.StartInvocation(events, store.Scheduling{AvailableAt: &at})
}

// CreateHeld writes a new invocation inside tx as queued work that no claim takes until it is made
// runnable (store.Tx.SetScheduling with an AvailableAt): an on_cancel handler that waits for its
// workflow's step compensations to end.
func (s *Spawner) CreateHeld(tx store.Tx, rec invocation.Record, now time.Time) (invocation.Record, error) {
	events, err := s.createdEvent(rec, now)
	if err != nil {
		return rec, err
	}
	return tx.StartInvocation(events, store.Scheduling{})
}

// createdEvent is a new invocation's first event, carrying its initial record and price.
func (s *Spawner) createdEvent(rec invocation.Record, now time.Time) ([]invocation.Event, error) {
	rec.Cost = s.pricing.For(rec.TenantID).PerInvocation // charged once, carried by the created event
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
		IdempotencyKey: invocation.IdempotencyKey(rec.ID, "", 1, invocation.EventCreated, ""), LogicalAttempt: 1, At: now}}, nil
}

// RateLimit applies the entrypoint's traits.rate_limit through its strategy's plugin, per tenant
// and entrypoint: refused → 429 rate_limited with Retry-After (whole seconds, at least 1).
func (s *Spawner) RateLimit(tenantID, entrypointID string, d catalog.Definition, now time.Time) (ratelimit.Decision, error) {
	rl := d.Traits.RateLimit
	if rl == nil || rl.Strategy == "" {
		return ratelimit.Decision{Allowed: true}, nil
	}
	p, ok := s.rateLimiters.Lookup(rl.Strategy)
	if !ok {
		return ratelimit.Decision{}, problem.Internal(fmt.Errorf("no rate limiter plugin handles strategy %s", rl.Strategy))
	}
	dec := p.Allow(tenantID+"|"+entrypointID, rl.Config, now)
	if dec.Allowed {
		return dec, nil
	}
	s.observer.RateLimited(tenantID, entrypointID)
	secs := int(math.Ceil(dec.RetryAfter.Seconds()))
	secs = max(secs, 1)
	pe := problem.New(problem.TypeRateLimited, "Entrypoint rate limit exceeded for tenant %s. Retry after %d seconds.", tenantID, secs)
	pe.RetryAfter = secs
	return dec, pe
}

// QuotaConcurrent names the max_concurrent_executions quota (the problem's quota member, and the
// Observer's quota).
const QuotaConcurrent = "max_concurrent_executions"

// QuotaExceeded is the 429 problem of a start over the tenant's max_concurrent_executions.
func QuotaExceeded(tenantID string, max int64) *problem.Error {
	pe := problem.New(problem.TypeQuotaExceeded, "tenant %s has %d executions running, its max_concurrent_executions quota", tenantID, max).
		With("quota", QuotaConcurrent)
	pe.RetryAfter = 1
	return pe
}

// EntrypointOwner is what an invocation of e records as its EntrypointOwner: the owning subject of a
// user-owned entrypoint, "" otherwise.
func EntrypointOwner(e entrypoint.Entrypoint) string {
	if e.Owner.OwnerType == entrypoint.OwnerUser {
		return e.Owner.ID
	}
	return ""
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// StartedRecord is the record a new invocation's first events leave (StartInvocation's fold),
// which its first attempt runs with before the write is durable.
func StartedRecord(events []invocation.Event) (invocation.Record, error) {
	var r invocation.Record
	for i := range events {
		ev := events[i]
		ev.Seq = int64(i + 1)
		var err error
		if r, err = invocation.Apply(r, ev); err != nil {
			return r, err
		}
	}
	return r, nil
}

// RecordIDs are the trace and span ids a new invocation record carries: those of ctx's span (the
// API request's, or the r_invoke_v1 call's for a child) when it has one, else a new trace (or the
// trace of a W3C traceparent) with a new span id.
func RecordIDs(ctx context.Context, traceparent string) (string, string) {
	if t, sp := tracing.IDs(ctx); t != "" {
		return t, sp
	}
	return traceIDs(traceparent)
}

// PrepareChild resolves and validates an r_invoke_v1 call of parent and builds the child's record
// (not yet stored). The child is visible to the parent's caller; internal entrypoints are allowed.
func (s *Spawner) PrepareChild(ctx context.Context, parent invocation.Record, entrypointID string, params any, mode invocation.Mode) (invocation.Record, entrypoint.Entrypoint, catalog.Definition, *sandbox.Error) {
	var e entrypoint.Entrypoint
	var d catalog.Definition
	fail := func(format string, args ...any) (invocation.Record, entrypoint.Entrypoint, catalog.Definition, *sandbox.Error) {
		return invocation.Record{}, e, d, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: fmt.Sprintf(format, args...)}
	}
	if parent.Depth+1 > s.maxDepth {
		return fail("r_invoke_v1: nesting deeper than %d invocations", s.maxDepth)
	}
	v := entrypoint.Viewer{TenantID: parent.TenantID, SubjectID: parent.SubjectID}
	e, err := s.catalog.Resolve(ctx, v, entrypointID)
	if err != nil {
		return fail("r_invoke_v1 %s: %s", entrypointID, problem.From(err).Detail)
	}
	if e.Kind == entrypoint.KindWorkflow && mode == invocation.ModeSync {
		return fail("r_invoke_v1 %s: a workflow can be awaited only from a workflow (outside a step)", entrypointID)
	}
	if d, err = s.catalog.Definition(e); err != nil {
		return fail("r_invoke_v1 %s: %v", entrypointID, err)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return fail("r_invoke_v1: params are not JSON: %v", err)
	}
	_, canon, err := s.catalog.ValidateParams(d, raw)
	if err != nil {
		pe := problem.From(err)
		return invocation.Record{}, e, d, &sandbox.Error{TypeID: problem.TypeValidation, Category: "non_retryable", Message: "r_invoke_v1: " + pe.Detail,
			Details: map[string]any{"issues": pe.Issues}}
	}
	now := s.clock.Now()
	rec := s.NewRecord(e, d, parent.TenantID, parent.SubjectID, mode, canon, now)
	rec.CorrelationID, rec.TraceID, rec.SpanID = parent.CorrelationID, parent.TraceID, randomHex(8)
	rec.ParentID, rec.Depth = parent.ID, parent.Depth+1
	switch t, sp := tracing.IDs(ctx); {
	case t == parent.TraceID:
		rec.SpanID = sp // the r_invoke_v1 call's (or the failing attempt's) span: the child's attempts are its children
	case parent.SpanID != "":
		// Started from outside the parent's trace (an on_cancel handler, by the cancel request): its
		// attempts hang under the span that created the parent.
		rec.SpanID = parent.SpanID
	}
	return rec, e, d, nil
}

// ChildRefused is the error result of an r_invoke_v1 call refused by a rate limit or a quota: the
// problem's type and detail, retryable (later the same call may pass), with retry_after_seconds.
func ChildRefused(err error) *sandbox.Error {
	pe := problem.From(err)
	e := &sandbox.Error{TypeID: pe.Type, Category: "retryable", Message: "r_invoke_v1: " + pe.Detail, Details: map[string]any{}}
	if pe.RetryAfter > 0 {
		e.Details["retry_after_seconds"] = pe.RetryAfter
	}
	for k, v := range pe.Extensions {
		e.Details[k] = v
	}
	return e
}

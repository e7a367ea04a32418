// Package eventtrigger starts invocations from events: it manages event triggers (000's Trigger API
// with 002's event trigger fields; the types are package trigger) and matches events to them: the
// events service (internal/eventbus) hands it every new event inside the transaction that stores
// it (Match), and each active trigger of the tenant for that event type whose filter matches plans
// and queues its invocation in that same transaction (or adds the event to its durable pending
// batch, flushed when full or when its oldest event has waited max_wait_ms: FlushDue, Run). Each event starts at most once per trigger (a unique row per trigger and first
// event). When an invocation a trigger started ends, the engine's writer.EndHook (InvocationEnded) counts it
// and, when it failed, writes a dead letter, in the transaction of the end. A sibling of
// internal/scheduler: it reuses its seam (invoke.Plan, invoke.Enqueue inside the caller's
// transaction).
package eventtrigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/eventfilter"
	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/loops"
	"github.com/larkrun/lark/internal/mergepatch"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/trigger"
)

// Invoker is what the event trigger service needs of invoke.Service.
type Invoker interface {
	Plan(ctx context.Context, st invoke.SystemStart) (invoke.Planned, error)
	NewID() string
	// Enqueue writes a planned invocation inside tx; once tx commits, the invoker reports it and
	// wakes its dispatcher.
	Enqueue(tx store.Tx, p invoke.Planned, id string, now time.Time) (invocation.Record, error)
	// CanSee reports whether sc may see an entrypoint.
	CanSee(ctx context.Context, sc auth.SecurityContext, entrypointID string) (bool, error)
}

// Feeds is what the event trigger service needs of the bus bridge that feeds triggers from external
// subjects (natsfeed): to hear of committed trigger changes, and each fed trigger's connection.
type Feeds interface {
	// Changed is called after a trigger write commits (deleted: the trigger is gone).
	Changed(t trigger.Trigger, deleted bool)
	// Await returns once the change of trigger t reported by Changed has been applied (its
	// subscription made, replaced, paused or resumed), or when ctx ends.
	Await(ctx context.Context, t trigger.Trigger)
	// Connection is the connection status of a fed trigger's subscription and 002's
	// connection_details (ok false: none).
	Connection(tenantID, triggerID string) (status string, details trigger.ConnectionDetails, ok bool)
}

// DefaultFeedWait is Options.FeedWait's default.
const DefaultFeedWait = 2 * time.Second

// Options configure a Service.
type Options struct {
	// Feeds connects triggers with a nats_subject to the NATS bridge; nil: the server has no
	// bridge, and such triggers are refused.
	Feeds Feeds
	// FeedWait bounds how long a create or change of a trigger fed by nats_subject waits for its
	// subscription to follow before answering, so that the answer's connection_status is the
	// subscription's as written (default DefaultFeedWait).
	FeedWait time.Duration
	Clock    clock.Clock
	IDs      idgen.Generator
	Logger   *slog.Logger
	// Poll is the longest sleep of the batch flusher (default 1 s).
	Poll time.Duration
	// Batch bounds the triggers one flusher pass reads (default 256).
	Batch int
	// Announce, when set, tells the other nodes sharing the store to wake their loop too
	// (internal/wakeup): Wake calls it. It must not block.
	Announce func()
	// Failed is called with "triggers" for every due batch that could not be flushed (nil: not
	// counted).
	Failed func(job string)
	// Observer hears of the triggers' starts, refusals, dead letters and redrives once the
	// writes that record them commit (nil: none).
	Observer Observer
	// Tracer records a trigger.flush span for each trigger whose due batches the flusher starts
	// (docs/observability.md): their invocations are created in its trace (default: no spans).
	Tracer trace.Tracer
}

// SpanFlush is the span of a flusher pass over one trigger's due batches.
const SpanFlush = "trigger.flush"

// JobTriggers is the job name of Options.Failed.
const JobTriggers = "triggers"

// Observer hears of what the triggers did (package metrics implements it), once the write that
// did it commits: outcome is OutcomeFired (an invocation started: for a matched event, a batch or
// a redriven dead letter), OutcomeRefused (its invocation could not be started), OutcomeDeadLettered
// (a dead letter written: a refused start, or a started invocation that failed) or
// OutcomeRedriven (a dead letter started again).
type Observer interface {
	TriggerOutcome(tenantID, outcome string)
}

// Observer outcomes.
const (
	OutcomeFired        = "fired"
	OutcomeRefused      = "refused"
	OutcomeDeadLettered = "dead_lettered"
	OutcomeRedriven     = "redriven"
)

// observe reports outcome for tenantID to the Observer once tx commits.
func (s *Service) observe(tx store.Tx, tenantID, outcome string) {
	if o := s.o.Observer; o != nil {
		tx.AfterCommit(func() { o.TriggerOutcome(tenantID, outcome) })
	}
}

// Store is the store methods the event trigger service uses (store.Store has them all): the trigger
// reads, the tenant's policy, Update for its writes, and Exclusive, which decides whether the
// active triggers may be cached in this process.
type Store interface {
	store.TenantReader
	Trigger(ctx context.Context, tenantID, id string) (trigger.Trigger, error)
	ListTriggers(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[trigger.Trigger], error)
	DueBatches(ctx context.Context, now time.Time, limit int) ([]trigger.Trigger, error)
	NextBatchDue(ctx context.Context) (*time.Time, error)
	DeadLetters(ctx context.Context, tenantID, triggerID string, q store.ListQuery) (store.Page[trigger.DeadLetter], error)
	TriggerMetrics(ctx context.Context, tenantID, triggerID string, since time.Time) ([]trigger.Hourly, error)
	// Exclusive reports whether this process is the database's only user (store.Store.Exclusive).
	Exclusive() bool
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Service implements the trigger use cases, matching and the batch flusher.
type Service struct {
	store Store
	inv   Invoker
	o     Options
	wake  loops.Bell
	cache *activeCache // nil unless the store is exclusive
	// metrics holds the received and filtered-out counts of committed publishes not yet written
	// (FlushMetrics).
	metrics metricsBuffer
}

// New returns a Service.
func New(st Store, inv Invoker, o Options) *Service {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.IDs == nil {
		o.IDs = idgen.UUIDv7{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.FeedWait <= 0 {
		o.FeedWait = DefaultFeedWait
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.Failed == nil {
		o.Failed = func(string) {}
	}
	if o.Tracer == nil {
		o.Tracer = tracing.Off().Tracer()
	}
	s := &Service{store: st, inv: inv, o: o, wake: loops.NewBell()}
	if st.Exclusive() {
		s.cache = &activeCache{m: map[[2]string]activeEntry{}}
	}
	return s
}

// Wake makes the loop look for due work now, on this node and, with Options.Announce, on the
// others (the leader's runs it). It never blocks.
func (s *Service) Wake() {
	s.WakeLocal()
	if s.o.Announce != nil {
		s.o.Announce()
	}
}

// WakeLocal wakes this node's loop only (the wake-up hub calls it on another node's announcement).
// It never blocks.
func (s *Service) WakeLocal() { s.wake.Ring() }

// Spec is the writable part of a trigger: the body of POST and PUT, and what PATCH merges into.
// The read-only fields are accepted and ignored, so a GET body can be PUT back.
type Spec struct {
	TriggerID        string                   `json:"trigger_id,omitempty"`
	EventTypeID      string                   `json:"event_type_id"`
	EventFilterQuery string                   `json:"event_filter_query,omitempty"`
	EntrypointID     string                   `json:"entrypoint_id"`
	Status           string                   `json:"status,omitempty"`
	ExecutionContext string                   `json:"execution_context,omitempty"`
	Batch            *trigger.Batch           `json:"batch,omitempty"`
	RetryPolicy      *trigger.RetryPolicy     `json:"retry_policy,omitempty"`
	DeadLetterQueue  *trigger.DeadLetterQueue `json:"dead_letter_queue,omitempty"`
	NATSSubject      string                   `json:"nats_subject,omitempty"`
	// 002's names of event_filter_query and status (aliases.go).
	Filter  string `json:"filter,omitempty"`
	Enabled *bool  `json:"enabled,omitempty"`

	TenantID          json.RawMessage `json:"tenant_id,omitempty"`
	ConnectionStatus  json.RawMessage `json:"connection_status,omitempty"`
	ConnectionDetails json.RawMessage `json:"connection_details,omitempty"`
	CreatedBy         json.RawMessage `json:"created_by,omitempty"`
	CreatedAt         json.RawMessage `json:"created_at,omitempty"`
	UpdatedAt         json.RawMessage `json:"updated_at,omitempty"`
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func invalid(path, code, format string, args ...any) *problem.Error {
	msg := fmt.Sprintf(format, args...)
	return problem.Validation(msg, []problem.Issue{{Path: path, Code: code, Message: msg}})
}

// build is build, refusing a nats_subject when the server has no NATS bridge.
func (s *Service) build(spec Spec, base trigger.Trigger) (trigger.Trigger, error) {
	if err := spec.aliases(); err != nil {
		return base, err
	}
	t, err := build(spec, base)
	if err == nil && t.NATSSubject != "" && s.o.Feeds == nil {
		err = invalid("$.nats_subject", "NOT_AVAILABLE", "this server has no NATS bridge: start it with --nats (LARK_NATS_URL) to feed triggers from subjects")
	}
	return t, err
}

// build validates spec into a trigger (other fields from base).
func build(spec Spec, base trigger.Trigger) (trigger.Trigger, error) {
	out := base
	if spec.EventTypeID == "" {
		return out, invalid("$.event_type_id", "MISSING_FIELD", "event_type_id is required")
	}
	if id, err := gts.Parse(spec.EventTypeID); err != nil || !id.IsType() {
		return out, invalid("$.event_type_id", "INVALID_VALUE", "event_type_id must be a GTS type id ending with ~")
	}
	out.EventTypeID = spec.EventTypeID
	if spec.EntrypointID == "" {
		return out, invalid("$.entrypoint_id", "MISSING_FIELD", "entrypoint_id is required")
	}
	if len(spec.EntrypointID) > gts.MaxLength {
		return out, invalid("$.entrypoint_id", "INVALID_VALUE", "entrypoint_id is longer than %d characters", gts.MaxLength)
	}
	out.EntrypointID = spec.EntrypointID
	if err := checkFilter(spec.EventFilterQuery); err != nil {
		return out, err
	}
	out.EventFilterQuery = spec.EventFilterQuery
	var err error
	if out.Status, err = oneOf("status", spec.Status, trigger.StatusActive, trigger.StatusPaused, trigger.StatusDisabled); err != nil {
		return out, err
	}
	if out.ExecutionContext, err = oneOf("execution_context", spec.ExecutionContext, trigger.ContextSystem, trigger.ContextEventSource); err != nil {
		return out, err
	}
	out.Batch = trigger.Batch{}
	if b := spec.Batch; b != nil && b.Enabled {
		out.Batch = trigger.Batch{Enabled: true, MaxSize: b.MaxSize, MaxWaitMS: b.MaxWaitMS}
		if out.Batch.MaxSize == 0 {
			out.Batch.MaxSize = trigger.DefaultBatchSize
		}
		if out.Batch.MaxWaitMS == 0 {
			out.Batch.MaxWaitMS = trigger.DefaultBatchWaitMS
		}
		if out.Batch.MaxSize < 1 || out.Batch.MaxSize > trigger.MaxBatchSize {
			return out, invalid("$.batch.max_size", "INVALID_VALUE", "batch.max_size must be 1-%d", trigger.MaxBatchSize)
		}
		if out.Batch.MaxWaitMS < trigger.MinBatchWaitMS || out.Batch.MaxWaitMS > trigger.MaxBatchWaitMS {
			return out, invalid("$.batch.max_wait_ms", "INVALID_VALUE", "batch.max_wait_ms must be %d-%d", trigger.MinBatchWaitMS, trigger.MaxBatchWaitMS)
		}
	}
	if out.RetryPolicy, err = checkRetry("$.retry_policy", spec.RetryPolicy); err != nil {
		return out, err
	}
	out.DeadLetterQueue = trigger.DeadLetterQueue{Enabled: true}
	if d := spec.DeadLetterQueue; d != nil {
		out.DeadLetterQueue = *d
		if out.DeadLetterQueue.RetryPolicy, err = checkRetry("$.dead_letter_queue.retry_policy", d.RetryPolicy); err != nil {
			return out, err
		}
		if t := d.DLQTopic; t != nil {
			if id, err := gts.Parse(*t); err != nil || !id.IsType() {
				return out, invalid("$.dead_letter_queue.dlq_topic", "INVALID_VALUE", "dlq_topic must be a GTS type id or null")
			}
		}
	}
	if err := checkSubject(spec.NATSSubject); err != nil {
		return out, err
	}
	out.NATSSubject = spec.NATSSubject
	return out, nil
}

// checkSubject validates a nats_subject: dot-separated tokens without spaces, "*" for one token and
// ">" as the last, at most MaxSubjectBytes.
func checkSubject(subj string) error {
	if subj == "" {
		return nil
	}
	if len(subj) > trigger.MaxSubjectBytes {
		return invalid("$.nats_subject", "INVALID_VALUE", "nats_subject is longer than %d bytes", trigger.MaxSubjectBytes)
	}
	tokens := strings.Split(subj, ".")
	for i, tok := range tokens {
		switch {
		case tok == "":
			return invalid("$.nats_subject", "INVALID_VALUE", "nats_subject has an empty token")
		case strings.ContainsAny(tok, " \t\r\n"):
			return invalid("$.nats_subject", "INVALID_VALUE", "nats_subject may not contain white space")
		case tok == ">" && i != len(tokens)-1:
			return invalid("$.nats_subject", "INVALID_VALUE", "\">\" may only be the last token of nats_subject")
		case tok != "*" && tok != ">" && strings.ContainsAny(tok, "*>"):
			return invalid("$.nats_subject", "INVALID_VALUE", "wildcards must be whole tokens of nats_subject")
		}
	}
	return nil
}

// checkFilter compiles and type-checks a CEL filter: a 422 naming the position when it does not.
func checkFilter(expr string) error {
	if expr == "" {
		return nil
	}
	if len(expr) > trigger.MaxFilterBytes {
		return invalid("$.event_filter_query", "INVALID_VALUE", "event_filter_query is longer than %d bytes", trigger.MaxFilterBytes)
	}
	if _, err := eventfilter.Cached(expr); err != nil {
		pe := invalid("$.event_filter_query", "INVALID_FILTER", "event_filter_query: %s", err.Error())
		var fe *eventfilter.Error
		if errors.As(err, &fe) {
			pe = pe.With("line", fe.Line).With("column", fe.Column)
		}
		return pe
	}
	return nil
}

// checkRetry bounds a retry policy.
func checkRetry(path string, p *trigger.RetryPolicy) (*trigger.RetryPolicy, error) {
	if p == nil {
		return nil, nil
	}
	out := *p
	if out.MaxAttempts == 0 {
		out.MaxAttempts = 3
	}
	if out.MaxAttempts < 1 || out.MaxAttempts > trigger.MaxRetryAttempts {
		return nil, invalid(path+".max_attempts", "INVALID_VALUE", "max_attempts must be 1-%d", trigger.MaxRetryAttempts)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"initial_delay_ms", out.InitialDelayMS}, {"max_delay_ms", out.MaxDelayMS}, {"backoff_ms", out.BackoffMS}} {
		if f.v < 0 || f.v > 24*3600*1000 {
			return nil, invalid(path+"."+f.name, "INVALID_VALUE", "%s must be 0-86400000", f.name)
		}
	}
	if out.BackoffMultiplier < 0 || out.BackoffMultiplier > 10 {
		return nil, invalid(path+".backoff_multiplier", "INVALID_VALUE", "backoff_multiplier must be 0-10")
	}
	return &out, nil
}

// oneOf reads an enumerated field: "" is the first allowed value; anything else outside the list is
// a 422 naming the field.
func oneOf[T ~string](field, v string, allowed ...T) (T, error) {
	if v == "" {
		return allowed[0], nil
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if string(a) == v {
			return a, nil
		}
		names[i] = string(a)
	}
	return "", invalid("$."+field, "INVALID_VALUE", "%s must be one of %s", field, strings.Join(names, ", "))
}

// render fills in the computed fields of a trigger: its connection status is paused while it is
// not active, its subscription's (natsfeed) when a subject feeds it, else active.
func (s *Service) render(t trigger.Trigger) trigger.Trigger {
	switch {
	case t.Status != trigger.StatusActive:
		t.ConnectionStatus = trigger.ConnectionPaused
	case t.NATSSubject != "" && s.o.Feeds != nil:
		t.ConnectionStatus = trigger.ConnectionDisconnected
	default:
		t.ConnectionStatus = trigger.ConnectionActive
	}
	if t.NATSSubject != "" && s.o.Feeds != nil {
		if st, d, ok := s.o.Feeds.Connection(t.TenantID, t.ID); ok {
			if t.Status == trigger.StatusActive {
				t.ConnectionStatus = st
			}
			t.ConnectionDetails = &d
		}
	}
	return t
}

// settle waits, up to FeedWait, for the feed of trigger t (just written) to follow the write, so
// that the answer shows the subscription as written rather than as it was.
func (s *Service) settle(ctx context.Context, t trigger.Trigger) {
	if s.o.Feeds == nil || t.NATSSubject == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.FeedWait)
	defer cancel()
	s.o.Feeds.Await(ctx, t)
}

// committed registers what follows a committed write of t: the active-trigger cache starts afresh,
// and the feeds hear of it.
func (s *Service) committed(tx store.Tx, t trigger.Trigger, deleted bool) {
	tx.AfterCommit(func() {
		s.cache.invalidate()
		if s.o.Feeds != nil {
			s.o.Feeds.Changed(t, deleted)
		}
	})
}

// retryPolicy is the retry policy of the invocations t starts: its retry_policy, else its
// dead_letter_queue's; nil (the entrypoint's traits.retry) when it has neither. 002's backoff_ms is
// the delay between attempts (constant); 000's initial_delay_ms, max_delay_ms and
// backoff_multiplier give an exponential backoff.
func retryPolicy(t trigger.Trigger) *outcome.RetryPolicy {
	rp := t.RetryPolicy
	if rp == nil {
		rp = t.DeadLetterQueue.RetryPolicy
	}
	if rp == nil {
		return nil
	}
	out := outcome.RetryPolicy{MaxAttempts: rp.MaxAttempts, InitialDelayMS: rp.InitialDelayMS, MaxDelayMS: rp.MaxDelayMS,
		BackoffMultiplier: rp.BackoffMultiplier}
	if out.InitialDelayMS == 0 {
		out.InitialDelayMS = rp.BackoffMS
	}
	if out.BackoffMultiplier == 0 {
		out.BackoffMultiplier = 1
	}
	return &out
}

// runAs is the identity a trigger's invocation has: the trigger itself (system), or the subject
// that published the event (event_source; the trigger's when the event has none).
func runAs(t trigger.Trigger, publisher string) auth.SecurityContext {
	sc := auth.SecurityContext{TenantID: t.TenantID, SubjectID: "trigger:" + t.ID, Roles: []auth.Role{auth.RoleOperator}}
	if t.ExecutionContext == trigger.ContextEventSource && publisher != "" {
		sc.SubjectID = publisher
	}
	return sc
}

func canRead(sc auth.SecurityContext) error {
	return auth.RequireTenantRole(sc, auth.RoleViewer, "reading triggers")
}

func canWrite(sc auth.SecurityContext) error {
	return auth.RequireTenantRole(sc, auth.RoleDeveloper, "changing triggers")
}

// insertAudit records an audit event of trigger t in tx.
func (s *Service) insertAudit(ctx context.Context, tx store.Tx, sc auth.SecurityContext, t trigger.Trigger, typ string, details map[string]any) error {
	d := map[string]any{"trigger_id": t.ID, "event_type_id": t.EventTypeID, "entrypoint_id": t.EntrypointID, "status": t.Status}
	for k, v := range details {
		d[k] = v
	}
	ev, err := audit.WithDetails(audit.Event{ID: s.o.IDs.New("aud"), TenantID: t.TenantID, Type: typ, ActorID: sc.SubjectID,
		ResourceType: "trigger", ResourceID: t.ID, CorrelationID: obs.CorrelationID(ctx), At: s.o.Clock.Now()}, d)
	if err != nil {
		return err
	}
	return tx.InsertAudit(ev)
}

// storeErr maps a store error of trigger id to its problem.
func storeErr(id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return problem.NotFound("trigger %s not found", id)
	case errors.Is(err, store.ErrStale):
		return problem.Conflict("concurrent_update", "trigger %s changed while this request was applied; retry it", id)
	}
	var pe *problem.Error
	if errors.As(err, &pe) {
		return pe
	}
	return problem.Internal(err)
}

// checkEntrypoint answers 404 when the caller may not see the entrypoint (or it does not exist),
// and when the trigger's own identity could not resolve it.
func (s *Service) checkEntrypoint(ctx context.Context, sc auth.SecurityContext, t trigger.Trigger) error {
	for i, who := range []auth.SecurityContext{sc, runAs(t, sc.SubjectID)} {
		ok, err := s.inv.CanSee(ctx, who, t.EntrypointID)
		if err != nil {
			return problem.Internal(err)
		}
		switch {
		case ok:
		case i == 0:
			return problem.NotFound("entrypoint %s not found", t.EntrypointID).With("entrypoint_id", t.EntrypointID)
		default:
			// The caller sees it, the trigger's runs would not: say why rather than 404.
			msg := fmt.Sprintf("execution_context is %q: the trigger's invocations start as %s, which cannot see %s: "+
				"it is private to its owner; share the entrypoint (\"shared\": true) or use a tenant-owned one",
				t.ExecutionContext, who.SubjectID, t.EntrypointID)
			return problem.Validation(msg, []problem.Issue{{Path: "$.execution_context", Code: "ENTRYPOINT_NOT_VISIBLE", Message: msg}}).
				With("execution_context", t.ExecutionContext)
		}
	}
	return nil
}

// Create registers a trigger: 201 with it. The entrypoint must exist and be visible to the caller;
// the tenant's max_triggers applies (429 quota_exceeded).
func (s *Service) Create(ctx context.Context, sc auth.SecurityContext, spec Spec) (trigger.Trigger, error) {
	if err := canWrite(sc); err != nil {
		return trigger.Trigger{}, err
	}
	now := s.o.Clock.Now()
	base := trigger.Trigger{ID: spec.TriggerID, TenantID: sc.TenantID, CreatedBy: sc.SubjectID, CreatedAt: now, UpdatedAt: now}
	if base.ID == "" {
		base.ID = s.o.IDs.New("trg")
	} else if !idPattern.MatchString(base.ID) {
		return base, invalid("$.trigger_id", "INVALID_VALUE", "trigger_id must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	t, err := s.build(spec, base)
	if err != nil {
		return base, err
	}
	if err := s.checkEntrypoint(ctx, sc, t); err != nil {
		return base, err
	}
	policy, err := s.store.Tenant(ctx, sc.TenantID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return base, problem.Internal(err)
	}
	var perr error
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if max := policy.Quotas.MaxTriggers; max != nil {
			n, err := store.TriggerTotal(tx, sc.TenantID)
			if err != nil {
				return err
			}
			if n >= *max {
				pe := problem.New(problem.TypeQuotaExceeded, "tenant %s has reached its quota of %d triggers; delete some, or ask the operator to raise max_triggers", sc.TenantID, *max).With("quota", "max_triggers")
				pe.RetryAfter = 60
				perr = pe
				return perr
			}
		}
		if err := tx.InsertTrigger(&t); err != nil {
			return err
		}
		s.committed(tx, t, false)
		return s.insertAudit(ctx, tx, sc, t, audit.TriggerCreated, nil)
	})
	switch {
	case perr != nil:
		return base, perr
	case errors.Is(err, store.ErrConflict):
		return base, problem.Conflict("trigger_exists", "a trigger with id %s already exists", t.ID).With("trigger_id", t.ID)
	case err != nil:
		return base, problem.Internal(err)
	}
	s.o.Logger.InfoContext(ctx, "trigger created", "tenant_id", t.TenantID, "trigger_id", t.ID)
	s.settle(ctx, t)
	return s.render(t), nil
}

// Get returns a trigger of the caller's tenant.
func (s *Service) Get(ctx context.Context, sc auth.SecurityContext, id string) (trigger.Trigger, error) {
	if err := canRead(sc); err != nil {
		return trigger.Trigger{}, err
	}
	t, err := s.store.Trigger(ctx, sc.TenantID, id)
	if err != nil {
		return t, storeErr(id, err)
	}
	return s.render(t), nil
}

// List lists the caller's tenant's triggers.
func (s *Service) List(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[trigger.Trigger], error) {
	if err := canRead(sc); err != nil {
		return store.Page[trigger.Trigger]{}, err
	}
	page, err := s.store.ListTriggers(ctx, sc.TenantID, q)
	for i := range page.Items {
		page.Items[i] = s.render(page.Items[i])
	}
	return page, err
}

// specOf is the writable part of a stored trigger (what PATCH merges into).
func specOf(t trigger.Trigger) Spec {
	b, d := t.Batch, t.DeadLetterQueue
	return Spec{TriggerID: t.ID, EventTypeID: t.EventTypeID, EventFilterQuery: t.EventFilterQuery, EntrypointID: t.EntrypointID,
		Status: string(t.Status), ExecutionContext: t.ExecutionContext, Batch: &b, RetryPolicy: t.RetryPolicy, DeadLetterQueue: &d,
		NATSSubject: t.NATSSubject}
}

// Replace is PUT: the body replaces every writable field (absent ones take their defaults).
func (s *Service) Replace(ctx context.Context, sc auth.SecurityContext, id string, spec Spec) (trigger.Trigger, error) {
	return s.change(ctx, sc, id, audit.TriggerUpdated, func(trigger.Trigger) (Spec, error) { return spec, nil })
}

// Patch is PATCH: a JSON merge patch (RFC 7396) of the writable fields.
func (s *Service) Patch(ctx context.Context, sc auth.SecurityContext, id string, patch map[string]any, decode func([]byte, *Spec) error) (trigger.Trigger, error) {
	return s.change(ctx, sc, id, audit.TriggerUpdated, func(cur trigger.Trigger) (Spec, error) {
		raw, err := json.Marshal(specOf(cur))
		if err != nil {
			return Spec{}, err
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return Spec{}, err
		}
		merged, err := json.Marshal(mergepatch.Apply(doc, patchAliases(patch)))
		if err != nil {
			return Spec{}, err
		}
		var spec Spec
		return spec, decode(merged, &spec)
	})
}

// Enable makes a trigger active; Disable disables it (events published meanwhile are not matched).
// Enabling an active trigger, or disabling a disabled one, changes nothing.
func (s *Service) Enable(ctx context.Context, sc auth.SecurityContext, id string) (trigger.Trigger, error) {
	return s.setStatus(ctx, sc, id, trigger.StatusActive, audit.TriggerEnabled)
}

// Disable is the :disable action (see Enable).
func (s *Service) Disable(ctx context.Context, sc auth.SecurityContext, id string) (trigger.Trigger, error) {
	return s.setStatus(ctx, sc, id, trigger.StatusDisabled, audit.TriggerDisabled)
}

func (s *Service) setStatus(ctx context.Context, sc auth.SecurityContext, id string, st trigger.Status, typ string) (trigger.Trigger, error) {
	return s.change(ctx, sc, id, typ, func(cur trigger.Trigger) (Spec, error) {
		spec := specOf(cur)
		spec.Status = string(st)
		return spec, nil
	})
}

// change applies an update built from the current trigger.
func (s *Service) change(ctx context.Context, sc auth.SecurityContext, id, typ string, next func(trigger.Trigger) (Spec, error)) (trigger.Trigger, error) {
	if err := canWrite(sc); err != nil {
		return trigger.Trigger{}, err
	}
	cur, err := s.store.Trigger(ctx, sc.TenantID, id)
	if err != nil {
		return cur, storeErr(id, err)
	}
	spec, err := next(cur)
	if err != nil {
		return cur, err
	}
	if spec.TriggerID != "" && spec.TriggerID != cur.ID {
		return cur, invalid("$.trigger_id", "READ_ONLY", "trigger_id cannot change (it is %s)", cur.ID)
	}
	t, err := s.build(spec, cur)
	if err != nil {
		return cur, err
	}
	if t.EntrypointID != cur.EntrypointID || t.ExecutionContext != cur.ExecutionContext {
		if err := s.checkEntrypoint(ctx, sc, t); err != nil {
			return cur, err
		}
	}
	t.UpdatedAt = s.o.Clock.Now()
	fields, err := mergepatch.Changed(specOf(cur), specOf(t))
	if err != nil {
		return cur, problem.Internal(err)
	}
	if len(fields) == 0 {
		return s.render(cur), nil
	}
	base := t
	err = s.store.Update(ctx, func(tx store.Tx) error {
		t = base // a run again (store.Tx) starts from the same trigger: UpdateTrigger moved its revision
		fresh, err := tx.Trigger(t.TenantID, t.ID)
		if err != nil {
			return err
		}
		t.BatchDueAt = fresh.BatchDueAt
		if !t.Batch.Enabled && fresh.Batch.Enabled {
			// Batching turned off: the pending batch is flushed now, as it is.
			if err := s.flushAll(tx, &fresh, t.UpdatedAt, true); err != nil {
				return err
			}
			t.BatchDueAt = nil
		}
		if err := tx.UpdateTrigger(&t); err != nil {
			return err
		}
		s.committed(tx, t, false)
		return s.insertAudit(ctx, tx, sc, t, typ, map[string]any{"updated_fields": fields})
	})
	if err != nil {
		return cur, storeErr(id, err)
	}
	s.Wake()
	s.settle(ctx, t)
	return s.render(t), nil
}

// Delete deletes a trigger with its pending batch, dead letters and metrics. Invocations it started
// are not affected.
func (s *Service) Delete(ctx context.Context, sc auth.SecurityContext, id string) error {
	if err := canWrite(sc); err != nil {
		return err
	}
	err := s.store.Update(ctx, func(tx store.Tx) error {
		t, err := tx.Trigger(sc.TenantID, id)
		if err != nil {
			return err
		}
		if err := tx.DeleteTrigger(sc.TenantID, id); err != nil {
			return err
		}
		s.committed(tx, t, true)
		return s.insertAudit(ctx, tx, sc, t, audit.TriggerDeleted, nil)
	})
	return storeErr(id, err)
}

package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
)

// execute runs one started attempt of rec and records its outcome. It is used by sync invocations,
// by the dispatcher for queued work, and for r_invoke_v1 children.
func (s *Service) execute(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d definition, due time.Time) (invocation.Record, error) {
	if e.Kind == entrypoint.KindWorkflow {
		s.dequeued(rec, time.Time{}, nil)
		return s.executeWorkflow(ctx, rec, e, d)
	}
	a := s.runFunction(ctx, rec, e, d, nil, due)
	s.dequeued(rec, due, a.Outcome.Metrics.QueueWaitMS)
	return s.complete(context.WithoutCancel(ctx), rec, d, a.Timeline, a.Outcome, nil)
}

// attempt is the run stage's view of an attempt of rec (e's version, parsed as d): data only.
// input is rec's params decoded, when the caller has them (nil: they are decoded by the run).
func (s *Service) attempt(rec invocation.Record, e entrypoint.Entrypoint, d definition, input any, due time.Time) run.Job {
	returns, rerr := s.returnsSchema(d)
	return run.Job{Record: rec, Input: input, ProgramKey: e.ID, Source: d.Implementation.Code.Source,
		Limits: d.limits(s.cfg.MaxPayloadBytes), Retry: retryOf(rec, d), Returns: returns, ReturnsErr: rerr, Due: due,
		AdmitWithin: s.admitWithin()}
}

// admitWithin bounds an execution's wait for admission: half the lease grace, so that a claimed
// attempt starts, and ends within its timeout, before its lease (timeout + grace) runs out.
func (s *Service) admitWithin() time.Duration { return s.cfg.LeaseGrace / 2 }

// runFunction runs one attempt of a function (rec as started, runnable since due) through the run
// stage, cancelable by cancel while it runs. Its timeout starts when the run stage admits it, not
// here. It writes nothing.
func (s *Service) runFunction(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d definition, input any, due time.Time) run.Result {
	if d.workerDefinition() != "" {
		a := s.attempt(rec, e, d, input, due)
		o := outcome.Decide(rec, a.Retry, nil, workerOnly(e.GTSID), true, s.cfg.Clock.Now())
		o.Metrics = run.Metrics(0, sandbox.Result{}, a.Limits.MemoryMB, 0)
		return run.Result{Outcome: o}
	}
	log := obs.Logger(ctx).With("tenant_id", rec.TenantID, "invocation_id", rec.ID, "correlation_id", rec.CorrelationID)
	ctx, span := s.startAttempt(ctx, rec)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.track(rec.ID, cancel)
	defer s.untrack(rec.ID)
	res := s.runner.Function(runCtx, s.attempt(rec, e, d, input, due), &host{s: s, rec: rec, log: log, spanCtx: ctx})
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrStatus.String(res.Outcome.Kind.String()))
		endSpan(span, res.Outcome.Err)
	}
	return res
}

// resolveParent completes the parent workflow's pending r_invoke_v1 entry with the child's outcome
// and makes the parent runnable, in the child's completion transaction. A parent that no longer
// waits (canceled meanwhile) is left alone.
func (s *Service) resolveParent(tx store.Tx, child invocation.Record, now time.Time) error {
	parent, err := tx.Invocation(child.TenantID, child.ParentID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || parent.Status != invocation.StatusSuspended {
		return err
	}
	data, err := json.Marshal(map[string]any{"seq": *child.ParentSeq, "result": childResult(child), "child_invocation_id": child.ID})
	if err != nil {
		return err
	}
	ev := invocation.Event{Type: invocation.EventJournalResolved, Data: data, At: now, LogicalAttempt: parent.Attempt,
		IdempotencyKey: eventKey(parent.ID, "child-"+child.ID, parent.Attempt, invocation.EventJournalResolved)}
	_, _, err = tx.Append(store.AppendRequest{TenantID: parent.TenantID, InvocationID: parent.ID, Events: []invocation.Event{ev}, AppendOptions: store.AppendOptions{Schedule: &store.Scheduling{AvailableAt: &now}}})
	return err
}

// childResult is the recorded result of an r_invoke_v1 whose child ended: struct(ok=True,
// value=result) when it succeeded, else its error (canceled when it has none).
func childResult(child invocation.Record) any {
	if child.Status == invocation.StatusSucceeded {
		var v any
		_ = invocation.DecodeJSON(child.Result, &v)
		return sandbox.OKResult(v)
	}
	e := &sandbox.Error{TypeID: sandbox.ErrCanceled, Category: "canceled", Message: "child invocation " + child.ID + " was canceled"}
	if child.Error != nil {
		e = &sandbox.Error{TypeID: child.Error.TypeID, Category: child.Error.Category, Message: child.Error.Message}
	}
	e.Details = map[string]any{"child_invocation_id": child.ID}
	return sandbox.ErrorResult(e)
}

// resolveCompensation ends a compensating workflow when its handler ends: compensated when the
// handler succeeded, dead_lettered (compensation_failed) otherwise (000's state machine).
func (s *Service) resolveCompensation(tx store.Tx, handler invocation.Record, now time.Time) error {
	wf, err := tx.Invocation(handler.TenantID, handler.CompensationFor)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || wf.Status != invocation.StatusCompensating {
		return err
	}
	t := invocation.EventCompensationCompleted
	if handler.Status != invocation.StatusSucceeded {
		t = invocation.EventCompensationFailed
	}
	data, err := json.Marshal(map[string]any{"handler_invocation_id": handler.ID, "handler_status": handler.Status})
	if err != nil {
		return err
	}
	ev := invocation.Event{Type: t, Data: data, At: now, LogicalAttempt: wf.Attempt,
		IdempotencyKey: eventKey(wf.ID, "handler-"+handler.ID, wf.Attempt, t)}
	_, _, err = tx.Append(store.AppendRequest{TenantID: wf.TenantID, InvocationID: wf.ID, Events: []invocation.Event{ev}, AppendOptions: store.AppendOptions{Schedule: &store.Scheduling{}}})
	return err
}

// retryOf is the retry policy of rec's attempts: its own (a trigger's retry_policy, with the
// entrypoint's non_retryable_errors) when it has one, else the entrypoint's traits.retry.
func retryOf(rec invocation.Record, d definition) outcome.RetryPolicy {
	if len(rec.RetryPolicy) == 0 {
		return d.Traits.Retry
	}
	var p outcome.RetryPolicy
	if err := json.Unmarshal(rec.RetryPolicy, &p); err != nil {
		return d.Traits.Retry // written by Plan: cannot happen; the entrypoint's is the safe answer
	}
	p.NonRetryableErrors = d.Traits.Retry.NonRetryableErrors
	return p
}

// track registers a running attempt so that cancel can stop it; untrack removes it.
func (s *Service) track(id string, cancel context.CancelFunc) {
	s.mu.Lock()
	s.running[id] = cancel
	s.mu.Unlock()
}

func (s *Service) untrack(id string) {
	s.mu.Lock()
	delete(s.running, id)
	s.mu.Unlock()
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// parking is how a workflow run that parked is suspended: until a time (a durable timer, or now to
// replay at once), or until a child invocation, created in the same transaction, ends.
type parking struct {
	until  *time.Time
	child  *invocation.Record
	childD definition
	reason string
	// handler, when set on a failed workflow, is its on_failure compensation invocation (000): the
	// workflow goes failed → compensating and the handler is created in the same transaction.
	handler  *invocation.Record
	handlerD definition
	// wait, when set, is the event the workflow suspends for (r_wait_event_v1), registered in the
	// same transaction; until is then its timeout.
	wait *events.Wait
	// clearWaits removes the workflow's registered event waits with this outcome (it waited for an
	// event earlier and no longer does).
	clearWaits bool
	// refused is the error result of a child that could not start (the entry is resolved at once).
	refused any
	// final, on a failed run, means it ends the invocation whatever the retry policy says (a
	// workflow's r_exit).
	final bool
}

// suspends reports whether the run parks (rather than ending).
func (p *parking) suspends() bool {
	return p != nil && p.handler == nil && (p.until != nil || p.child != nil || p.wait != nil)
}

// complete records an attempt's outcome in one transaction: the attempt's timeline entries, then
// succeeded, a scheduled retry, or failed followed by dead_lettered (functions have no compensation).
// If this process no longer holds the attempt's lease (it was canceled, or the lease expired and the
// work moved), the outcome is recorded as late_result and not applied.
// A workflow that parks passes park: it becomes suspended, holding no goroutine; the queue wakes it
// at park.until, or the child's completion does. o is what the attempt came to (s.decide for a
// workflow run, the run stage's decision for a function).
func (s *Service) complete(ctx context.Context, rec invocation.Record, d definition, timeline []invocation.Event,
	o outcome.Outcome, park *parking) (invocation.Record, error) {
	return s.completeWith(ctx, rec, d, timeline, o, park, nil)
}

// completeAfter is complete for a workflow run whose journal writes are still on their way
// (enqueueJournal): the outcome is queued behind them without waiting and expects exactly the
// projection the last of them leaves (it fails when one did not apply, or when anything else wrote
// in between). The caller flushes h afterwards, and completes again, as usual, if this failed.
func (s *Service) completeAfter(ctx context.Context, rec invocation.Record, d definition, timeline []invocation.Event,
	o outcome.Outcome, h *host) (invocation.Record, error) {
	return s.completeWith(ctx, rec, d, timeline, o, nil, h)
}

// decide is what a workflow run of rec came to: suspended when it parked (park.suspends), otherwise
// outcome.Decide of its output or error under the retry policy — r_exit (park.final) is never
// retried, and a failure with an on_failure handler (park.handler) goes on to the compensation.
func (s *Service) decide(rec invocation.Record, d definition, output json.RawMessage, rerr *sandbox.Error,
	metrics invocation.Metrics, park *parking) outcome.Outcome {
	var o outcome.Outcome
	if rerr == nil && park.suspends() {
		o = outcome.Outcome{Kind: outcome.Suspended, Until: park.until, Reason: park.reason}
	} else {
		o = outcome.Decide(rec, retryOf(rec, d), output, rerr, park != nil && park.final, s.cfg.Clock.Now())
	}
	if o.Kind == outcome.Failed && park != nil && park.handler != nil {
		o.Handler = &outcome.Handler{InvocationID: park.handler.ID, EntrypointID: park.handler.EntrypointID}
	}
	o.Metrics = metrics
	return o
}

// closingEvents prices o at the tenant's current prices and returns the events that close rec's attempt
// after its timeline entries, and the queue state they leave.
func (s *Service) closingEvents(rec invocation.Record, timeline []invocation.Event, o outcome.Outcome, now time.Time) ([]invocation.Event, store.Scheduling, error) {
	o.Cost = s.cfg.Pricing.For(rec.TenantID).Execution(o.Metrics)
	events, available, err := o.Events(rec, timeline, now)
	return events, store.Scheduling{AvailableAt: available}, err
}

// informational is what survives of an attempt's timeline when its outcome is not applied as it
// ran: no journal entries (another runner may be replaying those positions), no emitted events
// (never published by an outcome that did not apply), no step retries or compensation records, and
// no child_invoked of a parked child (created only with an applied outcome).
func informational(timeline []invocation.Event, park *parking) []invocation.Event {
	var out []invocation.Event
	for _, ev := range timeline {
		switch {
		case ev.Type == invocation.EventJournal, ev.Type == invocation.EventJournalResolved, ev.Type == invocation.EventStepRetried, ev.Type == invocation.EventEmitted,
			ev.Type == invocation.EventStepCompensating, ev.Type == invocation.EventStepCompensated, park != nil && park.child != nil && ev.Type == invocation.EventChildInvoked:
		default:
			out = append(out, ev)
		}
	}
	return out
}

// completeWith records o in one transaction (complete, completeAfter): the closing write of rec's
// attempt (completeRequest), then either a late_result when the lease was lost (completeLate) or
// the writes that go with the applied outcome (completeFollowUps). after, when set, is the host
// whose queued journal writes the outcome follows.
func (s *Service) completeWith(ctx context.Context, rec invocation.Record, d definition, timeline []invocation.Event,
	o outcome.Outcome, park *parking, after *host) (invocation.Record, error) {
	owner := s.leaseOwner(rec)
	// The execution's cost, at the prices of this moment, goes into the event that closes it
	// (invocation.Execution): whatever that event is, and even when the outcome is not applied.
	price := s.cfg.Pricing.For(rec.TenantID).Execution(o.Metrics)
	var final invocation.Record
	err := s.update(ctx, func(tx store.Tx) error {
		now := s.cfg.Clock.Now()
		req, err := s.completeRequest(rec, timeline, o, owner, after, now)
		if err != nil {
			return err
		}
		final, _, err = tx.Append(req)
		if after != nil && err != nil {
			return err // the caller completes again, as usual
		}
		if errors.Is(err, store.ErrLeaseLost) {
			// Canceled meanwhile, or the lease expired and the work moved: record, never apply.
			final, err = completeLate(tx, rec, timeline, o, park, price, now)
			return err
		}
		if err != nil {
			return err
		}
		return s.completeFollowUps(tx, rec, final, d, o, park, now)
	})
	if err != nil {
		return rec, fmt.Errorf("complete %s: %w", rec.ID, err)
	}
	return final, nil
}

// completeRequest is the closing write of rec's attempt: its timeline entries and the events of
// o, under this process's lease (owner) and expecting rec as it was, or, after queued journal
// writes (after), exactly the projection the last of them leaves.
func (s *Service) completeRequest(rec invocation.Record, timeline []invocation.Event, o outcome.Outcome, owner string,
	after *host, now time.Time) (store.AppendRequest, error) {
	events, next, err := s.closingEvents(rec, timeline, o, now)
	if err != nil {
		return store.AppendRequest{}, err
	}
	opt := store.AppendOptions{RequireLease: owner, Schedule: &next, Expect: &rec}
	if after != nil {
		if err := after.expectChain(&opt); err != nil {
			return store.AppendRequest{}, err
		}
	}
	return store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: events, AppendOptions: opt}, nil
}

// completeLate records the outcome of an attempt that lost its lease without applying it: the
// informational entries of its timeline and a late_result carrying its metrics and cost (price).
func completeLate(tx store.Tx, rec invocation.Record, timeline []invocation.Event, o outcome.Outcome, park *parking,
	price float64, now time.Time) (invocation.Record, error) {
	data, err := json.Marshal(map[string]any{"succeeded": o.Err == nil, "engine_attempt": rec.EngineAttempt,
		"metrics": o.Metrics, "cost": price})
	if err != nil {
		return invocation.Record{}, err
	}
	// Only informational entries survive: a run that lost its lease must never write journal
	// entries (another runner may be replaying those positions), nor step retries.
	late := append(informational(timeline, park), invocation.Event{Type: invocation.EventLateResult, Data: data, At: now,
		EngineAttempt: rec.EngineAttempt, LogicalAttempt: rec.Attempt,
		IdempotencyKey: eventKey(rec.ID, fmt.Sprintf("late-%d", rec.EngineAttempt), rec.Attempt, invocation.EventLateResult)})
	final, _, err := tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: late})
	return final, err
}

// completeFollowUps are the writes that go with an applied outcome (final, the record it left), in
// the same transaction: a failed workflow's compensation handler, the resolution of the workflow a
// finished handler compensated, a parked child, the event wait registered or cleared, the parent's
// resolution, and the response cache entry.
func (s *Service) completeFollowUps(tx store.Tx, rec, final invocation.Record, d definition, o outcome.Outcome,
	park *parking, now time.Time) error {
	if park != nil && park.handler != nil && final.Status == invocation.StatusCompensating {
		if _, err := s.create(tx, *park.handler, false, park.handlerD, now); err != nil {
			return err
		}
	}
	if rec.CompensationFor != "" && final.Status.Terminal() {
		if err := s.resolveCompensation(tx, final, now); err != nil {
			return err
		}
	}
	if park != nil && park.child != nil {
		if _, err := s.create(tx, *park.child, false, park.childD, now); err != nil {
			return err
		}
	}
	if park != nil && park.wait != nil && final.Status == invocation.StatusSuspended {
		if err := s.registerWait(tx, final, *park.wait, now); err != nil {
			return err
		}
	} else if park != nil && park.clearWaits {
		if err := tx.DeleteEventWaits(rec.TenantID, rec.ID); err != nil {
			return err
		}
	}
	if rec.ParentSeq != nil && final.Status.Terminal() {
		if err := s.resolveParent(tx, final, now); err != nil {
			return err
		}
	}
	if o.Err == nil && rec.CacheKey != "" && d.Traits.Caching.MaxAgeSeconds > 0 {
		return tx.PutCachedInvocation(store.CacheEntry{Key: rec.CacheKey, TenantID: rec.TenantID, InvocationID: rec.ID, ExpiresAt: now.Add(time.Duration(d.Traits.Caching.MaxAgeSeconds) * time.Second)})
	}
	return nil
}

// host is the sandbox's window on the world for one attempt: egress with the tenant's allowlist,
// child invocations, and timeline entries collected for the completion transaction.
type host struct {
	s   *Service
	rec invocation.Record
	log interface {
		InfoContext(ctx context.Context, msg string, args ...any)
	}
	mu       sync.Mutex
	timeline []invocation.Event
	n        int
	// logs and logBytes are the log entries kept in this attempt and their encoded size (capped at
	// maxLogEntries and maxLogBytes); dropped counts those dropped beyond, reported by drain in
	// one marker entry.
	logs, logBytes, dropped int
	egress                  int64 // body bytes of this execution's r_http_* calls (takeEgress)
	// keyPrefix keeps the idempotency keys of a compensation run's entries apart from the runs'.
	keyPrefix string
	// durable is the record as this activation last wrote it (persistJournal), or the zero Record
	// before its first write (rec is then current): the Expect of the next journal write.
	durable invocation.Record
	// children counts the r_invoke_v1 children this execution started (or tried to)
	// (Config.MaxChildren; guarded by mu); childSlots holds a token per child running now
	// (Config.MaxChildrenInFlight).
	children   int
	childSlots chan struct{}
	// pending are the waits of the journal writes enqueued and not yet awaited (enqueueJournal);
	// flushErr is the first that failed (guarded by mu).
	pending  []func() error
	flushErr error
	// chain and chainErr are what the last enqueued journal write left, set by the writer as it
	// applies it (guarded by mu): the expectation of the next write of the chain.
	chain    invocation.Record
	chainErr error
	// spanCtx carries the span of the attempt (activation) running, the parent of its steps' spans;
	// step is the open span of the step attempt running, if any (trace.go; guarded by mu).
	spanCtx context.Context
	step    *stepSpan
}

// takeChild reserves a child of this execution's budget (a call over it gets a non-retryable
// error) and waits for one of its in-flight slots (Config.MaxChildrenInFlight: the calls beyond
// wait for a running child to end, as in a pool); release gives the slot back when the child ends.
func (h *host) takeChild(ctx context.Context) (release func(), err *sandbox.Error) {
	h.mu.Lock()
	max := h.s.cfg.MaxChildren
	if h.children >= max {
		h.mu.Unlock()
		return nil, childBudgetError("r_invoke_v1: invocation %s has started %d child invocations, the most one execution may start; start fewer children (batch the work per child) or split it across invocations", h.rec.ID, max)
	}
	h.children++
	if h.childSlots == nil {
		h.childSlots = make(chan struct{}, h.s.cfg.MaxChildrenInFlight)
	}
	slots := h.childSlots
	h.mu.Unlock()
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, &sandbox.Error{TypeID: sandbox.ErrCanceled, Category: "canceled",
			Message: "r_invoke_v1: the execution ended while the call waited for one of its children to finish"}
	}
}

// childBudgetError is the non-retryable error result of an r_invoke_v1 call over a child budget.
func childBudgetError(format string, args ...any) *sandbox.Error {
	return &sandbox.Error{TypeID: problem.TypeQuotaExceeded, Category: "non_retryable", Message: fmt.Sprintf(format, args...),
		Details: map[string]any{"quota": "child_invocations"}}
}

const maxTimelineEntries = 1000

// Limits on an attempt's log entries (print, ctx.log): an entry's data beyond maxLogEntryBytes
// encoded keeps its message cut (the sandbox already cuts messages at sandbox.MaxLogEntryBytes);
// beyond maxLogEntries entries or maxLogBytes in total, entries are dropped and counted in one
// marker entry "N log entries dropped".
const (
	maxLogEntryBytes = sandbox.MaxLogEntryBytes + 1<<10 // the message, its fields and the keys around them
	maxLogEntries    = 1000
	maxLogBytes      = 1 << 20
)

func (h *host) add(t invocation.EventType, data map[string]any) {
	h.addAt(time.Time{}, t, data)
}

// addAt is add with the entry's time (now if zero).
func (h *host) addAt(at time.Time, t invocation.EventType, data map[string]any) {
	if at.IsZero() {
		at = h.s.cfg.Clock.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.timeline) >= maxTimelineEntries {
		return
	}
	h.appendLocked(at, t, data)
}

// appendLocked appends an entry; h.mu is held.
func (h *host) appendLocked(at time.Time, t invocation.EventType, data map[string]any) {
	b, err := json.Marshal(data)
	if err != nil {
		b = fmt.Appendf(nil, `{"error":%q}`, "entry not encodable: "+err.Error())
	}
	h.appendEncoded(at, t, b)
}

// appendEncoded appends an entry whose data is encoded already; h.mu is held.
func (h *host) appendEncoded(at time.Time, t invocation.EventType, b []byte) {
	h.n++
	h.timeline = append(h.timeline, invocation.Event{Type: t, Data: b, At: at, EngineAttempt: h.rec.EngineAttempt,
		LogicalAttempt: h.rec.Attempt, IdempotencyKey: eventKey(h.rec.ID, fmt.Sprintf("%s%d/%d", h.keyPrefix, h.rec.EngineAttempt, h.n), h.rec.Attempt, t)})
}

// prepend puts events ahead of the collected timeline entries.
func (h *host) prepend(events []invocation.Event) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	h.timeline = append(append([]invocation.Event(nil), events...), h.timeline...)
	h.mu.Unlock()
}

// Drain returns the timeline entries collected so far and forgets them (run.Host).
func (h *host) Drain() []invocation.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dropped > 0 {
		h.appendLocked(h.s.cfg.Clock.Now(), invocation.EventLog, map[string]any{
			"message": fmt.Sprintf("%d log entries dropped", h.dropped), "dropped": h.dropped,
			"reason": fmt.Sprintf("an attempt keeps at most %d log entries and %d bytes of them", maxLogEntries, maxLogBytes)})
		h.dropped = 0
	}
	out := h.timeline
	h.timeline = nil
	return out
}

// countEgress adds the body bytes of an outbound call to the execution's egress.
func (h *host) countEgress(n int) {
	h.mu.Lock()
	h.egress += int64(n)
	h.mu.Unlock()
}

// TakeEgress returns the egress counted since the last call (a live workflow's host serves several
// executions, each with its own metrics).
func (h *host) TakeEgress() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.egress
	h.egress = 0
	return n
}

// Now implements sandbox.Host.
func (h *host) Now() time.Time { return h.s.cfg.Clock.Now() }

// Sleep implements sandbox.Sleeper with Config.Sleep; without it, a real timer.
func (h *host) Sleep(ctx context.Context, d time.Duration) error {
	if h.s.cfg.Sleep != nil {
		return h.s.cfg.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Log implements sandbox.Host: ctx.log lands in the timeline.
// Entries are bounded: maxLogEntryBytes each (the message cut, the fields dropped beyond it), and
// maxLogEntries / maxLogBytes per attempt, the rest dropped and counted (see drain).
func (h *host) Log(ctx context.Context, msg string, fields map[string]any) {
	h.mu.Lock()
	full := h.logs >= maxLogEntries || h.logBytes >= maxLogBytes
	if full {
		h.dropped++ // without encoding it: a flood of entries past the cap costs little
	}
	h.mu.Unlock()
	if full {
		return
	}
	d := map[string]any{"message": msg}
	if len(fields) > 0 {
		d["fields"] = fields
	}
	b, err := json.Marshal(d)
	if err != nil || len(b) > maxLogEntryBytes {
		d = map[string]any{"message": outcome.Cut(msg, sandbox.MaxLogEntryBytes), "truncated": true}
		if b, err = json.Marshal(d); err != nil {
			b = []byte(`{"message":"","truncated":true}`)
		}
	}
	at := h.s.cfg.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.logs >= maxLogEntries || h.logBytes+len(b) > maxLogBytes || len(h.timeline) >= maxTimelineEntries {
		h.dropped++
		h.logBytes = maxLogBytes // full: later entries are dropped without being encoded
		return
	}
	h.logs++
	h.logBytes += len(b)
	h.appendEncoded(at, invocation.EventLog, b)
}

// HTTP implements sandbox.Host through the egress layer with the tenant's allowlist. The timeline
// gets method, host, status and duration — never URLs with queries, headers or bodies. A call that
// got a response (any status) adds its request and response body sizes to the execution's egress
// metric; a call that failed adds nothing (whether its body left is unknown).
func (h *host) HTTP(ctx context.Context, req sandbox.HTTPRequest) (sandbox.HTTPResponse, error) {
	if err := h.flush(); err != nil {
		// The workflow's earlier steps are not durable: no side effect may follow them.
		return sandbox.HTTPResponse{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "journal: " + err.Error()}
	}
	p, err := h.s.policy(ctx, h.rec.TenantID)
	if err != nil {
		return sandbox.HTTPResponse{}, &sandbox.Error{TypeID: sandbox.ErrHTTPTransport, Category: "retryable", Message: "policy unavailable"}
	}
	var sec egress.SecretResolver
	if h.s.cfg.Secrets != nil {
		sec = h.s.cfg.Secrets.ForTenant(h.rec.TenantID, h.rec.ID)
	}
	// Secret references in req's headers are resolved and substituted by the egress layer, and
	// scrubbed from the response: resp never holds a value.
	ctx, span := h.startHTTP(ctx, req)
	call := run.DoHTTP(ctx, h.s.cfg.Egress, req, p.Policies.AllowedOutboundDomains, sec)
	call.EndSpan(span)
	h.add(invocation.EventHTTPCall, call.Entry)
	if call.Err != nil {
		return sandbox.HTTPResponse{}, call.Err
	}
	h.countEgress(call.EgressBytes)
	return call.Response, nil
}

// Invoke implements sandbox.Host: r_invoke_v1 starts a real, linked child invocation and waits for it.
func (h *host) Invoke(ctx context.Context, req sandbox.InvokeRequest) (sandbox.InvokeResult, error) {
	if err := h.flush(); err != nil {
		return sandbox.InvokeResult{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "journal: " + err.Error()}
	}
	release, serr := h.takeChild(ctx)
	if serr != nil {
		return sandbox.InvokeResult{}, serr
	}
	defer release()
	ctx, span := h.startCall(ctx, spanChild)
	child, err := h.s.startChild(ctx, h.rec, req)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrChild.String(child.ID), tracing.AttrStatus.String(string(child.Status)))
		if err != nil || child.Status != invocation.StatusSucceeded {
			span.SetStatus(codes.Error, string(child.Status))
		}
		span.End()
	}
	if err != nil {
		return sandbox.InvokeResult{}, err
	}
	h.add(invocation.EventChildInvoked, map[string]any{"child_invocation_id": child.ID, "entrypoint_id": child.EntrypointID, "status": child.Status})
	if child.Status == invocation.StatusSucceeded {
		var v any
		dec := json.NewDecoder(strings.NewReader(string(child.Result)))
		dec.UseNumber()
		_ = dec.Decode(&v)
		return sandbox.InvokeResult{OK: true, Value: v}, nil
	}
	e := &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "child invocation " + child.ID + " ended " + string(child.Status)}
	if child.Error != nil {
		e = &sandbox.Error{TypeID: child.Error.TypeID, Category: child.Error.Category, Message: child.Error.Message,
			Details: map[string]any{"child_invocation_id": child.ID}}
	}
	return sandbox.InvokeResult{OK: false, Error: e}, nil
}

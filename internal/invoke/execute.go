package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
)

// execute runs one started attempt of rec and records its outcome. It is used by sync invocations,
// by the dispatcher for queued work, and for r_invoke_v1 children.
func (s *Service) execute(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d definition) (invocation.Record, error) {
	s.dequeued(rec)
	if e.Kind == entrypoint.KindWorkflow {
		return s.executeWorkflow(ctx, rec, e, d)
	}
	a := s.runFunction(ctx, rec, e, d, nil)
	return s.complete(context.WithoutCancel(ctx), rec, d, a.timeline, a.output, a.err, a.metrics, nil)
}

// runResult is what one run of a function produced: its timeline entries, its result (JSON) or
// error, and its metrics.
type runResult struct {
	timeline []invocation.Event
	output   json.RawMessage
	err      *sandbox.Error
	metrics  invocation.Metrics
}

// runFunction runs one attempt of a function (rec as started) in the sandbox, within the
// definition's limits, and checks its result against the returns schema. It writes nothing. input
// is rec's params decoded, when the caller has them (nil: they are decoded here).
func (s *Service) runFunction(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d definition, input any) runResult {
	log := obs.Logger(ctx).With("tenant_id", rec.TenantID, "invocation_id", rec.ID, "correlation_id", rec.CorrelationID)
	runCtx, cancel := context.WithTimeout(ctx, d.timeout())
	defer cancel()
	s.track(rec.ID, cancel)
	defer s.untrack(rec.ID)
	h := &host{s: s, rec: rec, log: log}
	start := time.Now()
	if input == nil {
		if err := decodeJSON(rec.Params, &input); err != nil { // validated by validateParams: not expected
			return runResult{err: &sandbox.Error{TypeID: sandbox.ErrValidation, Category: "non_retryable", Message: "params: " + err.Error()},
				metrics: metricsOf(0, sandbox.Result{}, d, 0)}
		}
	}
	var res sandbox.Result
	rerr := &sandbox.Error{}
	prog, cerr := s.cfg.Programs.Get(e.ID, "main.star", d.Implementation.Code.Source)
	if cerr != nil {
		// A stored definition passed the static checks, so this is rare; keep the executor's typed
		// error (validation, with line and column) when there is one.
		if !errors.As(cerr, &rerr) {
			rerr = &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "compile: " + cerr.Error()}
		}
	} else {
		res, rerr = sandbox.Run(runCtx, sandbox.Request{Program: prog, Input: input, Host: h, CPU: s.cfg.CPU,
			Info: sandbox.Info{InvocationID: rec.ID, TenantID: rec.TenantID, EntrypointID: rec.EntrypointID,
				CorrelationID: rec.CorrelationID, Attempt: rec.Attempt},
			Limits: sandbox.Limits{Timeout: d.timeout(), CPU: d.Traits.Limits.CPU, MemoryMB: int(d.Traits.Limits.MemoryMB),
				MaxPayloadBytes: int64(s.cfg.MaxPayloadBytes)}})
	}
	elapsed := time.Since(start)
	a := runResult{err: rerr, metrics: metricsOf(elapsed, res, d, h.takeEgress())}
	if rerr == nil {
		a.output, a.err = s.checkOutput(d, res.Output)
	}
	a.timeline = h.drain()
	return a
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
	data, _ := json.Marshal(map[string]any{"seq": *child.ParentSeq, "result": childResult(child), "child_invocation_id": child.ID})
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
		_ = decodeJSON(child.Result, &v)
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
	data, _ := json.Marshal(map[string]any{"handler_invocation_id": handler.ID, "handler_status": handler.Status})
	ev := invocation.Event{Type: t, Data: data, At: now, LogicalAttempt: wf.Attempt,
		IdempotencyKey: eventKey(wf.ID, "handler-"+handler.ID, wf.Attempt, t)}
	_, _, err = tx.Append(store.AppendRequest{TenantID: wf.TenantID, InvocationID: wf.ID, Events: []invocation.Event{ev}, AppendOptions: store.AppendOptions{Schedule: &store.Scheduling{}}})
	return err
}

// metricsOf is 000's invocation metrics for one execution: wall time, billed time (whole ms, at
// least 1), CPU estimated from interpreter steps, memory limit and accounted peak, steps, and the
// bytes of its r_http_* bodies (egress).
func metricsOf(elapsed time.Duration, res sandbox.Result, d definition, egress int64) invocation.Metrics {
	return invocation.Metrics{DurationMS: i64(elapsed.Milliseconds()),
		BilledDurationMS: i64(max(1, int64(math.Ceil(float64(elapsed)/float64(time.Millisecond))))),
		CPUTimeMS:        i64(res.CPUTime.Milliseconds()), MemoryLimitMB: i64(d.Traits.Limits.MemoryMB),
		MaxMemoryUsedMB: i64(int64(math.Ceil(float64(res.MaxMemoryBytes) / float64(1<<20)))), StepCount: i64(int64(res.Steps)),
		EgressBytes: i64(egress)}
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

// checkOutput converts the result to JSON and validates it against schema.returns.
func (s *Service) checkOutput(d definition, out any) (json.RawMessage, *sandbox.Error) {
	b, err := json.Marshal(out)
	if err != nil {
		return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "result is not JSON: " + err.Error()}
	}
	if len(b) > s.cfg.MaxPayloadBytes {
		// The sandbox bounds the result's size without its strings' escapes; this is the exact check.
		return nil, &sandbox.Error{TypeID: sandbox.ErrPayloadTooLarge, Category: "non_retryable",
			Message: fmt.Sprintf("the result is larger than the limit of %d bytes once encoded as JSON", s.cfg.MaxPayloadBytes),
			Details: map[string]any{"limit_bytes": s.cfg.MaxPayloadBytes, "size_bytes": len(b)}}
	}
	compiled, err := s.returnsSchema(d)
	if err != nil {
		return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "returns schema: " + err.Error()}
	}
	if compiled == nil {
		return b, nil
	}
	var v any
	vdec := json.NewDecoder(strings.NewReader(string(b)))
	vdec.UseNumber()
	_ = vdec.Decode(&v)
	if issues := s.cfg.Schemas.ValidateValue(compiled, "$.result", v); len(issues) > 0 {
		details := map[string]any{"issues": issues}
		return nil, &sandbox.Error{TypeID: sandbox.ErrValidation, Category: "non_retryable",
			Message: "the result does not match the entrypoint's returns schema", Details: details}
	}
	return b, nil
}

// retryDelay is the backoff before logical attempt n+1 (exponential, capped at max_delay_ms).
func retryDelay(d definition, attempt int) time.Duration {
	r := d.Traits.Retry
	mult := r.BackoffMultiplier
	if mult < 1 {
		mult = 1
	}
	ms := float64(r.InitialDelayMS) * math.Pow(mult, float64(attempt-1))
	if r.MaxDelayMS > 0 && ms > float64(r.MaxDelayMS) {
		ms = float64(r.MaxDelayMS)
	}
	return time.Duration(ms) * time.Millisecond
}

// shouldRetry applies 000's retry precedence: attempts remain, the category is retryable, and the
// type is not listed in non_retryable_errors.
func shouldRetry(d definition, attempt int, e *sandbox.Error) bool {
	max := d.Traits.Retry.MaxAttempts
	if max < 1 {
		max = 1
	}
	return attempt < max && e.Category == "retryable" && !slices.Contains(d.Traits.Retry.NonRetryableErrors, e.TypeID)
}

// complete records an attempt's outcome in one transaction: the attempt's timeline entries, then
// succeeded, a scheduled retry, or failed followed by dead_lettered (functions have no compensation).
// If this process no longer holds the attempt's lease (it was canceled, or the lease expired and the
// work moved), the outcome is recorded as late_result and not applied.
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

// A workflow that parks passes park: it becomes suspended, holding no goroutine; the queue wakes it
// at park.until, or the child's completion does.
func (s *Service) complete(ctx context.Context, rec invocation.Record, d definition, timeline []invocation.Event,
	output json.RawMessage, rerr *sandbox.Error, metrics invocation.Metrics, park *parking) (invocation.Record, error) {
	return s.completeWith(ctx, rec, d, timeline, output, rerr, metrics, park, nil)
}

// completeAfter is complete for a workflow run whose journal writes are still on their way
// (enqueueJournal): the outcome is queued behind them without waiting and expects exactly the
// projection the last of them leaves (it fails when one did not apply, or when anything else wrote
// in between). The caller flushes h afterwards, and completes again, as usual, if this failed.
func (s *Service) completeAfter(ctx context.Context, rec invocation.Record, d definition, timeline []invocation.Event,
	output json.RawMessage, rerr *sandbox.Error, metrics invocation.Metrics, h *host) (invocation.Record, error) {
	return s.completeWith(ctx, rec, d, timeline, output, rerr, metrics, nil, h)
}

// informational is what survives of an attempt's timeline when its outcome is not applied as it
// ran: no journal entries (another runner may be replaying those positions), no step retries or
// compensation records, and no child_invoked of a parked child (created only with an applied
// outcome).
func informational(timeline []invocation.Event, park *parking) []invocation.Event {
	var out []invocation.Event
	for _, ev := range timeline {
		switch {
		case ev.Type == invocation.EventJournal, ev.Type == invocation.EventJournalResolved, ev.Type == invocation.EventStepRetried,
			ev.Type == invocation.EventStepCompensating, ev.Type == invocation.EventStepCompensated, park != nil && park.child != nil && ev.Type == invocation.EventChildInvoked:
		default:
			out = append(out, ev)
		}
	}
	return out
}

func (s *Service) completeWith(ctx context.Context, rec invocation.Record, d definition, timeline []invocation.Event,
	output json.RawMessage, rerr *sandbox.Error, metrics invocation.Metrics, park *parking, after *host) (invocation.Record, error) {
	owner := s.leaseOwner(rec)
	// The execution's cost, at the prices of this moment, goes into the event that closes it
	// (invocation.Execution): whatever that event is, and even when the outcome is not applied.
	price := s.cfg.Pricing.For(rec.TenantID).Execution(metrics)
	spent := func(data map[string]any) map[string]any {
		data["metrics"], data["cost"] = metrics, price
		return data
	}
	var final invocation.Record
	err := s.update(ctx, func(tx store.Tx) error {
		now := s.cfg.Clock.Now()
		events, next := s.outcome(rec, d, timeline, output, rerr, metrics, price, park, now)
		opt := store.AppendOptions{RequireLease: owner, Schedule: &next, Expect: &rec}
		if after != nil {
			after.mu.Lock()
			prev, perr := after.chain, after.chainErr
			after.mu.Unlock()
			if perr != nil {
				return perr
			}
			opt.Expect, opt.ExpectOnly = &prev, true
		}
		var err error
		final, _, err = tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: events, AppendOptions: opt})
		if after != nil && err != nil {
			return err // the caller completes again, as usual
		}
		if errors.Is(err, store.ErrLeaseLost) {
			// Canceled meanwhile, or the lease expired and the work moved: record, never apply.
			data, _ := json.Marshal(spent(map[string]any{"succeeded": rerr == nil, "engine_attempt": rec.EngineAttempt}))
			// Only informational entries survive: a run that lost its lease must never write journal
			// entries (another runner may be replaying those positions), nor step retries.
			late := append(informational(timeline, park), invocation.Event{Type: invocation.EventLateResult, Data: data, At: now,
				EngineAttempt: rec.EngineAttempt, LogicalAttempt: rec.Attempt,
				IdempotencyKey: eventKey(rec.ID, fmt.Sprintf("late-%d", rec.EngineAttempt), rec.Attempt, invocation.EventLateResult)})
			final, _, err = tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: late})
			return err
		}
		if err != nil {
			return err
		}
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
		if rerr == nil && rec.CacheKey != "" && d.Traits.Caching.MaxAgeSeconds > 0 {
			return tx.PutCachedInvocation(store.CacheEntry{Key: rec.CacheKey, TenantID: rec.TenantID, InvocationID: rec.ID, ExpiresAt: now.Add(time.Duration(d.Traits.Caching.MaxAgeSeconds) * time.Second)})
		}
		return nil
	})
	if err != nil {
		return rec, fmt.Errorf("complete %s: %w", rec.ID, err)
	}
	return final, nil
}

// outcome is the events that close an attempt of rec at now, after its timeline entries, and the
// queue state they leave: suspended (a parked workflow), succeeded, retry_scheduled (000's retry
// precedence), or failed followed by dead_lettered, or by compensation_started when the failed
// workflow has an on_failure handler (park.handler). The closing event carries the execution's
// metrics and price.
func (s *Service) outcome(rec invocation.Record, d definition, timeline []invocation.Event, output json.RawMessage,
	rerr *sandbox.Error, metrics invocation.Metrics, price float64, park *parking, now time.Time) ([]invocation.Event, store.Scheduling) {
	spent := func(data map[string]any) map[string]any {
		data["metrics"], data["cost"] = metrics, price
		return data
	}
	ev := func(t invocation.EventType, data any) invocation.Event {
		b, _ := json.Marshal(data)
		return invocation.Event{Type: t, Data: b, At: now, EngineAttempt: rec.EngineAttempt, LogicalAttempt: rec.Attempt,
			IdempotencyKey: eventKey(rec.ID, "", rec.Attempt, t)}
	}
	events := timeline
	next := store.Scheduling{}
	switch {
	case rerr == nil && park.suspends():
		next.AvailableAt = park.until
		se := ev(invocation.EventSuspended, spent(map[string]any{"reason": park.reason, "until": park.until}))
		se.IdempotencyKey = eventKey(rec.ID, fmt.Sprintf("suspend-%d", rec.LastSeq), rec.Attempt, invocation.EventSuspended)
		events = append(events, se)
	case rerr == nil:
		events = append(events, ev(invocation.EventSucceeded, invocation.Outcome{Result: output, Metrics: &metrics, Cost: price}))
	case (park == nil || !park.final) && shouldRetry(d, rec.Attempt, rerr):
		delay := retryDelay(d, rec.Attempt)
		at := now.Add(delay)
		next.AvailableAt = &at
		events = append(events, ev(invocation.EventRetryScheduled, spent(map[string]any{"error": payload(rerr),
			"delay_ms": delay.Milliseconds(), "next_attempt": rec.Attempt + 1, "available_at": at})))
	default:
		o := invocation.Outcome{Error: payload(rerr), Metrics: &metrics, Cost: price}
		if park != nil && park.handler != nil {
			events = append(events, ev(invocation.EventFailed, o), ev(invocation.EventCompensationStarted,
				map[string]any{"trigger": "failure", "handler_invocation_id": park.handler.ID, "handler": park.handler.EntrypointID}))
		} else {
			events = append(events, ev(invocation.EventFailed, o), ev(invocation.EventDeadLettered, map[string]any{"reason": "no compensation configured"}))
		}
	}
	return events, next
}

// MaxErrorBytes bounds the stored error envelope of an attempt: its details, encoded, beyond
// sandbox.MaxErrorBytes (64 KiB) are replaced by {"truncated": true, "size_bytes": n}; its message
// beyond 4 KiB is cut (the sandbox keeps both within these limits; this is the store's guard).
const (
	maxErrorDetailsBytes = sandbox.MaxErrorBytes
	maxErrorMessageBytes = 4 << 10
)

// payload is the stored form of an attempt's error, bounded (maxErrorDetailsBytes).
func payload(e *sandbox.Error) *invocation.Error {
	p := &invocation.Error{TypeID: e.TypeID, Message: cut(e.Message, maxErrorMessageBytes), Category: e.Category}
	if len(e.Details) > 0 {
		b, err := json.Marshal(e.Details)
		if err != nil || len(b) > maxErrorDetailsBytes {
			b = fmt.Appendf(nil, `{"truncated":true,"size_bytes":%d}`, len(b))
		}
		p.Details = b
	}
	return p
}

// cut cuts s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	i := n - len(mark)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + mark
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

func (h *host) drain() []invocation.Event {
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

// takeEgress returns the egress counted since the last call (a live workflow's host serves several
// executions, each with its own metrics).
func (h *host) takeEgress() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.egress
	h.egress = 0
	return n
}

// Now implements sandbox.Host.
func (h *host) Now() time.Time { return h.s.cfg.Clock.Now() }

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
		d = map[string]any{"message": cut(msg, sandbox.MaxLogEntryBytes), "truncated": true}
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
	start := time.Now()
	resp, err := h.s.cfg.Egress.Do(ctx, egressRequest(req, p.Policies.AllowedOutboundDomains))
	entry := map[string]any{"method": req.Method, "host": hostOf(req.URL), "duration_ms": time.Since(start).Milliseconds()}
	if err != nil {
		var ee *egressError
		if errors.As(err, &ee) {
			entry["error"] = string(ee.Kind)
		}
		h.add(invocation.EventHTTPCall, entry)
		return sandbox.HTTPResponse{}, transportError(err)
	}
	entry["status"] = resp.StatusCode
	h.add(invocation.EventHTTPCall, entry)
	h.countEgress(len(req.Body) + len(resp.Body))
	return sandbox.HTTPResponse{StatusCode: resp.StatusCode, Headers: resp.Headers, Body: resp.Body}, nil
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
	child, err := h.s.startChild(ctx, h.rec, req)
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

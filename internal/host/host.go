package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
)

// host is the sandbox's window on the world for one attempt: egress with the tenant's allowlist,
// child invocations, and timeline entries collected for the completion transaction.
type Host struct {
	env      *Env
	rec      invocation.Record
	mu       sync.Mutex
	timeline []invocation.Event
	n        int
	// logs and logBytes are the log entries kept in this attempt and their encoded size (capped at
	// maxLogEntries and maxLogBytes); dropped counts those dropped beyond, reported by Drain in
	// one marker entry.
	logs, logBytes, dropped int
	egress                  int64 // body bytes of this execution's r_http_* calls (TakeEgress)
	// keyPrefix keeps the idempotency keys of a compensation run's entries apart from the runs'.
	keyPrefix string
	// durable is the record as this activation last wrote it (PersistJournal), or the zero Record
	// before its first write (rec is then current): the Expect of the next journal write.
	durable invocation.Record
	// children counts the r_invoke_v1 children this execution started (or tried to)
	// (Config.MaxChildren; guarded by mu); childSlots holds a token per child running now
	// (Config.MaxChildrenInFlight).
	children   int
	childSlots chan struct{}
	// pending are the waits of the journal writes enqueued and not yet awaited (EnqueueJournal);
	// flushErr is the first that failed (guarded by mu).
	pending  []func() error
	flushErr error
	// chain and chainErr are what the last enqueued journal write left, set by the writer as it
	// applies it (guarded by mu): the expectation of the next write of the chain.
	chain    invocation.Record
	chainErr error
	// open is the last journal write enqueued, while the writer has not taken it: entries enqueued
	// meanwhile join it rather than queue a write of their own (guarded by mu).
	open *journalWrite
	// beforeFlush, when set, runs at the start of every Flush (BeforeFlush).
	beforeFlush func()
	// spanCtx carries the span of the attempt (activation) running, the parent of its steps' spans;
	// step is the open span of the step attempt running, if any (trace.go; guarded by mu).
	spanCtx context.Context
	step    *stepSpan
}

// takeChild reserves a child of this execution's budget (a call over it gets a non-retryable
// error) and waits for one of its in-flight slots (Config.MaxChildrenInFlight: the calls beyond
// wait for a running child to end, as in a pool); release gives the slot back when the child ends.
func (h *Host) takeChild(ctx context.Context) (release func(), err *sandbox.Error) {
	h.mu.Lock()
	max := h.env.MaxChildren
	if h.children >= max {
		h.mu.Unlock()
		return nil, ChildBudgetError("r_invoke_v1: invocation %s has started %d child invocations, the most one execution may start; start fewer children (batch the work per child) or split it across invocations", h.rec.ID, max)
	}
	h.children++
	if h.childSlots == nil {
		h.childSlots = make(chan struct{}, h.env.MaxChildrenInFlight)
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

// ChildBudgetError is the non-retryable error result of an r_invoke_v1 call over a child budget.
func ChildBudgetError(format string, args ...any) *sandbox.Error {
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

func (h *Host) Add(t invocation.EventType, data invocation.Payload) {
	h.AddAt(time.Time{}, t, data)
}

// AddAt is Add with the entry's time (now if zero).
func (h *Host) AddAt(at time.Time, t invocation.EventType, data invocation.Payload) {
	if at.IsZero() {
		at = h.env.Clock.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.timeline) >= maxTimelineEntries {
		return
	}
	h.appendLocked(at, t, data)
}

// appendLocked appends an entry; h.mu is held.
func (h *Host) appendLocked(at time.Time, t invocation.EventType, data invocation.Payload) {
	b, err := invocation.EncodeData(data)
	if err != nil {
		b = fmt.Appendf(nil, `{"error":%q}`, "entry not encodable: "+err.Error())
	}
	h.appendEncoded(at, t, b)
}

// appendEncoded appends an entry whose data is encoded already; h.mu is held.
func (h *Host) appendEncoded(at time.Time, t invocation.EventType, b []byte) {
	h.n++
	h.timeline = append(h.timeline, invocation.Event{Type: t, Data: b, At: at, EngineAttempt: h.rec.EngineAttempt,
		LogicalAttempt: h.rec.Attempt, IdempotencyKey: invocation.IdempotencyKey(h.rec.ID, fmt.Sprintf("%s%d/%d", h.keyPrefix, h.rec.EngineAttempt, h.n), h.rec.Attempt, t, "")})
}

// Prepend puts events ahead of the collected timeline entries.
func (h *Host) Prepend(events []invocation.Event) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	h.timeline = append(append([]invocation.Event(nil), events...), h.timeline...)
	h.mu.Unlock()
}

// Drain returns the timeline entries collected so far and forgets them (run.Host).
func (h *Host) Drain() []invocation.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dropped > 0 {
		h.appendLocked(h.env.Clock.Now(), invocation.EventLog, invocation.Log{
			Message: fmt.Sprintf("%d log entries dropped", h.dropped), Dropped: h.dropped,
			Reason: fmt.Sprintf("an attempt keeps at most %d log entries and %d bytes of them", maxLogEntries, maxLogBytes)})
		h.dropped = 0
	}
	out := h.timeline
	h.timeline = nil
	return out
}

// countEgress adds the body bytes of an outbound call to the execution's egress.
func (h *Host) countEgress(n int) {
	h.mu.Lock()
	h.egress += int64(n)
	h.mu.Unlock()
}

// TakeEgress returns the egress counted since the last call (a live workflow's host serves several
// executions, each with its own metrics).
func (h *Host) TakeEgress() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.egress
	h.egress = 0
	return n
}

// Now implements sandbox.Host.
func (h *Host) Now() time.Time { return h.env.Clock.Now() }

// Sleep implements sandbox.Sleeper with Config.Sleep; without it, a real timer.
func (h *Host) Sleep(ctx context.Context, d time.Duration) error {
	if h.env.Sleep != nil {
		return h.env.Sleep(ctx, d)
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
// maxLogEntries / maxLogBytes per attempt, the rest dropped and counted (see Drain).
func (h *Host) Log(ctx context.Context, msg string, fields map[string]any) {
	h.mu.Lock()
	full := h.logs >= maxLogEntries || h.logBytes >= maxLogBytes
	if full {
		h.dropped++ // without encoding it: a flood of entries past the cap costs little
	}
	h.mu.Unlock()
	if full {
		return
	}
	d := invocation.Log{Message: msg, Fields: fields}
	b, err := invocation.EncodeData(d)
	if err != nil || len(b) > maxLogEntryBytes {
		d = invocation.Log{Message: outcome.Cut(msg, sandbox.MaxLogEntryBytes), Truncated: true}
		if b, err = invocation.EncodeData(d); err != nil {
			b = []byte(`{"message":"","truncated":true}`)
		}
	}
	at := h.env.Clock.Now()
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
func (h *Host) HTTP(ctx context.Context, req sandbox.HTTPRequest) (sandbox.HTTPResponse, error) {
	if err := h.Flush(); err != nil {
		// The workflow's earlier steps are not durable: no side effect may follow them.
		return sandbox.HTTPResponse{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "journal: " + err.Error()}
	}
	p, err := h.env.Catalog.Policy(ctx, h.rec.TenantID)
	if err != nil {
		return sandbox.HTTPResponse{}, &sandbox.Error{TypeID: sandbox.ErrHTTPTransport, Category: "retryable", Message: "policy unavailable"}
	}
	var sec egress.SecretResolver
	if h.env.Secrets != nil {
		sec = h.env.Secrets.ForTenant(h.rec.TenantID, h.rec.ID)
	}
	// Secret references in req's headers are resolved and substituted by the egress layer, and
	// scrubbed from the response: resp never holds a value.
	ctx, span := h.startHTTP(ctx, req)
	call := run.DoHTTP(ctx, h.env.Egress, req, p.Policies.AllowedOutboundDomains, sec)
	call.EndSpan(span)
	h.Add(invocation.EventHTTPCall, call.Data)
	if call.Err != nil {
		return sandbox.HTTPResponse{}, call.Err
	}
	h.countEgress(call.EgressBytes)
	return call.Response, nil
}

// Invoke implements sandbox.Host: r_invoke_v1 starts a real, linked child invocation and waits for it.
func (h *Host) Invoke(ctx context.Context, req sandbox.InvokeRequest) (sandbox.InvokeResult, error) {
	if err := h.Flush(); err != nil {
		return sandbox.InvokeResult{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "journal: " + err.Error()}
	}
	release, serr := h.takeChild(ctx)
	if serr != nil {
		return sandbox.InvokeResult{}, serr
	}
	defer release()
	ctx, span := h.startCall(ctx, spanChild)
	child, err := h.env.Children.StartChild(ctx, h.rec, req)
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
	h.Add(invocation.EventChildInvoked, invocation.ChildInvoked{ChildInvocationID: child.ID, EntrypointID: child.EntrypointID, Status: child.Status})
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

// SetRecord points the host at the record of a new activation (its lease and engine attempt).
func (h *Host) SetRecord(r invocation.Record) {
	h.mu.Lock()
	h.rec = r
	h.durable = invocation.Record{}
	h.open = nil
	h.mu.Unlock()
}

// Written returns the activation's record and the projection its last journal write left (the
// claim's record before the first).
func (h *Host) Written() (rec, durable invocation.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.durable.ID == "" {
		return h.rec, h.rec
	}
	return h.rec, h.durable
}

// wrote remembers the projection a journal write committed.
func (h *Host) wrote(r invocation.Record) {
	h.mu.Lock()
	h.durable = r
	h.mu.Unlock()
}

// eventChecker is what a writer.Publisher may offer r_emit_v1 at the call: whether the tenant would
// refuse the event (eventbus.Bus.CheckEvent).
type eventChecker interface {
	CheckEvent(ctx context.Context, ev events.Event) error
}

// CheckEvent implements sandbox.EventChecker through the publisher, when it can check. A refusal
// is described with its first issue's path and message (the payload itself is never repeated).
func (h *Host) CheckEvent(ctx context.Context, typeID string, payload json.RawMessage) error {
	c, ok := h.env.Publisher.(eventChecker)
	if !ok {
		return nil
	}
	err := c.CheckEvent(ctx, events.Event{TenantID: h.rec.TenantID, TypeID: typeID, Payload: payload})
	var pe *problem.Error
	if errors.As(err, &pe) {
		msg := pe.Detail
		if len(pe.Issues) > 0 {
			msg += fmt.Sprintf(" (%s: %s)", pe.Issues[0].Path, pe.Issues[0].Message)
		}
		return errors.New(msg)
	}
	return err
}

// ExpectChain makes opt expect exactly the projection the run's last enqueued write leaves (and
// fail with that write's error if it failed), so that a write queued behind it applies only on top
// of it.
func (h *Host) ExpectChain(opt *store.AppendOptions) error {
	h.mu.Lock()
	prev, err := h.chain, h.chainErr
	h.mu.Unlock()
	if err != nil {
		return err
	}
	opt.Expect, opt.ExpectOnly = &prev, true
	return nil
}

// journalWrite is one enqueued journal write: the events of the entries that joined it before
// the writer took it (taken, guarded by Host.mu). Once taken its events never change, so a run of
// the closure again (a replayed batch) writes the same ones.
type journalWrite struct {
	events []invocation.Event
	bytes  int
	taken  bool
}

// Bounds of one journal write: entries stop joining a write not yet taken beyond them (the writer
// is then so far behind that one more write costs little next to them).
const (
	maxJoinedEvents = 512
	maxJoinedBytes  = 1 << 20
)

// join adds events to w unless the writer took it or it is full; h.mu is held.
func (w *journalWrite) join(events []invocation.Event) bool {
	if w == nil || w.taken || len(w.events)+len(events) > maxJoinedEvents || w.bytes > maxJoinedBytes {
		return false
	}
	w.events = append(w.events, events...)
	w.bytes += eventBytes(events)
	return true
}

// eventBytes is the encoded size of events' data.
func eventBytes(events []invocation.Event) int {
	n := 0
	for i := range events {
		n += len(events[i].Data)
	}
	return n
}

// EnqueueJournal writes journal events behind the activation's earlier writes without waiting for
// them (checkpointing automatic, or a manual r_snapshot_v1): the writer applies them in order, and
// the run waits for them (host.flush) before its next side effect (an HTTP call, a child), before
// it parks and before it ends. So a crash repeats at most the step in flight and the side-effect
// free work since the last durable entry, and a run of pure steps costs a commit or two, not one per
// step.
//
// Entries enqueued while the run's last write waits for the writer join that write (journalWrite):
// a run whose steps outpace the writer appends several steps' entries in one Append (one read of
// the projection's row, one update of it, one savepoint) instead of one each. They are made
// durable in the same commit as they would have been on their own, or in an earlier one, never
// later: a write not yet taken is committed with the first batch the writer takes it into.
//
// The writes of one run form a chain: the first after a flush expects the projection the run last
// knew (and falls back to the stored one when something else got ahead of it); each later one
// expects exactly the projection its predecessor left (AppendOptions.ExpectOnly), so a write whose
// predecessor failed, or was rolled back with its batch, fails too rather than leave a hole in the
// journal.
func (h *Host) EnqueueJournal(ctx context.Context, events []invocation.Event) error {
	h.mu.Lock()
	if h.open.join(events) {
		h.mu.Unlock()
		return nil
	}
	chained := len(h.pending) > 0
	w := &journalWrite{events: slices.Clone(events), bytes: eventBytes(events)}
	h.open = w
	h.mu.Unlock()
	rec, known := h.Written()
	owner := h.env.Spawn.LeaseOwner(rec)
	// Through enqueue: the events of event_emitted entries among them are published in this write.
	// A run of the closure again (its batch replayed) expects what its first run expected: the chain
	// then holds what that first run left.
	var expect *store.AppendOptions
	wait := h.env.Writer.Enqueue(context.WithoutCancel(ctx), func(tx store.Tx) error {
		h.mu.Lock()
		w.taken = true
		events := w.events
		h.mu.Unlock()
		if expect == nil {
			opt := store.AppendOptions{RequireLease: owner, Expect: &known}
			if chained {
				if err := h.ExpectChain(&opt); err != nil {
					return err
				}
			}
			expect = &opt
		}
		opt := *expect
		out, _, err := tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: events, AppendOptions: opt})
		h.mu.Lock()
		h.chain, h.chainErr = out, err
		h.mu.Unlock()
		return err
	})
	h.mu.Lock()
	h.pending = append(h.pending, wait)
	h.mu.Unlock()
	return nil
}

// Enqueued reports whether journal writes were enqueued since the last flush.
func (h *Host) Enqueued() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pending) > 0
}

// Flush waits for the journal writes enqueued so far; it returns the first that failed, then and
// at every later call.
func (h *Host) Flush() error {
	h.mu.Lock()
	before := h.beforeFlush
	h.mu.Unlock()
	if before != nil {
		before()
	}
	h.mu.Lock()
	waits := h.pending
	h.pending, h.open = nil, nil
	h.mu.Unlock()
	var first error
	for _, wait := range waits {
		if err := wait(); err != nil && first == nil {
			first = err
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.flushErr == nil {
		h.flushErr = first
	}
	if len(waits) > 0 && h.flushErr == nil {
		h.durable = h.chain // the projection the last write left: the next chain starts from it
	}
	return h.flushErr
}

// PersistJournal makes journal events durable before the program uses their results (architecture:
// "a completed step is recorded before its result is used"). It writes only while this process
// holds the attempt's lease. The projection its previous write left is the Append's Expect, so a
// run whose log nobody else touched meanwhile skips reading and decoding the stored record.
func (h *Host) PersistJournal(ctx context.Context, events []invocation.Event) error {
	rec, known := h.Written()
	var out invocation.Record
	err := h.env.Writer.Update(context.WithoutCancel(ctx), func(tx store.Tx) error { // publishes the events of event_emitted entries
		var err error
		out, _, err = tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: events, AppendOptions: store.AppendOptions{RequireLease: h.env.Spawn.LeaseOwner(rec), Expect: &known}})
		return err
	})
	if err == nil {
		h.wrote(out)
	}
	return err
}

// StepStarted records a step attempt's start (step_started). It is persisted with the attempt's
// journal entry (the step's outcome, or its retry), at its own time; a retry's step_retried is
// added as the retry is recorded.
func (h *Host) StepStarted(step string, attempt int) {
	h.startStep(step, attempt)
	h.Add(invocation.EventStepStarted, invocation.StepStarted{Step: step, Attempt: attempt})
}

// Compensation records a step compensation as it begins (step_compensating) and as it ends
// (step_compensated, with its outcome); the timeline shows them as compensation_started and
// compensation_completed or compensation_failed, around what the compensation did.
func (h *Host) Compensation(c sandbox.CompensationRecord, done bool) {
	if !done {
		h.AddAt(c.StartedAt, invocation.EventStepCompensating, invocation.StepCompensating{Step: c.Step, Seq: c.Seq, Fn: c.Fn})
		return
	}
	entry := invocation.StepCompensated{Step: c.Step, Seq: c.Seq, Fn: c.Fn, OK: c.OK, DurationMS: c.EndedAt.Sub(c.StartedAt).Milliseconds()}
	if c.Error != nil {
		entry.Error = outcome.ErrorOf(c.Error)
	}
	h.AddAt(c.EndedAt, invocation.EventStepCompensated, entry)
}

func RetryData(r sandbox.StepRetryRecord) invocation.StepRetried {
	return invocation.StepRetried{Step: r.Step, Attempt: r.Attempt, Error: outcome.ErrorOf(r.Error), DelayMS: r.Delay.Milliseconds()}
}

package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/complete"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/host"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/journal"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/waits"
	"github.com/larkrun/lark/internal/writer"
)

// JournalEventsOf reads the events of rec's current journal: from its last continued_as_new event
// on (all of them before any), so that a long-lived workflow that continues as new reads and
// replays only its current journal.
func (s *Engine) JournalEventsOf(ctx context.Context, rec invocation.Record) ([]invocation.Event, error) {
	return store.EventsAfter(ctx, s.cfg.Store, rec.TenantID, rec.ID, max(rec.JournalFrom-1, 0))
}

// Activate runs claim c of a workflow (runWorkflow).
func (s *Engine) Activate(ctx context.Context, c Claim, e entrypoint.Entrypoint, d catalog.Definition) (invocation.Record, error) {
	rec := c.rec
	ctx, span := s.cfg.Host.StartAttempt(ctx, rec)
	c.spanCtx = ctx
	if lr := s.takeLive(rec.ID); lr != nil {
		lr.handover <- c
	} else {
		go s.runWorkflow(context.WithoutCancel(ctx), newLiveRun(), c, e, d)
	}
	a := <-c.reply
	host.EndAttempt(span, a.rec.Status, a.err)
	s.cfg.Host.Writer.AttemptEnded(rec, "workflow", writer.ActivationOutcome(a.rec.Status, a.err))
	return a.rec, a.err
}

// runWorkflow is a workflow execution: it replays the journal, records new entries, and reports
// each activation's outcome to the executor of its claim. Where the workflow waits (a timer, an
// event, a child) the suspension is made durable first; then, if the wait is short enough and
// there is room, the execution stays live and a later claim of the invocation hands it over
// (live.go), else the execution ends and a later activation replays.
func (s *Engine) runWorkflow(ctx context.Context, lr *liveRun, c Claim, e entrypoint.Entrypoint, d catalog.Definition) {
	x := &wfRun{s: s, ctx: ctx, lr: lr, e: e, d: d, c: c, open: true, rec: c.rec}
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.ErrorContext(ctx, "workflow execution panicked", "invocation_id", x.rec.ID, "tenant_id", x.rec.TenantID, "panic", p)
			x.held.merge() // a start still held is dropped with the call: nothing of it was written
			x.wfYield(x.rec, fmt.Errorf("workflow execution panicked: %v", p))
		}
	}()
	var logEvents []invocation.Event
	if !journal.FirstActivation(x.rec) {
		var err error
		if logEvents, err = s.JournalEventsOf(ctx, x.rec); err != nil {
			x.wfYield(x.rec, err)
			return
		}
	}
	wj, jerr := journal.Replay(logEvents)
	x.h = s.cfg.Host.New(c.spanCtx, x.rec)
	defer x.h.EndStep(nil)
	x.wfReplayed(wj)
	x.holdStart()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	x.runCtx, x.cancel = runCtx, cancel
	s.cfg.Running.Track(x.rec.ID, s.cfg.Spawn.LeaseOwner(x.rec), cancel)
	defer s.cfg.Running.Untrack(x.rec.ID)
	x.start = time.Now()
	x.strategy = wfCheckpointStrategy(d)
	res, rerr := x.wfGenerations(x.wfProgram(wj, jerr))
	if !x.open {
		return // the suspension was recorded, and the live wait ended without a handover
	}
	x.wfEnd(res, rerr)
}

// wfRun is the state of one workflow execution (runWorkflow), shared by its phases and by the
// callbacks the sandbox calls as the program runs (wfWait, wfRecord, wfStepRetry, wfCompensate).
// A live wait hands the execution the next claim of the invocation (wfHandover), so the claim, the
// record and the activation's times change while it runs; the journal state changes as entries are
// recorded and as the workflow continues as new.
type wfRun struct {
	s      *Engine
	ctx    context.Context
	runCtx context.Context    // ctx, canceled by a cancel or suspend request (Config.Running)
	cancel context.CancelFunc // cancels runCtx
	lr     *liveRun
	e      entrypoint.Entrypoint
	d      catalog.Definition
	h      *host.Host

	c     Claim
	open  bool // the executor of claim c waits for this activation's outcome
	rec   invocation.Record
	now   time.Time // the activation's clock time (timers and event timeouts are computed from it)
	start time.Time // when the activation began (its timeout and duration run from it)

	strategy     string // checkpointing.strategy (wfCheckpointStrategy)
	entries      []sandbox.JournalEntry
	recorded     map[int]time.Time
	children     map[int]string
	waited       bool               // the journal holds an r_wait_event_v1 entry
	buffered     []invocation.Event // recorded journal events not yet written (wfRecord)
	checkpointed int                // journal positions already durable (the checkpointed state)
	journalBytes int                // the encoded size of the current journal
	generation   int
	unused       *parking // a parking made for a live wait that could not be kept (the run parks with it)
	// held is the invocation's start while it is held back (hold.go); the first heldN buffered
	// events are the entries written with it when it is sent, up to journal position heldSeq.
	held           *heldStart
	heldN, heldSeq int
}

// wfYield reports the activation's outcome to the executor of the claim, once.
func (x *wfRun) wfYield(r invocation.Record, err error) {
	if x.open {
		x.c.reply <- activation{r, err}
		x.open = false
	}
}

// wfReplayed takes the replayed journal wj as the execution's journal state, all of it durable.
// Pending entries whose time has come are resolved now.
func (x *wfRun) wfReplayed(wj journal.Journal) {
	x.entries, x.recorded, x.children = wj.Entries, wj.Recorded, wj.Children
	x.now = x.s.cfg.Clock.Now()
	for i := range x.entries {
		x.waited = x.waited || x.entries[i].Helper == "r_wait_event_v1"
		resolveDue(x.h, &x.entries[i], x.now)
	}
	x.checkpointed = len(x.entries)
	x.journalBytes = wj.Bytes
	x.generation = wj.Generation
}

// wfCheckpointStrategy is the workflow's checkpointing.strategy (000): automatic — every journal
// entry is durable before the program continues (a crash repeats at most the step in flight);
// manual — entries become durable at each r_snapshot_v1 (a crash repeats the steps since the last
// snapshot); disabled — only when the run parks or ends (a crash starts the run over). Entries not
// yet written go with the outcome.
func wfCheckpointStrategy(d catalog.Definition) string {
	strategy := "automatic"
	if d.Traits.Workflow != nil && d.Traits.Workflow.Checkpointing.Strategy != "" {
		strategy = d.Traits.Workflow.Checkpointing.Strategy
	}
	return strategy
}

// wfProgram is what the run needs besides its journal: the compiled program and its input. A
// journal (jerr: its replay failed), input or program that cannot be read is the run's error: the
// program then does not run.
func (x *wfRun) wfProgram(wj journal.Journal, jerr error) (*sandbox.Program, any, *sandbox.Error) {
	var rerr *sandbox.Error
	input, ierr := wj.InputOf(x.rec)
	prog, perr := x.s.workflowProgram(x.e, x.d)
	switch {
	case jerr != nil || ierr != nil:
		jerr = errors.Join(jerr, ierr)
		rerr = &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "workflow journal unreadable: " + jerr.Error()}
	case perr != nil:
		rerr = perr
	}
	return prog, input, rerr
}

// wfGenerations runs the program unless rerr is set: again with each new input while it continues
// as new (r_continue_as_new_v1) and the activation is still reported to. It returns the last run's
// result and what ended it.
func (x *wfRun) wfGenerations(prog *sandbox.Program, input any, rerr *sandbox.Error) (sandbox.WorkflowResult, *sandbox.Error) {
	var res sandbox.WorkflowResult
	for rerr == nil {
		timeout := x.d.Timeout() - time.Since(x.start) // continuing as new does not renew the activation's time
		if timeout <= 0 {
			rerr = &sandbox.Error{TypeID: sandbox.ErrTimeout, Category: "timeout", Message: fmt.Sprintf("execution timed out after %v", x.d.Timeout())}
			break
		}
		res, rerr = sandbox.RunWorkflow(x.runCtx, x.wfRequest(prog, input, timeout))
		if rerr != nil || res.ContinueAsNew == nil || !x.open {
			break
		}
		if rerr = x.wfContinueAsNew(res.ContinueAsNew.Input); rerr != nil {
			break
		}
		input, res = res.ContinueAsNew.Input, sandbox.WorkflowResult{}
	}
	return res, rerr
}

// wfRequest is the sandbox request of one run of the program over the current journal, with the
// execution's callbacks.
func (x *wfRun) wfRequest(prog *sandbox.Program, input any, timeout time.Duration) sandbox.WorkflowRequest {
	s, rec, d := x.s, x.rec, x.d
	return sandbox.WorkflowRequest{Journal: x.entries, Now: x.now, StepRetry: x.wfStepRetry, CheckFilter: waits.CheckFilter,
		StepStarted: x.h.StepStarted, Wait: x.wfWait, Record: x.wfRecord, OnCompensation: x.h.Compensation,
		Compensate: x.wfCompensate,
		Request: sandbox.Request{
			Program: prog, Input: input, Host: x.h, CPU: s.cfg.CPU, Gate: s.cfg.Gate, AdmitWithin: s.cfg.AdmitWithin,
			Info: sandbox.Info{InvocationID: rec.ID, TenantID: rec.TenantID, EntrypointID: rec.EntrypointID,
				CorrelationID: rec.CorrelationID, Attempt: rec.Attempt, Generation: x.generation},
			Limits: sandbox.Limits{Timeout: timeout, CPU: d.Traits.Limits.CPU, MemoryMB: int(d.Traits.Limits.MemoryMB),
				MaxPayloadBytes: int64(s.cfg.MaxPayloadBytes)}}}
}

// wfStepRetry is the retry policy of the workflow's steps: the entrypoint's (catalog.Definition.RetryOf).
func (x *wfRun) wfStepRetry(attempt int, e *sandbox.Error) (time.Duration, bool) {
	if !x.d.RetryOf(x.rec).ShouldRetry(attempt, e) {
		return 0, false
	}
	return x.d.RetryOf(x.rec).Delay(attempt), true
}

// wfCompensate decides whether a failed run calls the compensate_fns. A run stopped by cancel or
// suspend (or shutdown) does not compensate: a canceled workflow is compensated once, by
// CompensateCanceled. An attempt that the retry policy tries again has not ended: its completed
// steps are replayed by the next attempt, and nothing is compensated (STARLARK_RUNTIME.md,
// Compensation).
func (x *wfRun) wfCompensate(e *sandbox.Error, exited bool) bool {
	return !errors.Is(x.runCtx.Err(), context.Canceled) && (exited || !x.d.RetryOf(x.rec).ShouldRetry(x.rec.BudgetAttempt(), e))
}

// wfRecord records journal entry j with the step retries reported since the last one, within the
// journal's limits (Config.MaxJournalEntries and MaxJournalBytes), and writes the entries recorded
// so far where the checkpointing strategy says (host.Host.EnqueueJournal); the others stay buffered.
func (x *wfRun) wfRecord(j sandbox.JournalEntry, retries []sandbox.StepRetryRecord) error {
	s, h := x.s, x.h
	if j.Seq >= s.cfg.MaxJournalEntries {
		return journalFull(fmt.Sprintf("%d entries", s.cfg.MaxJournalEntries), j.Seq)
	}
	h.StepRecorded(j)
	at := s.cfg.Clock.Now()
	for _, r := range retries {
		h.Add(invocation.EventStepRetried, host.RetryData(r))
	}
	x.recorded[j.Seq] = at
	x.waited = x.waited || j.Helper == "r_wait_event_v1"
	evs, err := journal.Events(x.rec, x.generation, at, j, h.Drain())
	if err != nil {
		return err
	}
	if x.journalBytes += len(evs[len(evs)-1].Data); x.journalBytes > s.cfg.MaxJournalBytes {
		h.Prepend(withoutEmits(evs[:len(evs)-1])) // the attempt's timeline entries stay; the entry (and its events) is not recorded
		return journalFull(sizeOf(s.cfg.MaxJournalBytes), j.Seq)
	}
	x.buffered = append(x.buffered, evs...)
	if x.strategy == "automatic" || (x.strategy == "manual" && j.Helper == "r_snapshot_v1") {
		if x.held.keeps() {
			// Written with the start, when it goes (hold.go).
			x.heldN, x.heldSeq = len(x.buffered), j.Seq+1
			return nil
		}
		if err := h.EnqueueJournal(x.ctx, x.buffered); err != nil {
			return err
		}
		x.buffered, x.checkpointed, x.heldN, x.heldSeq = nil, j.Seq+1, 0, 0
	}
	return nil
}

// wfWait keeps the execution live across a suspension (live.go): the suspension is recorded
// exactly as at the end of a run, this activation is reported, and the execution waits to be
// handed the next claim of the invocation. false: the run parks as usual, and ends.
func (x *wfRun) wfWait(p *sandbox.Park) (sandbox.Resolution, bool) {
	s := x.s
	x.unhold() // a wait is never held with the start
	if !s.liveEligible(p, x.now) {
		return sandbox.Resolution{}, false
	}
	park, perr := s.parkingFor(x.ctx, x.rec, x.d, p, x.recorded, x.children, x.now, x.h)
	switch {
	case perr != nil:
		return sandbox.Resolution{}, false // the end of the run reports it
	case park.refused != nil:
		return sandbox.Resolution{Result: park.refused, Now: x.now}, true // recorded with the next write
	}
	if !s.registerLive(x.rec.ID, x.lr) {
		x.unused = park
		return sandbox.Resolution{}, false
	}
	if x.waited && !park.event {
		park.clearWaits()
	}
	final, ok := x.wfParkLive(park)
	if !ok {
		return sandbox.Resolution{}, false
	}
	x.checkpointed = p.Seq + 1
	s.cfg.Running.Untrack(x.rec.ID)
	x.wfYield(final, nil)
	return x.wfHandover(p, final.LastSeq)
}

// wfParkLive records a live wait's suspension park, with the buffered journal entries ahead of it,
// as the end of a run records one. It returns the suspended record, or false when the run does not
// stay live: its journal writes failed, or it recorded something else (or lost the lease).
func (x *wfRun) wfParkLive(park *parking) (invocation.Record, bool) {
	s, h := x.s, x.h
	h.Prepend(x.buffered)
	x.buffered = nil
	metrics := run.Metrics(time.Since(x.start), sandbox.Result{}, int(x.d.Traits.Limits.MemoryMB), h.TakeEgress())
	if err := h.Flush(); err != nil {
		// The run's journal writes did not all apply: it does not park; it ends with that error
		// (wfComplete).
		s.DropLive(x.rec.ID)
		return invocation.Record{}, false
	}
	final, err := s.complete(x.ctx, x.rec, x.d, h.Drain(), s.decide(x.rec, x.d, nil, nil, metrics, park), park)
	if err != nil || final.Status != invocation.StatusSuspended {
		s.DropLive(x.rec.ID)
		x.wfYield(final, err)
		return invocation.Record{}, false // recorded (or lost the lease): nothing more to write
	}
	return final, true
}

// wfHandover waits for the next claim of the invocation and goes on with it as the activation
// (its record, times and span): the wait at p resolves from what was recorded after afterSeq.
// false when the live wait ended without a handover.
func (x *wfRun) wfHandover(p *sandbox.Park, afterSeq int64) (sandbox.Resolution, bool) {
	s := x.s
	next, ok := s.awaitHandover(x.lr, x.rec.ID)
	if !ok {
		return sandbox.Resolution{}, false
	}
	x.c, x.open, x.rec, x.now, x.start = next, true, next.rec, s.cfg.Clock.Now(), time.Now()
	x.h.SetRecord(x.rec)
	x.h.SetSpanContext(next.spanCtx)
	s.cfg.Running.Track(x.rec.ID, s.cfg.Spawn.LeaseOwner(x.rec), x.cancel)
	return s.resolutionAfter(x.ctx, x.h, p, afterSeq, x.now)
}

// wfContinueAsNew makes the journal so far, then the rotation (r_continue_as_new_v1), durable; the
// next generation then starts at once in this execution, with an empty journal.
func (x *wfRun) wfContinueAsNew(input any) *sandbox.Error {
	s, h := x.s, x.h
	x.unhold()
	x.generation++
	continued, cerr := journal.Continued(x.rec, x.generation, s.cfg.Clock.Now(), input, h.Drain())
	x.buffered = append(x.buffered, continued...)
	if err := errors.Join(cerr, h.Flush(), h.PersistJournal(x.ctx, x.buffered)); err != nil {
		return &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "journal: " + err.Error()}
	}
	x.entries, x.recorded, x.children, x.buffered = nil, map[int]time.Time{}, map[int]string{}, nil
	x.checkpointed, x.journalBytes, x.now = 0, 0, s.cfg.Clock.Now()
	return nil
}

// wfEnd ends the activation with the program's result res or error rerr: it settles how the run
// ends (wfSettle), measures it, and records and reports the outcome (wfComplete).
func (x *wfRun) wfEnd(res sandbox.WorkflowResult, rerr *sandbox.Error) {
	elapsed := time.Since(x.start)
	// Entries the run made durable as it went are in the log already; buffered ones go with the
	// outcome, ahead of the timeline entries collected since.
	x.h.Prepend(x.buffered)
	x.heldN = 0 // held entries go with the outcome too
	output, park, rerr := x.wfSettle(res, rerr)
	metrics := run.Metrics(elapsed-res.Waited, res.Result, int(x.d.Traits.Limits.MemoryMB), x.h.TakeEgress())
	metrics.StepCount = i64(int64(len(res.Completed)))
	metrics.QueueWaitMS = i64(res.Waited.Milliseconds()) // the activation's wait for admission
	x.wfComplete(x.h.Drain(), output, rerr, metrics, park)
}

// wfSettle is how the run ends: parked (the parking for res.Park), with its checked output, or
// with an error — final, with the on_failure handler's turn next, when no retry follows. Event waits
// the workflow no longer has are cleared with the outcome.
func (x *wfRun) wfSettle(res sandbox.WorkflowResult, rerr *sandbox.Error) (json.RawMessage, *parking, *sandbox.Error) {
	s, rec, d := x.s, x.rec, x.d
	var output json.RawMessage
	var park *parking
	if rerr == nil && res.Park != nil {
		if park = x.unused; park == nil {
			park, rerr = s.parkingFor(x.ctx, rec, d, res.Park, x.recorded, x.children, x.now, x.h)
		}
	}
	if rerr == nil && park == nil {
		output, rerr = s.cfg.Runner.CheckOutput(s.cfg.Catalog.RunJob(rec, x.e, d, nil, time.Time{}, s.cfg.AdmitWithin), res.Output)
	}
	if rerr != nil && (res.Exited || !d.RetryOf(rec).ShouldRetry(rec.BudgetAttempt(), rerr)) {
		park = x.wfFailed(res, rerr, park)
	}
	if x.waited && (park == nil || !park.event) {
		// The workflow no longer waits for an event: its registered waits go with this outcome.
		if park == nil {
			park = &parking{}
		}
		park.clearWaits()
	}
	return output, park, rerr
}

// wfFailed marks the parking of a workflow that ends unsuccessfully for good (r_exit: a retry would
// replay the journal to the same r_exit) as final, and so does its on_failure handler's turn: the
// handler, if the workflow has one, is prepared (failureHandler).
func (x *wfRun) wfFailed(res sandbox.WorkflowResult, rerr *sandbox.Error, park *parking) *parking {
	d := x.d
	if d.Traits.Workflow != nil && d.Traits.Workflow.Compensation.OnFailure != nil {
		all := append(x.entries, res.New...)
		// Entries held with the start (hold.go) are written with this outcome: they count as the
		// checkpointing strategy made them durable.
		checkpointed := max(x.checkpointed, x.heldSeq)
		park = x.s.failureHandler(x.ctx, x.rec, *d.Traits.Workflow.Compensation.OnFailure, rerr, all, all[:min(checkpointed, len(all))], x.h)
	}
	if park == nil {
		park = &parking{}
	}
	park.final = true
	return park
}

// wfComplete records the run's outcome (timeline, then what it came to) once its journal writes
// have applied, and reports it; if they did not, the run ends with that failure instead.
func (x *wfRun) wfComplete(timeline []invocation.Event, output json.RawMessage, rerr *sandbox.Error, metrics invocation.Metrics, park *parking) {
	s, rec, d, h := x.s, x.rec, x.d, x.h
	if park == nil && x.held.merge() {
		// The start is still held and nothing was written: one write holds the whole call (hold.go).
		x.wfYield(s.cfg.Completer.CompleteStart(x.ctx, x.held.events, rec, d, timeline, s.decide(rec, d, output, rerr, metrics, nil)))
		return
	}
	var ferr error
	if park == nil && h.Enqueued() {
		// A plain outcome (no park, no handler, no waits to clear) goes to the writer right behind the
		// run's journal writes, expecting exactly what they leave (CompleteAfter): one commit for the
		// last steps and the outcome, rather than one for each in turn.
		final, err := s.cfg.Completer.CompleteAfter(x.ctx, rec, d, timeline, s.decide(rec, d, output, rerr, metrics, nil), h)
		if ferr = h.Flush(); ferr == nil {
			if err != nil {
				// Not the journal: something else wrote meanwhile (a cancel, say). Complete as usual.
				final, err = s.complete(x.ctx, rec, d, timeline, s.decide(rec, d, output, rerr, metrics, park), park)
			}
			x.wfYield(final, err)
			return
		}
	} else if ferr = h.Flush(); ferr == nil {
		x.wfYield(s.complete(x.ctx, rec, d, timeline, s.decide(rec, d, output, rerr, metrics, park), park))
		return
	}
	// Journal writes the run enqueued did not apply (its lease was lost, or the store failed): it ends
	// as a failed write of its journal ends a run, keeping only its informational entries (what it
	// computed from the lost entries must not be recorded).
	if rerr == nil {
		rerr = &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "journal: " + ferr.Error()}
	}
	x.wfYield(s.complete(x.ctx, rec, d, complete.Informational(timeline, effectsOf(park)), s.decide(rec, d, nil, rerr, metrics, nil), nil))
}

// journalFull is the error of a journal entry beyond Config.MaxJournalEntries or MaxJournalBytes.
func journalFull(limit string, seq int) *sandbox.Error {
	return &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable",
		Message: "the workflow's journal is full (" + limit + "): call r_continue_as_new_v1 to carry on with a fresh journal",
		Details: map[string]any{"seq": seq}}
}

// sizeOf renders a byte count for messages: in MiB when it is a whole number of them.
func sizeOf(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// resolveDue satisfies a pending journal entry whose time has come: a due timer, or an event wait
// whose timeout has passed (with the timeout error). The resolution is recorded with the run's
// next write.
func resolveDue(h *host.Host, j *sandbox.JournalEntry, now time.Time) bool {
	if j.Done || j.Until.IsZero() || j.Until.After(now) {
		return false
	}
	switch {
	case journal.IsTimer(j.Helper):
		j.Done, j.Result = true, nil
		h.Add(invocation.EventJournalResolved, invocation.JournalResolved{Seq: j.Seq})
	case j.Helper == "r_wait_event_v1":
		j.Done, j.Result = true, sandbox.ErrorResult(&sandbox.Error{TypeID: sandbox.ErrTimeout, Category: "timeout",
			Message: "r_wait_event_v1: no matching event arrived before the timeout", Details: map[string]any{"seq": j.Seq}})
		h.Add(invocation.EventJournalResolved, invocation.JournalResolved{Seq: j.Seq, Result: j.Result, Timeout: true})
	default:
		return false
	}
	return true
}

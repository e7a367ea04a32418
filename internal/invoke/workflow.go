package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/journal"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
)

// journalEventsOf reads the events of rec's current journal: from its last continued_as_new event
// on (all of them before any), so that a long-lived workflow that continues as new reads and
// replays only its current journal.
func (s *Service) journalEventsOf(ctx context.Context, rec invocation.Record) ([]invocation.Event, error) {
	return s.eventsAfter(ctx, rec.TenantID, rec.ID, max(rec.JournalFrom-1, 0))
}

// executeWorkflow runs one activation of a workflow: until it ends (succeeded, or failed after the
// completed steps' compensations) or suspends. A workflow whose execution is still live in this
// process (waiting in memory after its last suspension, see live.go) continues there without a
// replay; otherwise the journal is replayed (completed helper calls return their recorded results
// without repeating side effects) in a new execution.
func (s *Service) executeWorkflow(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d definition) (invocation.Record, error) {
	return s.activate(ctx, newClaim(rec), e, d)
}

// activate runs claim c of a workflow (executeWorkflow).
func (s *Service) activate(ctx context.Context, c claim, e entrypoint.Entrypoint, d definition) (invocation.Record, error) {
	rec := c.rec
	ctx, span := s.startAttempt(ctx, rec)
	c.spanCtx = ctx
	if lr := s.takeLive(rec.ID); lr != nil {
		lr.handover <- c
	} else {
		go s.runWorkflow(context.WithoutCancel(ctx), newLiveRun(), c, e, d)
	}
	a := <-c.reply
	endAttempt(span, a.rec.Status, a.err)
	return a.rec, a.err
}

// runWorkflow is a workflow execution: it replays the journal, records new entries, and reports
// each activation's outcome to the executor of its claim. Where the workflow waits (a timer, an
// event, a child) the suspension is made durable first; then, if the wait is short enough and
// there is room, the execution stays live and a later claim of the invocation hands it over
// (live.go), else the execution ends and a later activation replays.
func (s *Service) runWorkflow(ctx context.Context, lr *liveRun, c claim, e entrypoint.Entrypoint, d definition) {
	x := &wfRun{s: s, ctx: ctx, lr: lr, e: e, d: d, c: c, open: true, rec: c.rec}
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.ErrorContext(ctx, "workflow execution panicked", "invocation_id", x.rec.ID, "tenant_id", x.rec.TenantID, "panic", p)
			x.wfYield(x.rec, fmt.Errorf("workflow execution panicked: %v", p))
		}
	}()
	log := obs.Logger(ctx).With("tenant_id", x.rec.TenantID, "invocation_id", x.rec.ID, "correlation_id", x.rec.CorrelationID)
	var logEvents []invocation.Event
	if !journal.FirstActivation(x.rec) {
		var err error
		if logEvents, err = s.journalEventsOf(ctx, x.rec); err != nil {
			x.wfYield(x.rec, err)
			return
		}
	}
	wj, jerr := journal.Replay(logEvents)
	x.h = &host{s: s, rec: x.rec, log: log, spanCtx: c.spanCtx}
	defer x.h.endStep(nil)
	x.wfReplayed(wj, c.start)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	x.runCtx, x.cancel = runCtx, cancel
	s.track(x.rec.ID, cancel)
	defer s.untrack(x.rec.ID)
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
	s      *Service
	ctx    context.Context
	runCtx context.Context    // ctx, canceled by a cancel or suspend request (Service.track)
	cancel context.CancelFunc // cancels runCtx
	lr     *liveRun
	e      entrypoint.Entrypoint
	d      definition
	h      *host

	c     claim
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
}

// wfYield reports the activation's outcome to the executor of the claim, once.
func (x *wfRun) wfYield(r invocation.Record, err error) {
	if x.open {
		x.c.reply <- activation{r, err}
		x.open = false
	}
}

// wfReplayed takes the replayed journal wj as the execution's journal state, all of it durable.
// start (claim.start) is the enqueued start the run's first write waits for. Pending entries whose
// time has come are resolved now.
func (x *wfRun) wfReplayed(wj journal.Journal, start func() error) {
	x.entries, x.recorded, x.children = wj.Entries, wj.Recorded, wj.Children
	if start != nil {
		x.h.pending = append(x.h.pending, start)
	}
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
func wfCheckpointStrategy(d definition) string {
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
		timeout := x.d.timeout() - time.Since(x.start) // continuing as new does not renew the activation's time
		if timeout <= 0 {
			rerr = &sandbox.Error{TypeID: sandbox.ErrTimeout, Category: "timeout", Message: fmt.Sprintf("execution timed out after %v", x.d.timeout())}
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
	return sandbox.WorkflowRequest{Journal: x.entries, Now: x.now, StepRetry: x.wfStepRetry, CheckFilter: checkFilter,
		StepStarted: x.h.stepStarted, Wait: x.wfWait, Record: x.wfRecord, OnCompensation: x.h.compensation,
		Compensate: x.wfCompensate,
		Request: sandbox.Request{
			Program: prog, Input: input, Host: x.h, CPU: s.cfg.CPU, Gate: s.cfg.Gate, AdmitWithin: s.admitWithin(),
			Info: sandbox.Info{InvocationID: rec.ID, TenantID: rec.TenantID, EntrypointID: rec.EntrypointID,
				CorrelationID: rec.CorrelationID, Attempt: rec.Attempt, Generation: x.generation},
			Limits: sandbox.Limits{Timeout: timeout, CPU: d.Traits.Limits.CPU, MemoryMB: int(d.Traits.Limits.MemoryMB),
				MaxPayloadBytes: int64(s.cfg.MaxPayloadBytes)}}}
}

// wfStepRetry is the retry policy of the workflow's steps: the entrypoint's (retryOf).
func (x *wfRun) wfStepRetry(attempt int, e *sandbox.Error) (time.Duration, bool) {
	if !retryOf(x.rec, x.d).ShouldRetry(attempt, e) {
		return 0, false
	}
	return retryOf(x.rec, x.d).Delay(attempt), true
}

// wfCompensate decides whether a failed run calls the compensate_fns. A run stopped by cancel or
// suspend (or shutdown) does not compensate: a canceled workflow is compensated once, by
// compensateCanceled. An attempt that the retry policy tries again has not ended: its completed
// steps are replayed by the next attempt, and nothing is compensated (STARLARK_RUNTIME.md,
// Compensation).
func (x *wfRun) wfCompensate(e *sandbox.Error, exited bool) bool {
	return !errors.Is(x.runCtx.Err(), context.Canceled) && (exited || !retryOf(x.rec, x.d).ShouldRetry(x.rec.Attempt, e))
}

// wfRecord records journal entry j with the step retries reported since the last one, within the
// journal's limits (Config.MaxJournalEntries and MaxJournalBytes), and writes the entries recorded
// so far where the checkpointing strategy says (enqueueJournal); the others stay buffered.
func (x *wfRun) wfRecord(j sandbox.JournalEntry, retries []sandbox.StepRetryRecord) error {
	s, h := x.s, x.h
	if j.Seq >= s.cfg.MaxJournalEntries {
		return journalFull(fmt.Sprintf("%d entries", s.cfg.MaxJournalEntries), j.Seq)
	}
	h.stepRecorded(j)
	at := s.cfg.Clock.Now()
	for _, r := range retries {
		h.add(invocation.EventStepRetried, retryData(r))
	}
	x.recorded[j.Seq] = at
	x.waited = x.waited || j.Helper == "r_wait_event_v1"
	evs, err := journal.Events(x.rec, x.generation, at, j, h.Drain())
	if err != nil {
		return err
	}
	if x.journalBytes += len(evs[len(evs)-1].Data); x.journalBytes > s.cfg.MaxJournalBytes {
		h.prepend(withoutEmits(evs[:len(evs)-1])) // the attempt's timeline entries stay; the entry (and its events) is not recorded
		return journalFull(sizeOf(s.cfg.MaxJournalBytes), j.Seq)
	}
	x.buffered = append(x.buffered, evs...)
	if x.strategy == "automatic" || (x.strategy == "manual" && j.Helper == "r_snapshot_v1") {
		if err := s.enqueueJournal(x.ctx, h, x.buffered); err != nil {
			return err
		}
		x.buffered, x.checkpointed = nil, j.Seq+1
	}
	return nil
}

// wfWait keeps the execution live across a suspension (live.go): the suspension is recorded
// exactly as at the end of a run, this activation is reported, and the execution waits to be
// handed the next claim of the invocation. false: the run parks as usual, and ends.
func (x *wfRun) wfWait(p *sandbox.Park) (sandbox.Resolution, bool) {
	s := x.s
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
	park.clearWaits = x.waited && park.wait == nil
	final, ok := x.wfParkLive(park)
	if !ok {
		return sandbox.Resolution{}, false
	}
	x.checkpointed = p.Seq + 1
	s.untrack(x.rec.ID)
	x.wfYield(final, nil)
	return x.wfHandover(p, final.LastSeq)
}

// wfParkLive records a live wait's suspension park, with the buffered journal entries ahead of it,
// as the end of a run records one. It returns the suspended record, or false when the run does not
// stay live: its journal writes failed, or it recorded something else (or lost the lease).
func (x *wfRun) wfParkLive(park *parking) (invocation.Record, bool) {
	s, h := x.s, x.h
	h.prepend(x.buffered)
	x.buffered = nil
	metrics := run.Metrics(time.Since(x.start), sandbox.Result{}, int(x.d.Traits.Limits.MemoryMB), h.TakeEgress())
	if err := h.flush(); err != nil {
		// The run's journal writes did not all apply: it does not park; it ends with that error
		// (wfComplete).
		s.dropLive(x.rec.ID)
		return invocation.Record{}, false
	}
	final, err := s.complete(x.ctx, x.rec, x.d, h.Drain(), s.decide(x.rec, x.d, nil, nil, metrics, park), park)
	if err != nil || final.Status != invocation.StatusSuspended {
		s.dropLive(x.rec.ID)
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
	x.h.setRecord(x.rec)
	x.h.setSpanContext(next.spanCtx)
	s.track(x.rec.ID, x.cancel)
	return s.resolutionAfter(x.ctx, x.h, p, afterSeq, x.now)
}

// wfContinueAsNew makes the journal so far, then the rotation (r_continue_as_new_v1), durable; the
// next generation then starts at once in this execution, with an empty journal.
func (x *wfRun) wfContinueAsNew(input any) *sandbox.Error {
	s, h := x.s, x.h
	x.generation++
	continued, cerr := journal.Continued(x.rec, x.generation, s.cfg.Clock.Now(), input, h.Drain())
	x.buffered = append(x.buffered, continued...)
	if err := errors.Join(cerr, h.flush(), s.persistJournal(x.ctx, h, x.buffered)); err != nil {
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
	x.h.prepend(x.buffered)
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
		output, rerr = s.runner.CheckOutput(s.attempt(rec, x.e, d, nil, time.Time{}), res.Output)
	}
	if rerr != nil && (res.Exited || !retryOf(rec, d).ShouldRetry(rec.Attempt, rerr)) {
		park = x.wfFailed(res, rerr, park)
	}
	if x.waited && (park == nil || park.wait == nil) {
		// The workflow no longer waits for an event: its registered waits go with this outcome.
		if park == nil {
			park = &parking{}
		}
		park.clearWaits = true
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
		park = x.s.failureHandler(x.ctx, x.rec, *d.Traits.Workflow.Compensation.OnFailure, rerr, all, all[:min(x.checkpointed, len(all))], x.h)
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
	var ferr error
	if park == nil && h.enqueued() {
		// A plain outcome (no park, no handler, no waits to clear) goes to the writer right behind the
		// run's journal writes, expecting exactly what they leave (completeAfter): one commit for the
		// last steps and the outcome, rather than one for each in turn.
		final, err := s.completeAfter(x.ctx, rec, d, timeline, s.decide(rec, d, output, rerr, metrics, nil), h)
		if ferr = h.flush(); ferr == nil {
			if err != nil {
				// Not the journal: something else wrote meanwhile (a cancel, say). Complete as usual.
				final, err = s.complete(x.ctx, rec, d, timeline, s.decide(rec, d, output, rerr, metrics, park), park)
			}
			x.wfYield(final, err)
			return
		}
	} else if ferr = h.flush(); ferr == nil {
		x.wfYield(s.complete(x.ctx, rec, d, timeline, s.decide(rec, d, output, rerr, metrics, park), park))
		return
	}
	// Journal writes the run enqueued did not apply (its lease was lost, or the store failed): it ends
	// as a failed write of its journal ends a run, keeping only its informational entries (what it
	// computed from the lost entries must not be recorded).
	if rerr == nil {
		rerr = &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "journal: " + ferr.Error()}
	}
	x.wfYield(s.complete(x.ctx, rec, d, informational(timeline, park), s.decide(rec, d, nil, rerr, metrics, nil), nil))
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
func resolveDue(h *host, j *sandbox.JournalEntry, now time.Time) bool {
	if j.Done || j.Until.IsZero() || j.Until.After(now) {
		return false
	}
	switch {
	case journal.IsTimer(j.Helper):
		j.Done, j.Result = true, nil
		h.add(invocation.EventJournalResolved, map[string]any{"seq": j.Seq, "result": nil})
	case j.Helper == "r_wait_event_v1":
		j.Done, j.Result = true, sandbox.ErrorResult(&sandbox.Error{TypeID: sandbox.ErrTimeout, Category: "timeout",
			Message: "r_wait_event_v1: no matching event arrived before the timeout", Details: map[string]any{"seq": j.Seq}})
		h.add(invocation.EventJournalResolved, map[string]any{"seq": j.Seq, "result": j.Result, "timeout": true})
	default:
		return false
	}
	return true
}

// parkingFor turns a workflow's wait into how it suspends: until a time (a timer), until a child
// invocation ends, or until an event arrives (or its timeout); bounded by
// traits.workflow.max_suspension_days. The child of an r_invoke_v1 position is created once, in the
// suspending transaction, and recorded (child_invoked with its seq, in children); a workflow that
// parks there again (after a resume, say) waits for that child rather than starting another, and
// takes its outcome at once if it has ended. A child that cannot start, or has ended, resolves the
// entry at once (the workflow is queued to replay now, see parking.refused).
func (s *Service) parkingFor(ctx context.Context, rec invocation.Record, d definition, p *sandbox.Park, recorded map[int]time.Time,
	children map[int]string, now time.Time, h *host) (*parking, *sandbox.Error) {
	var park *parking
	resolveNow := func(result any, reason string, extra map[string]any) *parking {
		data := map[string]any{"seq": p.Seq, "result": result}
		maps.Copy(data, extra)
		h.add(invocation.EventJournalResolved, data)
		n := s.cfg.Clock.Now()
		return &parking{until: &n, reason: reason, refused: result}
	}
	switch p.Kind {
	case "timer", "retry":
		u := p.Until
		park = &parking{until: &u, reason: "timer"}
		if p.Kind == "retry" {
			park.reason = "step retry"
		}
	case "child":
		if id, ok := children[p.Seq]; ok {
			child, err := s.cfg.Store.Invocation(ctx, rec.TenantID, id)
			if err != nil {
				return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "r_invoke_v1: reading child " + id + ": " + err.Error()}
			}
			if child.Status.Terminal() {
				return resolveNow(childResult(child), "child ended", map[string]any{"child_invocation_id": child.ID}), nil
			}
			park = &parking{reason: "child " + id}
			break
		}
		if len(children) >= s.cfg.MaxChildren {
			serr := childBudgetError("r_invoke_v1: workflow invocation %s has started %d child invocations, the most one journal may start; start fewer children, or continue as new (r_continue_as_new_v1)", rec.ID, s.cfg.MaxChildren)
			return resolveNow(sandbox.ErrorResult(serr), "child refused", nil), nil
		}
		child, ce, cd, serr := s.prepareChild(ctx, rec, p.ChildEntrypointID, p.ChildParams, invocation.ModeAsync)
		if serr != nil {
			// The call fails as a result, not as the workflow (no suspension limit applies).
			return resolveNow(sandbox.ErrorResult(serr), "child refused", nil), nil
		}
		// The child's rate limit applies at its start. It is queued work: the tenant's
		// max_concurrent_executions applies when the dispatcher claims it, like any queued work.
		if _, err := s.rateLimit(rec.TenantID, ce.GTSID, cd, now); err != nil {
			return resolveNow(sandbox.ErrorResult(childRefused(err)), "child refused", nil), nil
		}
		seq := p.Seq
		child.ParentSeq = &seq
		children[seq] = child.ID
		h.add(invocation.EventChildInvoked, map[string]any{"seq": seq, "child_invocation_id": child.ID, "entrypoint_id": child.EntrypointID})
		park = &parking{child: &child, childD: cd, reason: "child " + child.ID}
	case "event":
		// Any event received since the invocation was created can satisfy the wait (registerWait).
		w := events.Wait{TenantID: rec.TenantID, InvocationID: rec.ID, Seq: p.Seq, TypeID: p.EventTypeID,
			Filter: p.Filter, Since: rec.CreatedAt, TimeoutAt: p.TimeoutAt}
		park = &parking{until: p.TimeoutAt, wait: &w, reason: "event " + p.EventTypeID}
	default:
		return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable",
			Message: fmt.Sprintf("workflow waits on an unknown kind %q", p.Kind), Details: map[string]any{"seq": p.Seq}}
	}
	if d.Traits.Workflow == nil {
		return park, nil
	}
	return s.limitSuspension(park, p.Seq, recorded, now, d.Traits.Workflow.MaxSuspensionDays)
}

// failureHandler prepares the on_failure compensation invocation (000): its params are a
// CompensationContext built from the failed run: failed_step_id is the last step recorded failed in
// journal (everything the run recorded), and the workflow state snapshot is built from checkpointed,
// the durable part of it. If the handler cannot be started, the workflow is dead-lettered as
// without compensation, and the reason is logged.
func (s *Service) failureHandler(ctx context.Context, rec invocation.Record, handlerID string, rerr *sandbox.Error,
	journal, checkpointed []sandbox.JournalEntry, h *host) *parking {
	failedStep := "unknown"
	for _, j := range journal {
		if r, ok := j.Result.(map[string]any); ok && (j.Helper == "r_run_step_v1" || j.Helper == "r_step_v1") && r["ok"] == false {
			failedStep = j.Key
		}
	}
	errMeta := rerr.Details
	if errMeta == nil {
		errMeta = map[string]any{}
	}
	cc := s.compensationContext(rec, "failure", failedStep, checkpointed)
	cc["failed_step_error"] = map[string]any{"error_type": rerr.TypeID, "message": rerr.Message, "error_metadata": errMeta}
	handler, _, hd, serr := s.prepareChild(ctx, rec, handlerID, cc, invocation.ModeAsync)
	if serr != nil {
		h.add(invocation.EventLog, map[string]any{"message": "on_failure compensation could not start: " + serr.Message})
		return nil
	}
	handler.CompensationFor = rec.ID
	return &parking{handler: &handler, handlerD: hd}
}

// compensationContext is 000's CompensationContext for an on_failure or on_cancel handler of
// workflow rec; checkpointed are its durable journal entries (the state a crash would keep).
func (s *Service) compensationContext(rec invocation.Record, trigger, failedStep string, checkpointed []sandbox.JournalEntry) map[string]any {
	var input any
	_ = invocation.DecodeJSON(rec.Params, &input)
	meta := map[string]any{"entrypoint_id": rec.EntrypointID, "original_input": input, "tenant_id": rec.TenantID,
		"correlation_id": rec.CorrelationID}
	if rec.StartedAt != nil {
		meta["started_at"] = rec.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	return map[string]any{
		"trigger":                         trigger,
		"original_workflow_invocation_id": rec.ID,
		"failed_step_id":                  failedStep,
		"workflow_state_snapshot":         journal.StateSnapshot(checkpointed),
		"timestamp":                       s.cfg.Clock.Now().Format(time.RFC3339Nano),
		"invocation_metadata":             meta,
	}
}

// limitSuspension applies traits.workflow.max_suspension_days (000: suspension timeout → failed):
// a workflow waiting on journal position seq since it was recorded is woken no later than the
// deadline, and fails with the timeout error if it is still waiting then.
func (s *Service) limitSuspension(park *parking, seq int, recorded map[int]time.Time, now time.Time, maxDays int) (*parking, *sandbox.Error) {
	if maxDays <= 0 {
		maxDays = 30
	}
	since, ok := recorded[seq]
	if !ok {
		since = now // recorded by this run
	}
	deadline := since.Add(time.Duration(maxDays) * 24 * time.Hour)
	if !now.Before(deadline) {
		return nil, &sandbox.Error{TypeID: sandbox.ErrTimeout, Category: "timeout",
			Message: fmt.Sprintf("suspended longer than max_suspension_days (%d)", maxDays), Details: map[string]any{"seq": seq, "since": since}}
	}
	if park.until == nil || park.until.After(deadline) {
		park.until = &deadline
	}
	return park, nil
}

func retryData(r sandbox.StepRetryRecord) map[string]any {
	return map[string]any{"step": r.Step, "attempt": r.Attempt, "error": outcome.ErrorOf(r.Error), "delay_ms": r.Delay.Milliseconds()}
}

// expectChain makes opt expect exactly the projection the run's last enqueued write leaves (and
// fail with that write's error if it failed), so that a write queued behind it applies only on top
// of it.
func (h *host) expectChain(opt *store.AppendOptions) error {
	h.mu.Lock()
	prev, err := h.chain, h.chainErr
	h.mu.Unlock()
	if err != nil {
		return err
	}
	opt.Expect, opt.ExpectOnly = &prev, true
	return nil
}

// enqueueJournal writes journal events behind the activation's earlier writes without waiting for
// them (checkpointing automatic, or a manual r_snapshot_v1): the writer applies them in order, and
// the run waits for them (host.flush) before its next side effect (an HTTP call, a child), before
// it parks and before it ends. So a crash repeats at most the step in flight and the side-effect
// free work since the last durable entry, and a run of pure steps costs a commit or two, not one per
// step.
//
// The writes of one run form a chain: the first after a flush expects the projection the run last
// knew (and falls back to the stored one when something else got ahead of it); each later one
// expects exactly the projection its predecessor left (AppendOptions.ExpectOnly), so a write whose
// predecessor failed, or was rolled back with its batch, fails too rather than leave a hole in the
// journal.
func (s *Service) enqueueJournal(ctx context.Context, h *host, events []invocation.Event) error {
	rec, known := h.written()
	owner := s.leaseOwner(rec)
	h.mu.Lock()
	chained := len(h.pending) > 0
	h.mu.Unlock()
	// Through enqueue: the events of event_emitted entries among them are published in this write.
	wait := s.enqueue(context.WithoutCancel(ctx), func(tx store.Tx) error {
		opt := store.AppendOptions{RequireLease: owner, Expect: &known}
		if chained {
			if err := h.expectChain(&opt); err != nil {
				return err
			}
		}
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

// enqueued reports whether journal writes were enqueued since the last flush.
func (h *host) enqueued() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pending) > 0
}

// flush waits for the journal writes enqueued so far; it returns the first that failed, then and
// at every later call.
func (h *host) flush() error {
	h.mu.Lock()
	waits := h.pending
	h.pending = nil
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

// persistJournal makes journal events durable before the program uses their results (architecture:
// "a completed step is recorded before its result is used"). It writes only while this process
// holds the attempt's lease. The projection its previous write left is the Append's Expect, so a
// run whose log nobody else touched meanwhile skips reading and decoding the stored record.
func (s *Service) persistJournal(ctx context.Context, h *host, events []invocation.Event) error {
	rec, known := h.written()
	var out invocation.Record
	err := s.update(context.WithoutCancel(ctx), func(tx store.Tx) error { // publishes the events of event_emitted entries
		var err error
		out, _, err = tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: events, AppendOptions: store.AppendOptions{RequireLease: s.leaseOwner(rec), Expect: &known}})
		return err
	})
	if err == nil {
		h.wrote(out)
	}
	return err
}

// workflowProgram compiles a workflow once per version (the function cache compiles functions).
func (s *Service) workflowProgram(e entrypoint.Entrypoint, d definition) (*sandbox.Program, *sandbox.Error) {
	s.mu.Lock()
	p, ok := s.workflows[e.ID]
	s.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := sandbox.CompileWorkflow("main.star", d.Implementation.Code.Source)
	if err != nil {
		var se *sandbox.Error
		if errorsAs(err, &se) {
			return nil, se
		}
		return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "compile: " + err.Error()}
	}
	s.mu.Lock()
	if len(s.workflows) >= definitionCacheMax {
		s.workflows = map[string]*sandbox.Program{}
	}
	s.workflows[e.ID] = p
	s.mu.Unlock()
	return p, nil
}

// stepStarted records a step attempt's start (step_started). It is persisted with the attempt's
// journal entry (the step's outcome, or its retry), at its own time; a retry's step_retried is
// added as the retry is recorded.
func (h *host) stepStarted(step string, attempt int) {
	h.startStep(step, attempt)
	h.add(invocation.EventStepStarted, map[string]any{"step": step, "attempt": attempt})
}

// compensation records a step compensation as it begins (step_compensating) and as it ends
// (step_compensated, with its outcome); the timeline shows them as compensation_started and
// compensation_completed or compensation_failed, around what the compensation did.
func (h *host) compensation(c sandbox.CompensationRecord, done bool) {
	if !done {
		h.addAt(c.StartedAt, invocation.EventStepCompensating, map[string]any{"step": c.Step, "seq": c.Seq, "fn": c.Fn})
		return
	}
	entry := map[string]any{"step": c.Step, "seq": c.Seq, "fn": c.Fn, "ok": c.OK, "duration_ms": c.EndedAt.Sub(c.StartedAt).Milliseconds()}
	if c.Error != nil {
		entry["error"] = outcome.ErrorOf(c.Error)
	}
	h.addAt(c.EndedAt, invocation.EventStepCompensated, entry)
}

// compensateCanceled compensates a canceled workflow (STARLARK_RUNTIME.md: compensation on cancel):
// it replays the journal without running or waiting on anything beyond it (sandbox CancelAtEnd),
// so no step runs again, then calls the compensate_fn of every completed r_step_v1 step in reverse
// completion order and records each outcome. The status stays canceled (or compensating, when an
// on_cancel handler runs too). Claimed with its own lease; if this process dies meanwhile, the lease
// expires and the compensations run again (at-least-once, like steps).
func (s *Service) compensateCanceled(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d definition) error {
	log := obs.Logger(ctx).With("tenant_id", rec.TenantID, "invocation_id", rec.ID, "correlation_id", rec.CorrelationID)
	h := &host{s: s, rec: rec, log: log, keyPrefix: "compensate-"}
	logEvents, err := s.journalEventsOf(ctx, rec)
	if err != nil {
		return err
	}
	wj, jerr := journal.Replay(logEvents)
	input, ierr := wj.InputOf(rec)
	prog, perr := s.workflowProgram(e, d)
	switch {
	case jerr != nil || ierr != nil:
		jerr = errors.Join(jerr, ierr)
		h.add(invocation.EventLog, map[string]any{"message": "step compensations skipped: workflow journal unreadable: " + jerr.Error()})
	case perr != nil:
		h.add(invocation.EventLog, map[string]any{"message": "step compensations skipped: " + perr.Message})
	default:
		_, rerr := sandbox.RunWorkflow(ctx, sandbox.WorkflowRequest{Journal: wj.Entries, Now: s.cfg.Clock.Now(), CancelAtEnd: true, OnCompensation: h.compensation,
			Request: sandbox.Request{Program: prog, Input: input, Host: h, CPU: s.cfg.CPU, Gate: s.cfg.Gate, AdmitWithin: s.admitWithin(),
				Info: sandbox.Info{InvocationID: rec.ID, TenantID: rec.TenantID, EntrypointID: rec.EntrypointID,
					CorrelationID: rec.CorrelationID, Attempt: rec.Attempt, Generation: wj.Generation},
				Limits: d.limits(s.cfg.MaxPayloadBytes)}})
		if rerr != nil && rerr.TypeID != sandbox.ErrCanceled {
			h.add(invocation.EventLog, map[string]any{"message": "step compensations: the replay ended with " + rerr.Message})
		}
	}
	owner := attempt.CompensationLease(s.leaseOwner(rec))
	return s.cfg.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: h.Drain(), AppendOptions: store.AppendOptions{RequireLease: owner, Schedule: &store.Scheduling{}}})
		return err
	})
}

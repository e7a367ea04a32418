package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
)

// journalEntry is the persisted form of a sandbox.JournalEntry (the Data of a journal event).
type journalEntry struct {
	Seq      int       `json:"seq"`
	Helper   string    `json:"helper"`
	Key      string    `json:"key,omitempty"`
	ArgsHash string    `json:"args_hash"`
	Input    any       `json:"input,omitempty"`
	Until    time.Time `json:"until,omitzero"`
	Result   any       `json:"result"`
	Done     bool      `json:"done"`
}

func toJournal(e sandbox.JournalEntry) journalEntry {
	return journalEntry{Seq: e.Seq, Helper: e.Helper, Key: e.Key, ArgsHash: e.ArgsHash, Input: e.Input, Until: e.Until, Result: e.Result, Done: e.Done}
}

func (j journalEntry) sandbox() sandbox.JournalEntry {
	return sandbox.JournalEntry{Seq: j.Seq, Helper: j.Helper, Key: j.Key, ArgsHash: j.ArgsHash, Input: j.Input, Until: j.Until, Result: j.Result, Done: j.Done}
}

func decodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// workflowJournal is a workflow's current journal, rebuilt from its event log by journalOf.
type workflowJournal struct {
	entries  []sandbox.JournalEntry
	recorded map[int]time.Time // when each position was recorded
	children map[int]string    // the child invocation started for a pending r_invoke_v1 position
	bytes    int               // the encoded size of its journal events
	// generation and input are those of the continued_as_new event the journal starts at (0 and
	// nil for the first journal: the input is the invocation's params).
	generation int
	input      any
}

// journalOf rebuilds a workflow's current journal from its event log (read from the record's
// JournalFrom on): journal events in order, with pending entries completed by journal_resolved
// events; a continued_as_new event starts a new, empty journal.
func journalOf(events []invocation.Event) (workflowJournal, error) {
	j := workflowJournal{recorded: map[int]time.Time{}, children: map[int]string{}}
	for _, ev := range events {
		switch ev.Type {
		case invocation.EventContinuedAsNew:
			var c struct {
				Generation int `json:"generation"`
				Input      any `json:"input"`
			}
			if err := decodeJSON(ev.Data, &c); err != nil {
				return j, fmt.Errorf("continued_as_new event %d: %w", ev.Seq, err)
			}
			j = workflowJournal{recorded: map[int]time.Time{}, children: map[int]string{}, generation: c.Generation, input: c.Input}
		case invocation.EventChildInvoked:
			var c struct {
				Seq   *int   `json:"seq"`
				Child string `json:"child_invocation_id"`
			}
			if decodeJSON(ev.Data, &c) == nil && c.Seq != nil {
				j.children[*c.Seq] = c.Child
			}
		case invocation.EventJournal:
			var e journalEntry
			if err := decodeJSON(ev.Data, &e); err != nil {
				return j, fmt.Errorf("journal event %d: %w", ev.Seq, err)
			}
			if e.Seq != len(j.entries) {
				return j, fmt.Errorf("journal event %d: entry %d out of order (expected %d)", ev.Seq, e.Seq, len(j.entries))
			}
			j.recorded[e.Seq] = ev.At
			j.bytes += len(ev.Data)
			j.entries = append(j.entries, e.sandbox())
		case invocation.EventJournalResolved:
			var r struct {
				Seq    int `json:"seq"`
				Result any `json:"result"`
			}
			if err := decodeJSON(ev.Data, &r); err != nil || r.Seq < 0 || r.Seq >= len(j.entries) {
				return j, fmt.Errorf("journal_resolved event %d is invalid", ev.Seq)
			}
			j.bytes += len(ev.Data)
			j.entries[r.Seq].Done, j.entries[r.Seq].Result = true, r.Result
		}
	}
	return j, nil
}

// inputOf is the input of the journal's run of main: the invocation's params for the first
// journal, the one given to r_continue_as_new_v1 after that.
func (j workflowJournal) inputOf(rec invocation.Record) any {
	if j.generation > 0 {
		return j.input
	}
	var input any
	_ = decodeJSON(rec.Params, &input)
	return input
}

// journalEventsOf reads the events of rec's current journal: from its last continued_as_new event
// on (all of them before any), so that a long-lived workflow that continues as new reads and
// replays only its current journal.
func (s *Service) journalEventsOf(ctx context.Context, rec invocation.Record) ([]invocation.Event, error) {
	return s.eventsAfter(ctx, rec.TenantID, rec.ID, max(rec.JournalFrom-1, 0))
}

// firstActivation reports whether rec is a workflow's first activation, with nothing in its log but created
// and started: it has no journal to read (and a sync call's start may not even be durable yet).
func firstActivation(rec invocation.Record) bool {
	return rec.LastSeq == 2 && rec.Attempt == 1 && rec.EngineAttempt == 1 && rec.JournalFrom == 0 && rec.Generation == 0
}

// isTimer tells the journal entries that are timers: sleeps and the backoff of step retries.
func isTimer(helper string) bool {
	return helper == "r_sleep" || helper == "r_sleep_v1" || helper == sandbox.StepRetryHelper
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
	if lr := s.takeLive(rec.ID); lr != nil {
		lr.handover <- c
	} else {
		go s.runWorkflow(context.WithoutCancel(ctx), newLiveRun(), c, e, d)
	}
	a := <-c.reply
	return a.rec, a.err
}

// runWorkflow is a workflow execution: it replays the journal, records new entries, and reports
// each activation's outcome to the executor of its claim. Where the workflow waits (a timer, an
// event, a child) the suspension is made durable first; then, if the wait is short enough and
// there is room, the execution stays live and a later claim of the invocation hands it over
// (live.go), else the execution ends and a later activation replays.
func (s *Service) runWorkflow(ctx context.Context, lr *liveRun, c claim, e entrypoint.Entrypoint, d definition) {
	rec := c.rec
	open := true // the executor of claim c waits for this activation's outcome
	yield := func(r invocation.Record, err error) {
		if open {
			c.reply <- activation{r, err}
			open = false
		}
	}
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.ErrorContext(ctx, "workflow execution panicked", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "panic", p)
			yield(rec, fmt.Errorf("workflow execution panicked: %v", p))
		}
	}()
	log := obs.Logger(ctx).With("tenant_id", rec.TenantID, "invocation_id", rec.ID, "correlation_id", rec.CorrelationID)
	var logEvents []invocation.Event
	if !firstActivation(rec) {
		var err error
		if logEvents, err = s.journalEventsOf(ctx, rec); err != nil {
			yield(rec, err)
			return
		}
	}
	wj, jerr := journalOf(logEvents)
	journal, recorded, children := wj.entries, wj.recorded, wj.children
	h := &host{s: s, rec: rec, log: log}
	if c.start != nil {
		h.pending = append(h.pending, c.start)
	}
	now := s.cfg.Clock.Now()
	waited := false
	for i := range journal {
		waited = waited || journal[i].Helper == "r_wait_event_v1"
		resolveDue(h, &journal[i], now)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.track(rec.ID, cancel)
	defer s.untrack(rec.ID)
	start := time.Now()
	// checkpointing.strategy (000): automatic — every journal entry is durable before the program
	// continues (a crash repeats at most the step in flight); manual — entries become durable at each
	// r_snapshot_v1 (a crash repeats the steps since the last snapshot); disabled — only when the run
	// parks or ends (a crash starts the run over). Entries not yet written go with the outcome.
	strategy := "automatic"
	if d.Traits.Workflow != nil && d.Traits.Workflow.Checkpointing.Strategy != "" {
		strategy = d.Traits.Workflow.Checkpointing.Strategy
	}
	var buffered []invocation.Event
	checkpointed := len(journal) // journal positions already durable (the checkpointed state)
	journalBytes := wj.bytes     // the encoded size of the current journal
	generation := wj.generation
	var res sandbox.WorkflowResult
	var rerr *sandbox.Error
	input := wj.inputOf(rec)
	prog, perr := s.workflowProgram(e, d)
	switch {
	case jerr != nil:
		rerr = &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "workflow journal unreadable: " + jerr.Error()}
	case perr != nil:
		rerr = perr
	}
	stepRetry := func(attempt int, e *sandbox.Error) (time.Duration, bool) {
		if !shouldRetry(d, attempt, e) {
			return 0, false
		}
		return retryDelay(d, attempt), true
	}
	// wait keeps the execution live across a suspension (live.go): the suspension is recorded
	// exactly as at the end of a run, this activation is reported, and the execution waits to be
	// handed the next claim of the invocation.
	var unused *parking // a parking made for a live wait that could not be kept (the run parks with it)
	wait := func(p *sandbox.Park) (sandbox.Resolution, bool) {
		if !s.liveEligible(p, now) {
			return sandbox.Resolution{}, false
		}
		park, perr := s.parkingFor(ctx, rec, d, p, recorded, children, now, h)
		switch {
		case perr != nil:
			return sandbox.Resolution{}, false // the end of the run reports it
		case park.refused != nil:
			return sandbox.Resolution{Result: park.refused, Now: now}, true // recorded with the next write
		}
		if !s.registerLive(rec.ID, lr) {
			unused = park
			return sandbox.Resolution{}, false
		}
		park.clearWaits = waited && park.wait == nil
		h.prepend(buffered)
		buffered = nil
		metrics := metricsOf(time.Since(start), sandbox.Result{}, d, h.takeEgress())
		if err := h.flush(); err != nil {
			// The run's journal writes did not all apply: it does not park; it ends with that error
			// (below).
			s.dropLive(rec.ID)
			return sandbox.Resolution{}, false
		}
		final, err := s.complete(ctx, rec, d, h.drain(), nil, nil, metrics, park)
		if err != nil || final.Status != invocation.StatusSuspended {
			s.dropLive(rec.ID)
			yield(final, err)
			return sandbox.Resolution{}, false // recorded (or lost the lease): nothing more to write
		}
		checkpointed = p.Seq + 1
		s.untrack(rec.ID)
		yield(final, nil)
		next, ok := s.awaitHandover(lr, rec.ID)
		if !ok {
			return sandbox.Resolution{}, false
		}
		c, open, rec, now, start = next, true, next.rec, s.cfg.Clock.Now(), time.Now()
		h.setRecord(rec)
		s.track(rec.ID, cancel)
		return s.resolutionAfter(ctx, h, p, final.LastSeq, now)
	}
	record := func(j sandbox.JournalEntry, retries []sandbox.StepRetryRecord) error {
		if j.Seq >= s.cfg.MaxJournalEntries {
			return journalFull(fmt.Sprintf("%d entries", s.cfg.MaxJournalEntries), j.Seq)
		}
		at := s.cfg.Clock.Now()
		for _, r := range retries {
			h.add(invocation.EventStepRetried, retryData(r))
		}
		recorded[j.Seq] = at
		waited = waited || j.Helper == "r_wait_event_v1"
		evs := journalEvents(rec, generation, at, j, h.drain())
		if journalBytes += len(evs[len(evs)-1].Data); journalBytes > s.cfg.MaxJournalBytes {
			h.prepend(evs[:len(evs)-1]) // the attempt's timeline entries stay; the entry is not recorded
			return journalFull(sizeOf(s.cfg.MaxJournalBytes), j.Seq)
		}
		buffered = append(buffered, evs...)
		if strategy == "automatic" || (strategy == "manual" && j.Helper == "r_snapshot_v1") {
			if err := s.enqueueJournal(ctx, h, buffered); err != nil {
				return err
			}
			buffered, checkpointed = nil, j.Seq+1
		}
		return nil
	}
	for rerr == nil {
		timeout := d.timeout() - time.Since(start) // continuing as new does not renew the activation's time
		if timeout <= 0 {
			rerr = &sandbox.Error{TypeID: sandbox.ErrTimeout, Category: "timeout", Message: fmt.Sprintf("execution timed out after %v", d.timeout())}
			break
		}
		res, rerr = sandbox.RunWorkflow(runCtx, sandbox.WorkflowRequest{Journal: journal, Now: now, StepRetry: stepRetry, CheckFilter: checkFilter,
			StepStarted: h.stepStarted, Wait: wait, Record: record, OnCompensation: h.compensation,
			// A run stopped by cancel or suspend (or shutdown) does not compensate: a canceled workflow
			// is compensated once, by compensateCanceled.
			// An attempt that the retry policy tries again has not ended: its completed steps are replayed
			// by the next attempt, and nothing is compensated (STARLARK_RUNTIME.md, Compensation).
			Compensate: func(e *sandbox.Error, exited bool) bool {
				return !errors.Is(runCtx.Err(), context.Canceled) && (exited || !shouldRetry(d, rec.Attempt, e))
			},
			Request: sandbox.Request{
				Program: prog, Input: input, Host: h, CPU: s.cfg.CPU,
				Info: sandbox.Info{InvocationID: rec.ID, TenantID: rec.TenantID, EntrypointID: rec.EntrypointID,
					CorrelationID: rec.CorrelationID, Attempt: rec.Attempt, Generation: generation},
				Limits: sandbox.Limits{Timeout: timeout, CPU: d.Traits.Limits.CPU, MemoryMB: int(d.Traits.Limits.MemoryMB),
					MaxPayloadBytes: int64(s.cfg.MaxPayloadBytes)}}})
		if rerr != nil || res.ContinueAsNew == nil || !open {
			break
		}
		// r_continue_as_new_v1: the journal so far, then the rotation, are made durable; the next
		// generation starts at once in this execution, with an empty journal.
		generation++
		buffered = append(buffered, continuedEvent(rec, generation, s.cfg.Clock.Now(), res.ContinueAsNew.Input, h.drain())...)
		if err := errors.Join(h.flush(), s.persistJournal(ctx, h, buffered)); err != nil {
			rerr = &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "journal: " + err.Error()}
			break
		}
		journal, recorded, children, buffered, input, res = nil, map[int]time.Time{}, map[int]string{}, nil, res.ContinueAsNew.Input, sandbox.WorkflowResult{}
		checkpointed, journalBytes, now = 0, 0, s.cfg.Clock.Now()
	}
	if !open {
		return // the suspension was recorded, and the live wait ended without a handover
	}
	elapsed := time.Since(start)
	// Entries the run made durable as it went are in the log already; buffered ones go with the
	// outcome, ahead of the timeline entries collected since.
	h.prepend(buffered)
	var output json.RawMessage
	var park *parking
	if rerr == nil && res.Park != nil {
		if park = unused; park == nil {
			park, rerr = s.parkingFor(ctx, rec, d, res.Park, recorded, children, now, h)
		}
	}
	if rerr == nil && park == nil {
		output, rerr = s.checkOutput(d, res.Output)
	}
	if rerr != nil && (res.Exited || !shouldRetry(d, rec.Attempt, rerr)) {
		// The workflow ends unsuccessfully for good (r_exit: a retry would replay the journal to the
		// same r_exit), and so does its on_failure handler's turn.
		if d.Traits.Workflow != nil && d.Traits.Workflow.Compensation.OnFailure != nil {
			all := append(journal, res.New...)
			park = s.failureHandler(ctx, rec, *d.Traits.Workflow.Compensation.OnFailure, rerr, all, all[:min(checkpointed, len(all))], h)
		}
		if park == nil {
			park = &parking{}
		}
		park.final = true
	}
	if waited && (park == nil || park.wait == nil) {
		// The workflow no longer waits for an event: its registered waits go with this outcome.
		if park == nil {
			park = &parking{}
		}
		park.clearWaits = true
	}
	metrics := metricsOf(elapsed, res.Result, d, h.takeEgress())
	metrics.StepCount = i64(int64(len(res.Completed)))
	timeline := h.drain()
	var ferr error
	if park == nil && h.enqueued() {
		// A plain outcome (no park, no handler, no waits to clear) goes to the writer right behind the
		// run's journal writes, expecting exactly what they leave (completeAfter): one commit for the
		// last steps and the outcome, rather than one for each in turn.
		final, err := s.completeAfter(ctx, rec, d, timeline, output, rerr, metrics, h)
		if ferr = h.flush(); ferr == nil {
			if err != nil {
				// Not the journal: something else wrote meanwhile (a cancel, say). Complete as usual.
				final, err = s.complete(ctx, rec, d, timeline, output, rerr, metrics, park)
			}
			yield(final, err)
			return
		}
	} else if ferr = h.flush(); ferr == nil {
		yield(s.complete(ctx, rec, d, timeline, output, rerr, metrics, park))
		return
	}
	// Journal writes the run enqueued did not apply (its lease was lost, or the store failed): it ends
	// as a failed write of its journal ends a run, keeping only its informational entries (what it
	// computed from the lost entries must not be recorded).
	if rerr == nil {
		rerr = &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "journal: " + ferr.Error()}
	}
	yield(s.complete(ctx, rec, d, informational(timeline, park), nil, rerr, metrics, nil))
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

// continuedEvent is the log event of r_continue_as_new_v1: it ends the current journal and carries
// the next generation's number and input; the timeline entries collected before it go first.
func continuedEvent(rec invocation.Record, generation int, at time.Time, input any, pending []invocation.Event) []invocation.Event {
	b, _ := json.Marshal(map[string]any{"generation": generation, "input": input})
	return append(pending, invocation.Event{Type: invocation.EventContinuedAsNew, Data: b, At: at, EngineAttempt: rec.EngineAttempt,
		LogicalAttempt: rec.Attempt, IdempotencyKey: eventKey(rec.ID, fmt.Sprintf("continue-%d", generation), rec.Attempt, invocation.EventContinuedAsNew)})
}

// resolveDue satisfies a pending journal entry whose time has come: a due timer, or an event wait
// whose timeout has passed (with the timeout error). The resolution is recorded with the run's
// next write.
func resolveDue(h *host, j *sandbox.JournalEntry, now time.Time) bool {
	if j.Done || j.Until.IsZero() || j.Until.After(now) {
		return false
	}
	switch {
	case isTimer(j.Helper):
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
	_ = decodeJSON(rec.Params, &input)
	meta := map[string]any{"entrypoint_id": rec.EntrypointID, "original_input": input, "tenant_id": rec.TenantID,
		"correlation_id": rec.CorrelationID}
	if rec.StartedAt != nil {
		meta["started_at"] = rec.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	return map[string]any{
		"trigger":                         trigger,
		"original_workflow_invocation_id": rec.ID,
		"failed_step_id":                  failedStep,
		"workflow_state_snapshot":         stateSnapshot(checkpointed),
		"timestamp":                       s.cfg.Clock.Now().Format(time.RFC3339Nano),
		"invocation_metadata":             meta,
	}
}

// stateSnapshot is 000's workflow_state_snapshot, "the last checkpointed workflow state": the steps
// completed successfully among the durable entries of the current journal (in completion order)
// with their outputs, and the label of the last r_snapshot_v1 among them (`checkpoint`); {} when
// there is none yet (000: failure before the first checkpoint). Which entries are durable depends
// on checkpointing.strategy (automatic: all; manual: up to the last r_snapshot_v1 or park;
// disabled: up to the last park).
func stateSnapshot(checkpointed []sandbox.JournalEntry) map[string]any {
	names := []string{}
	outputs := map[string]any{}
	var label any
	labeled := false
	for _, j := range checkpointed {
		if !j.Done {
			continue
		}
		switch j.Helper {
		case "r_run_step_v1", "r_step_v1":
			if r, ok := j.Result.(map[string]any); ok && r["ok"] == true {
				names = append(names, j.Key)
				outputs[j.Key] = r["value"]
			}
		case "r_snapshot_v1":
			label, labeled = j.Result, true
		}
	}
	if len(names) == 0 && !labeled {
		return map[string]any{}
	}
	m := map[string]any{"completed_steps": names, "outputs": outputs}
	if labeled {
		m["checkpoint"] = label
	}
	return m
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
	return map[string]any{"step": r.Step, "attempt": r.Attempt, "error": payload(r.Error), "delay_ms": r.Delay.Milliseconds()}
}

// journalEvents are the log events of one journal entry: the timeline entries collected before it
// (the step's attempts, retries and HTTP calls), then the entry, whose idempotency key is its
// journal position (so writing it twice is a no-op).
func journalEvents(rec invocation.Record, generation int, now time.Time, j sandbox.JournalEntry, pending []invocation.Event) []invocation.Event {
	b, _ := json.Marshal(toJournal(j))
	return append(pending, invocation.Event{Type: invocation.EventJournal, Data: b, At: now, EngineAttempt: rec.EngineAttempt,
		LogicalAttempt: rec.Attempt, IdempotencyKey: eventKey(rec.ID, journalKey(generation, j.Seq), rec.Attempt, invocation.EventJournal)})
}

// journalKey names a journal position of a generation in idempotency keys (journal-<seq> in the
// first journal, journal-<generation>-<seq> after a continue-as-new).
func journalKey(generation, seq int) string {
	if generation == 0 {
		return fmt.Sprintf("journal-%d", seq)
	}
	return fmt.Sprintf("journal-%d-%d", generation, seq)
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
	wait := s.cfg.Store.Enqueue(context.WithoutCancel(ctx), func(tx store.Tx) error {
		opt := store.AppendOptions{RequireLease: owner, Expect: &known}
		if chained {
			h.mu.Lock()
			prev, perr := h.chain, h.chainErr
			h.mu.Unlock()
			if perr != nil {
				return perr
			}
			opt.Expect, opt.ExpectOnly = &prev, true
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
	err := s.cfg.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		var err error
		out, _, err = tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: events, AppendOptions: store.AppendOptions{RequireLease: s.leaseOwner(rec), Expect: &known}})
		return err
	})
	if err == nil {
		h.wrote(out)
	}
	return err
}

func toMap(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = decodeJSON(b, &m)
	return m
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
		entry["error"] = payload(c.Error)
	}
	h.addAt(c.EndedAt, invocation.EventStepCompensated, entry)
}

// compensationLease is the lease owner of a compensation run: distinct from the canceled run's, so
// that run's late outcome can never be applied.
func compensationLease(owner string) string { return owner + "/compensate" }

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
	wj, jerr := journalOf(logEvents)
	prog, perr := s.workflowProgram(e, d)
	switch {
	case jerr != nil:
		h.add(invocation.EventLog, map[string]any{"message": "step compensations skipped: workflow journal unreadable: " + jerr.Error()})
	case perr != nil:
		h.add(invocation.EventLog, map[string]any{"message": "step compensations skipped: " + perr.Message})
	default:
		_, rerr := sandbox.RunWorkflow(ctx, sandbox.WorkflowRequest{Journal: wj.entries, Now: s.cfg.Clock.Now(), CancelAtEnd: true, OnCompensation: h.compensation,
			Request: sandbox.Request{Program: prog, Input: wj.inputOf(rec), Host: h, CPU: s.cfg.CPU,
				Info: sandbox.Info{InvocationID: rec.ID, TenantID: rec.TenantID, EntrypointID: rec.EntrypointID,
					CorrelationID: rec.CorrelationID, Attempt: rec.Attempt, Generation: wj.generation},
				Limits: sandbox.Limits{Timeout: d.timeout(), CPU: d.Traits.Limits.CPU, MemoryMB: int(d.Traits.Limits.MemoryMB),
					MaxPayloadBytes: int64(s.cfg.MaxPayloadBytes)}}})
		if rerr != nil && rerr.TypeID != sandbox.ErrCanceled {
			h.add(invocation.EventLog, map[string]any{"message": "step compensations: the replay ended with " + rerr.Message})
		}
	}
	owner := compensationLease(s.leaseOwner(rec))
	return s.cfg.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: h.drain(), AppendOptions: store.AppendOptions{RequireLease: owner, Schedule: &store.Scheduling{}}})
		return err
	})
}

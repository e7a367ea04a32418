package sandbox

// Durable workflows: deterministic re-execution of main(ctx, input) against
// a journal (ARCHITECTURE.md, "Durable workflows (replay with a journal)").
//
// Every workflow helper call made by the workflow itself (outside step
// functions and compensations) takes the next position of the journal. If
// the journal has an entry there, the call must be the same (same helper,
// same ArgsHash) and the recorded result is returned without side effects;
// otherwise the call is performed and recorded as a new entry
// (WorkflowResult.New). A call that must wait (a timer, an event, a child
// invocation) records a pending entry and ends the execution with a Park:
// no goroutine or memory is held while the workflow is suspended. The
// caller persists New, marks pending entries Done when they are satisfied
// (filling Result with OKResult or ErrorResult for events and children),
// and runs the workflow again with the longer journal.
//
// Cost: a run replays the whole journal from the start, so its cost is
// linear in the number of journal entries (each lookup is O(1) by
// position). WorkflowRequest.Wait lets the caller keep the execution live
// across a wait instead of ending it with a Park, so that a workflow that
// waits often is not replayed after every wait while it stays on one node.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
)

// JournalEntry is one recorded workflow helper call.
type JournalEntry struct {
	// Seq is the position in the program's workflow-helper-call order (0-based).
	Seq int
	// Helper is the helper called: "r_run_step_v1", "r_step_v1" (a call of
	// a step object), "r_now_v1", "r_rand_v1", "r_sleep", "r_sleep_v1",
	// "r_wait_event_v1", "r_invoke_v1", "r_snapshot_v1"; StepRetryHelper for
	// a scheduled retry of the step that follows it; "r_emit_v1" for an event emitted by the
	// workflow's code (Result is {"event_type_id": ...}, Emits the event).
	Helper string
	// Key is the step name for steps, "" otherwise.
	Key string
	// ArgsHash is the hex SHA-256 of the canonical JSON of the arguments
	// that identify the call (see argsOf* below).
	ArgsHash string
	// Input is the step input (steps only), kept for compensations.
	Input any
	// Until is when a timer is due, or when an event wait times out; zero
	// otherwise.
	Until time.Time
	// Result is the JSON-ready recorded result (nil while pending): for
	// steps, events and children {"ok": true, "value": v} or {"ok": false,
	// "error": envelope} (see OKResult, ErrorResult); for r_now_v1 and
	// r_rand_v1 the string returned; for r_snapshot_v1 the label.
	Result any
	// Done is false while the call is still pending (a sleep not yet due,
	// an event not yet received, a child not yet finished).
	Done bool
	// Emits are the events to publish with this entry (r_emit_v1): the event of an r_emit_v1 call
	// made by the workflow's code, or those a step's successful attempt emitted. Only new entries
	// carry them (the caller publishes them in the write that makes the entry durable); a replayed
	// journal has none, so a replay publishes nothing again.
	Emits []Emit
}

// WorkflowRequest is one run of a workflow. Request.Program should come
// from CompileWorkflow (programs from Compile also run, without the
// workflow helpers).
type WorkflowRequest struct {
	Request
	// Journal is the journal persisted so far; Journal[i].Seq must be i.
	Journal []JournalEntry
	// Now is the time timers and event timeouts are computed from
	// (Request.Host.Now() if zero).
	Now time.Time
	// StepRetry is the retry policy of every step (the entrypoint's traits.retry, as
	// STARLARK_RUNTIME.md says). The zero value runs each step once.
	StepRetry StepRetry
	// Record, if set, is called synchronously as each journal entry is recorded, with the step
	// retries reported since the previous call; it must make them durable. An error ends the run
	// (an *Error as it is, so the caller can enforce journal limits with a typed error).
	// How many entries it accepted is WorkflowResult.Persisted.
	Record func(JournalEntry, []StepRetryRecord) error
	// CheckFilter, if set, checks an r_wait_event_v1 event_filter_query before the wait is
	// recorded; an error fails the workflow at the call.
	CheckFilter func(expr string) error
	// StepStarted, if set, is called as each step attempt begins (attempt is 1-based).
	StepStarted func(step string, attempt int)
	// Compensate, if set, decides whether a failed run calls the compensate_fns (nil: always); exited
	// is WorkflowResult.Exited. Compensations run once, when the workflow ends for good: the caller
	// says no for an attempt its retry policy will try again (the next attempt replays the completed
	// steps), and for a run stopped by a cancel or suspend request, whose compensation (if any) runs
	// once, in a CancelAtEnd run.
	Compensate func(e *Error, exited bool) bool
	// OnCompensation, if set, is called as each step compensation begins (done false) and as it
	// ends (done true, with its outcome), so that what the compensation does in between (its HTTP
	// calls, say) is seen between the two.
	OnCompensation func(c CompensationRecord, done bool)
	// CancelAtEnd replays the journal and, where the program goes beyond it (a call not yet
	// recorded, or a pending wait), ends the run with the canceled error instead of running or
	// parking: the completed steps' compensate_fns then run. This is how a canceled workflow is
	// compensated without repeating any step.
	CancelAtEnd bool
	// Wait, if set, is called where the workflow would park, after the pending entry was recorded
	// (through Record). It may make the park durable and block until the wait is satisfied, keeping
	// this execution live: it then returns the entry's result and true, and the program continues
	// without a replay, with a fresh Limits.Timeout and CPU budget (each activation between parks
	// has its own, as a replay would). Returning false parks as usual: the run ends with Park set.
	Wait func(*Park) (Resolution, bool)
}

// Resolution is how a live wait ended: the pending entry's result (nil for a timer; OKResult or
// ErrorResult for events and children) and the time the workflow resumes at.
type Resolution struct {
	Result any
	Now    time.Time
}

// StepRetry decides whether a failed step attempt (1-based) is tried again, and after how long;
// the caller supplies the entrypoint's retry policy (000's precedence and backoff). Each retry is
// a journal entry (StepRetryHelper, a timer due after the delay: the workflow parks, or waits live,
// until then) and is reported to WorkflowRequest.Record with it; the step's outcome is journaled
// after its retries. A nil StepRetry runs each step once.
type StepRetry func(attempt int, e *Error) (delay time.Duration, retry bool)

// StepRetryRecord is one retried step attempt.
type StepRetryRecord struct {
	Step    string
	Attempt int // the attempt that failed (1-based)
	Error   *Error
	Delay   time.Duration
}

// Park tells the caller to suspend the workflow until it is satisfied,
// then to mark the journal entry at Seq Done and run the workflow again.
type Park struct {
	Kind string // "timer" | "retry" (a step retry's backoff) | "event" | "child"
	// Until is when the timer is due (Kinds "timer" and "retry").
	Until time.Time
	// EventTypeID, Filter and TimeoutAt describe the event awaited (Kind
	// "event"); the caller fills the entry with OKResult(payload) or, at
	// TimeoutAt, ErrorResult(a timeout error).
	EventTypeID, Filter string
	TimeoutAt           *time.Time
	// ChildEntrypointID and ChildParams describe the child invocation to
	// run (Kind "child"); the caller fills the entry with its outcome.
	ChildEntrypointID string
	ChildParams       any
	// Seq is the journal position of the pending entry.
	Seq int
}

// StepRecord is a step that completed successfully, in this run or an
// earlier one, in completion (journal) order.
type StepRecord struct {
	Seq           int
	Name          string
	Input, Output any
	// Compensate is the name of the step's compensate_fn ("" if none; only
	// steps made with r_step_v1 have one).
	Compensate string
}

// CompensationRecord is the outcome of one compensation.
type CompensationRecord struct {
	Step string // the step compensated
	Seq  int    // its journal position
	Fn   string // the compensate_fn's name
	OK   bool
	// Error is the failure of the compensation when !OK.
	Error *Error
	// StartedAt and EndedAt are when it began and ended (the host's clock).
	StartedAt, EndedAt time.Time
}

// WorkflowResult is the outcome of one run of a workflow.
type WorkflowResult struct {
	// Result holds the measurements, and Output when the workflow finished.
	Result
	// New are the entries this run appended to the journal, in order. The
	// caller must persist them before a later run uses their results.
	New []JournalEntry
	// Park, when not nil, means the workflow must suspend until it is
	// satisfied; RunWorkflow then returns no error and no output.
	Park *Park
	// Completed lists the steps completed so far (earlier runs and this one).
	Completed []StepRecord
	// Compensations are the compensations run because the workflow failed,
	// in the order they ran (reverse completion order).
	Compensations []CompensationRecord
	// StepRetries are the step attempts that failed and were retried in this run.
	StepRetries []StepRetryRecord
	// Persisted is how many of New (and of StepRetries' reports) Record has made durable already.
	Persisted int
	// Exited means the run failed through r_exit at the workflow's level (called by main, or by a
	// workflow helper's exit_on_error): the program chose to end, and a retry would replay the journal
	// to the same end, so the failure is final whatever its category. (r_exit inside a step function
	// fails only that step's attempt.)
	Exited bool
	// ContinueAsNew, when not nil, means the program called r_continue_as_new_v1: this journal is
	// over (no output, no error, no compensation) and the caller starts main again with Input and an
	// empty journal, in the same invocation.
	ContinueAsNew *ContinueAsNew
}

// ContinueAsNew is a workflow's request to start over with a fresh journal (003 §6).
type ContinueAsNew struct {
	// Input is the next run's input (a JSON object).
	Input any
}

// OKResult is the recorded result of a satisfied event wait or a
// successful child invocation: r_wait_event_v1 / r_invoke_v1 give
// struct(ok=True, value=v).
func OKResult(v any) any { return map[string]any{"ok": true, "value": v} }

// ErrorResult is the recorded result of a timed-out event wait or a failed
// child invocation: struct(ok=False, error=<envelope of e>).
func ErrorResult(e *Error) any { return map[string]any{"ok": false, "error": envelopeMap(e)} }

// RunWorkflow runs req.Program's main(ctx, input) as a workflow against
// req.Journal (see the package comment of this file for the replay
// semantics). Limits, panics and errors are as for Run.
//
// Outcomes:
//   - the workflow finished: Output is set, Park is nil, the error is nil;
//   - the workflow must wait: Park is set, the error is nil;
//   - the workflow failed: the error is set (as Run's), and the
//     compensate_fn of every completed r_step_v1 step (this run and
//     earlier ones; functions looked up by step name among the current
//     program's r_step_v1 registrations) has been called as
//     compensate_fn(ctx, step_input, step_output), in reverse completion
//     order, each on a fresh thread with the execution's limits and a
//     shared deadline of Limits.Timeout (not bounded by ctx's
//     cancellation, so that a canceled workflow is still compensated).
//     Compensations are not journaled: they run once, at the end; their
//     outcomes are in Compensations. A non-deterministic workflow
//     (divergence from the journal, or a malformed journal) is not
//     compensated: the program is not the one that ran.
//
// New is returned in every case. A step attempt runs at most once per run
// and is recorded when it completes; a failed attempt is retried per
// StepRetry, each retry a durable timer entry; once retries are over, the
// step's error is returned (or ends the workflow with exit_on_error). A step interrupted
// by the execution's end (timeout, limit, crash) is not recorded and runs
// again on the next run (at-least-once side effects).
func RunWorkflow(ctx context.Context, req WorkflowRequest) (out WorkflowResult, rerr *Error) {
	onSchedulerThreads(req.CPU, func() { out, rerr = runWorkflow(ctx, req) })
	return out, rerr
}

// runWorkflow is RunWorkflow where onSchedulerThreads runs it: the program, its live waits and
// its compensations all run there.
func runWorkflow(ctx context.Context, req WorkflowRequest) (out WorkflowResult, rerr *Error) {
	for i, e := range req.Journal {
		if e.Seq != i {
			return out, newError(ErrValidation, CategoryNonRetryable, "journal entry %d has seq %d", i, e.Seq)
		}
	}
	now := req.Now
	if now.IsZero() && req.Host != nil {
		now = req.Host.Now()
	}
	w := &workflowState{journal: req.Journal, now: now, steps: map[string]*workflowStep{}, retry: req.StepRetry, onRecord: req.Record,
		checkFilter: req.CheckFilter, stepStarted: req.StepStarted, host: req.Host, cancelAtEnd: req.CancelAtEnd, wait: req.Wait}
	res, rerr := runProgram(ctx, req.Request, w)
	out.Result = res
	out.Exited = rerr != nil && w.exited
	out.New = w.newEntries
	out.StepRetries = w.retries
	out.Persisted = w.persisted
	out.Completed = w.completed()
	if w.park != nil {
		out.Park = w.park
		out.Output = nil
		return out, nil
	}
	if w.continued != nil {
		out.ContinueAsNew = w.continued
		out.Output = nil
		return out, nil
	}
	if rerr == nil || w.divergent || (req.Compensate != nil && !req.Compensate(rerr, out.Exited)) {
		return out, rerr
	}
	limits, lerr := normalizeLimits(req.Limits)
	if lerr != nil || req.Program == nil || req.Host == nil {
		return out, rerr
	}
	out.Compensations = w.compensate(ctx, req.Request, limits, out.Completed, &out.Result, req.OnCompensation)
	return out, rerr
}

// CompileWorkflow is Compile for workflows: the workflow helpers are
// predeclared too.
func CompileWorkflow(filename, src string) (*Program, error) {
	return compile(filename, src, workflowPredeclared().Has)
}

// workflowHelperImpls replace or add helpers in workflow executions.
var workflowHelperImpls = map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
	"r_now_v1":             wfNow,
	"r_rand_v1":            wfRand,
	"r_sleep":              wfSleep,
	"r_sleep_v1":           wfSleep,
	"r_wait_event_v1":      wfWaitEvent,
	"r_invoke_v1":          wfInvoke,
	"r_snapshot_v1":        wfSnapshot,
	"r_continue_as_new_v1": wfContinueAsNew,
	"r_step_v1":            wfStep,
	"r_run_step_v1":        wfRunStep,
	"r_http_get_v1":        wfHTTP,
	"r_http_post_v1":       wfHTTP,
	"r_emit_v1":            wfEmit,
}

// workflowPredeclared is the environment of workflow executions.
var workflowPredeclared = sync.OnceValue(func() starlark.StringDict {
	d := maps.Clone(predeclared())
	for name, fn := range workflowHelperImpls {
		d[name] = starlark.NewBuiltin(name, fn)
	}
	return d
})

// errPark unwinds the program when the workflow parks.
var errPark = errors.New("the workflow is suspended")

// errContinue unwinds the program when it calls r_continue_as_new_v1.
var errContinue = errors.New("the workflow continues as new")

// workflowState is the journal state of one workflow execution.
type workflowState struct {
	journal    []JournalEntry
	now        time.Time
	next       int // the next journal position
	newEntries []JournalEntry
	park       *Park
	continued  *ContinueAsNew           // set by r_continue_as_new_v1
	steps      map[string]*workflowStep // r_step_v1 registrations by name
	// depth counts the step functions running; compensating marks the
	// executions of compensations. In both, helpers run live (as in
	// functions) and are not journaled.
	depth        int
	compensating bool
	divergent    bool // the journal did not match the program
	retry        StepRetry
	retries      []StepRetryRecord
	onRecord     func(JournalEntry, []StepRetryRecord) error
	reported     int // retries handed to onRecord
	checkFilter  func(string) error
	stepStarted  func(string, int)
	cancelAtEnd  bool
	exited       bool // the run ended with r_exit at the workflow's level (see WorkflowResult.Exited)
	wait         func(*Park) (Resolution, bool)
	persisted    int // entries onRecord accepted
	host         Host
}

func (w *workflowState) live() bool { return w.depth > 0 || w.compensating }

// StepRetryHelper is the Helper of the journal entry of a scheduled step retry: a timer (Until is
// when the next attempt may start) recorded at the position the step's outcome would have taken;
// the outcome follows the step's last retry entry. Its Key and ArgsHash are the step's.
const StepRetryHelper = "step_retry"

// nextHelper is the Helper of the journal entry at the next position ("" beyond the journal).
func (w *workflowState) nextHelper() string {
	if w.next < len(w.journal) {
		return w.journal[w.next].Helper
	}
	return ""
}

// clock is the current time for new timers that must be relative to real time (step retry
// backoff): the host's clock, else the run's Now.
func (w *workflowState) clock() time.Time {
	if w.host != nil {
		return w.host.Now()
	}
	return w.now
}

// argsHash returns the hex SHA-256 of the canonical JSON of args
// (encoding/json sorts map keys).
func argsHash(args any) (string, error) {
	data, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

func describeCall(helper, key string) string {
	if key != "" {
		return fmt.Sprintf("%s(%q)", helper, key)
	}
	return helper
}

// lookup takes the next journal position for a call and returns the
// journal's entry there (nil if the journal ends before it), or ends the
// execution with a non-deterministic workflow error.
func (w *workflowState) lookup(thread *starlark.Thread, helper, key string, args any) (int, string, *JournalEntry, error) {
	hash, err := argsHash(args)
	if err != nil {
		return 0, "", nil, errorf(helper, "arguments: %v", err)
	}
	seq := w.next
	w.next++
	if seq >= len(w.journal) {
		if w.cancelAtEnd {
			return 0, "", nil, w.canceled(thread)
		}
		return seq, hash, nil, nil
	}
	e := &w.journal[seq]
	if e.Helper != helper || e.Key != key || e.ArgsHash != hash {
		called := describeCall(helper, key)
		if e.Helper == helper && e.Key == key {
			called += " with different arguments"
		}
		pos := callerPosition(thread)
		return 0, "", nil, w.fail(thread, fmt.Sprintf("non-deterministic workflow: at line %d the journal has %s but the program called %s",
			pos.Line, describeCall(e.Helper, e.Key), called), seq)
	}
	return seq, hash, e, nil
}

// fail ends the execution with a non-retryable error that skips compensations.
func (w *workflowState) fail(thread *starlark.Thread, msg string, seq int) error {
	e := newError(ErrRuntime, CategoryNonRetryable, "%s", msg).withDetail("seq", seq)
	if pos := callerPosition(thread); pos.Line > 0 {
		e.withDetail("line", int(pos.Line)).withDetail("column", int(pos.Col))
	}
	w.divergent = true
	runOf(thread).exit = e
	return errExit
}

// corrupt ends the execution because of a malformed journal entry.
func (w *workflowState) corrupt(thread *starlark.Thread, e *JournalEntry, what string) error {
	return w.fail(thread, fmt.Sprintf("malformed journal: entry %d (%s) %s", e.Seq, describeCall(e.Helper, e.Key), what), e.Seq)
}

// record appends an entry and, when the caller asked for it, makes it durable at once through
// WorkflowRequest.Record — before the program sees the result, so that a crash repeats at most the
// step in flight. A failing Record ends the run: with its error if that is an *Error (a journal
// limit, say), else with a retryable runtime error.
func (w *workflowState) record(thread *starlark.Thread, e JournalEntry) error {
	w.newEntries = append(w.newEntries, e)
	if w.onRecord == nil {
		return nil
	}
	retries := w.retries[w.reported:]
	w.reported = len(w.retries)
	var err error
	berr := runOf(thread).blocking(func() { err = w.onRecord(e, retries) }) // a write: no CPU held
	if err != nil {
		w.newEntries = w.newEntries[:len(w.newEntries)-1]
		var se *Error
		if errors.As(err, &se) {
			return exitWith(thread, se)
		}
		return fmt.Errorf("journal: %w", err)
	}
	w.persisted = len(w.newEntries)
	return berr
}

// parkOn waits for p: live, through WorkflowRequest.Wait, returning the entry now Done; or by
// ending the execution with p (in a CancelAtEnd run, with the canceled error).
func (w *workflowState) parkOn(thread *starlark.Thread, p *Park) (*JournalEntry, error) {
	if w.cancelAtEnd {
		return nil, w.canceled(thread)
	}
	if w.wait != nil {
		if r := runOf(thread); r.pauseLimits() {
			var res Resolution
			var ok bool
			berr := r.blocking(func() { res, ok = w.wait(p) })
			r.renewLimits()
			if berr != nil {
				return nil, berr
			}
			if ok {
				e := w.entry(p.Seq)
				e.Done, e.Result = true, res.Result
				if !res.Now.IsZero() {
					w.now = res.Now
				}
				return e, nil
			}
		}
	}
	w.park = p
	return nil, errPark
}

// entry is the journal entry at seq, recorded by an earlier run or this one.
func (w *workflowState) entry(seq int) *JournalEntry {
	if seq < len(w.journal) {
		return &w.journal[seq]
	}
	return &w.newEntries[seq-len(w.journal)]
}

// canceled ends a CancelAtEnd run where the program goes beyond its journal.
func (w *workflowState) canceled(thread *starlark.Thread) error {
	runOf(thread).exit = newError(ErrCanceled, CategoryCanceled, "the workflow was canceled")
	return errExit
}

// exitWith ends the execution like r_exit with e.
func exitWith(thread *starlark.Thread, e *Error) error {
	e = e.clone()
	if pos := callerPosition(thread); pos.Line > 0 {
		if _, ok := e.Details["line"]; !ok {
			e.withDetail("line", int(pos.Line)).withDetail("column", int(pos.Col))
		}
	}
	runOf(thread).exit = e
	return errExit
}

// workflowOnlyArgs is the prologue of the builtins that exist only in workflows: the run's
// workflow state (an error inside a step function or a compensation) and the bound arguments.
func workflowOnlyArgs(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (*workflowState, []starlark.Value, error) {
	w := runOf(thread).wf
	if w.live() {
		return nil, nil, notInLive(b.Name())
	}
	vals, err := bindArgs(b.Name(), args, kwargs)
	return w, vals, err
}

// notInLive is the error of a workflow-only helper called in a step
// function or a compensation.
func notInLive(name string) error {
	return errorf(name, "cannot be called inside a step function or a compensation")
}

// resolvedPromise is a promise whose value is known (workflow helpers
// return promises, as in the spec, that r_await resolves at once).
func resolvedPromise(helper string, v starlark.Value) *Promise {
	done := make(chan struct{})
	close(done)
	return &Promise{helper: helper, done: done, outcome: &outcome{}, awaited: true, value: v}
}

// wfNow implements r_now_v1 in workflows: recorded once, then replayed.
func wfNow(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	w := runOf(thread).wf
	if w.live() {
		return rNow(thread, b, args, kwargs)
	}
	if _, err := bindArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	seq, hash, e, err := w.lookup(thread, b.Name(), "", map[string]any{})
	if err != nil {
		return nil, err
	}
	if e != nil {
		s, ok := e.Result.(string)
		if !e.Done || !ok {
			return nil, w.corrupt(thread, e, "has no recorded time")
		}
		return starlark.String(s), nil
	}
	v, err := rNow(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	if err := w.record(thread, JournalEntry{Seq: seq, Helper: b.Name(), ArgsHash: hash, Result: string(v.(starlark.String)), Done: true}); err != nil {
		return nil, err
	}
	return v, nil
}

// wfRand implements r_rand_v1 in workflows: recorded once, then replayed.
func wfRand(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	w := runOf(thread).wf
	v, err := rRand(thread, b, args, kwargs) // validates the arguments
	if err != nil || w.live() {
		return v, err
	}
	vals, _ := bindArgs(b.Name(), args, kwargs)
	var label any
	if given(vals[0]) {
		label = string(vals[0].(starlark.String))
	}
	seq, hash, e, err := w.lookup(thread, b.Name(), "", map[string]any{"label": label})
	if err != nil {
		return nil, err
	}
	if e != nil {
		s, ok := e.Result.(string)
		if !e.Done || !ok {
			return nil, w.corrupt(thread, e, "has no recorded value")
		}
		return starlark.String(s), nil
	}
	if err := w.record(thread, JournalEntry{Seq: seq, Helper: b.Name(), ArgsHash: hash, Result: string(v.(starlark.String)), Done: true}); err != nil {
		return nil, err
	}
	return v, nil
}

// wfSleep implements r_sleep(milliseconds) and r_sleep_v1: a durable
// timer. The first call records a pending entry due at Now+milliseconds
// and parks; once the caller has marked it Done, it returns a promise of
// None. A non-positive duration is recorded Done at once.
func wfSleep(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	name := b.Name()
	w, vals, err := workflowOnlyArgs(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	var ms int64
	if err := starlark.AsInt(vals[0], &ms); err != nil {
		return nil, errorf(name, "milliseconds: %v", err)
	}
	seq, hash, e, err := w.lookup(thread, name, "", map[string]any{"ms": ms})
	if err != nil {
		return nil, err
	}
	switch {
	case e != nil && e.Done:
	case e != nil:
		if _, err := w.parkOn(thread, &Park{Kind: "timer", Until: e.Until, Seq: seq}); err != nil {
			return nil, err
		}
	case ms <= 0:
		if err := w.record(thread, JournalEntry{Seq: seq, Helper: name, ArgsHash: hash, Until: w.now, Done: true}); err != nil {
			return nil, err
		}
	default:
		until := w.now.Add(msDuration(ms))
		if err := w.record(thread, JournalEntry{Seq: seq, Helper: name, ArgsHash: hash, Until: until}); err != nil {
			return nil, err
		}
		if _, err := w.parkOn(thread, &Park{Kind: "timer", Until: until, Seq: seq}); err != nil {
			return nil, err
		}
	}
	return resolvedPromise(name, starlark.None), nil
}

func msDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		ms = math.MaxInt64 / int64(time.Millisecond)
	}
	return time.Duration(ms) * time.Millisecond
}

// wfWaitEvent implements r_wait_event_v1(event_type_id,
// event_filter_query=None, timeout_ms=None, exit_on_error=True): a pending
// entry and an event park; once Done, a promise of struct(ok, value|error).
// With exit_on_error, a recorded error (the timeout) ends the workflow at
// the call, like r_exit.
func wfWaitEvent(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	name := b.Name()
	w, vals, err := workflowOnlyArgs(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	typeID, ok := vals[0].(starlark.String)
	if !ok || typeID == "" {
		return nil, errorf(name, "event_type_id must be a non-empty string, not %s", vals[0].Type())
	}
	var filter string
	if given(vals[1]) {
		s, ok := vals[1].(starlark.String)
		if !ok {
			return nil, errorf(name, "event_filter_query must be a string or None, not %s", vals[1].Type())
		}
		filter = string(s)
		if w.checkFilter != nil && filter != "" {
			if err := w.checkFilter(filter); err != nil {
				return nil, errorf(name, "event_filter_query: %v", err)
			}
		}
	}
	var timeoutMS any
	var timeout time.Duration
	if given(vals[2]) {
		if timeout, err = helperTimeout(name, vals[2]); err != nil {
			return nil, err
		}
		timeoutMS = timeout.Milliseconds()
	}
	exitOnError, err := boolArg(name, "exit_on_error", vals[3])
	if err != nil {
		return nil, err
	}
	seq, hash, e, err := w.lookup(thread, name, "", map[string]any{"event_type_id": string(typeID), "filter": filter, "timeout_ms": timeoutMS})
	if err != nil {
		return nil, err
	}
	park := &Park{Kind: "event", EventTypeID: string(typeID), Filter: filter, Seq: seq}
	switch {
	case e != nil && e.Done:
		return recordedPromise(thread, w, name, e, exitOnError)
	case e != nil:
		if !e.Until.IsZero() {
			t := e.Until
			park.TimeoutAt = &t
		}
	default:
		ne := JournalEntry{Seq: seq, Helper: name, ArgsHash: hash}
		if timeout > 0 {
			t := w.now.Add(timeout)
			ne.Until, park.TimeoutAt = t, &t
		}
		if err := w.record(thread, ne); err != nil {
			return nil, err
		}
	}
	done, err := w.parkOn(thread, park)
	if err != nil {
		return nil, err
	}
	return recordedPromise(thread, w, name, done, exitOnError)
}

// wfInvoke implements r_invoke_v1 in workflows: a pending entry and a
// child park; once Done, a promise of struct(ok, value|error). Inside a
// step function or a compensation it is the function helper (a live
// call). timeout_ms is checked but left to the caller's child invocation.
func wfInvoke(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	name := b.Name()
	w := runOf(thread).wf
	if w.live() {
		return rInvoke(thread, b, args, kwargs)
	}
	vals, err := bindArgs(name, args, kwargs)
	if err != nil {
		return nil, err
	}
	id, ok := vals[0].(starlark.String)
	if !ok || id == "" {
		return nil, errorf(name, "entrypoint_id must be a non-empty string, not %s", vals[0].Type())
	}
	var params any = map[string]any{}
	if vals[1] != nil {
		if params, err = toGo(thread, vals[1], name+" params"); err != nil {
			if isLimitError(err) {
				return nil, err
			}
			return nil, errorf(name, "params: %v", err)
		}
	}
	if _, err := helperTimeout(name, vals[2]); err != nil {
		return nil, err
	}
	seq, hash, e, err := w.lookup(thread, name, "", map[string]any{"entrypoint_id": string(id), "params": params})
	if err != nil {
		return nil, err
	}
	if e != nil && e.Done {
		return recordedPromise(thread, w, name, e, false)
	}
	if e == nil {
		if err := w.record(thread, JournalEntry{Seq: seq, Helper: name, ArgsHash: hash}); err != nil {
			return nil, err
		}
	}
	done, err := w.parkOn(thread, &Park{Kind: "child", ChildEntrypointID: string(id), ChildParams: params, Seq: seq})
	if err != nil {
		return nil, err
	}
	return recordedPromise(thread, w, name, done, false)
}

// wfSnapshot implements r_snapshot_v1(label=None): a Done entry whose
// Result is the label; the caller decides what to persist.
func wfSnapshot(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	name := b.Name()
	w, vals, err := workflowOnlyArgs(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	var label any
	if given(vals[0]) {
		s, ok := vals[0].(starlark.String)
		if !ok {
			return nil, errorf(name, "label must be a string or None, not %s", vals[0].Type())
		}
		label = string(s)
	}
	seq, hash, e, err := w.lookup(thread, name, "", map[string]any{"label": label})
	if err != nil {
		return nil, err
	}
	if e == nil {
		if err := w.record(thread, JournalEntry{Seq: seq, Helper: name, ArgsHash: hash, Result: label, Done: true}); err != nil {
			return nil, err
		}
	}
	return starlark.None, nil
}

// wfContinueAsNew implements r_continue_as_new_v1(input=None) (003 §6): it ends this journal and
// asks the caller to run main(ctx, input) again with an empty one, in the same invocation. input
// must be a dict (None: {}). In a CancelAtEnd run the program stops here, canceled.
func wfContinueAsNew(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	name := b.Name()
	w, vals, err := workflowOnlyArgs(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	var input any = map[string]any{}
	if given(vals[0]) {
		if _, ok := vals[0].(*starlark.Dict); !ok {
			return nil, errorf(name, "input must be a dict or None, not %s", vals[0].Type())
		}
		if input, err = toGo(thread, vals[0], name+" input"); err != nil {
			if isLimitError(err) {
				return nil, err
			}
			return nil, errorf(name, "input: %v", err)
		}
	}
	if w.cancelAtEnd {
		return nil, w.canceled(thread)
	}
	w.continued = &ContinueAsNew{Input: input}
	return nil, errContinue
}

// wfHTTP implements the HTTP helpers in workflows: live inside step
// functions and compensations; rejected elsewhere, where their result
// would not be journaled.
func wfHTTP(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if runOf(thread).wf.live() {
		return rHTTP(thread, b, args, kwargs)
	}
	return nil, errorf(b.Name(), "in a workflow, call HTTP helpers inside a step (r_run_step_v1 or r_step_v1) so that their result is journaled")
}

func boolArg(name, param string, v starlark.Value) (bool, error) {
	if !given(v) {
		return true, nil
	}
	b, ok := v.(starlark.Bool)
	if !ok {
		return false, errorf(name, "%s must be a bool, not %s", param, v.Type())
	}
	return bool(b), nil
}

// recordedPromise returns a promise of the struct(ok, value|error) of a
// Done entry, or ends the workflow if it is an error and exitOnError.
func recordedPromise(thread *starlark.Thread, w *workflowState, name string, e *JournalEntry, exitOnError bool) (starlark.Value, error) {
	v, env, err := recordedValue(thread, w, e)
	if err != nil {
		return nil, err
	}
	if env != nil && exitOnError {
		return nil, exitWith(thread, env)
	}
	return resolvedPromise(name, v), nil
}

// recordedValue converts a recorded {"ok", "value"|"error"} result to
// struct(ok, value|error); env is the error when not ok.
func recordedValue(thread *starlark.Thread, w *workflowState, e *JournalEntry) (starlark.Value, *Error, error) {
	m, ok := e.Result.(map[string]any)
	okv, isBool := m["ok"].(bool)
	if !ok || !isBool {
		return nil, nil, w.corrupt(thread, e, `has no {"ok": ...} result`)
	}
	if okv {
		v, err := toStarlark(thread, m["value"])
		if err != nil {
			return nil, nil, err
		}
		s, err := makeStruct(thread, "ok", starlark.True, "value", v)
		return s, nil, err
	}
	env := errorFromRecord(m["error"])
	ev, err := envelopeValue(thread, env)
	if err != nil {
		return nil, nil, err
	}
	s, err := makeStruct(thread, "ok", starlark.False, "error", ev)
	return s, env, err
}

// envelopeMap is e as a JSON-ready error envelope.
func envelopeMap(e *Error) map[string]any {
	m := map[string]any{"id": e.TypeID, "message": e.Message, "category": e.Category}
	if e.Details != nil {
		m["details"] = e.Details
	}
	return m
}

// errorFromRecord converts a recorded error envelope (an *Error or a map).
func errorFromRecord(v any) *Error {
	switch v := v.(type) {
	case *Error:
		if v != nil {
			return v.clone()
		}
	case map[string]any:
		e := &Error{TypeID: ErrRuntime, Category: CategoryNonRetryable}
		if s, ok := v["id"].(string); ok && s != "" {
			e.TypeID = s
		}
		if s, ok := v["category"].(string); ok && validCategory(s) {
			e.Category = s
		}
		if s, ok := v["message"].(string); ok {
			e.Message = truncate(s, maxMessageBytes)
		}
		if d, ok := v["details"].(map[string]any); ok {
			e.Details = maps.Clone(d)
		}
		return e
	}
	return newError(ErrRuntime, CategoryNonRetryable, "the call failed without an error envelope")
}

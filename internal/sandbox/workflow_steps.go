package sandbox

import (
	"context"
	"fmt"
	"github.com/larkrun/lark/internal/invocation"
	"time"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
)

// workflowStep is the callable step object returned by r_step_v1(name, fn,
// compensate_fn=None). Calling it as step(input, exit_on_error=True) runs
// like r_run_step_v1(name, fn, input, exit_on_error), journaled as helper
// "r_step_v1", and makes compensate_fn eligible for compensation.
type workflowStep struct {
	name string
	fn   starlark.Callable
	comp starlark.Callable // nil if none
}

var _ starlark.Callable = (*workflowStep)(nil)

func (s *workflowStep) Name() string          { return s.name }
func (s *workflowStep) String() string        { return fmt.Sprintf("<step %q>", s.name) }
func (s *workflowStep) Type() string          { return "step" }
func (s *workflowStep) Freeze()               {}
func (s *workflowStep) Truth() starlark.Bool  { return true }
func (s *workflowStep) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: step") }

// CallInternal runs the step.
func (s *workflowStep) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var input starlark.Value
	var exit starlark.Value = starlark.None
	if err := starlark.UnpackArgs(s.String(), args, kwargs, "input", &input, "exit_on_error?", &exit); err != nil {
		return nil, err
	}
	exitOnError, err := boolArg(s.String(), "exit_on_error", exit)
	if err != nil {
		return nil, err
	}
	return runStep(thread, "r_step_v1", s.name, s.fn, input, exitOnError)
}

// stepArgs binds the arguments of r_step_v1 and r_run_step_v1 and checks the two they share: a
// non-empty step name (parameter nameParam) and a callable fn.
func stepArgs(b *starlark.Builtin, nameParam string, args starlark.Tuple, kwargs []starlark.Tuple) ([]starlark.Value, string, starlark.Callable, error) {
	name := b.Name()
	vals, err := bindArgs(name, args, kwargs)
	if err != nil {
		return nil, "", nil, err
	}
	stepName, ok := vals[0].(starlark.String)
	if !ok || stepName == "" {
		return nil, "", nil, errorf(name, "%s must be a non-empty string, not %s", nameParam, vals[0].Type())
	}
	fn, ok := vals[1].(starlark.Callable)
	if !ok {
		return nil, "", nil, errorf(name, "fn must be callable, not %s", vals[1].Type())
	}
	return vals, string(stepName), fn, nil
}

// wfStep implements r_step_v1(name, fn, compensate_fn=None): it registers
// the step under its name (a later registration of the same name wins)
// and returns the step object.
func wfStep(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	name := b.Name()
	vals, stepName, fn, err := stepArgs(b, "name", args, kwargs)
	if err != nil {
		return nil, err
	}
	s := &workflowStep{name: stepName, fn: fn}
	if given(vals[2]) {
		var ok bool
		if s.comp, ok = vals[2].(starlark.Callable); !ok {
			return nil, errorf(name, "compensate_fn must be callable or None, not %s", vals[2].Type())
		}
	}
	if w := runOf(thread).wf; !w.compensating {
		w.steps[s.name] = s
	}
	return s, nil
}

// wfRunStep implements r_run_step_v1(step_name, fn, input, exit_on_error=True).
func wfRunStep(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	name := b.Name()
	vals, stepName, fn, err := stepArgs(b, "step_name", args, kwargs)
	if err != nil {
		return nil, err
	}
	exitOnError, err := boolArg(name, "exit_on_error", vals[3])
	if err != nil {
		return nil, err
	}
	if s, ok := fn.(*workflowStep); ok {
		// The ADR's form, r_run_step_v1(name, r_step_v1(name, fn, compensate_fn), input): the step
		// object's fn runs, and its compensate_fn becomes the compensation of the step run here.
		if w := runOf(thread).wf; !w.live() {
			w.steps[stepName] = &workflowStep{name: stepName, fn: s.fn, comp: s.comp}
		}
		fn = s.fn
	}
	return runStep(thread, name, stepName, fn, vals[2], exitOnError)
}

// runStep runs or replays a step: with a Done journal entry at its
// position, it returns the recorded struct(ok, value|error) without
// calling fn; otherwise it calls fn(ctx, input) on the execution's thread
// and records the outcome as a new Done entry. Failures of fn (fail(),
// evaluation errors, a result that does not convert to JSON) are recorded
// as the step's error, and so is an r_exit inside fn (it fails the attempt,
// not the workflow); the end of the execution (limits, timeout,
// cancellation) is not recorded, and propagates. A recorded error ends the
// workflow if exitOnError.
func runStep(thread *starlark.Thread, helper, stepName string, fn starlark.Callable, input starlark.Value, exitOnError bool) (starlark.Value, error) {
	r := runOf(thread)
	w := r.wf
	if w.live() {
		return nil, notInLive(helper)
	}
	in, err := toGo(thread, input, fmt.Sprintf("the input of step %q", stepName))
	if err != nil {
		if isLimitError(err) {
			return nil, err
		}
		return nil, errorf(helper, "step %q: input: %v", stepName, err)
	}
	args := map[string]any{"name": stepName, "input": in}
	// Retries already scheduled for this call come first in the journal: each is a timer entry
	// (StepRetryHelper) at its own position, and the step's outcome follows the last one.
	attempt := 1
	for w.nextHelper() == StepRetryHelper {
		seq, _, e, err := w.lookup(thread, StepRetryHelper, stepName, args)
		if err != nil {
			return nil, err
		}
		if !e.Done {
			if _, err := w.parkOn(thread, &Park{Kind: "retry", Until: e.Until, Seq: seq}); err != nil {
				return nil, err
			}
		}
		attempt++
	}
	seq, hash, e, err := w.lookup(thread, helper, stepName, args)
	if err != nil {
		return nil, err
	}
	if e == nil {
		var res any
		var emits []Emit
		for ; ; attempt++ {
			if w.stepStarted != nil {
				w.stepStarted(stepName, attempt)
			}
			res, emits, err = callStep(thread, r, stepName, fn, input, attempt)
			if err != nil {
				return nil, err
			}
			se := stepError(res)
			delay, again := w.retryAfter(attempt, se)
			if !again {
				break
			}
			// The retry is durable: a timer entry takes this position (the step's outcome moves to the
			// next one) and the workflow parks until it is due, holding nothing while it waits (or
			// waits live, see WorkflowRequest.Wait). A crash or restart resumes at the same attempt.
			w.retries = append(w.retries, StepRetryRecord{Step: stepName, Attempt: attempt, Error: se, Delay: delay})
			due := w.clock().Add(delay)
			re := JournalEntry{Seq: seq, Helper: StepRetryHelper, Key: stepName, ArgsHash: hash, Until: due, Done: delay <= 0}
			if err := w.record(thread, re); err != nil {
				return nil, err
			}
			if !re.Done {
				if _, err := w.parkOn(thread, &Park{Kind: "retry", Until: due, Seq: seq}); err != nil {
					return nil, err
				}
			}
			seq = w.next
			w.next++
		}
		if err := w.record(thread, JournalEntry{Seq: seq, Helper: helper, Key: stepName, ArgsHash: hash, Input: in, Result: res, Done: true, Emits: emits}); err != nil {
			return nil, err
		}
		e = &w.newEntries[len(w.newEntries)-1]
	} else if !e.Done {
		return nil, w.corrupt(thread, e, "is pending")
	}
	v, env, err := recordedValue(thread, w, e)
	if err != nil {
		return nil, err
	}
	if env != nil && exitOnError {
		return nil, exitWith(thread, env)
	}
	return v, nil
}

// stepError returns the error of a recorded step result, or nil when it succeeded.
func stepError(res any) *Error {
	m, ok := res.(map[string]any)
	if !ok || m["ok"] == true {
		return nil
	}
	env, _ := m["error"].(map[string]any)
	e := &Error{}
	e.TypeID, _ = env["id"].(string)
	e.Category, _ = env["category"].(string)
	e.Message, _ = env["message"].(string)
	return e
}

// retryAfter asks the step retry policy about a failed attempt.
func (w *workflowState) retryAfter(attempt int, e *Error) (time.Duration, bool) {
	if e == nil || w.retry == nil {
		return 0, false
	}
	return w.retry(attempt, e)
}

// stepID is the step identifier of 003 §1.3's idempotency key: the step's name, qualified by the
// journal generation after a continue-as-new.
func stepID(name string, generation int) string {
	if generation == 0 {
		return name
	}
	return fmt.Sprintf("%s#%d", name, generation)
}

// callStep calls fn(ctx, input) — ctx also carrying the step's name, attempt and 003 §1.3
// idempotency key — and returns its recorded result with the events it emitted (a successful
// attempt's; a failed attempt's are dropped), or the error that ends the execution.
func callStep(thread *starlark.Thread, r *run, stepName string, fn starlark.Callable, input starlark.Value, attempt int) (any, []Emit, error) {
	r.wf.depth++
	mark := r.emits.mark()
	sc := &contextValue{info: r.info, step: stepName, stepAttempt: attempt,
		stepKey: invocation.IdempotencyKey(r.info.InvocationID, stepID(stepName, r.info.Generation), r.info.Attempt, invocation.EventStepCompleted, "")}
	out, err := starlark.Call(thread, fn, starlark.Tuple{sc, input}, nil)
	r.wf.depth--
	if err != nil {
		r.emits.drop(mark) // a failed attempt's events are never published
		if r.stop.Load() != nil || r.ctx.Err() != nil || isAllocError(err) || thread.AllocLimitExceeded() || r.wf.park != nil {
			return nil, nil, err
		}
		if e := r.exit; e != nil {
			// r_exit inside the step function (or an HTTP helper's exit_on_http_error there) fails
			// this attempt with its envelope: the step's retry policy then applies, and the workflow
			// sees the step's error (ending with it when exit_on_error).
			r.exit = nil
			return ErrorResult(e.clone().withDetail("step", stepName)), nil, nil
		}
		return ErrorResult(runtimeError(err).withDetail("step", stepName)), nil, nil
	}
	v, err := toGo(thread, out, fmt.Sprintf("the output of step %q", stepName))
	if err != nil {
		r.emits.drop(mark)
		if isLimitError(err) {
			return nil, nil, err
		}
		return ErrorResult(newError(ErrRuntime, CategoryRetryable,
			"step %q returned a value that cannot be converted to JSON: %v", stepName, err).withDetail("step", stepName)), nil, nil
	}
	return OKResult(v), r.emits.take(mark), nil
}

// completed returns the steps completed successfully, in journal order:
// the journal's then this run's.
func (w *workflowState) completed() []StepRecord {
	var out []StepRecord
	add := func(e *JournalEntry) {
		if !e.Done || (e.Helper != "r_step_v1" && e.Helper != "r_run_step_v1") {
			return
		}
		m, _ := e.Result.(map[string]any)
		if ok, _ := m["ok"].(bool); !ok {
			return
		}
		rec := StepRecord{Seq: e.Seq, Name: e.Key, Input: e.Input, Output: m["value"]}
		if s := w.steps[e.Key]; s != nil && s.comp != nil {
			rec.Compensate = s.comp.Name()
		}
		out = append(out, rec)
	}
	for i := range w.journal {
		add(&w.journal[i])
	}
	for i := range w.newEntries {
		add(&w.newEntries[i])
	}
	return out
}

// compensate calls the compensate_fn of the completed steps that have one,
// in reverse completion order, each on a fresh thread with the
// execution's limits; all of them share one deadline of limits.Timeout,
// which the cancellation of ctx does not shorten. res accumulates their
// steps and peak memory.
func (w *workflowState) compensate(ctx context.Context, req Request, limits Limits, done []StepRecord, res *Result,
	report func(CompensationRecord, bool)) []CompensationRecord {
	if report == nil {
		report = func(CompensationRecord, bool) {}
	}
	var out []CompensationRecord
	cctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), limits.Timeout, errRunTimeout)
	defer cancel()
	for i := len(done) - 1; i >= 0; i-- {
		st := done[i]
		s := w.steps[st.Name]
		if st.Compensate == "" || s == nil || s.comp == nil {
			continue
		}
		rec := CompensationRecord{Step: st.Name, Seq: st.Seq, Fn: st.Compensate, StartedAt: req.Host.Now()}
		report(rec, false)
		rec.Error = runCompensation(cctx, req, limits, s.comp, st, res)
		rec.OK, rec.EndedAt = rec.Error == nil, req.Host.Now()
		report(rec, true)
		out = append(out, rec)
	}
	return out
}

// runCompensation calls comp(ctx, step_input, step_output) on a fresh
// execution; helpers run live in it (workflow-only ones fail).
func runCompensation(ctx context.Context, req Request, limits Limits, comp starlark.Callable, st StepRecord, res *Result) (rerr *Error) {
	runCtx, cancel := context.WithCancel(ctx)
	r := newRun(runCtx, req, limits)
	r.wf = &workflowState{compensating: true}
	stopAfter := context.AfterFunc(runCtx, func() { r.halt(r.ctxError()) })
	defer func() {
		stopAfter()
		cancel()
		r.sched.drain(hostDrainGrace)
		res.Steps += r.thread.ExecutionSteps()
		res.CPUTime = stepsCPUTime(res.Steps)
		res.MaxMemoryBytes = max(res.MaxMemoryBytes, r.thread.PeakAllocBytes())
	}()
	defer func() {
		if p := recover(); p != nil {
			rerr = internalError("recovered panic in a compensation")
		}
	}()
	if runCtx.Err() != nil {
		return r.ctxError()
	}
	in, err := toStarlark(r.thread, st.Input)
	if err != nil {
		return r.failure(err)
	}
	out, err := toStarlark(r.thread, st.Output)
	if err != nil {
		return r.failure(err)
	}
	if !r.acquireCPU() {
		return r.ctxError()
	}
	defer r.releaseCPU()
	if _, err := starlark.Call(r.thread, comp, starlark.Tuple{&contextValue{info: r.info}, in, out}, nil); err != nil {
		return r.failure(err)
	}
	if err := r.sched.settle(); err != nil {
		return r.failure(err)
	}
	return nil
}

// stepsCPUTime is the CPU time estimated from interpreter steps (as Run).
func stepsCPUTime(steps uint64) time.Duration {
	return time.Duration(float64(steps) / StepsPerCPUSecond * float64(time.Second))
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/larkrun/lark/internal/admission"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"
)

// StepsPerCPUSecond converts between the interpreter's abstract steps and
// CPU time. Calibration (BenchmarkStepsPerSecond; go1.26.8, linux/amd64,
// AMD EPYC, one core, allocation accounting on): `while True: pass` runs
// about 96 million steps per second, a loop calling a small function about
// 70 million; the round number for the tight loop is used. The CPU limit
// is a step budget derived from it (see Limits), and Result.CPUTime is an
// estimate derived from it, not a measurement. Recalibrate when the
// interpreter or the hardware changes.
const StepsPerCPUSecond = 100_000_000

// Default and maximum limits.
const (
	DefaultTimeout  = 30 * time.Second
	DefaultCPU      = 1.0
	DefaultMemoryMB = 128
	MinCPU          = 0.1
	MaxCPU          = 1.0
	MaxMemoryMB     = 512
	// DefaultMaxPayloadBytes is the default Limits.MaxPayloadBytes: 2 MiB,
	// as Temporal's payload limit.
	DefaultMaxPayloadBytes = 2 << 20
)

// maxHostCalls bounds the host calls (HTTP, child invocations) one
// execution runs concurrently; further calls queue.
const maxHostCalls = 8

// hostDrainGrace bounds how long Run waits, after it has canceled the
// context of the host calls still in flight, for them to return.
const hostDrainGrace = 2 * time.Second

// Limits are the resource limits of one execution (000's Starlark adapter
// limits). Zero values select the defaults.
//
//   - Timeout is the wall-clock limit (DefaultTimeout if zero). The
//     execution is canceled at the deadline (the earlier of Timeout and
//     the deadline of Run's context) and fails with ErrTimeout.
//   - CPU is the share of one core the execution may use over Timeout,
//     MinCPU..MaxCPU (DefaultCPU if zero). It is enforced as a budget of
//     CPU × Timeout × StepsPerCPUSecond interpreter steps, not by
//     throttling: exceeding it fails the execution with ErrCPULimit.
//   - MemoryMB is the allocation budget in MiB, 1..MaxMemoryMB
//     (DefaultMemoryMB if zero). The patched interpreter charges the
//     approximate size of every string, list, tuple, dict, set, struct,
//     big integer and call frame the execution creates, before creating
//     it; a charge beyond the budget fails the execution with
//     ErrMemoryLimit. Accounting is cumulative (memory is not credited
//     back when it becomes garbage, except call frames when they return):
//     a conservative bound on the live heap, since Go cannot measure the
//     live memory of one goroutine. See third_party/go.starlark.net/PATCHES.md.
//     Converting values to JSON (the result, step outputs, error details,
//     helper arguments) is charged too, as the text they become.
//   - MaxPayloadBytes bounds the JSON encoding of the result, of every
//     step's input and output and of helper arguments (r_http_post_v1
//     bodies, r_invoke_v1 params, r_continue_as_new_v1 input)
//     (DefaultMaxPayloadBytes if zero; negative: no limit). A larger value
//     fails the execution with ErrPayloadTooLarge.
type Limits struct {
	Timeout         time.Duration
	CPU             float64
	MemoryMB        int
	MaxPayloadBytes int64
}

// Info identifies the invocation being executed; main sees it as ctx.
type Info struct {
	InvocationID, TenantID, EntrypointID, CorrelationID string
	Attempt                                             int
	// Generation counts a workflow's r_continue_as_new_v1 calls so far (0 for the first journal);
	// it is part of its steps' idempotency keys, so that a step of the same name in a later
	// generation gets a key of its own.
	Generation int
}

// HTTPRequest is an outbound request made by r_http_get_v1 or
// r_http_post_v1. Timeout is the time left for this attempt (the helper's
// timeout_ms, never beyond the execution's deadline); the context passed
// to Host.HTTP carries the same deadline.
type HTTPRequest struct {
	Method, URL string
	Headers     map[string]string
	Body        []byte
	Timeout     time.Duration
}

// HTTPResponse is the answer to an HTTPRequest, whatever its status.
type HTTPResponse struct {
	StatusCode int
	Headers    map[string]string
	Body       []byte
}

// InvokeRequest is a child invocation made by r_invoke_v1. Params is a
// JSON-ready value (map[string]any, []any, json.Number, string, bool, nil).
type InvokeRequest struct {
	EntrypointID string
	Params       any
	Timeout      time.Duration
}

// InvokeResult is the outcome of a child invocation: its value (a decoded
// JSON value, as Request.Input) if OK, else its error envelope.
type InvokeResult struct {
	OK    bool
	Value any
	Error *Error
}

// Host performs everything with side effects on behalf of an execution:
// egress, child invocations, the timeline and the clock. Run calls HTTP
// and Invoke from other goroutines (at most a few at a time per
// execution), Log and Now from the execution's goroutine; the context
// passed is canceled when the execution ends, times out or is canceled.
type Host interface {
	// HTTP performs an outbound request. A non-nil error is an *Error of
	// type ErrHTTPTransport, or ErrTimeout/ErrCanceled when ctx ends;
	// any other error is treated as a transport failure.
	HTTP(ctx context.Context, req HTTPRequest) (HTTPResponse, error)
	// Invoke runs a child invocation and waits for its outcome. A non-nil
	// error (preferably an *Error) means the child could not be run.
	Invoke(ctx context.Context, req InvokeRequest) (InvokeResult, error)
	// Log records a message of the execution (print, ctx.log).
	Log(ctx context.Context, msg string, fields map[string]any)
	// Now returns the current time (r_now_v1).
	Now() time.Time
}

// Sleeper is implemented by a Host whose time is not the wall clock's: the wait between two
// attempts of an r_http_* call's retry goes through Sleep (lark test moves its fake clock instead
// of waiting). It returns early with ctx's error. A Host without it waits on a real timer.
type Sleeper interface {
	Sleep(ctx context.Context, d time.Duration) error
}

// Request is one execution of a program's main(ctx, input).
type Request struct {
	Program *Program
	// Input is the decoded JSON params: map[string]any, []any,
	// json.Number or float64, string, bool, nil. Objects reach main as
	// Objects, arrays as (frozen) lists, integral numbers as ints.
	Input  any
	Info   Info
	Limits Limits
	Host   Host
	// CPU, if set, shares the CPU between tenants: the execution interprets only while it holds a
	// slot of CPU (for Info.TenantID), yields it every CPUQuantum steps, and gives it back while it
	// waits on the host. Nil runs unscheduled.
	CPU CPUScheduler
	// Gate, if set, admits the execution before it starts (admission: runnable executions per
	// tenant, memory); its timeout and CPU budget start once admitted, and its accounted
	// allocations are reserved as they grow. A ticket the caller took already (admission.Admitted
	// in ctx) is used instead of entering the gate. Nil starts at once.
	Gate *admission.Gate
	// AdmitWithin, if positive, bounds the wait for admission: an execution not admitted in that
	// time ends with ErrTimeout without running (a claimed attempt must start well within its
	// lease, or another node could take it over while it waits).
	AdmitWithin time.Duration
}

// CPUScheduler shares the CPU between executions (package cpushare implements it).
type CPUScheduler interface {
	// Acquire waits for a slot for an execution of tenant (an error: ctx ended, no slot held).
	Acquire(ctx context.Context, tenant string) error
	// Release gives the slot back.
	Release()
	// Yield lets waiting executions run, and returns holding a slot again (an error: ctx ended,
	// no slot held).
	Yield(ctx context.Context, tenant string) error
}

// threadPriority is implemented by a CPU scheduler that lowers the priority of an execution's
// thread (cpushare.Scheduler.LowerPriority). An execution lowers it once it has interpreted a whole
// quantum, at its first yield, and restores it before it gives its slot up: one that ends within
// its first quantum (most sync calls) costs no system call and no wiring to a thread.
type threadPriority interface {
	// Lower wires the calling goroutine to its thread and lowers the thread's priority.
	Lower()
	// Restore undoes Lower.
	Restore()
}

// CPUQuantum is how many interpreter steps an execution runs between yields of its CPU slot:
// about a millisecond of CPU (StepsPerCPUSecond).
const CPUQuantum = StepsPerCPUSecond / 10000

// Result is the outcome of a successful execution; Run also fills the
// measurements of a failed one.
type Result struct {
	// Output is main's return value as a JSON-ready value:
	// map[string]any, []any, json.Number, string, bool or nil.
	Output any
	// Steps is the number of interpreter steps executed (top level and main).
	Steps uint64
	// CPUTime is estimated from Steps and StepsPerCPUSecond, not measured.
	CPUTime time.Duration
	// MaxMemoryBytes is the peak of the accounted allocations (see Limits).
	MaxMemoryBytes int64
	// Duration is the wall-clock time of Run from the execution's admission.
	Duration time.Duration
	// Waited is how long the execution waited to be admitted (Request.Gate).
	Waited time.Duration
	// Emits are the events a function emitted with r_emit_v1, in order (a workflow's go with its
	// journal entries instead: JournalEntry.Emits). Run returns them whatever the outcome: the
	// caller publishes them only with a successful attempt's outcome.
	Emits []Emit
}

// errRunTimeout is the cause of the execution's context at its timeout.
var errRunTimeout = errors.New("execution timed out")

// runContext is an execution's context: canceled with errRunTimeout at its deadline (or when the
// caller's context ends), with a deadline that a live workflow can pause while it waits and renew
// when it resumes (each activation between parks has the whole Limits.Timeout).
type runContext struct {
	context.Context
	cancel   context.CancelCauseFunc
	timeout  time.Duration
	timer    *time.Timer
	parentDL time.Time // the caller's deadline (zero if none)
	deadline atomic.Int64
}

func newRunContext(parent context.Context, timeout time.Duration) *runContext {
	ctx, cancel := context.WithCancelCause(parent)
	c := &runContext{Context: ctx, cancel: cancel, timeout: timeout}
	c.parentDL, _ = parent.Deadline()
	c.deadline.Store(time.Now().Add(timeout).UnixNano())
	c.timer = time.AfterFunc(timeout, func() { cancel(errRunTimeout) })
	return c
}

// Deadline is the earlier of the execution's and the caller's deadline.
func (c *runContext) Deadline() (time.Time, bool) {
	d := time.Unix(0, c.deadline.Load())
	if !c.parentDL.IsZero() && c.parentDL.Before(d) {
		d = c.parentDL
	}
	return d, true
}

// stop ends the context and its timer.
func (c *runContext) stop() {
	c.timer.Stop()
	c.cancel(context.Canceled)
}

// pause stops the deadline; false if it has passed already.
func (c *runContext) pause() bool { return c.timer.Stop() }

// renew starts a fresh deadline of the whole timeout.
func (c *runContext) renew() {
	c.deadline.Store(time.Now().Add(c.timeout).UnixNano())
	c.timer.Reset(c.timeout)
}

// runKey is the thread-local key of the *run.
const runKey = "lark.sandbox.run"

// run is the state of one execution.
type run struct {
	ctx      context.Context // ends at the execution's deadline, cancellation or end
	host     Host
	info     Info
	limits   Limits
	maxSteps uint64
	thread   *starlark.Thread

	// stop is the first asynchronous reason to stop (timeout, cancellation,
	// CPU limit), set before the thread is canceled.
	stop atomic.Pointer[Error]
	// exit is the envelope of r_exit or of a failed HTTP call with
	// exit_on_http_error; set on the execution's goroutine.
	exit *Error

	rand  map[string]int // r_rand_v1 calls per label
	emits emitBuffer     // r_emit_v1
	sched scheduler

	wf *workflowState // non-nil in workflow executions (RunWorkflow)
	// clock is the execution's deadline (nil in compensation executions).
	clock *runContext

	// cpu shares the CPU (nil: unscheduled); holding tells whether this execution holds a slot.
	// stepLimit is the step count at which the CPU budget is spent (the thread's own limit is
	// the next yield, or this).
	cpu     CPUScheduler
	holding bool
	// lowered: the execution's thread runs at the low priority (threadPriority.Lower) until it
	// gives its slot up.
	lowered   bool
	stepLimit uint64
	// ticket is the execution's admission (nil: not admitted through a gate): it stops counting as
	// runnable while the execution waits, and reserves memory as its allocations grow.
	ticket *admission.Ticket
}

// acquireCPU takes a CPU slot before the execution interprets; false if the execution ended
// while it waited.
func (r *run) acquireCPU() bool {
	if r.cpu == nil || r.holding {
		return true
	}
	if err := r.cpu.Acquire(r.ctx, r.info.TenantID); err != nil {
		return false
	}
	r.holding = true
	return true
}

// releaseCPU gives the slot back, before the execution waits or when it ends.
func (r *run) releaseCPU() {
	if r.cpu != nil && r.holding {
		r.holding = false
		r.restorePriority()
		r.cpu.Release()
	}
}

// lowerPriority lowers the thread's priority at the end of the execution's first quantum in a slot.
func (r *run) lowerPriority() {
	if p, ok := r.cpu.(threadPriority); ok && !r.lowered {
		p.Lower()
		r.lowered = true
	}
}

// restorePriority undoes lowerPriority, before the slot is given up.
func (r *run) restorePriority() {
	if p, ok := r.cpu.(threadPriority); ok && r.lowered {
		p.Restore()
		r.lowered = false
	}
}

// blocking runs wait (which blocks on the host or another goroutine) without holding a CPU slot,
// and takes one again afterwards; the error is the execution's end if it ended meanwhile.
func (r *run) blocking(wait func()) error {
	r.ticket.Block()
	defer r.ticket.Unblock()
	if r.cpu == nil || !r.holding {
		wait()
		return nil
	}
	r.releaseCPU()
	wait()
	if !r.acquireCPU() {
		return fmt.Errorf("waiting for CPU: %w", r.ctx.Err())
	}
	return nil
}

// onSteps is the thread's OnMaxSteps: at the end of the CPU budget it stops the execution;
// before it, at the end of a quantum, it yields the CPU slot.
func (r *run) onSteps(thread *starlark.Thread) {
	if thread.ExecutionSteps() >= r.stepLimit {
		r.halt(r.cpuError())
		return
	}
	if r.cpu != nil && r.holding {
		r.lowerPriority()
		if err := r.cpu.Yield(r.ctx, r.info.TenantID); err != nil {
			r.holding = false
			r.restorePriority()
			r.halt(r.ctxError())
			return
		}
	}
	if !r.reserveMemory() {
		return
	}
	r.setStepLimit(r.stepLimit)
}

// reserveMemory grows the execution's memory reservation to its accounted allocations, waiting
// without its CPU slot when the gate's budgets are spent; false if the execution ended meanwhile
// (it is halted).
func (r *run) reserveMemory() bool {
	total := r.thread.AllocBytes()
	if r.ticket.TryGrow(total) {
		return true
	}
	var gerr error
	if err := r.blocking(func() { gerr = r.ticket.Grow(r.ctx, total) }); err != nil || gerr != nil {
		r.halt(r.ctxError())
		return false
	}
	return true
}

// setStepLimit sets the CPU budget's end and arms the thread for the next yield (every CPUQuantum
// steps when scheduled).
func (r *run) setStepLimit(limit uint64) {
	r.stepLimit = limit
	next := limit
	if r.cpu != nil {
		next = min(limit, r.thread.ExecutionSteps()+CPUQuantum)
	}
	r.thread.SetMaxExecutionSteps(next)
}

// pauseLimits stops the execution's deadline while a live workflow waits; false if the deadline
// has passed already (the execution is ending).
func (r *run) pauseLimits() bool { return r.clock != nil && r.clock.pause() }

// renewLimits gives a live workflow resuming after a wait a fresh deadline and CPU budget, as a
// replay would have.
func (r *run) renewLimits() {
	r.clock.renew()
	r.setStepLimit(r.thread.ExecutionSteps() + r.maxSteps)
}

// runOf returns the execution a thread belongs to.
func runOf(thread *starlark.Thread) *run {
	return thread.Local(runKey).(*run)
}

// Run executes req.Program's main(ctx, input) within req.Limits and
// returns its output, or a typed error: ErrValidation (bad request or
// input), ErrTimeout, ErrCanceled (ctx canceled by the caller),
// ErrCPULimit, ErrMemoryLimit, ErrRuntime (fail(), evaluation errors, a
// main result that does not convert to JSON, recovered panics), or the
// envelope given to r_exit (ErrHTTP/ErrHTTPTransport for failed HTTP
// calls with exit_on_http_error). Run never panics; when it returns, the
// context of every host call it made has been canceled.
func Run(ctx context.Context, req Request) (res Result, rerr *Error) {
	onSchedulerThreads(req.CPU, func() { res, rerr = runProgram(ctx, req, nil) })
	return res, rerr
}

// ownThreads is implemented by a CPU scheduler whose executions must run on threads of its own
// (cpushare in its one-way mode: a thread whose priority it lowered cannot be restored, so only its
// own low-priority workers interpret).
type ownThreads interface {
	OwnThreads() bool
	// Do runs f on one of the scheduler's threads and waits for it; a panic in f is the caller's.
	Do(f func())
}

// onSchedulerThreads runs f through cpu's Do when cpu asks for threads of its own, and on the caller's
// goroutine otherwise.
func onSchedulerThreads(cpu CPUScheduler, f func()) {
	if o, ok := cpu.(ownThreads); ok && o.OwnThreads() {
		o.Do(f)
		return
	}
	f()
}

// runProgram is Run; wf, if not nil, makes the execution a workflow
// execution (RunWorkflow): the workflow helpers are predeclared and
// journaled through wf.
func runProgram(ctx context.Context, req Request, wf *workflowState) (res Result, rerr *Error) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	limits, err := normalizeLimits(req.Limits)
	if err != nil {
		return res, err
	}
	if req.Program == nil {
		return res, newError(ErrValidation, CategoryNonRetryable, "no program")
	}
	if req.Host == nil {
		return res, newError(ErrValidation, CategoryNonRetryable, "no host")
	}

	ticket, own, rerr := admit(ctx, req, limits)
	if rerr != nil {
		return res, rerr
	}
	if own {
		defer ticket.Leave()
	}
	res.Waited = ticket.Waited()
	start = time.Now() // the timeout, the CPU budget and the duration start once admitted
	runCtx := newRunContext(admission.Inside(ctx), limits.Timeout)
	defer runCtx.stop()
	r := newRun(runCtx, req, limits)
	r.ticket = ticket
	r.wf = wf
	r.clock = runCtx
	thread := r.thread

	stopAfter := context.AfterFunc(runCtx, func() { r.halt(r.ctxError()) })
	out, rerr := r.execute(req.Program, req.Input)
	stopAfter()
	runCtx.stop()
	r.sched.drain(hostDrainGrace)

	res.Steps = thread.ExecutionSteps()
	res.CPUTime = time.Duration(float64(res.Steps) / StepsPerCPUSecond * float64(time.Second))
	res.MaxMemoryBytes = thread.PeakAllocBytes()
	if wf == nil {
		res.Emits = r.emits.held
	}
	if rerr != nil {
		if wf != nil && r.exit != nil {
			wf.exited = true
		}
		return res, rerr
	}
	res.Output = out
	return res, nil
}

// admit takes the execution's place (Request.Gate): the ticket the caller took for it, or one the
// gate gives once the execution may start. A ctx that ends first is the execution's end.
// own says the execution gives it back when it ends (always, today: the gate's and the caller's
// alike, so that a sync call's place is free while its outcome is written).
func admit(ctx context.Context, req Request, limits Limits) (t *admission.Ticket, own bool, rerr *Error) {
	if t := admission.Take(ctx); t != nil {
		return t, true, nil // the caller's: this execution leaves it when it ends (Leave is idempotent)
	}
	if req.AdmitWithin > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.AdmitWithin)
		defer cancel()
	}
	t, err := req.Gate.Enter(ctx, req.Info.TenantID, int64(limits.MemoryMB)<<20)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, false, newError(ErrTimeout, CategoryTimeout, "not started before its deadline: the runtime was busy")
		}
		return nil, false, newError(ErrCanceled, CategoryCanceled, "canceled before it started")
	}
	return t, true, nil
}

// newRun returns the state and thread of an execution under runCtx, with
// normalized limits.
func newRun(runCtx context.Context, req Request, limits Limits) *run {
	r := &run{
		ctx:      runCtx,
		host:     req.Host,
		info:     req.Info,
		limits:   limits,
		maxSteps: max(uint64(limits.CPU*limits.Timeout.Seconds()*StepsPerCPUSecond), 1),
	}
	r.sched.init(r)
	thread := &starlark.Thread{Name: req.Info.InvocationID}
	thread.Print = func(_ *starlark.Thread, msg string) { r.log(msg, nil) }
	thread.SetLocal(runKey, r)
	r.cpu = req.CPU
	r.thread = thread
	r.setStepLimit(r.maxSteps)
	thread.OnMaxSteps = r.onSteps
	thread.SetMaxAllocBytes(int64(limits.MemoryMB) << 20)
	return r
}

// normalizeLimits applies the defaults and checks the ranges.
func normalizeLimits(l Limits) (Limits, *Error) {
	if l.Timeout == 0 {
		l.Timeout = DefaultTimeout
	}
	if l.CPU == 0 {
		l.CPU = DefaultCPU
	}
	if l.MemoryMB == 0 {
		l.MemoryMB = DefaultMemoryMB
	}
	if l.MaxPayloadBytes == 0 {
		l.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	switch {
	case l.Timeout < 0:
		return l, newError(ErrValidation, CategoryNonRetryable, "timeout %v is negative", l.Timeout)
	case !(l.CPU >= MinCPU && l.CPU <= MaxCPU):
		return l, newError(ErrValidation, CategoryNonRetryable, "cpu %v is outside %v..%v", l.CPU, MinCPU, MaxCPU)
	case l.MemoryMB < 1 || l.MemoryMB > MaxMemoryMB:
		return l, newError(ErrValidation, CategoryNonRetryable, "memory_mb %d is outside 1..%d", l.MemoryMB, MaxMemoryMB)
	}
	return l, nil
}

// halt stops the execution for reason e, unless it is already stopping.
func (r *run) halt(e *Error) {
	if r.stop.CompareAndSwap(nil, e) {
		r.thread.Cancel(e.Message)
	}
}

// execute converts the input, runs the program's main on the thread holding a CPU slot, and
// converts its result. The conversions, Go code bounded by the payload limits, run without the
// slot: a tenant's large params and results (a few MB take tens of milliseconds to convert) never
// hold the interpreter from another tenant's executions.
func (r *run) execute(prog *Program, input any) (out any, rerr *Error) {
	defer func() {
		if p := recover(); p != nil {
			r.releaseCPU()
			out, rerr = nil, internalError("recovered panic")
		}
	}()
	thread := r.thread
	if err := r.ctx.Err(); err != nil {
		return nil, r.ctxError()
	}
	in, err := toStarlark(thread, input)
	if err != nil {
		if e := r.stop.Load(); e != nil {
			return nil, e.clone()
		}
		if isAllocError(err) {
			return nil, r.memoryError(err)
		}
		return nil, newError(ErrValidation, CategoryNonRetryable, "input: %v", err)
	}
	if !r.acquireCPU() {
		return nil, r.ctxError()
	}
	v, returnedAt, rerr := r.callMain(prog, in)
	r.releaseCPU()
	if rerr != nil {
		return nil, rerr
	}
	out, err = toGo(thread, v, "the result")
	if err != nil {
		return nil, r.resultError(err, returnedAt)
	}
	return out, nil
}

// callMain runs the program's top level and main(ctx, in), and waits for the helpers it started;
// returnedAt is where main returned.
func (r *run) callMain(prog *Program, in starlark.Value) (v starlark.Value, returnedAt syntax.Position, rerr *Error) {
	thread := r.thread
	env := predeclared()
	if r.wf != nil {
		env = workflowPredeclared()
	}
	globals, err := prog.prog.Init(thread, env)
	if err != nil {
		return nil, returnedAt, r.failure(err)
	}
	main, ok := globals["main"].(*starlark.Function)
	if !ok || main.NumParams() != 2 || main.HasVarargs() || main.HasKwargs() {
		return nil, returnedAt, newError(ErrValidation, CategoryNonRetryable, "main must be a function main(ctx, input)")
	}
	v, err = starlark.Call(thread, main, starlark.Tuple{&contextValue{info: r.info}, in}, nil)
	if err != nil {
		return nil, returnedAt, r.failure(err)
	}
	returnedAt = thread.LastReturnPosition()
	if err := r.sched.settle(); err != nil {
		return nil, returnedAt, r.failure(err)
	}
	return v, returnedAt, nil
}

// resultError is the error of a main result that did not convert to JSON.
func (r *run) resultError(err error, returnedAt syntax.Position) *Error {
	if e := r.stop.Load(); e != nil {
		return e.clone().addPosition(nil, returnedAt)
	}
	if isAllocError(err) {
		return r.memoryError(err).addPosition(nil, returnedAt)
	}
	if isPayloadError(err) {
		return payloadError(err).addPosition(nil, returnedAt)
	}
	e := newError(ErrRuntime, CategoryRetryable, "main returned a value that cannot be converted to JSON: %v", err)
	var cerr *convertError
	if errors.As(err, &cerr) {
		e.withDetail("path", cerr.Path())
	}
	return e.addPosition(nil, returnedAt)
}

// failure maps the error of an evaluation to the execution's error.
func (r *run) failure(err error) *Error {
	if r.exit != nil {
		return r.exit
	}
	if isAllocError(err) {
		return r.memoryError(err)
	}
	if isPayloadError(err) {
		return payloadError(err).addPosition(err, syntax.Position{})
	}
	if e := r.stop.Load(); e != nil {
		return e.clone().addPosition(err, syntax.Position{})
	}
	if r.ctx.Err() != nil {
		return r.ctxError().addPosition(err, syntax.Position{})
	}
	if r.thread.AllocLimitExceeded() {
		return r.memoryError(err)
	}
	return runtimeError(err)
}

// ctxError is the error of an execution whose context has ended.
func (r *run) ctxError() *Error {
	if errors.Is(context.Cause(r.ctx), errRunTimeout) {
		return newError(ErrTimeout, CategoryTimeout, "execution timed out after %v", r.limits.Timeout).
			withDetail("timeout_ms", r.limits.Timeout.Milliseconds())
	}
	if errors.Is(r.ctx.Err(), context.DeadlineExceeded) {
		return newError(ErrTimeout, CategoryTimeout, "execution timed out: the caller's deadline passed")
	}
	return newError(ErrCanceled, CategoryCanceled, "execution canceled")
}

func (r *run) cpuError() *Error {
	return newError(ErrCPULimit, CategoryResourceLimit,
		"CPU limit exceeded: %d steps, the budget of %.2f CPU for %v", r.maxSteps, r.limits.CPU, r.limits.Timeout).
		withDetail("max_steps", r.maxSteps).
		withDetail("cpu", r.limits.CPU)
}

func (r *run) memoryError(err error) *Error {
	e := newError(ErrMemoryLimit, CategoryResourceLimit,
		"memory limit exceeded: the execution tried to allocate more than %d MiB", r.limits.MemoryMB).
		withDetail("memory_mb", r.limits.MemoryMB).
		withDetail("allocated_bytes", r.thread.AllocBytes())
	var ae *starlark.AllocLimitError
	if errors.As(err, &ae) {
		e.withDetail("requested_bytes", ae.Requested)
	}
	return e.addPosition(err, syntax.Position{})
}

// clone returns a copy of e with its own details.
func (e *Error) clone() *Error {
	c := *e
	if e.Details != nil {
		c.Details = make(map[string]any, len(e.Details))
		for k, v := range e.Details {
			c.Details[k] = v
		}
	}
	return &c
}

// log sends a message to the host.
// The message is cut to MaxLogEntryBytes.
func (r *run) log(msg string, fields map[string]any) {
	r.host.Log(r.ctx, truncateLog(msg), fields)
}

// callerPosition returns the position of the Starlark code that called the
// built-in being executed.
func callerPosition(thread *starlark.Thread) syntax.Position {
	if thread.CallStackDepth() < 2 {
		return syntax.Position{}
	}
	return thread.CallFrame(1).Pos
}

// errorf returns a Starlark error for a call of a helper.
func errorf(name, format string, args ...any) error {
	return &misuseError{msg: fmt.Sprintf("%s: %s", name, fmt.Sprintf(format, args...))}
}

// misuseError is a helper called wrongly (a missing or mistyped argument, an unknown retry key,
// an invalid event filter, a workflow-only helper where it cannot run): a programming mistake that
// fails the same way every time, so the execution fails with a non-retryable validation error.
type misuseError struct{ msg string }

func (e *misuseError) Error() string { return e.msg }

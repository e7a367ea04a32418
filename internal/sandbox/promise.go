package sandbox

import (
	"fmt"
	"sync"
	"time"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
)

// Promise is the Starlark value of a host call started by an I/O helper
// (r_http_get_v1, r_http_post_v1, r_invoke_v1). The call starts when the
// helper is called and runs concurrently with the program and with other
// calls; r_await and r_await_all wait for results.
type Promise struct {
	helper string // the helper that made it
	seq    int    // 1-based creation order

	// Set by the worker before done is closed.
	done    chan struct{}
	work    func(p *Promise) // performs the call, on a worker goroutine
	outcome *outcome

	// Used on the execution's goroutine only.
	exitOnError bool
	awaited     bool
	value       starlark.Value // the resolved value, built on first await
	position    string         // where the promise was created, for messages
}

// outcome is the result of a host call, as Go values.
type outcome struct {
	http   *HTTPResponse
	invoke *InvokeResult
	err    *Error // the call failed (transport error, non-2xx status with exit, panic)
	host   string // for HTTP, the host of the URL
}

var _ starlark.Value = (*Promise)(nil)

// String returns a description of the promise.
func (p *Promise) String() string { return fmt.Sprintf("<promise #%d of %s>", p.seq, p.helper) }

// Type returns "promise".
func (p *Promise) Type() string { return "promise" }

// Freeze does nothing: a promise's state is not visible to the program
// other than through r_await.
func (p *Promise) Freeze() {}

// Truth returns True.
func (p *Promise) Truth() starlark.Bool { return true }

// Hash fails: promises are not hashable.
func (p *Promise) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: promise") }

// scheduler runs the host calls of one execution on at most maxHostCalls
// worker goroutines, in creation order.
type scheduler struct {
	r       *run
	mu      sync.Mutex
	queue   []*Promise // not yet started
	running int        // workers
	wg      sync.WaitGroup
	all     []*Promise // every promise, in creation order (execution goroutine only)
}

func (s *scheduler) init(r *run) { s.r = r }

// promiseBytes is the memory charged for a promise (its state, the
// request it holds and its queue slot).
const promiseBytes = 1024

// submit creates a promise for work and starts it, or queues it if
// maxHostCalls calls are running.
func (s *scheduler) submit(thread *starlark.Thread, helper string, work func(p *Promise)) (*Promise, error) {
	if err := thread.AddAllocBytes(promiseBytes); err != nil {
		return nil, err
	}
	p := &Promise{helper: helper, seq: len(s.all) + 1, done: make(chan struct{}), work: work}
	if pos := callerPosition(thread); pos.IsValid() {
		p.position = pos.String()
	}
	s.all = append(s.all, p)
	s.mu.Lock()
	if s.running < maxHostCalls {
		s.running++
		s.wg.Add(1)
		go s.worker(p)
	} else {
		s.queue = append(s.queue, p)
	}
	s.mu.Unlock()
	return p, nil
}

// worker runs p, then queued promises until there are none.
func (s *scheduler) worker(p *Promise) {
	defer s.wg.Done()
	for p != nil {
		s.perform(p)
		s.mu.Lock()
		if len(s.queue) > 0 {
			p = s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
		} else {
			p = nil
			s.running--
		}
		s.mu.Unlock()
	}
}

// perform runs a promise's call, recovering panics (of the host).
func (s *scheduler) perform(p *Promise) {
	defer close(p.done)
	defer func() {
		if v := recover(); v != nil {
			p.outcome = &outcome{err: newError(ErrRuntime, CategoryRetryable, "internal error in the host during %s", p.helper)}
		}
	}()
	if s.r.ctx.Err() != nil {
		p.outcome = &outcome{err: s.r.ctxError()}
		return
	}
	p.work(p)
	if p.outcome == nil {
		p.outcome = &outcome{err: internalError(p.helper)}
	}
}

// settle waits, after main has returned, for the calls the program did
// not await, so that they complete rather than being canceled, and fails
// like r_exit if one of them failed with exit_on_http_error.
func (s *scheduler) settle() error {
	for _, p := range s.all {
		if p.awaited {
			continue
		}
		if err := s.r.waitFor(p); err != nil {
			return fmt.Errorf("waiting for %s: %w", p, err)
		}
		if p.exitOnError && p.outcome.err != nil {
			s.r.exit = p.outcome.err
			return errExit
		}
	}
	return nil
}

// drain waits for the workers, at most grace (the context of their calls
// has been canceled: a well-behaved host returns at once).
func (s *scheduler) drain(grace time.Duration) {
	s.mu.Lock()
	idle := s.running == 0
	s.mu.Unlock()
	if idle {
		return
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
}

// await waits for p and returns its value, or ends the execution (r_exit)
// if it failed with exit_on_http_error.
func (r *run) await(thread *starlark.Thread, name string, p *Promise) (starlark.Value, error) {
	if p.value != nil {
		return p.value, nil
	}
	if err := r.waitFor(p); err != nil {
		return nil, fmt.Errorf("%s: interrupted: %w", name, err)
	}
	p.awaited = true
	o := p.outcome
	if o.err != nil && p.exitOnError {
		r.exit = o.err.clone()
		pos := callerPosition(thread)
		if pos.Line > 0 {
			r.exit.withDetail("line", int(pos.Line)).withDetail("column", int(pos.Col))
		}
		return nil, errExit
	}
	v, err := o.value(thread)
	if err != nil {
		return nil, err
	}
	p.value = v
	return v, nil
}

// waitFor waits until p is done, without holding a CPU slot while it waits; the error is the
// execution's end if it ended first.
func (r *run) waitFor(p *Promise) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	var ended bool
	err := r.blocking(func() {
		select {
		case <-p.done:
		case <-r.ctx.Done():
			ended = true
		}
	})
	if ended {
		return r.ctx.Err()
	}
	return err
}

// errExit is the Starlark error that unwinds the program after r_exit.
var errExit = fmt.Errorf("r_exit: the execution ended with an error envelope")

// value builds the Starlark value of an outcome: for HTTP calls,
// struct(ok=True, response=struct(status_code, headers, body)) or
// struct(ok=False, error=<envelope>[, response=...]); for child
// invocations struct(ok=True, value=...) or struct(ok=False, error=...).
func (o *outcome) value(thread *starlark.Thread) (starlark.Value, error) {
	switch {
	case o.http != nil:
		resp, err := responseValue(thread, o.http)
		if err != nil {
			return nil, err
		}
		if o.err != nil {
			env, err := envelopeValue(thread, o.err)
			if err != nil {
				return nil, err
			}
			return makeStruct(thread, "ok", starlark.False, "error", env, "response", resp)
		}
		return makeStruct(thread, "ok", starlark.True, "response", resp)
	case o.invoke != nil && o.invoke.OK:
		v, err := toStarlark(thread, o.invoke.Value)
		if err != nil {
			return nil, err
		}
		return makeStruct(thread, "ok", starlark.True, "value", v)
	}
	e := o.err
	if e == nil && o.invoke != nil {
		e = o.invoke.Error
	}
	if e == nil {
		e = newError(ErrRuntime, CategoryRetryable, "the call failed without an error")
	}
	env, err := envelopeValue(thread, e)
	if err != nil {
		return nil, err
	}
	return makeStruct(thread, "ok", starlark.False, "error", env)
}

package cpushare

import (
	"errors"
	"fmt"
	"runtime"
)

// DefaultNice is the nice value of the threads that interpret while they hold a slot (Linux's
// lowest priority): when the process's other work (HTTP, the database writer, the Go collector)
// wants a core, the kernel gives it that core ahead of user code.
const DefaultNice = 19

// ErrPriorityUnsupported is returned by LowerPriority where threads cannot be given a priority
// of their own (outside Linux).
var ErrPriorityUnsupported = errors.New("per-thread priorities are not supported on this system")

// LowerPriority makes the executions holding a slot interpret at nice value nice (1 to 19): after
// their first quantum (Lower, at the first Yield) the calling goroutine is wired to its OS thread
// (runtime.LockOSThread) and the thread's priority lowered. The OS then shares the cores between user code and the rest of the process by
// priority, so interpreting, however much of it there is, waits for the server's own work instead
// of the other way round. The caller should let the Go scheduler run the process's work beside
// the slots: runtime.GOMAXPROCS of the cores plus the slots.
//
// Any process may lower a thread's priority, but only one allowed to raise it (CAP_SYS_NICE, or an
// RLIMIT_NICE that covers the difference) may restore it. LowerPriority tries both on a thread of
// its own and chooses the mode:
//   - both allowed: Restore, before Release, gives the thread its priority back and unwires the goroutine;
//   - lowering only (OwnThreads reports true): executions run through Do, on workers whose threads
//     are at the low priority for their whole life and never serve the rest of the process;
//     Lower and Restore leave priorities alone.
//
// It returns an error, changing nothing, when lowering is refused too. It must be called before the
// scheduler's first Acquire.
func (s *Scheduler) LowerPriority(nice int) error {
	if s == nil {
		return nil
	}
	if nice < 1 || nice > 19 {
		return fmt.Errorf("nice value %d is outside 1..19", nice)
	}
	base, restorable, err := probePriority(nice)
	if err != nil {
		return err
	}
	s.nice, s.baseNice, s.oneWay = nice, base, !restorable
	return nil
}

// OwnThreads reports whether executions must run through Do, on low-priority workers: the process
// may lower a thread's priority but not restore it (see LowerPriority).
func (s *Scheduler) OwnThreads() bool { return s != nil && s.oneWay }

// probePriority lowers and restores the priority of a thread of its own, which it then lets end
// (a goroutine that exits wired to its thread takes the thread with it, so a thread left at the
// low priority is never reused). It returns the priority threads start with, and whether restoring
// it was allowed.
func probePriority(nice int) (base int, restorable bool, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		base, err = threadNice()
		if err != nil {
			return
		}
		if nice <= base {
			err = fmt.Errorf("the process already runs at nice %d, not above %d", base, nice)
			return
		}
		if err = setThreadNice(nice); err != nil {
			err = fmt.Errorf("lowering a thread's priority: %w", err)
			return
		}
		restorable = setThreadNice(base) == nil
	}()
	<-done
	return base, restorable, err
}

// Lower wires the calling goroutine to its thread and lowers the thread's priority to
// LowerPriority's nice value, for an execution that holds a slot and has interpreted a whole quantum
// (the sandbox calls it at its first yield): executions that end within their first quantum, most
// sync calls, never pay for the two system calls and the wiring. Restore undoes it. Both do
// nothing unless LowerPriority chose the restorable mode (in the one-way mode the execution already
// runs on a low-priority worker, Do). A thread whose priority cannot be changed interprets at the
// normal one.
func (s *Scheduler) Lower() {
	if s == nil || s.nice == 0 || s.oneWay {
		return
	}
	runtime.LockOSThread()
	if err := setThreadNice(s.nice); err != nil {
		s.failures.Add(1) // the probe succeeded: unexpected, and it costs only the isolation
	}
}

// Restore gives the thread Lower lowered its priority back and unwires the goroutine; the
// execution calls it before it gives its slot up (Release, or a Yield that failed). A thread whose
// priority cannot be restored stays wired to the goroutine, so that it ends with it instead of
// serving the process at the low priority.
func (s *Scheduler) Restore() {
	if s == nil || s.nice == 0 || s.oneWay {
		return
	}
	if err := setThreadNice(s.baseNice); err != nil {
		s.failures.Add(1)
		return
	}
	runtime.UnlockOSThread()
}

// PriorityFailures counts the times a thread's priority could not be lowered or restored after
// LowerPriority succeeded (a thread not restored stays with its goroutine and ends with it).
func (s *Scheduler) PriorityFailures() int64 {
	if s == nil {
		return 0
	}
	return s.failures.Load()
}

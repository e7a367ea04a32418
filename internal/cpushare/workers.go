package cpushare

import (
	"runtime"
	"time"
)

// workerIdle is how long a low-priority worker waits for its next execution before it ends (and
// its thread with it).
const workerIdle = 10 * time.Second

// MaxWorkers bounds the low-priority workers, and so the threads they hold: a worker keeps its thread
// while its execution waits (an HTTP answer, a child, a live workflow's timer), and the Go runtime
// stops the process at 10,000 threads. An execution that finds every worker busy runs where it is
// called, at the server's priority: isolation degrades, the process does not.
const MaxWorkers = 1024

// job is one execution handed to a low-priority worker; done receives what it panicked with (nil
// when it returned).
type job struct {
	f    func()
	done chan any
}

// Do runs f on a low-priority worker and waits for it; a panic in f is the caller's again. It is
// the one-way mode's way to interpret (OwnThreads): a worker's goroutine is wired to its thread for
// the thread's whole life, and the thread runs at the low priority from the start, so no thread
// whose priority was lowered ever serves the rest of the process. Idle workers are reused, so a
// thread is created only when every worker is busy; one idle for workerIdle ends. In any other mode
// Do just calls f.
func (s *Scheduler) Do(f func()) {
	if !s.OwnThreads() {
		f()
		return
	}
	j := job{f: f, done: make(chan any, 1)}
	select {
	case s.jobs <- j: // an idle worker took it
	default:
		if s.workers.Add(1) > MaxWorkers {
			s.workers.Add(-1)
			s.overflow.Add(1)
			f()
			return
		}
		go s.worker(j)
	}
	if p := <-j.done; p != nil {
		panic(p)
	}
}

// worker runs j, then the jobs idle workers receive, on a thread of its own at the low priority.
func (s *Scheduler) worker(j job) {
	defer s.workers.Add(-1)
	runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
	if err := setThreadNice(s.nice); err != nil {
		s.failures.Add(1)
	}
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		j.done <- run(j.f)
		idle.Reset(workerIdle)
		select {
		case j = <-s.jobs:
		case <-idle.C:
			return
		}
	}
}

// run calls f and returns what it panicked with.
func run(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// Overflows counts the executions that found MaxWorkers workers busy and ran at the server's
// priority.
func (s *Scheduler) Overflows() int64 {
	if s == nil {
		return 0
	}
	return s.overflow.Load()
}

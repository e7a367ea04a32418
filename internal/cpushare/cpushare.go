// Package cpushare shares the process's CPU between tenants' Starlark executions. At most Slots
// executions interpret at once. An execution holds its slot for a quantum of interpreter steps and
// then yields it: when executions of other tenants wait, the slot goes to the tenant next in
// round-robin order, so one tenant's CPU-bound code, however many executions it runs, delays
// another tenant's by about a quantum, not by the length of its own work. An execution gives its
// slot back while it waits (for an HTTP answer, a child invocation, a journal write), so waiting
// never holds CPU and a parent waiting for its child cannot starve it.
//
// Without contention a yield costs an atomic load and a runtime.Gosched (every tenth, a park of a
// microsecond), which lets the Go scheduler run the HTTP handlers and database work waiting beside
// the executions.
package cpushare

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Scheduler hands out CPU slots fairly between tenants. The zero value is not usable; use New.
// A nil *Scheduler is valid and schedules nothing (every call returns at once).
type Scheduler struct {
	mu     sync.Mutex
	free   int
	queues map[string][]chan struct{} // waiting executions by tenant, first come first served
	ring   []string                   // tenants with waiting executions, in round-robin order
	// waiting counts queued executions, read without the lock by Yield's fast path.
	waiting atomic.Int64
	// yields counts uncontended yields: every tenth parks briefly instead of runtime.Gosched, so
	// that the P looks at the network (a P that only ever finds runnable goroutines polls it only
	// from sysmon, up to 10 ms late).
	yields atomic.Int64

	// nice is the priority of the threads holding slots (0: unchanged; LowerPriority) and baseNice
	// the one they are given back (unless oneWay). failures counts threads whose priority could not be changed.
	nice, baseNice int
	oneWay         bool         // lowered priorities are never restored (OwnThreads)
	jobs           chan job     // executions for idle low-priority workers (one-way mode)
	workers        atomic.Int64 // low-priority workers alive
	overflow       atomic.Int64 // executions that found every worker busy
	failures       atomic.Int64
}

// New returns a scheduler of slots slots (at least 1); runtime.GOMAXPROCS(0) is the natural size.
func New(slots int) *Scheduler {
	return &Scheduler{free: max(slots, 1), queues: map[string][]chan struct{}{}, jobs: make(chan job)}
}

// Acquire waits for a slot for an execution of tenant, or until ctx ends (its error is returned,
// and no slot is held). The execution's goroutine calls Acquire, Yield and Release.
func (s *Scheduler) Acquire(ctx context.Context, tenant string) error {
	if s == nil {
		return nil
	}
	return s.acquire(ctx, tenant)
}

// acquire is Acquire without the thread's priority.
func (s *Scheduler) acquire(ctx context.Context, tenant string) error {
	s.mu.Lock()
	if s.free > 0 && len(s.ring) == 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	if len(s.queues[tenant]) == 0 {
		s.ring = append(s.ring, tenant)
	}
	s.queues[tenant] = append(s.queues[tenant], turn)
	s.waiting.Add(1)
	s.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dequeue(tenant, turn) {
		// Granted as ctx ended: the slot is ours, pass it on.
		s.handOff()
	}
	return ctx.Err()
}

// Release gives a slot back: to the execution whose tenant is next in round-robin order, or to
// the pool.
func (s *Scheduler) Release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.handOff()
	s.mu.Unlock()
}

// Yield is called by an execution holding a slot at the end of each quantum: if executions wait,
// it passes the slot on and waits for another turn; otherwise it only lets the Go scheduler run
// other goroutines. An error (ctx ended while waiting) means no slot is held any more.
func (s *Scheduler) Yield(ctx context.Context, tenant string) error {
	if s == nil {
		return nil
	}
	if s.waiting.Load() == 0 {
		if s.yields.Add(1)%10 == 0 {
			time.Sleep(time.Microsecond) // parks: the P looks at the network (Gosched does not)
		} else {
			runtime.Gosched()
		}
		return nil
	}
	s.mu.Lock()
	s.handOffFrom(tenant)
	s.mu.Unlock()
	return s.acquire(ctx, tenant)
}

// handOff gives a released slot to the first execution of the next tenant in the ring (which moves
// to the ring's end if it has more), or back to the pool. s.mu is held.
func (s *Scheduler) handOff() { s.handOffFrom("") }

// handOffFrom is handOff for a slot that an execution of tenant yields: the next other tenant in
// the ring goes first, so that a tenant with many executions waiting does not make another wait
// behind its own queue. s.mu is held.
func (s *Scheduler) handOffFrom(from string) {
	if len(s.ring) == 0 {
		s.free++
		return
	}
	i := 0
	if s.ring[0] == from && len(s.ring) > 1 {
		i = 1
	}
	tenant := s.ring[i]
	s.ring = append(s.ring[:i:i], s.ring[i+1:]...)
	q := s.queues[tenant]
	turn := q[0]
	if len(q) > 1 {
		s.queues[tenant] = q[1:]
		s.ring = append(s.ring, tenant)
	} else {
		delete(s.queues, tenant)
	}
	s.waiting.Add(-1)
	close(turn)
}

// dequeue removes a waiting execution that gave up; false if it was not queued (it was granted a
// slot). s.mu is held.
func (s *Scheduler) dequeue(tenant string, turn chan struct{}) bool {
	q := s.queues[tenant]
	for i, c := range q {
		if c != turn {
			continue
		}
		q = append(q[:i:i], q[i+1:]...)
		if len(q) == 0 {
			delete(s.queues, tenant)
			for j, t := range s.ring {
				if t == tenant {
					s.ring = append(s.ring[:j:j], s.ring[j+1:]...)
					break
				}
			}
		} else {
			s.queues[tenant] = q
		}
		s.waiting.Add(-1)
		return true
	}
	return false
}

// Package running keeps the executions running in this process, by invocation, with the lease each
// runs under, so that a control action (cancel, suspend) can stop the one in flight: at once when
// it is taken on this node, and on any node through a cluster notification or a lease check
// (execution.Executor.WatchLeases) when it is taken on another.
package running

import (
	"context"
	"sync"
)

// Set is the executions running in this process. The zero Set is ready to use.
type Set struct {
	mu sync.Mutex
	m  map[string]entry
}

type entry struct {
	owner  string
	cancel context.CancelFunc
}

// Track registers the execution of invocation id, running under lease owner, which cancel stops.
func (s *Set) Track(id, owner string, cancel context.CancelFunc) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]entry{}
	}
	s.m[id] = entry{owner: owner, cancel: cancel}
	s.mu.Unlock()
}

// Untrack forgets the execution of invocation id.
func (s *Set) Untrack(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// Cancel stops the execution of invocation id, if one runs here, and reports whether one did.
func (s *Set) Cancel(id string) bool {
	s.mu.Lock()
	e, ok := s.m[id]
	s.mu.Unlock()
	if ok {
		e.cancel()
	}
	return ok
}

// Leases are the executions running here: invocation id → the lease owner each runs under.
func (s *Set) Leases() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.m))
	for id, e := range s.m {
		out[id] = e.owner
	}
	return out
}

// Stop stops the executions of lost (invocation id → the lease owner it ran under) that still run
// under that lease, and returns their ids; one tracked again since, under another lease, is left
// alone.
func (s *Set) Stop(lost map[string]string) []string {
	var stopped []string
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, owner := range lost {
		if e, ok := s.m[id]; ok && e.owner == owner {
			e.cancel()
			stopped = append(stopped, id)
		}
	}
	return stopped
}

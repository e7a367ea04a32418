// Package running keeps the executions running in this process, by invocation, so that a control
// action (cancel, suspend) can stop the one in flight.
package running

import (
	"context"
	"sync"
)

// Set is the executions running in this process. The zero Set is ready to use.
type Set struct {
	mu sync.Mutex
	m  map[string]context.CancelFunc
}

// Track registers the execution of invocation id, which cancel stops.
func (s *Set) Track(id string, cancel context.CancelFunc) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]context.CancelFunc{}
	}
	s.m[id] = cancel
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
	cancel := s.m[id]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return cancel != nil
}

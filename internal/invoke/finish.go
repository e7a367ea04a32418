package invoke

// Waiting for an invocation to end. A sync invocation of a workflow answers when the workflow ends,
// not when its first activation stops at a timer, an event or a child: Start waits here after the
// first activation, holding no dispatcher slot and no sandbox (the activations that follow run
// wherever the dispatcher claims them). The wait is woken when a write of this process commits a
// terminal status for the invocation (update notifies the waiters, as it tells the Observer), and
// polls the store every Config.SyncPoll for an end committed elsewhere (another process).

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/larkrun/lark/internal/invocation"
)

// finishWaiters are the waits for invocations to end, by invocation id.
type finishWaiters struct {
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
	n  atomic.Int64 // how many waits there are (update notes changes only when some wait, or an Observer listens)
}

// watchFinish registers a wait for invocation id to end; the channel receives when a write of this
// process commits a terminal status for it. stop removes the wait.
func (s *Service) watchFinish(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w := &s.finish
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string]map[chan struct{}]struct{}{}
	}
	if w.m[id] == nil {
		w.m[id] = map[chan struct{}]struct{}{}
	}
	w.m[id][ch] = struct{}{}
	w.n.Add(1)
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.m[id], ch)
		if len(w.m[id]) == 0 {
			delete(w.m, id)
		}
		w.n.Add(-1)
		w.mu.Unlock()
	}
}

// finished wakes the waits for invocation id (after a commit left it in a terminal status).
func (s *Service) finished(id string) {
	w := &s.finish
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.m[id] {
		select {
		case ch <- struct{}{}:
		default: // already woken
		}
	}
}

// awaitFinish waits for invocation rec to reach a terminal status until deadline (on the service's
// clock, checked at every wake-up, and as a timer of the remaining time), the end of ctx, or
// Close. woken is its watchFinish channel, registered before the invocation's first activation so
// that no commit of its end can slip between the activation and the wait. It returns the latest
// stored record and whether it is terminal.
func (s *Service) awaitFinish(ctx context.Context, rec invocation.Record, deadline time.Time, woken <-chan struct{}) (invocation.Record, bool, error) {
	poll := time.NewTicker(s.cfg.SyncPoll)
	defer poll.Stop()
	timer := time.NewTimer(max(deadline.Sub(s.cfg.Clock.Now()), 0))
	defer timer.Stop()
	read := context.WithoutCancel(ctx) // the last read happens after the caller's deadline too
	over := false
	for {
		cur, err := s.cfg.Store.Invocation(read, rec.TenantID, rec.ID)
		if err != nil {
			return rec, false, err
		}
		if cur.Status.Terminal() {
			return cur, true, nil
		}
		if over || !s.cfg.Clock.Now().Before(deadline) {
			return cur, false, nil
		}
		select {
		case <-woken:
		case <-poll.C:
		case <-timer.C:
			over = true
		case <-ctx.Done():
			over = true
		case <-s.closing:
			over = true
		}
	}
}

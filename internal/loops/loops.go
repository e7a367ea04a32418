// Package loops is the start/stop contract of the server's background loops. Two kinds:
//
//   - per-node loops run on every node for the process's whole life: the dispatcher (claiming and
//     running work) and the cross-node wake-up listener;
//   - singletons run on one node of a cluster at a time, the leader (internal/leader): schedule
//     firing and backfill driving (internal/scheduler), retention (internal/retention) and the
//     trigger batch flusher (internal/eventtrigger). Expired leases need no reaper of their own:
//     the claim stage takes back work whose lease ran out on every node (dispatch).
//
// A loop is a function that runs until its context ends and then returns, promptly (at its next
// batch, one transaction at most). Group starts a set of loops together and stops them together:
// cancel, then wait for every one to return. The server runs its singletons in a Group under the
// leader's context, so losing the lease stops them all before the node campaigns again.
package loops

import (
	"context"
	"log/slog"
	"sync"
)

// Loop is a named background loop: Run returns when its context ends.
type Loop struct {
	Name string
	Run  func(context.Context)
}

// Group is a set of loops started and stopped together.
type Group struct {
	Loops  []Loop
	Logger *slog.Logger
}

// Run starts every loop in its own goroutine and returns once ctx has ended and every loop has
// returned. A loop that returns early is not restarted (it ended by itself: logged).
func (g Group) Run(ctx context.Context) {
	log := g.Logger
	if log == nil {
		log = slog.Default()
	}
	var wg sync.WaitGroup
	for _, l := range g.Loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log.Debug("loop started", "loop", l.Name)
			l.Run(ctx)
			if ctx.Err() == nil {
				log.Warn("loop returned before it was stopped", "loop", l.Name)
			}
			log.Debug("loop stopped", "loop", l.Name)
		}()
	}
	wg.Wait()
}

// Bell wakes a loop that otherwise sleeps until its next due time: rings coalesce (at most one
// is pending) and never block. The zero Bell is not usable: make one with NewBell.
type Bell struct{ c chan struct{} }

// NewBell returns a Bell.
func NewBell() Bell { return Bell{c: make(chan struct{}, 1)} }

// Ring wakes the loop, now or at its next wait.
func (b Bell) Ring() {
	select {
	case b.c <- struct{}{}:
	default:
	}
}

// C receives once per ring (rings before it is read count once).
func (b Bell) C() <-chan struct{} { return b.c }

package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultQueueVacuum is how often a store vacuums invocation_queue (Options.QueueVacuum).
const DefaultQueueVacuum = 5 * time.Second

// queueVacuum vacuums invocation_queue every period until it is closed.
//
// The table holds one row per queued invocation (migration 00005): each claim deletes a row, and
// the row's index entries stay, dead, until VACUUM. Claims read the queue oldest first, so those
// dead entries are the ones in front of every claim query; autovacuum would let them pile up for a
// minute (its naptime) or longer. Vacuuming the table itself is cheap because it holds only what is
// queued, so every store does it on its own, often: SKIP_LOCKED lets a node whose neighbour is
// vacuuming at that moment skip its turn rather than wait.
type queueVacuum struct {
	s      *Store
	period time.Duration
	stop   context.CancelFunc
	done   sync.WaitGroup
	runs   atomic.Int64 // vacuums done
}

// startQueueVacuum starts vacuuming s's queue every period, until close.
func startQueueVacuum(s *Store, period time.Duration) *queueVacuum {
	ctx, stop := context.WithCancel(context.Background())
	q := &queueVacuum{s: s, period: period, stop: stop}
	q.done.Add(1)
	go func() {
		defer q.done.Done()
		t := time.NewTicker(q.period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				q.once(ctx)
			}
		}
	}()
	return q
}

// once vacuums the table; a failure (the database away, a statement timeout) waits for the next
// turn: the vacuum only keeps claims fast. It may take longer than a period (a deep backlog):
// the ticker then drops the turns it missed, and the pool's statement timeout bounds it.
func (q *queueVacuum) once(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(q.period, time.Minute))
	defer cancel()
	if _, err := q.s.pool.Exec(ctx, "VACUUM (SKIP_LOCKED) invocation_queue"); err == nil {
		q.runs.Add(1)
	}
}

// close stops the vacuums (one under way is canceled) and waits for them to end.
func (q *queueVacuum) close() {
	q.stop()
	q.done.Wait()
}

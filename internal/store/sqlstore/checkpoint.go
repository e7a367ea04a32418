package sqlstore

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// checkpointer copies committed WAL frames into the database file from a connection of its own,
// so that the writer's commits do not pay for it. After every batch the committer nudges it; it
// runs a passive checkpoint (which never blocks the writer or readers) at most every
// checkpointEvery.
//
// The writer keeps SQLite's automatic checkpoint (every 1,000 pages): it runs right after one of
// the writer's commits, with no frame written after it, so it can always finish the job and let
// the next transaction restart the WAL from its beginning. The checkpointer has usually copied
// almost every frame by then, which leaves the writer little to do. A passive checkpoint alone
// could not bound the WAL under continuous writes: it never catches up with a writer that keeps
// appending.
//
// The loop also keeps the planner's statistics (optimize) at most every optimizeEvery, after a
// checkpoint: a store that is not written to keeps the statistics it has.
type checkpointer struct {
	db     *sql.DB
	nudge  chan struct{}
	stop   chan struct{}
	done   sync.WaitGroup
	runs   atomic.Uint64
	failed atomic.Uint64
	// optimized is when optimize last ran (the loop's own); optimizeFailed counts its failures.
	optimized      time.Time
	optimizeFailed atomic.Uint64
}

// checkpointEvery is the shortest time between two background checkpoints: each ends with an
// fsync of the database file, so checkpoints of a few frames each would cost more than they save.
const checkpointEvery = 20 * time.Millisecond

func newCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, nudge: make(chan struct{}, 1), stop: make(chan struct{}), optimized: time.Now()}
	c.done.Add(1)
	go c.loop()
	return c
}

// wake asks for a checkpoint soon; it never blocks.
func (c *checkpointer) wake() {
	select {
	case c.nudge <- struct{}{}:
	default:
	}
}

func (c *checkpointer) loop() {
	defer c.done.Done()
	for {
		select {
		case <-c.stop:
			return
		case <-c.nudge:
		}
		// The error of one checkpoint is counted, not fatal: the writer's own checkpoint is the
		// guarantee, this one only takes work off it.
		if _, err := c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
			c.failed.Add(1)
		} else {
			c.runs.Add(1)
		}
		if time.Since(c.optimized) >= optimizeEvery {
			c.optimized = time.Now()
			if err := optimize(context.Background(), c.db); err != nil {
				c.optimizeFailed.Add(1)
			}
		}
		select {
		case <-c.stop:
			return
		case <-time.After(checkpointEvery):
		}
	}
}

// close stops the loop and waits for a checkpoint in progress.
func (c *checkpointer) close() error {
	close(c.stop)
	c.done.Wait()
	return c.db.Close()
}

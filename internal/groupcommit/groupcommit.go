// Package groupcommit batches concurrent writes into shared transactions.
//
// Each caller hands Do a closure; a single goroutine gathers every closure waiting at that moment
// (up to MaxBatch closures and MaxBatchBytes of their weights), runs each inside its own SAVEPOINT
// of one transaction, commits once, and only then answers each caller. Waiting closures are taken
// lane by lane (a lane is a tenant, WithWeight), round robin, so one tenant's many or large writes
// delay another's small one by about one batch, not by their number. A closure that fails is
// rolled back to its savepoint without touching the others (with Options.LazySavepoints the
// savepoints are taken only when a batch is run again because a closure failed). Under load, one
// fsync serves a whole batch, so throughput is set by CPU rather than by disk flushes; with a
// single caller there is no added wait, because nothing is held back for a batch to fill.
package groupcommit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("groupcommit: closed")

// ErrReplay is wrapped by the error a pipelined batch's commit or rollback returns (see
// Options.Pipeline) when the handle could not carry the batch out as it was optimistically sent: a
// statement failed, or did not affect the rows it was expected to. Nothing of the batch was
// applied, and the committer runs it again, closure by closure, without pipelining.
var ErrReplay = errors.New("groupcommit: pipelined batch must be replayed")

// ErrBusy is returned by Do when its closure waited Options.MaxWait without the committer taking
// it (the batches ahead of it are slow, or the database does not answer): the closure never ran
// and never will.
var ErrBusy = errors.New("groupcommit: the writer did not take the write within its wait bound")

// Options tune a Committer.
type Options struct {
	// MaxBatch bounds the closures per transaction (default 256).
	MaxBatch int
	// MaxBatchBytes bounds the sum of the weights (WithWeight) of a transaction's closures
	// (default DefaultMaxBatchBytes); a batch's first closure is taken whatever it weighs.
	MaxBatchBytes int64
	// Queue is the channel capacity (default 4*MaxBatch).
	Queue int
	// AfterBatch, if set, runs on the committer goroutine after each batch, while the committer holds
	// no transaction (e.g. to prepare statements on the writer connection).
	AfterBatch func()
	// MaxWait bounds how long Do waits for the committer to start its closure (0: no bound; a
	// context from WithMaxWait overrides it). Past it Do returns ErrBusy and the closure is
	// dropped; a closure the committer has started is waited for to the end (its statements are
	// bounded by the database's own timeouts), so an answer always says what happened.
	MaxWait time.Duration
	// Pipeline, if set, is the context each batch's transaction is first begun with: a database
	// handle that recognises it may defer the transaction's statements (its SAVEPOINTs included)
	// and send them together with the next one whose result is needed (pgstore does: one round trip
	// per read instead of one per statement). Such a batch is run again, every closure of it, in a
	// transaction begun without Pipeline, when its Commit or Rollback fails with an error wrapping
	// ErrReplay. A closure that fails is rolled back to its savepoint either way: one tenant's
	// refused writes never make the others' batches run twice. Closures learn which run they are
	// in from Pipelined.
	Pipeline context.Context
	// BeginBatch, if set, runs on the committer's goroutine before each run of a batch (a replay
	// included), and BeforeCommit after the run's closures, in its transaction, before its commit:
	// a store writes there what it gathered from the run's closures (pgstore: their usage deltas,
	// one upsert per row instead of one per closure). An error from BeforeCommit fails the batch
	// as a failed commit would (or replays a pipelined one, when it wraps ErrReplay).
	BeginBatch   func()
	BeforeCommit func(*sql.Tx) error
	// PrepareSavepoints has the committer prepare its SAVEPOINT, RELEASE and ROLLBACK TO statements
	// once on db instead of sending their text with every closure of a batch (SQLite parses a
	// statement sent as text on every execution: two parses per closure otherwise). A statement
	// that cannot be prepared is sent as text.
	PrepareSavepoints bool
	// LazySavepoints has the committer run a batch's closures without their savepoints, and only
	// when one of them fails roll the whole transaction back and run the batch again with them (the
	// failed closure rolled back to its savepoint, as without this option). A savepoint costs
	// SQLite a copy of every page a closure changes (its statement journal), a tenth of a batch's
	// work, which a batch whose closures all succeed, nearly every batch, need not pay. Only a
	// batch whose closures were all made with a context from Rerunnable runs so (a closure that
	// succeeded is run again too); after a batch that failed, the next GuardedAfterFailure batches
	// keep their savepoints, so a stream of failing writes costs at most one wasted run in that
	// many.
	LazySavepoints bool
}

// GuardedAfterFailure is how many batches run with savepoints after one run without them failed
// (Options.LazySavepoints).
const GuardedAfterFailure = 16

// Committer runs closures in group-committed transactions on one database handle.
type Committer struct {
	db      *sql.DB
	after   func()
	max     int
	maxB    int64
	queue   int
	maxWait time.Duration
	ops     chan *op
	mu      sync.RWMutex
	closed  bool
	done    chan struct{}
	batches atomic.Uint64
	writes  atomic.Uint64
	stats   *batchStats // Histograms
	pipe    context.Context
	begin   func()
	before  func(*sql.Tx) error
	// sp holds the prepared savepoint statements (Options.PrepareSavepoints); nil sends them as text.
	sp map[string]*sql.Stmt
	// pipelined is true while the committer runs a batch's closures with Pipeline (Pipelined); only
	// the committer's goroutine reads and writes it.
	pipelined bool
	replays   atomic.Uint64
	// lazy is Options.LazySavepoints; guarded counts the batches still to run with savepoints after
	// a failure (only the committer's goroutine uses it); reruns counts the batches run again
	// because a closure failed without its savepoint.
	lazy    bool
	guarded int
	reruns  atomic.Uint64
	// inFlight counts the closures queued or running; enqueued those of them queued by Enqueue.
	inFlight, enqueued atomic.Int64
}

type op struct {
	enq   bool // queued by Enqueue
	rerun bool // made with Rerunnable
	lane  string
	bytes int64 // the weight of the write (WithWeight)
	ctx   context.Context
	fn    func(*sql.Tx) error
	errc  chan error
	// state is opQueued until the committer starts fn (opTaken) or Do gives up on it (opAbandoned).
	state atomic.Int32
}

const (
	opQueued int32 = iota
	opTaken
	opAbandoned
)

// New starts a Committer on db. db should allow a single open connection (SQLite) or be a pool
// whose writes this committer serialises.
func New(db *sql.DB, o Options) *Committer {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Queue <= 0 {
		o.Queue = 4 * o.MaxBatch
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	c := &Committer{db: db, after: o.AfterBatch, max: o.MaxBatch, maxB: o.MaxBatchBytes, queue: o.Queue, maxWait: o.MaxWait, ops: make(chan *op, o.Queue), done: make(chan struct{}), stats: newBatchStats(), pipe: o.Pipeline,
		begin: o.BeginBatch, before: o.BeforeCommit, lazy: o.LazySavepoints}
	if o.PrepareSavepoints {
		c.sp = map[string]*sql.Stmt{}
		for _, q := range []string{spBegin, spRelease, spRollback} {
			if st, err := db.Prepare(q); err == nil {
				c.sp[q] = st
			}
		}
	}
	go c.loop()
	return c
}

type rerunnableKey struct{}

// Rerunnable returns ctx marking the closures given with it as safe to run again after they
// succeeded, their transaction rolled back (Options.LazySavepoints): they act outside their
// transaction on nothing they learnt in it, and a run leaves nothing that the next run reads.
func Rerunnable(ctx context.Context) context.Context {
	return context.WithValue(ctx, rerunnableKey{}, true)
}

func isRerunnable(ctx context.Context) bool {
	v, _ := ctx.Value(rerunnableKey{}).(bool)
	return v
}

type maxWaitKey struct{}

// WithMaxWait returns ctx carrying a bound for Do's wait (Options.MaxWait) of the writes made
// with it: an API request's writes have a latency budget, the engine's own do not.
func WithMaxWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, maxWaitKey{}, d)
}

// maxWait is the bound of a write made with ctx.
func (c *Committer) maxWaitOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(maxWaitKey{}).(time.Duration); ok {
		return d
	}
	return c.maxWait
}

var opPool = sync.Pool{New: func() any { return &op{errc: make(chan error, 1)} }}

// Do runs fn in the next batch and returns its error, or the commit's. Once fn is queued Do waits
// for the outcome even if ctx ends, so a nil return always means "durable" and an error from a
// cancelled ctx always means "not applied".
func (c *Committer) Do(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := opPool.Get().(*op)
	o.ctx, o.fn, o.rerun = ctx, fn, isRerunnable(ctx)
	o.lane, o.bytes = weightOf(ctx)
	o.state.Store(opQueued)
	var bound <-chan time.Time
	if d := c.maxWaitOf(ctx); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		bound = t.C
	}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		o.ctx, o.fn = nil, nil
		opPool.Put(o)
		return ErrClosed
	}
	c.inFlight.Add(1)
	select {
	case c.ops <- o:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		c.inFlight.Add(-1)
		o.ctx, o.fn = nil, nil
		opPool.Put(o)
		return ctx.Err()
	case <-bound:
		c.inFlight.Add(-1)
		c.mu.RUnlock()
		o.ctx, o.fn = nil, nil
		opPool.Put(o)
		return ErrBusy
	}
	var err error
	select {
	case err = <-o.errc:
	case <-bound:
		if o.state.CompareAndSwap(opQueued, opAbandoned) {
			// The committer will skip it and answer into its buffered channel; o is not reused.
			return ErrBusy
		}
		err = <-o.errc // started: its outcome is on its way
	}
	o.ctx, o.fn = nil, nil
	opPool.Put(o)
	return err
}

// Enqueue queues fn behind every closure queued before it in its lane (Do's or Enqueue's; a
// caller's writes share a lane, since they share its context's weight: WithWeight) and returns at
// once; wait returns fn's error or the commit's, as Do would, and must be called exactly once. A
// caller that enqueues several closures in turn has them applied in that order, in one batch or in
// consecutive ones, without waiting for each.
func (c *Committer) Enqueue(ctx context.Context, fn func(*sql.Tx) error) (wait func() error) {
	if err := ctx.Err(); err != nil {
		return func() error { return err }
	}
	o := &op{enq: true, rerun: isRerunnable(ctx), ctx: ctx, fn: fn, errc: make(chan error, 1)}
	o.lane, o.bytes = weightOf(ctx)
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return func() error { return ErrClosed }
	}
	c.inFlight.Add(1)
	c.enqueued.Add(1)
	select {
	case c.ops <- o:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		c.inFlight.Add(-1)
		c.enqueued.Add(-1)
		return func() error { return ctx.Err() }
	}
	return func() error { return <-o.errc }
}

// Stats returns how many transactions were committed and how many closures they carried.
func (c *Committer) Stats() (batches, writes uint64) { return c.batches.Load(), c.writes.Load() }

// InFlight reports how many closures are queued or running, and how many of those were queued by
// Enqueue (a store with several committers keeps a caller's writes after its enqueued ones on the
// same committer while they are in flight).
func (c *Committer) InFlight() (all, enqueued int64) { return c.inFlight.Load(), c.enqueued.Load() }

// Replays reports how many pipelined batches had to be run again without pipelining (ErrReplay).
func (c *Committer) Replays() uint64 { return c.replays.Load() }

// Reruns reports how many batches were run again with savepoints because a closure of theirs
// failed without one (Options.LazySavepoints).
func (c *Committer) Reruns() uint64 { return c.reruns.Load() }

// Pipelined reports whether the closure now running runs in a pipelined transaction (see
// Options.Pipeline): its writes may be deferred, and a write it expects to succeed may be assumed
// to, since a batch where one did not is run again without pipelining. It is meaningful only when
// called from inside a closure.
func (c *Committer) Pipelined() bool { return c.pipelined }

// Close stops accepting work, finishes what is queued and returns.
func (c *Committer) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.ops)
	}
	c.mu.Unlock()
	<-c.done
	for _, st := range c.sp {
		st.Close()
	}
	return nil
}

func (c *Committer) loop() {
	defer close(c.done)
	batch := make([]*op, 0, c.max)
	var waiting lanes
	open := true
	for {
		if waiting.len() == 0 {
			if !open {
				return
			}
			first, ok := <-c.ops
			if !ok {
				return
			}
			waiting.push(first)
		}
		open = c.drain(&waiting, open)
		batch = waiting.take(batch, c.max, c.maxB)
		c.run(batch)
		clear(batch)
		if c.after != nil {
			c.after()
		}
	}
}

// drain moves the closures waiting on the channel into waiting, without blocking, until waiting
// holds Queue of them (so a full channel still holds callers back); it reports whether the channel
// is still open.
func (c *Committer) drain(waiting *lanes, open bool) bool {
	for open && waiting.len() < c.queue {
		select {
		case o, ok := <-c.ops:
			if !ok {
				return false
			}
			waiting.push(o)
		default:
			return true
		}
	}
	return open
}

func (c *Committer) run(batch []*op) {
	results := make([]error, len(batch))
	defer func() {
		for i, o := range batch {
			if o.enq {
				c.enqueued.Add(-1)
			}
			c.inFlight.Add(-1)
			o.errc <- results[i]
		}
	}()
	began := time.Now()
	unguarded := c.unguarded(batch)
	applied, replay := c.attempt(batch, results, c.pipe != nil, !unguarded)
	if replay {
		if unguarded {
			c.reruns.Add(1)
			c.guarded = GuardedAfterFailure
		} else {
			c.replays.Add(1)
		}
		clear(results)
		applied, _ = c.attempt(batch, results, false, true)
	}
	if applied > 0 {
		c.batches.Add(1)
		c.writes.Add(uint64(applied))
		c.stats.observe(applied, time.Since(began))
	}
}

// unguarded reports whether batch runs without its closures' savepoints (Options.LazySavepoints):
// a batch of one has none anyway.
func (c *Committer) unguarded(batch []*op) bool {
	if !c.lazy || len(batch) < 2 {
		return false
	}
	if c.guarded > 0 {
		c.guarded--
		return false
	}
	for _, o := range batch {
		if !o.rerun {
			return false
		}
	}
	return true
}

// attempt runs batch in one transaction, pipelined or not, each closure of several in a savepoint
// or not (guarded), and reports how many closures it applied, or that the transaction must be run
// again (nothing of it applied): a pipelined one that failed, or an unguarded one whose closure
// failed.
func (c *Committer) attempt(batch []*op, results []error, pipelined, guarded bool) (applied int, replay bool) {
	ctx := context.Background()
	if pipelined {
		ctx = c.pipe
	}
	c.pipelined = pipelined
	defer func() { c.pipelined = false }()
	if c.begin != nil {
		c.begin()
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		for i := range results {
			results[i] = fmt.Errorf("begin: %w", err)
		}
		return 0, false
	}
	useSavepoints := len(batch) > 1 && guarded
	for i, o := range batch {
		// A replay runs again what the first run took.
		if st := o.state.Load(); st != opTaken && !o.state.CompareAndSwap(opQueued, opTaken) {
			results[i] = ErrBusy // Do gave up on it
			continue
		}
		if err := o.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if useSavepoints {
			if _, err := c.exec(ctx, tx, spBegin); err != nil {
				return 0, c.abort(tx, results, fmt.Errorf("savepoint: %w", err))
			}
		}
		err := call(o.fn, tx)
		if err != nil {
			results[i] = err
			if !useSavepoints {
				rerr := tx.Rollback()
				return 0, len(batch) > 1 || errors.Is(rerr, ErrReplay)
			}
			if _, rerr := c.exec(ctx, tx, spRollback); rerr != nil {
				return 0, c.abort(tx, results, fmt.Errorf("rollback to savepoint: %w", rerr))
			}
		} else {
			applied++
		}
		if useSavepoints {
			if _, err := c.exec(ctx, tx, spRelease); err != nil {
				return 0, c.abort(tx, results, fmt.Errorf("release savepoint: %w", err))
			}
		}
	}
	if applied == 0 {
		return 0, errors.Is(tx.Rollback(), ErrReplay)
	}
	if c.before != nil {
		if err := c.before(tx); err != nil {
			return 0, c.abort(tx, results, fmt.Errorf("before commit: %w", err))
		}
	}
	if err := tx.Commit(); err != nil {
		if errors.Is(err, ErrReplay) {
			return 0, true
		}
		for i := range results {
			if results[i] == nil {
				results[i] = fmt.Errorf("commit: %w", err)
			}
		}
		return 0, false
	}
	return applied, false
}

// abort rolls the whole transaction back and fails every closure that had not already failed, or
// reports that the pipelined transaction must be replayed.
func (c *Committer) abort(tx *sql.Tx, results []error, err error) (replay bool) {
	if errors.Is(tx.Rollback(), ErrReplay) {
		return true
	}
	for i := range results {
		if results[i] == nil {
			results[i] = err
		}
	}
	return false
}

// The savepoint around each closure of a batch of several.
const (
	spBegin    = "SAVEPOINT gc"
	spRelease  = "RELEASE gc"
	spRollback = "ROLLBACK TO gc"
)

// exec runs the savepoint statement q in tx: prepared when Options.PrepareSavepoints prepared it.
func (c *Committer) exec(ctx context.Context, tx *sql.Tx, q string) (sql.Result, error) {
	if st := c.sp[q]; st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx)
	}
	return tx.ExecContext(ctx, q)
}

// call runs fn, turning a panic into an error so one bad closure cannot kill the committer.
func call(fn func(*sql.Tx) error, tx *sql.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("groupcommit: write panicked: %v", r)
		}
	}()
	return fn(tx)
}

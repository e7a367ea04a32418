package groupcommit_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"

	"github.com/larkrun/lark/internal/groupcommit"
)

// TestMain fails the package if any test or benchmark leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait in these tests; nothing sleeps.
const waitTimeout = 20 * time.Second

// dsn is the production SQLite configuration of sqlstore: WAL, synchronous=FULL, immediate
// transactions.
func dsn(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
}

// openRawDB opens a fresh single-connection WAL database with a rows table. The caller closes it.
func openRawDB(tb testing.TB) (*sql.DB, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "gc.db")
	db, err := sql.Open("sqlite", dsn(path))
	require.NoError(tb, err)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	var mode string
	require.NoError(tb, db.QueryRow("PRAGMA journal_mode").Scan(&mode))
	require.Equal(tb, "wal", mode)
	var syncMode int
	require.NoError(tb, db.QueryRow("PRAGMA synchronous").Scan(&syncMode))
	require.Equal(tb, 2, syncMode, "synchronous=FULL")
	_, err = db.Exec(`CREATE TABLE rows (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`)
	require.NoError(tb, err)
	return db, path
}

// openDB is openRawDB closed by the test's cleanup.
func openDB(tb testing.TB) *sql.DB {
	tb.Helper()
	db, _ := openRawDB(tb)
	tb.Cleanup(func() { db.Close() })
	return db
}

// newCommitter starts a committer closed by the test's cleanup (before db, cleanups being LIFO).
func newCommitter(tb testing.TB, db *sql.DB, o groupcommit.Options) *groupcommit.Committer {
	c := groupcommit.New(db, o)
	tb.Cleanup(func() { c.Close() })
	return c
}

func insert(id int) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.Exec("INSERT INTO rows (id, v) VALUES (?, ?)", id, fmt.Sprint("row ", id))
		return err
	}
}

func rowIDs(t *testing.T, db *sql.DB) []int {
	t.Helper()
	rows, err := db.Query("SELECT id FROM rows ORDER BY id")
	require.NoError(t, err)
	defer rows.Close()
	var ids []int
	for rows.Next() {
		var id int
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func waitErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

func wgChan(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return ch
}

// hold occupies the committer with a closure (inserting row 0) that blocks until release is
// called. It returns once that closure is running, so everything enqueued afterwards waits for a
// later batch. The returned channel yields the holder's Do result.
func hold(t *testing.T, c *groupcommit.Committer) (release func(), result <-chan error) {
	t.Helper()
	running, rel := make(chan struct{}), make(chan struct{})
	res := make(chan error, 1)
	go func() {
		res <- c.Do(context.Background(), func(tx *sql.Tx) error {
			close(running)
			<-rel
			return insert(0)(tx)
		})
	}()
	waitFor(t, running, "the holding closure to run")
	var once sync.Once
	release = func() { once.Do(func() { close(rel) }) }
	t.Cleanup(release) // never leave the committer stuck when a test fails early
	return release, res
}

// enqCtx reports when Do reaches its enqueue step. Do checks for Close under its read lock and
// then calls ctx.Done() in the select that sends the op; the queue has room in these tests, so once
// the hook fires the op is in the queue (or is being put there without blocking) and a Close cannot
// overtake it. This replaces a sleep with a condition.
type enqCtx struct {
	context.Context
	once    sync.Once
	entered *sync.WaitGroup
}

func (c *enqCtx) Done() <-chan struct{} {
	c.once.Do(c.entered.Done)
	return c.Context.Done()
}

// enqueue runs one Do per fn in its own goroutine, each with an enqCtx derived from ctx, and
// waits until all of them have reached the queue. errs[i] is fn[i]'s result once done is closed.
func enqueue(t *testing.T, ctx context.Context, c *groupcommit.Committer, fns []func(*sql.Tx) error) (errs []error, done <-chan struct{}) {
	t.Helper()
	errs = make([]error, len(fns))
	var entered, finished sync.WaitGroup
	entered.Add(len(fns))
	finished.Add(len(fns))
	for i, fn := range fns {
		go func() {
			defer finished.Done()
			errs[i] = c.Do(&enqCtx{Context: ctx, entered: &entered}, fn)
		}()
	}
	waitFor(t, wgChan(&entered), "every Do to reach the queue")
	return errs, wgChan(&finished)
}

// (a) A single Do commits, is visible through the committer's handle and through another
// connection, and is counted as one batch of one write.
func TestDoCommitsAndIsVisible(t *testing.T) {
	db, path := openRawDB(t)
	t.Cleanup(func() { db.Close() })
	c := newCommitter(t, db, groupcommit.Options{})

	require.NoError(t, c.Do(context.Background(), insert(7)))
	require.Equal(t, []int{7}, rowIDs(t, db))

	other, err := sql.Open("sqlite", dsn(path))
	require.NoError(t, err)
	defer other.Close()
	require.Equal(t, []int{7}, rowIDs(t, other), "committed, not just visible inside the writer's connection")

	batches, writes := c.Stats()
	require.Equal(t, uint64(1), batches)
	require.Equal(t, uint64(1), writes)
}

// (b) Concurrent Do calls that queue while the committer is busy all succeed and share
// transactions.
func TestConcurrentDoIsBatched(t *testing.T) {
	db := openDB(t)
	c := newCommitter(t, db, groupcommit.Options{})
	release, held := hold(t, c)

	const n = 64
	var mu sync.Mutex
	txs := map[*sql.Tx]int{}
	fns := make([]func(*sql.Tx) error, n)
	for i := range fns {
		fns[i] = func(tx *sql.Tx) error {
			mu.Lock()
			txs[tx]++
			mu.Unlock()
			return insert(i + 1)(tx)
		}
	}
	errs, done := enqueue(t, context.Background(), c, fns)
	release()
	require.NoError(t, waitErr(t, held, "the holder"))
	waitFor(t, done, "the writers")
	for i, err := range errs {
		require.NoError(t, err, "writer %d", i+1)
	}
	require.Equal(t, seq(0, n), rowIDs(t, db))

	batches, writes := c.Stats()
	require.Equal(t, uint64(n+1), writes)
	require.GreaterOrEqual(t, batches, uint64(2), "the holder's batch cannot include the writers queued behind it")
	require.Less(t, batches, writes, "queued writes share transactions")
	require.Less(t, len(txs), n, "closures ran in shared transactions")
	t.Logf("%d writes in %d batches", writes, batches)
}

// (c) A closure that fails is rolled back to its savepoint; the rest of its batch commits.
func TestFailingClosureRolledBackInBatch(t *testing.T) {
	for _, o := range []groupcommit.Options{{}, {PrepareSavepoints: true}, {LazySavepoints: true}} {
		t.Run(fmt.Sprintf("prepared savepoints %v, lazy %v", o.PrepareSavepoints, o.LazySavepoints), func(t *testing.T) {
			t.Parallel()
			failingClosuresRolledBack(t, o)
		})
	}
}

// With LazySavepoints a batch of Rerunnable closures that all succeed runs each once; one whose
// closure fails runs again with savepoints (the failed one rolled back alone), and so do the
// GuardedAfterFailure batches after it, after which batches run without savepoints again. A batch
// with a closure not made Rerunnable keeps its savepoints.
func TestLazySavepoints(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	c := newCommitter(t, db, groupcommit.Options{LazySavepoints: true})
	var mu sync.Mutex
	runs := map[int]int{}
	write := func(id int, fail bool) func(*sql.Tx) error {
		return func(tx *sql.Tx) error {
			mu.Lock()
			runs[id]++
			mu.Unlock()
			if err := insert(id)(tx); err != nil {
				return err
			}
			if fail {
				return fmt.Errorf("deliberate failure %d", id)
			}
			return nil
		}
	}
	// batchOf runs the closures for ids in one batch, behind a holder, and returns their errors.
	batchOf := func(ctx context.Context, ids []int, failing int) []error {
		release, held := hold(t, c)
		fns := make([]func(*sql.Tx) error, len(ids))
		for i, id := range ids {
			fns[i] = write(id, id == failing)
		}
		errs, done := enqueue(t, ctx, c, fns)
		release()
		require.NoError(t, waitErr(t, held, "the holder"))
		waitFor(t, done, "the writers")
		_, err := db.Exec("DELETE FROM rows WHERE id = 0")
		require.NoError(t, err)
		return errs
	}
	batch := func(ids []int, failing int) []error {
		return batchOf(groupcommit.Rerunnable(context.Background()), ids, failing)
	}

	errs := batchOf(context.Background(), []int{1001, 1002}, 1002)
	require.EqualError(t, errs[1], "deliberate failure 1002")
	require.Equal(t, 1, runs[1002], "closures not made Rerunnable keep their savepoints")
	require.Zero(t, c.Reruns())
	_, err := db.Exec("DELETE FROM rows")
	require.NoError(t, err)

	errs = batch([]int{1, 2, 3}, 0)
	require.Equal(t, []error{nil, nil, nil}, errs)
	require.Equal(t, []int{1, 1, 1}, []int{runs[1], runs[2], runs[3]}, "a batch that succeeds runs once")
	require.Zero(t, c.Reruns())

	errs = batch([]int{4, 5, 6}, 5)
	require.NoError(t, errs[0])
	require.EqualError(t, errs[1], "deliberate failure 5")
	require.NoError(t, errs[2])
	require.Equal(t, 2, runs[5], "the batch ran again with savepoints")
	for _, id := range []int{4, 6} { // before the failure in the batch (run twice) or after it (once)
		require.Contains(t, []int{1, 2}, runs[id])
	}
	require.EqualValues(t, 1, c.Reruns())
	require.Equal(t, []int{1, 2, 3, 4, 6}, rowIDs(t, db))

	// The batches of several closures after a failure keep their savepoints: a failure in them costs
	// no second run (the holders run alone, with no savepoint to take, and do not count).
	for i := range groupcommit.GuardedAfterFailure {
		id := 10 + 2*i
		errs = batch([]int{id, id + 1}, id+1)
		require.NoError(t, errs[0])
		require.EqualError(t, errs[1], fmt.Sprintf("deliberate failure %d", id+1))
		require.Equal(t, 1, runs[id+1], "batch %d after the failure ran once", i)
	}
	require.EqualValues(t, 1, c.Reruns())
	errs = batch([]int{100, 101}, 101)
	require.EqualError(t, errs[1], "deliberate failure 101")
	require.Equal(t, 2, runs[101], "once the guard is spent, a failure runs the batch again")
	require.EqualValues(t, 2, c.Reruns())
}

// failingClosuresRolledBack is TestFailingClosureRolledBackInBatch with the committer's options o.
func failingClosuresRolledBack(t *testing.T, o groupcommit.Options) {
	db := openDB(t)
	c := newCommitter(t, db, o)
	require.NoError(t, c.Do(context.Background(), insert(9999)))
	release, held := hold(t, c)

	const n = 30
	var mu sync.Mutex
	txOf := make([]*sql.Tx, n+1)
	fns := make([]func(*sql.Tx) error, n)
	for i := range fns {
		id := i + 1
		fns[i] = func(tx *sql.Tx) error {
			mu.Lock()
			txOf[id] = tx
			mu.Unlock()
			if err := insert(id)(tx); err != nil {
				return err
			}
			switch id % 3 {
			case 0: // an error returned by the closure after it wrote
				return fmt.Errorf("deliberate failure %d", id)
			case 1:
				if id%2 == 0 { // a failing statement after a successful one
					return insert(9999)(tx)
				}
			}
			return nil
		}
	}
	ctx := context.Background()
	if o.LazySavepoints {
		ctx = groupcommit.Rerunnable(ctx)
	}
	errs, done := enqueue(t, ctx, c, fns)
	release()
	require.NoError(t, waitErr(t, held, "the holder"))
	waitFor(t, done, "the writers")

	want := []int{0}
	failed, sharedTx := 0, false
	for i, err := range errs {
		id := i + 1
		switch {
		case id%3 == 0:
			require.EqualError(t, err, fmt.Sprintf("deliberate failure %d", id))
		case id%3 == 1 && id%2 == 0:
			require.ErrorContains(t, err, "UNIQUE constraint failed", "writer %d", id)
		default:
			require.NoError(t, err, "writer %d", id)
			want = append(want, id)
			continue
		}
		failed++
		for j := 1; j <= n; j++ {
			if errs[j-1] == nil && txOf[j] == txOf[id] {
				sharedTx = true
			}
		}
	}
	want = append(want, 9999)
	require.Equal(t, want, rowIDs(t, db), "failed closures leave no rows; their neighbours' rows are all there")
	require.True(t, sharedTx, "at least one failing closure ran in the same transaction as a successful one")

	batches, writes := c.Stats()
	require.Equal(t, uint64(1+1+n-failed), writes, "only applied closures count as writes")
	t.Logf("%d writes in %d batches, %d failures", writes, batches, failed)

	// A batch where every closure fails commits nothing and counts nothing.
	err := c.Do(context.Background(), func(tx *sql.Tx) error {
		if err := insert(5000)(tx); err != nil {
			return err
		}
		return errors.New("alone and failing")
	})
	require.EqualError(t, err, "alone and failing")
	b2, w2 := c.Stats()
	require.Equal(t, batches, b2)
	require.Equal(t, writes, w2)
	require.NotContains(t, rowIDs(t, db), 5000)
}

// (d) A panicking closure yields an error carrying the panic value, its writes are undone, and the
// committer goes on working — whether it ran alone or inside a batch.
func TestPanickingClosure(t *testing.T) {
	db := openDB(t)
	c := newCommitter(t, db, groupcommit.Options{})
	ctx := context.Background()

	err := c.Do(ctx, func(tx *sql.Tx) error {
		if err := insert(1)(tx); err != nil {
			return err
		}
		panic("kaboom-42")
	})
	require.Error(t, err)
	require.ErrorContains(t, err, "kaboom-42")
	require.NoError(t, c.Do(ctx, insert(2)), "the committer survives a panic")
	require.Equal(t, []int{2}, rowIDs(t, db))

	release, held := hold(t, c)
	errs, done := enqueue(t, ctx, c, []func(*sql.Tx) error{
		func(tx *sql.Tx) error {
			if err := insert(3)(tx); err != nil {
				return err
			}
			panic(fmt.Errorf("batched boom %d", 3))
		},
		insert(4),
		insert(5),
	})
	release()
	require.NoError(t, waitErr(t, held, "the holder"))
	waitFor(t, done, "the writers")
	require.ErrorContains(t, errs[0], "batched boom 3")
	require.NoError(t, errs[1])
	require.NoError(t, errs[2])
	require.NoError(t, c.Do(ctx, insert(6)))
	require.Equal(t, []int{0, 2, 4, 5, 6}, rowIDs(t, db))
}

// (e) A context that is already done is reported as is and its closure never runs; so is one
// cancelled while its closure waits in the queue.
func TestCancelledContext(t *testing.T) {
	db := openDB(t)
	c := newCommitter(t, db, groupcommit.Options{})

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	err := c.Do(canceled, func(tx *sql.Tx) error { ran = true; return insert(1)(tx) })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, canceled.Err(), err)

	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	err = c.Do(expired, func(tx *sql.Tx) error { ran = true; return insert(2)(tx) })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ran)

	// Cancelled after reaching the queue but before its batch runs.
	release, held := hold(t, c)
	queued, cancel3 := context.WithCancel(context.Background())
	var ranQueued atomic.Bool
	errs, done := enqueue(t, queued, c, []func(*sql.Tx) error{
		func(tx *sql.Tx) error { ranQueued.Store(true); return insert(3)(tx) },
	})
	cancel3()
	release()
	require.NoError(t, waitErr(t, held, "the holder"))
	waitFor(t, done, "the cancelled writer")
	require.ErrorIs(t, errs[0], context.Canceled)
	require.False(t, ranQueued.Load(), "a cancelled closure never runs")

	require.Equal(t, []int{0}, rowIDs(t, db))
	batches, writes := c.Stats()
	require.Equal(t, uint64(1), batches)
	require.Equal(t, uint64(1), writes)
}

// (f) Close waits for everything already queued to commit; afterwards Do returns ErrClosed
// without running its closure.
func TestCloseDrainsQueue(t *testing.T) {
	db := openDB(t)
	c := newCommitter(t, db, groupcommit.Options{})
	release, held := hold(t, c)

	const n = 50
	fns := make([]func(*sql.Tx) error, n)
	for i := range fns {
		fns[i] = insert(i + 1)
	}
	errs, done := enqueue(t, context.Background(), c, fns)

	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a batch was still running")
	default:
	}
	release()
	require.NoError(t, waitErr(t, held, "the holder"))
	waitFor(t, closed, "Close")
	waitFor(t, done, "the writers")
	for i, err := range errs {
		require.NoError(t, err, "queued writer %d is committed by Close", i+1)
	}
	require.Equal(t, seq(0, n), rowIDs(t, db))

	ran := false
	err := c.Do(context.Background(), func(tx *sql.Tx) error { ran = true; return nil })
	require.ErrorIs(t, err, groupcommit.ErrClosed)
	require.False(t, ran)
	require.NoError(t, c.Close(), "Close is idempotent")
	_, writes := c.Stats()
	require.Equal(t, uint64(n+1), writes)
}

// (g) After Close (and closing the database) the committer leaves no goroutine behind, even after
// batches, failures and panics.
func TestNoGoroutineLeak(t *testing.T) {
	db, _ := openRawDB(t)
	c := groupcommit.New(db, groupcommit.Options{MaxBatch: 8})
	var wg sync.WaitGroup
	for i := 1; i <= 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Do(context.Background(), func(tx *sql.Tx) error {
				switch i % 10 {
				case 0:
					panic("leak check")
				case 5:
					return errors.New("leak check")
				}
				return insert(i)(tx)
			})
		}()
	}
	waitFor(t, wgChan(&wg), "the writers")
	require.NoError(t, c.Close())
	require.NoError(t, db.Close())
	goleak.VerifyNone(t)
}

// MaxBatch bounds how many closures share a transaction.
func TestMaxBatchBoundsBatches(t *testing.T) {
	db := openDB(t)
	c := newCommitter(t, db, groupcommit.Options{MaxBatch: 4})
	release, held := hold(t, c)
	var mu sync.Mutex
	perTx := map[*sql.Tx]int{}
	fns := make([]func(*sql.Tx) error, 20)
	for i := range fns {
		fns[i] = func(tx *sql.Tx) error {
			mu.Lock()
			perTx[tx]++
			mu.Unlock()
			return insert(i + 1)(tx)
		}
	}
	errs, done := enqueue(t, context.Background(), c, fns)
	release()
	require.NoError(t, waitErr(t, held, "the holder"))
	waitFor(t, done, "the writers")
	for _, err := range errs {
		require.NoError(t, err)
	}
	sizes := make([]int, 0, len(perTx))
	for _, k := range perTx {
		sizes = append(sizes, k)
	}
	sort.Ints(sizes)
	require.LessOrEqual(t, sizes[len(sizes)-1], 4, "batch sizes %v", sizes)
	require.GreaterOrEqual(t, len(sizes), 5)
	require.Equal(t, seq(0, 20), rowIDs(t, db))
}

// A closure that panics, or returns, with a *sql.Rows still open does not wedge the batch: the
// savepoint rollback and the commit go through and the committer keeps working.
func TestClosureLeavingRowsOpen(t *testing.T) {
	db := openDB(t)
	c := newCommitter(t, db, groupcommit.Options{})
	require.NoError(t, c.Do(context.Background(), insert(1)))
	openRows := func(tx *sql.Tx) error {
		rows, err := tx.Query("SELECT id FROM rows")
		if err != nil {
			return err
		}
		rows.Next() // deliberately never closed
		return nil
	}
	release, held := hold(t, c)
	errs, done := enqueue(t, context.Background(), c, []func(*sql.Tx) error{
		func(tx *sql.Tx) error {
			if err := openRows(tx); err != nil {
				return err
			}
			if err := insert(50)(tx); err != nil {
				return err
			}
			panic("with rows open")
		},
		insert(2),
		func(tx *sql.Tx) error {
			if err := openRows(tx); err != nil {
				return err
			}
			return insert(3)(tx)
		},
		insert(4),
	})
	release()
	require.NoError(t, waitErr(t, held, "the holder"))
	waitFor(t, done, "the writers")
	require.ErrorContains(t, errs[0], "with rows open")
	require.NoError(t, errs[1])
	require.NoError(t, errs[2])
	require.NoError(t, errs[3])

	err := c.Do(context.Background(), func(tx *sql.Tx) error {
		if err := openRows(tx); err != nil {
			return err
		}
		panic("alone with rows open")
	})
	require.ErrorContains(t, err, "alone with rows open")
	require.NoError(t, c.Do(context.Background(), insert(5)))
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, rowIDs(t, db))
}

// MaxWait bounds the wait of a write the committer has not started: behind a batch that does not
// end, Do answers ErrBusy within the bound and its closure never runs, while the write that was
// running is waited for to its end; once the writer is free, writes succeed again. The bound comes
// from Options.MaxWait or, overriding it, from the context (WithMaxWait): a write whose context
// says 0 waits.
func TestMaxWaitAnswersBusyBehindAStuckBatch(t *testing.T) {
	const bound = 100 * time.Millisecond
	for _, tc := range []struct {
		name      string
		opts      groupcommit.Options
		bounded   context.Context
		unbounded context.Context
	}{
		{"option", groupcommit.Options{MaxWait: bound}, context.Background(), groupcommit.WithMaxWait(context.Background(), 0)},
		{"context", groupcommit.Options{}, groupcommit.WithMaxWait(context.Background(), bound), context.Background()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			c := newCommitter(t, db, tc.opts)
			release, held := hold(t, c) // the stuck batch: it runs, and waits past the bound

			patient := make(chan error, 1)
			go func() { patient <- c.Do(tc.unbounded, insert(3)) }()

			var ran atomic.Bool
			start := time.Now()
			err := c.Do(tc.bounded, func(tx *sql.Tx) error { ran.Store(true); return insert(1)(tx) })
			waited := time.Since(start)
			require.ErrorIs(t, err, groupcommit.ErrBusy)
			require.GreaterOrEqual(t, waited, bound)
			require.Less(t, waited, bound+5*time.Second, "answered within the bound, not after the stuck batch")

			release()
			require.NoError(t, waitErr(t, held, "the holder"), "a started write is waited for past the bound")
			require.NoError(t, waitErr(t, patient, "the unbounded write"), "a write without a bound waits")
			require.NoError(t, c.Do(context.Background(), insert(2)))
			require.False(t, ran.Load(), "an abandoned closure never runs")
			require.Equal(t, []int{0, 2, 3}, rowIDs(t, db))
		})
	}
}

// TestBatchHooks: BeginBatch runs before each batch and BeforeCommit in its transaction after its
// closures, so what it writes commits with them; when BeforeCommit fails, the batch's closures fail
// and nothing of it is applied.
func TestBatchHooks(t *testing.T) {
	db := openDB(t)
	var begun, before int
	fail := false
	c := newCommitter(t, db, groupcommit.Options{
		BeginBatch: func() { begun++ },
		BeforeCommit: func(tx *sql.Tx) error {
			before++
			if fail {
				return errors.New("hook failed")
			}
			_, err := tx.Exec("INSERT INTO rows (id, v) VALUES (?, 'hook')", 1000+before)
			return err
		},
	})
	ctx := context.Background()
	require.NoError(t, c.Do(ctx, insert(1)))
	require.Equal(t, []int{1, 1001}, rowIDs(t, db))
	require.Equal(t, 1, begun)
	require.Equal(t, 1, before)

	fail = true // read and written by the committer's goroutine only from here on (Do waits)
	err := c.Do(ctx, insert(2))
	require.ErrorContains(t, err, "before commit: hook failed")
	require.Equal(t, []int{1, 1001}, rowIDs(t, db), "the failed batch applied nothing")
	require.Equal(t, 2, begun)
}

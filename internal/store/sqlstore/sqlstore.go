// Package sqlstore implements store.Store on SQL databases. SQLite (modernc.org/sqlite, pure Go) is
// the embedded default: one writer connection owned by the group committer, a separate pool of
// read-only connections, WAL journal, foreign keys, a busy timeout and synchronous=FULL so that an
// acknowledged write survives power loss as well as kill -9.
//
// The domain code shared with pgstore (the PostgreSQL sibling) is in sqlcore, which Store and tx
// embed; this package keeps the connections, migrations, statement cache, checkpointer, file lock,
// its Dialect and the few statements SQLite needs written its own way.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/larkrun/lark/internal/groupcommit"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

// Store is a store.Store backed by SQL.
type Store struct {
	// Reader is the shared half of store.Reader, over r.
	sqlcore.Reader
	w    *sql.DB // writer: used only by the group committer
	rdb  *sql.DB // readers
	r    cachedDB
	ws   *stmtCache    // the writer's statements
	ckpt *checkpointer // copies WAL frames into the database beside the writer
	gc   *groupcommit.Committer
	// usage sums the usage its batch's closures wrote, written once per row before it commits.
	usage *sqlcore.UsageBatch
	prov  *goose.Provider
	lock  *os.File // held while open: one process per database file
	// catalogGen is store.Store's CatalogGeneration: bumped by Update after a transaction that wrote
	// the entrypoints or tenants table.
	catalogGen atomic.Uint64
	// missed counts the optimistic closures Update ran again (Missed).
	missed atomic.Uint64
}

var _ store.Store = (*Store)(nil)

// Options tune OpenSQLite.
type Options struct {
	// MaxBatch bounds the writes per group commit (default 256).
	MaxBatch int
	// Synchronous is SQLite's synchronous pragma: FULL (default) or NORMAL (durable against process
	// crashes but not power loss; faster).
	Synchronous string
	// NoMigrate leaves pending migrations alone: a database that is behind the binary then fails
	// the open (migration.BehindError) instead of being migrated. A database newer than the binary
	// always fails it (migration.TooNewError).
	NoMigrate bool
}

// OpenSQLite opens (creating if needed) the database file at path, applies pending migrations
// (unless o.NoMigrate) and starts the group committer. A database whose schema is newer than the
// binary's migrations is refused.
func OpenSQLite(ctx context.Context, path string, o Options) (*Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := privateFiles(path); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	s, err := openSQLite(ctx, path, o)
	if err != nil {
		lock.Close()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// FileMode is the mode of the database files: the database, its -wal and -shm files (SQLite gives
// them the database's mode) and the lock file. Only the owner reads tenants' data.
const FileMode os.FileMode = 0o600

// privateFiles creates the database file with FileMode when it does not exist yet, and takes
// group and other permissions off the database files that do.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + ".lock"} {
		st, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if st.Mode().Perm()&^FileMode != 0 {
			if err := os.Chmod(p, FileMode); err != nil {
				return err
			}
		}
	}
	return nil
}

func openSQLite(ctx context.Context, path string, o Options) (*Store, error) {
	syncMode := strings.ToUpper(o.Synchronous)
	if syncMode == "" {
		syncMode = "FULL"
	}
	if syncMode != "FULL" && syncMode != "NORMAL" {
		return nil, fmt.Errorf("open store: synchronous must be FULL or NORMAL, got %q", o.Synchronous)
	}
	base := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)" +
		"&_pragma=synchronous(" + syncMode + ")"
	w, err := sql.Open("sqlite", base+"&_txlock=immediate&_pragma=temp_store(MEMORY)")
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	prov, err := newProvider(w)
	if err != nil {
		w.Close()
		return nil, err
	}
	if err := prepareSchema(ctx, w, prov, !o.NoMigrate); err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := optimize(ctx, w); err != nil { // the planner's statistics (optimize.go)
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", base+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open store readers: %w", err)
	}
	n := 2 * runtime.GOMAXPROCS(0)
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	ck, err := sql.Open("sqlite", base)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open store checkpointer: %w", err)
	}
	ck.SetMaxOpenConns(1)
	ck.SetMaxIdleConns(1)
	s := &Store{w: w, rdb: r, r: cachedDB{newStmtCache(r)}, ws: newStmtCache(w), prov: prov, ckpt: newCheckpointer(ck)}
	s.Reader = sqlcore.Reader{Q: s.r, D: dialect{}}
	s.usage = sqlcore.NewUsageBatch()
	s.gc = groupcommit.New(w, groupcommit.Options{MaxBatch: o.MaxBatch, AfterBatch: func() {
		s.ws.prepareWanted()
		s.ckpt.wake()
	}, BeginBatch: s.usage.Reset, BeforeCommit: func(t *sql.Tx) error { return writeUsage(cachedTx{tx: t, c: s.ws}, s.usage) }, PrepareSavepoints: true, LazySavepoints: true})
	return s, nil
}

// errMissed is what an optimistic closure's run returns to the committer when an assumption of
// it proved wrong (sqlcore.Tx.Missed): its savepoint is rolled back, and Update runs it again.
var errMissed = errors.New("sqlstore: an optimistic assumption proved wrong")

// Update implements store.Store. A closure made with store.Optimistic runs optimistically first:
// an Append given the caller's projection (AppendOptions.Expect) takes it as current instead of
// reading it, and makes the projection's update conditional on it. When that proves wrong the run
// is rolled back and the closure runs again on a read of the projection, as store.Optimistic
// allows; the engine's appends (a claim, an attempt's end) are right but for a race with another
// write to the same invocation, and each saves a read.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	optimistic := store.IsOptimistic(ctx)
	err := s.update(ctx, fn, optimistic)
	if optimistic && errors.Is(err, errMissed) {
		s.missed.Add(1)
		err = s.update(ctx, fn, false)
	}
	return err
}

// update is one run of Update's closure, optimistic or not.
func (s *Store) update(ctx context.Context, fn func(store.Tx) error, optimistic bool) error {
	var catalog bool
	var after []func()
	err := s.gc.Do(committerCtx(ctx), func(t *sql.Tx) error {
		x := s.newTx(t, ctx)
		x.Optimistic = optimistic
		err := fn(x)
		if x.Missed {
			err = errMissed // whatever fn made of it: nothing of this run may commit
		}
		x.finish(err)
		catalog, after = x.Catalog, x.After
		return err
	})
	// Do has returned: fn ran and its batch committed (or fn never ran, or it failed). A write to
	// the catalog moves the generation even when it failed, since the batch's other closures may
	// have read it before the rollback; a miss costs a read, a missed bump would serve stale data.
	if catalog {
		s.catalogGen.Add(1)
	}
	if errors.Is(err, groupcommit.ErrClosed) {
		return store.ErrClosed
	}
	if errors.Is(err, groupcommit.ErrBusy) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	committed(err, after)
	return err
}

// committerCtx is the context a write made with ctx is handed to the committer with: a
// store.Optimistic closure tolerates a run again, so its batch may run without savepoints
// (groupcommit.Options.LazySavepoints).
func committerCtx(ctx context.Context) context.Context {
	if store.IsOptimistic(ctx) {
		return groupcommit.Rerunnable(ctx)
	}
	return ctx
}

// Missed is how many optimistic closures of Update ran again, an assumption of theirs wrong.
func (s *Store) Missed() uint64 { return s.missed.Load() }

// Enqueue implements store.Store.
func (s *Store) Enqueue(ctx context.Context, fn func(store.Tx) error) func() error {
	var catalog bool
	var after []func()
	wait := s.gc.Enqueue(committerCtx(ctx), func(t *sql.Tx) error {
		x := s.newTx(t, ctx)
		err := fn(x)
		x.finish(err)
		catalog, after = x.Catalog, x.After
		return err
	})
	return func() error {
		err := wait()
		if catalog { // as in Update
			s.catalogGen.Add(1)
		}
		if errors.Is(err, groupcommit.ErrClosed) {
			return store.ErrClosed
		}
		committed(err, after)
		return err
	}
}

// Synchronous reads the writer connection's synchronous pragma back: 1 is NORMAL, 2 is FULL (the
// setting is per connection, so the writer's is the one that decides what a commit survives).
func (s *Store) Synchronous(ctx context.Context) (int, error) {
	var n int
	err := s.gc.Do(ctx, func(t *sql.Tx) error { return t.QueryRowContext(bg, `PRAGMA synchronous`).Scan(&n) })
	if err != nil {
		return 0, fmt.Errorf("read the synchronous pragma: %w", err)
	}
	return n, nil
}

// CatalogGeneration implements store.Store.
func (s *Store) CatalogGeneration() uint64 { return s.catalogGen.Load() }

// CommitStats reports group-commit batches and the writes they carried.
func (s *Store) CommitStats() (batches, writes uint64) { return s.gc.Stats() }

// CommitReruns reports how many group-commit batches ran again because a closure failed without
// its savepoint (groupcommit.Options.LazySavepoints).
func (s *Store) CommitReruns() uint64 { return s.gc.Reruns() }

// CommitHistograms reports the group commit's batch sizes and latencies (lark_groupcommit_*).
func (s *Store) CommitHistograms() (size, latency groupcommit.Histogram) { return s.gc.Histograms() }

// Ping implements store.Store: the database answers and no migration is pending.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.PingContext(ctx); err != nil {
		return err
	}
	pending, err := s.prov.HasPending(ctx)
	if err != nil {
		return err
	}
	if pending {
		return errors.New("migrations pending")
	}
	return nil
}

// Close finishes queued writes and closes the database.
func (s *Store) Close() error {
	s.gc.Close()
	ckErr := s.ckpt.close()
	s.r.c.close()
	s.ws.close()
	err := errors.Join(ckErr, s.rdb.Close(), s.w.Close())
	if s.lock != nil {
		err = errors.Join(err, s.lock.Close())
	}
	return err
}

// Exclusive reports that this process is the only one using the database (true for the embedded
// SQLite file, which is locked while open): every lease found in it at start-up was taken by a
// process that has since stopped.
func (s *Store) Exclusive() bool { return true }

// tx implements store.Tx, one per closure (a group-committed batch runs several closures in one
// database transaction, each through its own tx). Its statements use a background context: the
// committer, not the caller, owns the transaction's lifetime.
type tx struct {
	// Tx is the shared half of store.Tx, over t; its Catalog says the transaction wrote the
	// entrypoints or tenants table (Update then moves the CatalogGeneration).
	sqlcore.Tx
	t cachedTx
	// batch is the committer's usage batch, usage what the closure gathered for it (WriteUsage),
	// flushed what it wrote of the batch's (flushUsage).
	batch   *sqlcore.UsageBatch
	usage   []sqlcore.UsageDelta
	flushed []*sqlcore.UsageBatch
}

// newTx is the tx of one closure run by the committer over its transaction t, its usage gathered
// into the batch's.
func (s *Store) newTx(t *sql.Tx, ctx context.Context) *tx {
	q := cachedTx{tx: t, c: s.ws}
	x := &tx{Tx: sqlcore.Tx{Q: q, D: dialect{}, Ctx: ctx}, t: q, batch: s.usage}
	x.W = x
	return x
}

// committed runs the hooks of a closure whose write committed (err == nil).
func committed(err error, after []func()) {
	if err != nil {
		return
	}
	for _, f := range after {
		f()
	}
}

var bg = context.Background()

// The stored forms of times (sqlcore.TimeFormat).
func ts(t time.Time) string  { return sqlcore.TS(t) }
func tsPtr(t *time.Time) any { return sqlcore.TSPtr(t) }

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// Package pgstore implements store.Store on PostgreSQL, with pgx/v5 and a pgxpool pool: the store
// of a deployment that outgrew one machine, where several lark processes share one database.
//
// It is a sibling of sqlstore, not a dialect of it: the domain code both share is in sqlcore (Store
// and tx embed its Reader and Tx, over this package's Dialect), and this package keeps what is
// PostgreSQL's own: connections, migrations, retries, locks, NOTIFY and the statements written
// differently (the same domain file names hold them). The columns are SQLite's, with the same
// meaning (times as fixed-width UTC text, JSON documents as text returned verbatim, booleans as
// 0/1), in its own consolidated migrations. Queries are written with ?
// placeholders like sqlstore's (and the OData compiler emits them); the querier rewrites them to
// PostgreSQL's $n once per distinct text (rebind).
//
// Writes: Update and Enqueue go through the group committer (internal/groupcommit), as on SQLite:
// each process runs its write closures one batch at a time, each closure in its own SAVEPOINT of
// one transaction, and commits once per batch. On PostgreSQL that saves a commit (a WAL flush and
// a round trip) per write, and it serialises this process's writes, so they never deadlock or
// conflict with each other; concurrent writers are other processes. The committer's transactions
// are pipelined (pipeline.go): writes are sent with the next read or the COMMIT, so a batch costs a
// round trip per read, not per statement; the engine's writes (store.Optimistic) also skip reads
// they can assume, and a batch where an assumption failed is replayed unpipelined. Transactions run at READ
// COMMITTED; the claims lock the rows they take with FOR UPDATE SKIP LOCKED, so two processes never
// claim the same work; revision checks are in the UPDATE itself, which PostgreSQL re-checks on the
// locked row; Append reads the projection FOR UPDATE, so its lease and last_seq checks see another
// process's committed write to that invocation, and Tx.Secret reads the secret FOR UPDATE (a
// secret's update carries no revision). A closure that fails
// with a serialization failure (40001), a deadlock (40P01) or a connection error raised before its
// COMMIT was sent is run again, in a new batch, with backoff (see retryable).
//
// Every operation on a connection is bounded on this side (Options.ClientTimeout), and the
// connections use TCP keepalives and TCP_USER_TIMEOUT (Options.TCPTimeout): a database that stops
// answering fails requests with store.ErrUnavailable within a bound instead of holding them for
// as long as a network partition lasts (deadline.go).
//
// Reads go straight to the pool, outside any transaction; TenantLoads reads in one read-only
// transaction (one snapshot).
package pgstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/larkrun/lark/internal/groupcommit"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Store is a store.Store backed by PostgreSQL.
type Store struct {
	// Reader is the shared half of store.Reader, over r.
	sqlcore.Reader
	pool *pgxpool.Pool
	db   *sql.DB // database/sql over pool (pipeConnector): the committer's and the readers' handle
	r    rebound
	// gcs are the committers, each on a connection of its own (Options.Writers); see writer.
	gcs []*groupcommit.Committer
	// usage are the usage deltas each committer's batch gathered (usageBatch).
	usage []*usageBatch
	prov  *goose.Provider
	// catalogGen is store.Store's CatalogGeneration (as in sqlstore).
	catalogGen atomic.Uint64
	retry      RetryPolicy
	// retries counts closures run again after a retryable failure (RetryStats).
	retries atomic.Uint64
	// usageShard is the first shard of the usage_hourly rows this process adds to (random at open,
	// 0-63; committer i adds to usageShard+i): the nodes and committers sharing the database then
	// rarely wait for each other's row lock (migration 00003).
	usageShard int16
	// wakeChannel is the NOTIFY channel of this database and schema's cross-node wake-ups (notify.go).
	wakeChannel string
	// vacuum keeps invocation_queue's dead entries few (queue.go); nil when Options.QueueVacuum < 0.
	vacuum *queueVacuum
	// timeouts are Options.ClientTimeout and TCPTimeout resolved (deadline.go).
	timeouts timeouts
}

var _ store.Store = (*Store)(nil)

// Options tune Open. The zero value is usable.
type Options struct {
	// MaxConns bounds the pool's connections (default 10). The committer uses one at a time; the
	// rest serve reads. Every lark process sharing the database has its own pool: the sum over the
	// processes must stay under the server's max_connections.
	MaxConns int32
	// StatementTimeout bounds every statement (default 30s; negative: none). A URL that sets
	// statement_timeout itself wins.
	StatementTimeout time.Duration
	// MaxBatch bounds the writes per group commit (default 256).
	MaxBatch int
	// Writers is the number of group committers, each writing on a connection of its own (default
	// DefaultWriters): a committer waits for the database on each of its round trips, and another
	// can use the time. Writes made with store.AnyWriter spread over them; the others all run on
	// the first (Store.writer). The pool needs a connection per writer besides its readers.
	Writers int
	// Retry is the policy for closures that failed with a retryable error (zero: DefaultRetry).
	Retry RetryPolicy
	// NoMigrate leaves pending migrations alone: a database that is behind the binary then fails
	// the open (migration.BehindError) instead of being migrated. A database newer than the binary
	// always fails it (migration.TooNewError).
	NoMigrate bool
	// NoPipeline runs every statement of the committer's transactions as it is made, a round trip
	// each, instead of pipelining them (pipeline.go): for measuring what pipelining saves.
	NoPipeline bool
	// QueueVacuum is how often the store vacuums the table of queued invocations (queueVacuum;
	// default DefaultQueueVacuum; negative: never, autovacuum alone).
	QueueVacuum time.Duration
	// ClientTimeout bounds, on this side, each operation on a connection: taking it from the pool
	// (or opening it), a read with its rows, a transaction from BEGIN to COMMIT (a group-commit
	// batch). Past it the connection is closed and the operation fails with store.ErrUnavailable.
	// It is what bounds a request while the database does not answer at all (a network partition),
	// where StatementTimeout cannot act (default DefaultClientTimeout; negative: none). See
	// deadline.go.
	ClientTimeout time.Duration
	// TCPTimeout is how long a connection's peer may stay silent before the kernel ends it:
	// keepalive probes, and TCP_USER_TIMEOUT on Linux, on Lark's end and (as session settings) on
	// the server's (default DefaultTCPTimeout; negative: the operating system's defaults).
	TCPTimeout time.Duration
}

// RetryPolicy says how often, and after what waits, a write that failed with a retryable error is
// run again.
type RetryPolicy struct {
	// Attempts is the number of runs in all (default 5).
	Attempts int
	// Base is the first wait; each next wait doubles, up to Max (defaults 10ms and 1s).
	Base, Max time.Duration
}

// DefaultRetry is the retry policy of a zero Options.
var DefaultRetry = RetryPolicy{Attempts: 5, Base: 10 * time.Millisecond, Max: time.Second}

// Default pool and statement bounds.
const (
	DefaultMaxConns         = 10
	DefaultStatementTimeout = 30 * time.Second
	DefaultWriters          = 2
)

// IsURL reports whether s names a PostgreSQL database (postgres:// or postgresql://).
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open connects to the database at url (a postgres:// URL; search_path in it selects the schema),
// applies pending migrations under an advisory lock, so that processes starting together migrate
// once, and starts the group committer.
func Open(ctx context.Context, url string, o Options) (*Store, error) {
	pool, err := connect(ctx, url, o)
	if err != nil {
		return nil, err
	}
	s, err := open(ctx, pool, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// connect opens the pool of url with o's bounds.
func connect(ctx context.Context, url string, o Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	cfg.MaxConns = DefaultMaxConns
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	timeout := DefaultStatementTimeout
	if o.StatementTimeout != 0 {
		timeout = o.StatementTimeout
	}
	if _, set := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !set && timeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
	}
	// The queries' string literals assume standard strings (LIKE ... ESCAPE '\'), PostgreSQL's default
	// since 9.1; a server configured otherwise is overridden for Lark's connections.
	rp := cfg.ConnConfig.RuntimeParams
	rp["standard_conforming_strings"] = "on"
	if _, set := rp["application_name"]; !set {
		rp["application_name"] = "lark"
	}
	applyTimeouts(cfg, timeoutsOf(o))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return pool, nil
}

func open(ctx context.Context, pool *pgxpool.Pool, o Options) (*Store, error) {
	where, err := schemaOf(ctx, pool)
	if err != nil {
		return nil, err
	}
	if err := migrateOn(ctx, pool, where, !o.NoMigrate); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// database/sql over the pool, through pconn (pipeline.go); the pool manages idle connections.
	t := timeoutsOf(o)
	db := sql.OpenDB(pipeConnector{base: stdlib.GetPoolConnector(pool), timeout: t.client})
	db.SetMaxIdleConns(0)
	prov, err := newProvider(db, where)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	s := &Store{pool: pool, db: db, r: rebound{db}, prov: prov, retry: o.Retry, wakeChannel: wakeChannel(where),
		usageShard: int16(mrand.IntN(64)), timeouts: t}
	s.Reader = sqlcore.Reader{Q: s.r, D: dialect{}}
	if s.retry.Attempts <= 0 {
		s.retry = DefaultRetry
	}
	gco := groupcommit.Options{MaxBatch: o.MaxBatch, Pipeline: pipelineCtx}
	if o.NoPipeline {
		gco.Pipeline = nil
	}
	n := o.Writers
	if n <= 0 {
		n = DefaultWriters
	}
	for i := range n {
		ub := newUsageBatch((s.usageShard + int16(i)) % 64)
		o := gco
		o.BeginBatch = ub.Reset
		o.BeforeCommit = func(t *sql.Tx) error { return ub.write(rebound{t}) }
		s.usage = append(s.usage, ub)
		s.gcs = append(s.gcs, groupcommit.New(db, o))
	}
	if o.QueueVacuum >= 0 {
		period := o.QueueVacuum
		if period == 0 {
			period = DefaultQueueVacuum
		}
		s.vacuum = startQueueVacuum(s, period)
	}
	return s, nil
}

// Update implements store.Store. A closure that failed with a retryable error (see retryable) is
// run again, with backoff, up to the retry policy's attempts: closures passed to Update must be
// safe to run again after a failed run, which store.Tx already demands (a failed run's writes are
// rolled back, and its AfterCommit hooks never run).
//
// A write made with store.OutlastOutages that could not reach the database (refused, lost, or past
// its client-side deadline before its COMMIT was sent) goes on being retried (backoff at most the
// policy's Max) for its duration after the first such failure. Any other
// write starts no new run once Options.ClientTimeout has passed since its first: a request's
// answer stays bounded while the database does not answer.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	outlast, persist := store.OutagesOutlasted(ctx)
	began := time.Now()
	var until time.Time
	var err error
	for attempt := 1; ; attempt++ {
		err = s.updateOnce(ctx, fn)
		if !retryable(err) {
			return unavailable(err)
		}
		if persist && isConnError(err) {
			if until.IsZero() {
				until = time.Now().Add(outlast)
			}
			if time.Now().After(until) {
				return unavailable(err)
			}
		} else if attempt >= s.retry.Attempts || (s.timeouts.client > 0 && time.Since(began) >= s.timeouts.client) {
			return unavailable(err)
		}
		s.retries.Add(1)
		if werr := s.backoff(ctx, attempt); werr != nil {
			return unavailable(err)
		}
	}
}

// unavailable marks a write's final error as store.ErrUnavailable when it says the database could
// not be reached or the connection was lost (the API answers 503 with Retry-After): a connection
// refused or closed, an end of stream, a timeout, anything pgconn deems safe to retry, or what
// store.IsUnavailable recognises (class 08, 57P01–03, 57014, 53300). Other errors are returned as
// they are.
func unavailable(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	if connLost(err) || store.IsUnavailable(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// connLost reports whether err says the connection could not be made or was lost: refused or
// closed, an end of stream, a timeout, or anything pgconn deems safe to retry.
func connLost(err error) bool {
	var connErr *pgconn.ConnectError
	return errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &connErr) || pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

// writer picks the committer of an Update made with ctx. The first, which runs every Enqueue and
// every write not made with store.AnyWriter (and store.Optimistic): those keep a single writer's
// order and serialisation within the process. A write made with both goes to the committer with
// the fewest closures queued or running, except to the first while writes queued by Enqueue are
// in flight on it (a caller's write never overtakes what it enqueued before, as Enqueue promises).
func (s *Store) writer(ctx context.Context) int {
	if len(s.gcs) == 1 || !store.IsAnyWriter(ctx) || !store.IsOptimistic(ctx) {
		return 0
	}
	all, enq := s.gcs[0].InFlight()
	if enq > 0 {
		return 0
	}
	best := 0
	for i := 1; i < len(s.gcs); i++ {
		if n, _ := s.gcs[i].InFlight(); n < all {
			best, all = i, n
		}
	}
	return best
}

func (s *Store) updateOnce(ctx context.Context, fn func(store.Tx) error) error {
	var catalog bool
	var after []func()
	i := s.writer(ctx)
	gc := s.gcs[i]
	err := gc.Do(ctx, func(t *sql.Tx) error {
		x := s.newTx(t, ctx, i)
		err := s.run(x, fn, i)
		catalog, after = x.Catalog, x.After
		return err
	})
	return s.finish(err, catalog, after)
}

// finish is the end of one run of a closure: as sqlstore's Update.
func (s *Store) finish(err error, catalog bool, after []func()) error {
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

// Enqueue implements store.Store. A closure whose run failed with a retryable error is run again
// by wait, through Update, after the writes queued behind it: a write that depends on it detects
// the failure as store.Store.Enqueue requires (AppendOptions.RequireLease and Expect).
func (s *Store) Enqueue(ctx context.Context, fn func(store.Tx) error) func() error {
	var catalog bool
	var after []func()
	wait := s.gcs[0].Enqueue(ctx, func(t *sql.Tx) error {
		x := s.newTx(t, ctx, 0)
		err := s.run(x, fn, 0)
		catalog, after = x.Catalog, x.After
		return err
	})
	return func() error {
		err := s.finish(wait(), catalog, after)
		if !retryable(err) || s.retry.Attempts <= 1 {
			return unavailable(err)
		}
		s.retries.Add(1)
		if werr := s.backoff(ctx, 1); werr != nil {
			return unavailable(err)
		}
		return s.Update(ctx, fn)
	}
}

// backoff waits before run attempt+1: Base doubled attempt-1 times, at most Max, or until ctx ends.
func (s *Store) backoff(ctx context.Context, attempt int) error {
	d := s.retry.Base
	for i := 1; i < attempt && d < s.retry.Max; i++ {
		d *= 2
	}
	d = min(d, s.retry.Max)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryable reports whether a write that failed with err may be run again: a serialization failure
// (40001) or a deadlock (40P01), after which PostgreSQL rolled the work back; a connection the server
// ended or refused (class 08, or 57P01-57P03: an administrator's pg_terminate_backend, a shutdown or
// a restart) before the commit, which ended the transaction with nothing applied; or a connection
// error that happened while connecting, before anything was sent (pgconn.SafeToRetry), or before the
// COMMIT was sent (a connection lost or past its client-side deadline mid-transaction). A failed
// commit (the committer's "commit: " errors) is retried only for 40001 and 40P01: a connection lost
// during a commit leaves unknown whether it applied.
func retryable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "40001" || pgErr.Code == "40P01":
			return true
		case strings.HasPrefix(err.Error(), commitFailed):
			return false
		default:
			return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
		}
	}
	if strings.HasPrefix(err.Error(), commitFailed) {
		return false
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	// The connection was lost, or its operation passed its deadline (the database does not
	// answer), before the COMMIT was sent: the transaction was never committed.
	return pgconn.SafeToRetry(err) || isConnError(err)
}

// commitFailed starts the committer's error for a failed COMMIT (groupcommit).
const commitFailed = "commit: "

// Replays reports how many group-commit batches were run again without pipelining (pipeline.go).
func (s *Store) Replays() uint64 {
	var n uint64
	for _, gc := range s.gcs {
		n += gc.Replays()
	}
	return n
}

// RetryStats reports how many closures were run again after a retryable failure.
func (s *Store) RetryStats() uint64 { return s.retries.Load() }

// CatalogGeneration implements store.Store.
func (s *Store) CatalogGeneration() uint64 { return s.catalogGen.Load() }

// CommitStats reports group-commit batches and the writes they carried.
func (s *Store) CommitStats() (batches, writes uint64) {
	for _, gc := range s.gcs {
		b, w := gc.Stats()
		batches, writes = batches+b, writes+w
	}
	return batches, writes
}

// CommitReruns reports how many group-commit batches ran a second time (Replays, and the
// committers' Reruns).
func (s *Store) CommitReruns() uint64 {
	n := s.Replays()
	for _, gc := range s.gcs {
		n += gc.Reruns()
	}
	return n
}

// CommitHistograms reports the group commit's batch sizes and latencies (lark_groupcommit_*).
func (s *Store) CommitHistograms() (size, latency groupcommit.Histogram) {
	size, latency = s.gcs[0].Histograms()
	for _, gc := range s.gcs[1:] {
		sz, lat := gc.Histograms()
		size, latency = size.Add(sz), latency.Add(lat)
	}
	return size, latency
}

// Pool is the store's connection pool, for the few callers that need PostgreSQL itself (advisory
// locks, LISTEN/NOTIFY, tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping implements store.Store: the database answers and no migration is pending, within
// Options.ClientTimeout.
func (s *Store) Ping(ctx context.Context) error {
	return s.within(ctx, func(ctx context.Context) error {
		if err := s.pool.Ping(ctx); err != nil {
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
	})
}

// Close finishes queued writes and closes the pool.
func (s *Store) Close() error {
	if s.vacuum != nil {
		s.vacuum.close()
	}
	for _, gc := range s.gcs {
		gc.Close()
	}
	err := s.db.Close()
	s.pool.Close()
	return err
}

// Exclusive implements store.Store: false, since other processes may share the database, so a lease
// found at start-up may be live.
func (s *Store) Exclusive() bool { return false }

// tx implements store.Tx, one per closure (as sqlstore's). Its statements use a background
// context: the committer, not the caller, owns the transaction's lifetime.
type tx struct {
	// Tx is the shared half of store.Tx, over t.
	sqlcore.Tx
	t rebound
	// usageShard is the usage_hourly shard of the closure's committer (Store.usageShard).
	usageShard int16
	// usage are the deltas an optimistic closure wrote (WriteUsage), for its batch's usageBatch.
	usage []sqlcore.UsageDelta
}

// newTx is the tx of one run of a closure made with ctx, on committer writer's transaction t: an
// optimistic one (store.Optimistic) when the committer runs it pipelined.
func (s *Store) newTx(t *sql.Tx, ctx context.Context, writer int) *tx {
	x := newTx(rebound{t}, ctx, (s.usageShard+int16(writer))%64)
	x.Optimistic = s.gcs[writer].Pipelined() && store.IsOptimistic(ctx)
	return x
}

// run runs fn on x, committer writer's. The usage deltas of an optimistic fn that succeeded join
// its batch's. A closure that is not optimistic, run pipelined, first writes the usage the batch
// gathered so far, so that it sees the aggregates exact; that write is in the closure's savepoint,
// so when fn fails (and the savepoint is rolled back) the batch gathers it again.
func (s *Store) run(x *tx, fn func(store.Tx) error, writer int) error {
	b := s.usage[writer]
	var written *usageBatch
	if s.gcs[writer].Pipelined() && !x.Optimistic {
		written = b.take()
		if err := written.write(x.t); err != nil {
			b.Merge(written.UsageBatch)
			return err
		}
	}
	if err := fn(x); err != nil {
		if written != nil {
			b.Merge(written.UsageBatch)
		}
		return err
	}
	if x.Optimistic {
		b.Add(x.usage)
	}
	return nil
}

// newTx is the tx of one closure run over t.
func newTx(t rebound, ctx context.Context, usageShard int16) *tx {
	x := &tx{Tx: sqlcore.Tx{Q: t, D: dialect{}, Ctx: ctx}, t: t, usageShard: usageShard}
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

// conflicted reports whether an INSERT ... ON CONFLICT DO NOTHING met an existing row. PostgreSQL
// aborts a transaction at its first error, so an insert that may meet a unique constraint never
// lets it fail: it does nothing, and the caller reports store.ErrConflict.
func conflicted(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 0, err
}

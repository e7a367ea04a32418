// Package sqlcore is the dialect-neutral SQL of both stores: the domain code (entrypoints,
// tenants and tokens, invocations and their event logs, the queue, events, triggers, schedules,
// backfills, webhooks, secrets, usage, retention, projections, assets) that sqlstore (SQLite) and pgstore
// (PostgreSQL) would otherwise each carry a copy of, statement for statement.
//
// The stores stay siblings, not dialects of one store: each owns its connection handling, its
// migrations, its group committer, its locks and every statement whose shape differs between the
// databases (an insert that reports its sequence number, an upsert, an invocation event's insert,
// a planner-specific load query, the leader lease). What is the same lives here:
//
//   - Reader and Tx carry a Querier (the store's read pool, or the closure's transaction) and a
//     Dialect. Their methods implement the shared parts of store.Reader and store.Tx; each store's
//     Store and tx embed them, so the methods are promoted, and define only the ones that differ.
//     A Tx also calls back into its store's tx for the writes whose shape differs (Writes).
//   - Dialect is the little that differs inside otherwise shared statements: how an insert that
//     may meet a unique key reports it (PostgreSQL aborts a transaction at its first error, so it
//     inserts ON CONFLICT DO NOTHING and counts the rows; SQLite reports the unique violation),
//     row locks (FOR UPDATE, SKIP LOCKED: SQLite has one writer and needs none), SQLite's index
//     hints (INDEXED BY), JSON functions, integer SUMs and conditional counts, OFFSET.
//   - The helpers both stores use: the stored time format (TS, ParseTS), argument conversion
//     (Args), keyset pagination (ListPage), ScanAll, NotFound.
//
// Why one copy: a fix or a new column in a domain file used to need the same edit twice, and the
// two copies drifted only where the databases differ; now that difference is all that is left in
// the stores, and the conformance suite (storetest) runs the one copy on both.
//
// Statements are written with ? placeholders; pgstore's Querier rewrites them to $n.
package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// Querier runs statements with ? placeholders: what *sql.DB and *sql.Tx have in common, and what
// each store wraps them in (statement caching, placeholder rewriting).
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type expectKey struct{}

// ExpectRows returns ctx carrying the row count a statement made with it is expected to affect. A
// store may then answer that count without waiting for the statement (pgstore's pipelined
// transactions do, and replay the transaction without pipelining when the count differs); others
// ignore it.
func ExpectRows(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, expectKey{}, n)
}

// ExpectedRows is the count ExpectRows put in ctx.
func ExpectedRows(ctx context.Context) (int64, bool) {
	n, ok := ctx.Value(expectKey{}).(int64)
	return n, ok
}

// expectOne is a context for statements expected to affect one row (ExpectRows).
var expectOne = ExpectRows(context.Background(), 1)

// Scanner is a row: *sql.Row or *sql.Rows.
type Scanner interface{ Scan(dest ...any) error }

// Dialect is what differs between the databases inside the shared statements.
type Dialect interface {
	// InsertIgnoreConflict runs insert, a plain INSERT ... VALUES statement, and reports dup when
	// the row met an existing one on a unique key (nothing was inserted, and the transaction can
	// go on), or the statement's other error.
	InsertIgnoreConflict(ctx context.Context, q Querier, insert string, args ...any) (dup bool, err error)
	// ForUpdate is the suffix of a SELECT whose rows the transaction locks until it ends (with its
	// leading space), or "" where the database has one writer.
	ForUpdate() string
	// Offset is a clause that skips the number of rows bound to its ? and keeps the rest.
	Offset() string
	// ForUpdateSkipLocked is the suffix of a claim's SELECT: the rows it returns stay locked until
	// the transaction ends, and rows another transaction holds are skipped; "" where the database
	// has one writer.
	ForUpdateSkipLocked() string
	// JSONArrayContains is the predicate "the JSON array in column col holds one of the strings
	// bound to the placeholders ph" (a comma-separated list of ?). A row whose column is not a
	// JSON array matches nothing rather than failing the statement.
	JSONArrayContains(col, ph string) string
	// Pack is a record or event document as the database stores it: compressed from PackAt bytes
	// on where the store packs (SQLite, see Pack), the text itself otherwise. Every read unpacks
	// (Unpack), so a store may start packing with documents written before.
	Pack(doc []byte) string
	// DocLen is the length in bytes of the document in column col as it was written, unpacked (a
	// packed one's is read from its header): what the history measurements count, the same
	// whether a store packs or not.
	DocLen(col string) string
	// JSONField is a top-level field (as text) of the JSON document in column col, NULL when the
	// database cannot parse the document: one such row must never fail a whole statement.
	JSONField(col, field string) string
	// IndexedBy is the planner hint after a table name that makes a query use index, or "" where
	// the planner needs none.
	IndexedBy(index string) string
	// CountIf is the aggregate "how many rows of the group satisfy cond", never NULL.
	CountIf(cond string) string
	// SumInt is the SUM of an integer column, as an integer.
	SumInt(expr string) string
	// Queue is what the queue's reads walk (the due tenants and entrypoints, the next due time):
	// invocations itself, through index (its partial index on available_at IS NOT NULL), or a
	// table of the queued invocations alone where the store keeps one. Either has the columns
	// tenant_id, entrypoint_ref and available_at.
	Queue(index string) string
	// OpaqueText and OpaqueInt are the parameter ph, bound to a text or an integer, as an
	// expression the query planner does not look into. SQLite (built with STAT4, as modernc's is)
	// plans a term on an indexed column, and a LIMIT, with the values bound to them, and so parses
	// and plans the statement again on every execution whose bindings changed. The engine's loops
	// scan by a time that changes on every call (the queue's walks on every claim, the due and
	// lease checks on every dispatcher wake-up, the due schedules and trigger batches), on plans
	// that do not depend on it: a queue walk took 60–70 µs a call that way instead of 15–25, the
	// due checks 25 µs instead of 12 (2.6 % of async's CPU in all).
	OpaqueText(ph string) string
	OpaqueInt(ph string) string
	// DueWork is the claim's query: up to ?4 invocations of tenant ?1 and entrypoint ref ?2 due at
	// ?3, oldest first, as tenant_id, id, entrypoint_ref, available_at, their invocations rows
	// locked as ForUpdateSkipLocked says.
	DueWork() string
}

// InFlightStatuses are the statuses of an invocation in flight, as an SQL list.
const InFlightStatuses = "('queued', 'running', 'suspended', 'compensating')"

// PurgingPrefix marks an invocation hidden for a multi-batch purge: its tenant_id becomes
// PurgingPrefix+tenant. No tenant id can start with it.
const PurgingPrefix = "~purging:"

// Reader implements the shared parts of store.Reader over a store's read handle.
type Reader struct {
	// Q is the read pool (outside any transaction).
	Q Querier
	// D is the store's dialect.
	D Dialect
}

// Tx implements the shared parts of store.Tx over one closure's transaction. Its statements use a
// background context: the group committer, not the caller, owns the transaction's lifetime.
type Tx struct {
	// Q is the transaction.
	Q Querier
	// D is the store's dialect.
	D Dialect
	// W are the transaction's statements whose shape differs between the databases: the store's
	// tx, which embeds this Tx.
	W Writes
	// Ctx is the context the closure's Update or Enqueue was called with (Context).
	Ctx context.Context
	// Catalog is set when the closure wrote the entrypoints or tenants table: the store then moves
	// its CatalogGeneration.
	Catalog bool
	// After are the closure's AfterCommit hooks, which the store runs once its write committed.
	After []func()
	// Optimistic says the closure was made with store.Optimistic and runs in a transaction that is
	// replayed without it when a write expected to succeed did not (pgstore's pipelined
	// transactions; sqlstore's Update, through Missed): inserts that may meet a conflict are then
	// made with ExpectOne, and Append skips its read of the projection when the caller knows it
	// (AppendOptions.Expect), making the projection's update conditional on what it expected
	// instead.
	Optimistic bool
	// Missed is set when an optimistic Append's assumption (the caller's projection, taken as
	// current) proved wrong, or anything failed after it was made: the SQLite store then rolls the
	// closure back whatever it returned, and runs it again without Optimistic.
	Missed bool
}

// ExpectOne is the context of a statement expected to affect one row: ExpectRows(1) in an
// Optimistic closure, where the store may assume it did, else a plain context.
func (t *Tx) ExpectOne() context.Context {
	if t.Optimistic {
		return expectOne
	}
	return bg
}

// Context implements store.Tx.
func (t *Tx) Context() context.Context { return t.Ctx }

// AfterCommit implements store.Tx.
func (t *Tx) AfterCommit(f func()) { t.After = append(t.After, f) }

// Writes are the statements of a transaction that the shared code runs but each store writes in
// its own way.
type Writes interface {
	// InsertInvocationEvent inserts e unless its idempotency key is already in the invocation's log,
	// and reports whether it did. A row already at e's seq is store.ErrConflict.
	InsertInvocationEvent(e invocation.Event) (inserted bool, err error)
	// InsertInvocationEvents inserts es, two or more events of one invocation whose seqs follow the
	// log's last one (the projection's last_seq, which the transaction holds), with multi-row
	// INSERTs (InsertEventsSQL), and reports whether it inserted them all. When it did not (a key
	// already in the log, a row at one of their seqs), it leaves none of them in the log: the
	// caller then goes event by event (InsertInvocationEvent), which tells the cases apart.
	InsertInvocationEvents(es []invocation.Event) (all bool, err error)
	// WriteUsage adds d to the usage aggregates (usage_hourly).
	WriteUsage(d *UsageDelta) error
}

// bg is the context of a Tx's statements (see Tx).
var bg = context.Background()

// TimeFormat is the stored form of times: fixed-width UTC text with microseconds, which sorts as
// the times do.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// TS is t in its stored form (TimeFormat).
func TS(t time.Time) string { return t.UTC().Format(TimeFormat) }

// TSPtr is *t in its stored form, or nil (SQL NULL) for a nil t.
func TSPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return TS(*t)
}

// ParseTS reads a stored time.
func ParseTS(s string) (time.Time, error) { return time.Parse(TimeFormat, s) }

// ParseTSPtr reads a nullable stored time: nil for NULL.
func ParseTSPtr(ns sql.NullString) (*time.Time, error) {
	if !ns.Valid {
		return nil, nil
	}
	t, err := ParseTS(ns.String)
	return &t, err
}

// NotFound turns sql.ErrNoRows into store.ErrNotFound about what; other errors are returned as
// they are.
func NotFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

// Args converts query arguments to their stored form in place (times become TimeFormat text,
// booleans 0/1) and returns them.
func Args(in []any) []any {
	for i, a := range in {
		switch v := a.(type) {
		case time.Time:
			in[i] = TS(v)
		case bool:
			if v {
				in[i] = 1
			} else {
				in[i] = 0
			}
		}
	}
	return in
}

// ScanAll reads every row of a query's result with scan; err is the query's error, returned as it
// is.
func ScanAll[T any](rows *sql.Rows, err error, scan func(*sql.Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

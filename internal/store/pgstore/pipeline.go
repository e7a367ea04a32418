package pgstore

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/larkrun/lark/internal/groupcommit"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// Pipelined transactions: the committer's round trips.
//
// The group committer runs every write of the process on one connection, one batch at a time, so
// its round trips bound the store's write throughput. A batch's transaction is first begun with
// pipelineCtx (groupcommit.Options.Pipeline): its connection (a pconn, this file's database/sql
// driver connection over pgx's) then defers every Exec, answering at once, and sends the deferred
// statements together with the next statement whose answer is needed (a query, a RowsAffected, the
// COMMIT) as one pgx.Batch: one round trip per read instead of one per statement. BEGIN, the
// SAVEPOINTs and RELEASEs, the inserts and updates of a batch ride along with its reads.
//
// An Exec's error is then known only at the next flush. A statement made with
// sqlcore.ExpectRows(ctx, n) is answered "n rows" at once, and sent wrapped so that the server
// fails it when it affected another count (deferred.text). When a flush meets an error, the
// connection marks the transaction failed: every later statement fails at once, and its Commit or
// Rollback rolls back and returns an error wrapping groupcommit.ErrReplay, after which the
// committer runs the whole batch again, unpipelined, with every statement executed as it is made
// (the exact semantics, for the rare batch that needs them). Nothing of a replayed batch was
// applied: a statement that fails aborts the transaction on the server, so the COMMIT sent behind
// it in the same batch is not run. Only a connection lost while the COMMIT's batch was in flight
// leaves the outcome unknown, as a lost COMMIT always does: that is the commit's error.

// pipeKey marks the context of a pipelined transaction.
type pipeKey struct{}

// pipelineCtx is the committer's groupcommit.Options.Pipeline.
var pipelineCtx = context.WithValue(context.Background(), pipeKey{}, true)

// pipeConnector makes pconns over stdlib's pool connector, each bounded by timeout (0: none) from
// when it is asked for (see deadline.go).
type pipeConnector struct {
	base    driver.Connector
	timeout time.Duration
}

func (c pipeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	p := &pconn{timeout: c.timeout}
	p.dl.arm(c.timeout)
	dc, err := c.base.Connect(p.dl.bound(ctx))
	if err != nil {
		p.dl.release()
		return nil, err
	}
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		p.dl.release()
		return dc, nil
	}
	p.Conn = sc
	return p, nil
}

func (c pipeConnector) Driver() driver.Driver { return c.base.Driver() }

// pconn is stdlib's connection, plus pipelined transactions (outside one it is stdlib's), and the
// client-side deadline of the operation it serves: every call on it is bounded by dl.
type pconn struct {
	*stdlib.Conn
	// timeout bounds each operation on the connection (0: none); dl is the current one's deadline.
	timeout time.Duration
	dl      deadline
	// pipe is set while a pipelined transaction is open.
	pipe bool
	// begun says the transaction's BEGIN was sent.
	begun bool
	// pending are the statements deferred since the last flush, in order.
	pending []*deferred
	// failed is the first error a flush met: the transaction is doomed to replay.
	failed error
}

// Close gives the connection back to the pool and ends its operation's contexts.
func (c *pconn) Close() error {
	defer c.dl.release()
	return c.Conn.Close()
}

// ResetSession starts a new operation on a connection database/sql uses again.
func (c *pconn) ResetSession(ctx context.Context) error {
	c.dl.arm(c.timeout)
	return c.Conn.ResetSession(c.dl.bound(ctx))
}

// Ping is stdlib's, within the operation's deadline.
func (c *pconn) Ping(ctx context.Context) error { return c.Conn.Ping(c.dl.bound(ctx)) }

// PrepareContext is stdlib's, within the operation's deadline.
func (c *pconn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(c.dl.bound(ctx), query)
}

// deferred is a statement waiting for the next flush, and then its outcome.
type deferred struct {
	sql    string
	args   []any
	expect int64 // rows it must affect; -1: any
	done   bool
	tag    pgconn.CommandTag
	err    error
}

// text is the statement as sent. A statement answered on an expectation is wrapped so that the
// server checks the expectation itself, failing with a division by zero when the statement did
// not affect the expected rows: the transaction is then aborted on the server, and the statements
// behind it in the batch (a COMMIT among them) are not run, so the COMMIT can travel in the same
// batch as the statements it depends on.
//
// A one-row INSERT … VALUES (…) ON CONFLICT DO NOTHING expected to insert its row is sent without
// its ON CONFLICT clause instead: it then inserts the row or fails on the conflict, which aborts
// the transaction just as the unmet expectation would, at the cost of a plain INSERT.
func (d *deferred) text() string {
	if d.expect < 0 {
		return d.sql
	}
	if q, ok := plainInsert(d.sql); ok && d.expect == 1 {
		return q
	}
	return fmt.Sprintf("WITH lark_expect AS (%s RETURNING 1) SELECT 1 / (count(*) = %d)::int FROM lark_expect", d.sql, d.expect)
}

// plainInsert returns a one-row INSERT … VALUES (…) ON CONFLICT DO NOTHING without its ON CONFLICT
// clause; ok is false for any other statement.
func plainInsert(q string) (string, bool) {
	const onConflict = "ON CONFLICT DO NOTHING"
	body, found := strings.CutSuffix(strings.TrimSpace(q), onConflict)
	if !found || !strings.HasPrefix(body, "INSERT INTO ") || strings.Count(body, "VALUES (") != 1 ||
		strings.Contains(body, "SELECT") || strings.Contains(body, "), (") {
		return "", false
	}
	return strings.TrimSpace(body), true
}

// BeginTx begins a pipelined transaction for pipelineCtx (its BEGIN deferred), else stdlib's.
func (c *pconn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if ctx.Value(pipeKey{}) == nil || opts.ReadOnly || opts.Isolation != driver.IsolationLevel(0) {
		return c.Conn.BeginTx(c.dl.bound(ctx), opts) // stdlib's COMMIT and ROLLBACK use this context too
	}
	if c.Conn.Conn().IsClosed() {
		return nil, driver.ErrBadConn
	}
	c.pipe, c.begun, c.failed = true, false, nil
	c.pending = c.pending[:0]
	c.queue("begin", nil, -1)
	return ptx{c}, nil
}

func (c *pconn) queue(query string, args []any, expect int64) *deferred {
	d := &deferred{sql: query, args: args, expect: expect}
	c.pending = append(c.pending, d)
	return d
}

func namedArgs(argsV []driver.NamedValue) []any {
	if len(argsV) == 0 {
		return nil
	}
	args := make([]any, len(argsV))
	for i, v := range argsV {
		args[i] = v.Value
	}
	return args
}

// ExecContext defers the statement in a pipelined transaction.
func (c *pconn) ExecContext(ctx context.Context, query string, argsV []driver.NamedValue) (driver.Result, error) {
	if !c.pipe {
		return c.Conn.ExecContext(c.dl.bound(ctx), query, argsV)
	}
	if c.failed != nil {
		return nil, c.failed
	}
	expect := int64(-1)
	if n, ok := sqlcore.ExpectedRows(ctx); ok {
		expect = n
	}
	return result{c: c, d: c.queue(query, namedArgs(argsV), expect)}, nil
}

// QueryContext sends the deferred statements and the query in one round trip in a pipelined
// transaction.
func (c *pconn) QueryContext(ctx context.Context, query string, argsV []driver.NamedValue) (driver.Rows, error) {
	if !c.pipe {
		return c.Conn.QueryContext(c.dl.bound(ctx), query, argsV)
	}
	if c.failed != nil {
		return nil, c.failed
	}
	return c.flush(ctx, query, namedArgs(argsV), true)
}

// flush sends the pending statements, and the query when withQuery, as one batch, and records
// their outcomes; the first error (or unmet expectation) fails the transaction.
func (c *pconn) flush(ctx context.Context, query string, args []any, withQuery bool) (driver.Rows, error) {
	ctx = c.dl.bound(ctx)
	pend := c.pending
	c.pending = nil
	if len(pend) == 0 && !withQuery {
		return nil, c.failed
	}
	b := &pgx.Batch{}
	for _, d := range pend {
		b.Queue(d.text(), d.args...)
	}
	if withQuery {
		b.Queue(query, args...)
	}
	br := c.Conn.Conn().SendBatch(ctx, b)
	for _, d := range pend {
		if d.sql == "begin" {
			c.begun = true
		}
		d.tag, d.err = br.Exec() // an expectation not met is an error (text)
		d.done = true
		if d.err != nil && c.failed == nil {
			c.failed = d.err
		}
	}
	if !withQuery || c.failed != nil {
		if err := br.Close(); err != nil && c.failed == nil {
			c.failed = err
		}
		return nil, c.failed
	}
	rows, err := br.Query()
	if err != nil {
		c.failed = err
		rows.Close()
		return nil, errors.Join(err, br.Close())
	}
	return &prows{c: c, br: br, rows: rows}, nil
}

// end leaves the pipelined transaction.
func (c *pconn) end() {
	c.pipe, c.begun, c.failed = false, false, nil
	c.pending = nil
}

// ptx is a pipelined transaction.
type ptx struct{ c *pconn }

// Commit sends what is pending and COMMIT in one batch; a failed transaction rolls back and
// returns an error wrapping groupcommit.ErrReplay.
func (t ptx) Commit() error {
	c := t.c
	defer c.end()
	ctx := context.Background()
	if c.failed != nil {
		return c.replay()
	}
	pend := c.pending
	commit := c.queue("commit", nil, -1)
	if _, err := c.flush(ctx, "", nil, false); err != nil {
		for _, d := range pend {
			if d.err != nil {
				if !replayable(d.err) {
					return err // the connection broke while the batch was in flight: outcome unknown
				}
				return c.replay() // a statement before the COMMIT failed: nothing was applied
			}
		}
		return err // the COMMIT itself failed: its outcome is the commit's error
	}
	if commit.tag.String() != "COMMIT" {
		return fmt.Errorf("commit ended as %q", commit.tag.String())
	}
	return nil
}

// replayable reports whether err, met by a statement before the COMMIT, left the transaction
// unapplied: PostgreSQL reported the statement failed (an unmet expectation among them), which
// aborted the transaction, or the error was not the connection's.
func replayable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) || !isConnError(err)
}

// isConnError reports whether err is a failure of the connection rather than of a statement.
func isConnError(err error) bool {
	return connLost(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || isNetError(err)
}

// replay rolls the failed transaction back and reports ErrReplay. It is called only where
// nothing of the transaction can have been applied (no COMMIT was sent, or a statement before it
// failed): when the rollback fails too, the connection is closed, which ends the transaction.
//
// A transaction that failed because its connection did (lost, or past its deadline: the database
// does not answer) is not replayed: running it again would wait for the database again, doubling
// the time its callers wait for their 503. Its error is returned as it is.
func (c *pconn) replay() error {
	cause := c.failed
	if err := c.rollback(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Conn.Conn().Close(c.dl.bound(ctx)) // the connection is broken already; closing it is what matters
	}
	var pgErr *pgconn.PgError
	if !errors.As(cause, &pgErr) && isConnError(cause) {
		return cause
	}
	return fmt.Errorf("%w: %w", groupcommit.ErrReplay, cause)
}

// rollback ends the transaction on the server, if its BEGIN was sent.
func (c *pconn) rollback() error {
	c.pending = nil
	if !c.begun {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Conn.Conn().Exec(c.dl.bound(ctx), "rollback")
	return err
}

// Rollback rolls back; a failed transaction reports ErrReplay. Statements answered on an
// expectation are checked first: a closure that failed may have failed on a wrong assumption.
func (t ptx) Rollback() error {
	c := t.c
	defer c.end()
	if c.failed == nil && c.expecting() {
		if _, err := c.flush(context.Background(), "", nil, false); err != nil && !replayable(err) {
			return errors.Join(err, c.rollback())
		}
	}
	if c.failed != nil {
		return c.replay()
	}
	return c.rollback()
}

// expecting reports whether a pending statement was answered on an expectation.
func (c *pconn) expecting() bool {
	for _, d := range c.pending {
		if d.expect >= 0 {
			return true
		}
	}
	return false
}

// result is a deferred Exec's driver.Result.
type result struct {
	c *pconn
	d *deferred
}

func (r result) LastInsertId() (int64, error) {
	return 0, errors.New("LastInsertId is not supported by PostgreSQL")
}

// RowsAffected is the expected count of a statement made with sqlcore.ExpectRows (the server
// checks it), else the statement's own, flushing it first.
func (r result) RowsAffected() (int64, error) {
	if r.d.expect >= 0 {
		if r.d.done && r.d.err != nil {
			return 0, r.d.err
		}
		return r.d.expect, nil
	}
	if !r.d.done {
		if _, err := r.c.flush(context.Background(), "", nil, false); err != nil && !r.d.done {
			return 0, err
		}
	}
	if r.d.err != nil {
		return 0, r.d.err
	}
	return r.d.tag.RowsAffected(), nil
}

// prows are a pipelined query's rows, as database/sql driver values.
type prows struct {
	c    *pconn
	br   pgx.BatchResults
	rows pgx.Rows
	cols []string
}

func (r *prows) Columns() []string {
	if r.cols == nil {
		fds := r.rows.FieldDescriptions()
		r.cols = make([]string, len(fds))
		for i, fd := range fds {
			r.cols[i] = fd.Name
		}
	}
	return r.cols
}

func (r *prows) Close() error {
	r.rows.Close()
	err := errors.Join(r.rows.Err(), r.br.Close())
	if err != nil && r.c.failed == nil {
		r.c.failed = err
	}
	return err
}

func (r *prows) Next(dest []driver.Value) error {
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			if r.c.failed == nil {
				r.c.failed = err
			}
			return err
		}
		return io.EOF
	}
	vals, err := r.rows.Values()
	if err != nil {
		return err
	}
	for i, v := range vals {
		if dest[i], err = driverValue(v); err != nil {
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return nil
}

// driverValue converts a value pgx decoded to one of database/sql's driver.Value types.
func driverValue(v any) (driver.Value, error) {
	switch x := v.(type) {
	case nil, int64, float64, bool, []byte, string, time.Time:
		return x, nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case driver.Valuer:
		return x.Value()
	case map[string]any, []any:
		return json.Marshal(x)
	default:
		return fmt.Sprint(x), nil
	}
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

// Scheduling implements store.Tx.
func (t *Tx) Scheduling(tenantID, invocationID string) (store.Scheduling, error) {
	var s store.Scheduling
	var avail, owner, exp sql.NullString
	err := t.Q.QueryRowContext(bg, "SELECT available_at, lease_owner, lease_expires_at FROM invocations WHERE id = ? AND tenant_id = ?",
		invocationID, tenantID).Scan(&avail, &owner, &exp)
	if err != nil {
		return s, NotFound(err, "invocation")
	}
	if s.AvailableAt, err = ParseTSPtr(avail); err != nil {
		return s, err
	}
	s.LeaseOwner = owner.String
	s.LeaseExpiresAt, err = ParseTSPtr(exp)
	return s, err
}

// SetScheduling implements store.Tx.
func (t *Tx) SetScheduling(tenantID, invocationID string, s store.Scheduling) error {
	var owner any
	if s.LeaseOwner != "" {
		owner = s.LeaseOwner
	}
	res, err := t.Q.ExecContext(bg, "UPDATE invocations SET available_at = ?, lease_owner = ?, lease_expires_at = ? WHERE id = ? AND tenant_id = ?",
		TSPtr(s.AvailableAt), owner, TSPtr(s.LeaseExpiresAt), invocationID, tenantID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("invocation %s: %w", invocationID, store.ErrNotFound)
	}
	return nil
}

// ExpiredLeases implements store.Tx; like DueWork, it locks what it returns and skips rows another
// transaction holds (Dialect.ForUpdateSkipLocked).
func (t *Tx) ExpiredLeases(now time.Time, limit int) ([]store.Runnable, error) {
	rows, err := t.Q.QueryContext(bg, `SELECT tenant_id, id, entrypoint_ref, lease_expires_at FROM invocations
		WHERE lease_expires_at IS NOT NULL AND lease_expires_at <= `+t.D.OpaqueText("?")+` ORDER BY lease_expires_at, id LIMIT `+t.D.OpaqueInt("?")+
		t.D.ForUpdateSkipLocked(), TS(now), limit)
	if err != nil {
		return nil, err
	}
	out, err := scanRunnable(rows)
	for i := range out {
		out[i].Expired = true
	}
	return out, err
}

func scanRunnable(rows *sql.Rows) ([]store.Runnable, error) {
	defer rows.Close()
	var out []store.Runnable
	for rows.Next() {
		var r store.Runnable
		var due string
		if err := rows.Scan(&r.TenantID, &r.InvocationID, &r.EntrypointRef, &due); err != nil {
			return nil, err
		}
		var err error
		if r.Due, err = ParseTS(due); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scanColumn reads the single column of every row and closes rows.
func scanColumn[T any](rows *sql.Rows) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// DueTenants implements store.Tx: a skip-scan over the queue (Dialect.Queue: its index on
// tenant_id, available_at): the next tenant id with queued work, then that tenant's earliest
// available_at, so its cost follows the tenants walked, not the rows queued. LIMIT inside the
// recursive CTE stops the walk early.
func (t *Tx) DueTenants(after string, now time.Time, limit int) ([]string, error) {
	q := t.D.Queue("invocations_queue_tenant")
	rows, err := t.Q.QueryContext(bg, `WITH RECURSIVE walk(id) AS (
		SELECT (SELECT min(tenant_id) FROM `+q+` WHERE available_at IS NOT NULL AND tenant_id > `+t.D.OpaqueText("?1")+`)
		UNION ALL
		SELECT (SELECT min(tenant_id) FROM `+q+` WHERE available_at IS NOT NULL AND tenant_id > walk.id)
		FROM walk WHERE walk.id IS NOT NULL
	) SELECT id FROM walk WHERE id IS NOT NULL AND (SELECT min(available_at) FROM `+q+`
		WHERE tenant_id = walk.id AND available_at IS NOT NULL) <= `+t.D.OpaqueText("?2")+` LIMIT `+t.D.OpaqueInt("?3"), after, TS(now), limit)
	if err != nil {
		return nil, err
	}
	return scanColumn[string](rows)
}

// DueEntrypoints implements store.Tx (a skip-scan over the queue's index on tenant_id,
// entrypoint_ref, available_at).
func (t *Tx) DueEntrypoints(tenantID string, now time.Time) ([]string, error) {
	q := t.D.Queue("invocations_queue_entrypoint")
	rows, err := t.Q.QueryContext(bg, `WITH RECURSIVE walk(ref) AS (
		SELECT min(entrypoint_ref) FROM `+q+` WHERE tenant_id = ?1 AND available_at IS NOT NULL
		UNION ALL
		SELECT (SELECT min(entrypoint_ref) FROM `+q+`
			WHERE tenant_id = ?1 AND available_at IS NOT NULL AND entrypoint_ref > walk.ref) FROM walk WHERE walk.ref IS NOT NULL
	) SELECT ref FROM walk WHERE ref IS NOT NULL AND (SELECT min(available_at) FROM `+q+`
		WHERE tenant_id = ?1 AND entrypoint_ref = walk.ref AND available_at IS NOT NULL) <= `+t.D.OpaqueText("?2"), tenantID, TS(now))
	if err != nil {
		return nil, err
	}
	return scanColumn[string](rows)
}

// DueWork implements store.Tx (Dialect.DueWork). The rows it returns stay locked until the
// transaction ends (Dialect.ForUpdateSkipLocked): a claimer in another process skips them rather
// than waiting or taking them too, and finds them again, updated, only after this claim commits or
// rolls back.
func (t *Tx) DueWork(q store.DueWorkQuery) ([]store.Runnable, error) {
	rows, err := t.Q.QueryContext(bg, t.D.DueWork(), q.TenantID, q.EntrypointRef, TS(q.Now), q.Limit)
	if err != nil {
		return nil, err
	}
	return scanRunnable(rows)
}

// RunningByEntrypoint implements store.Tx.
func (t *Tx) RunningByEntrypoint(tenantID string) (map[string]int64, error) {
	rows, err := t.Q.QueryContext(bg, `SELECT entrypoint_ref, count(*) FROM invocations WHERE tenant_id = ? AND status = 'running'
		GROUP BY entrypoint_ref`, tenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var ref string
		var n int64
		if err := rows.Scan(&ref, &n); err != nil {
			return nil, err
		}
		out[ref] = n
	}
	return out, rows.Err()
}

// ExpireLeases implements store.Tx.
func (t *Tx) ExpireLeases(now time.Time) (int64, error) {
	res, err := t.Q.ExecContext(bg, "UPDATE invocations SET lease_expires_at = ? WHERE lease_expires_at IS NOT NULL AND lease_expires_at > ?", TS(now), TS(now))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// NextDue implements store.Reader.
func (s *Reader) NextDue(ctx context.Context, after time.Time) (*time.Time, error) {
	var a, b sql.NullString
	at := TS(after)
	err := s.Q.QueryRowContext(ctx, `SELECT (SELECT min(available_at) FROM `+s.D.Queue("invocations_runnable")+` WHERE available_at > `+s.D.OpaqueText("?")+`),
		(SELECT min(lease_expires_at) FROM invocations WHERE lease_expires_at > `+s.D.OpaqueText("?")+`)`, at, at).Scan(&a, &b)
	if err != nil {
		return nil, err
	}
	first := a
	if !a.Valid || (b.Valid && b.String < a.String) {
		first = b
	}
	return ParseTSPtr(first)
}

// HasDue implements store.Reader, with the partial indexes the claim's reads use.
func (s *Reader) HasDue(ctx context.Context, now time.Time) (bool, error) {
	at := TS(now)
	var due bool
	err := s.Q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.D.Queue("invocations_runnable")+` WHERE available_at <= `+s.D.OpaqueText("?")+`)
		OR EXISTS (SELECT 1 FROM invocations WHERE lease_expires_at IS NOT NULL AND lease_expires_at <= `+s.D.OpaqueText("?")+`)`, at, at).Scan(&due)
	return due, err
}

// leaseOwnersChunk bounds the ids of one LeaseOwners statement.
const leaseOwnersChunk = 500

// LeaseOwners implements store.Reader.
func (s *Reader) LeaseOwners(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), leaseOwnersChunk)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		rows, err := s.Q.QueryContext(ctx, "SELECT id, coalesce(lease_owner, '') FROM invocations WHERE id IN (?"+
			strings.Repeat(", ?", n-1)+")", args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id, owner string
			if err := rows.Scan(&id, &owner); err != nil {
				rows.Close()
				return nil, err
			}
			out[id] = owner
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
		ids = ids[n:]
	}
	return out, nil
}

// CountTenantInFlight implements store.Reader.
func (s *Reader) CountTenantInFlight(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.Q.QueryRowContext(ctx, "SELECT count(*) FROM invocations WHERE tenant_id = ? AND status IN "+InFlightStatuses, tenantID).Scan(&n)
	return n, err
}

const countRunning = "SELECT count(*) FROM invocations WHERE tenant_id = ? AND status = 'running'"

// CountTenantRunning implements store.Reader.
func (s *Reader) CountTenantRunning(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.Q.QueryRowContext(ctx, countRunning, tenantID).Scan(&n)
	return n, err
}

// CountTenantRunning implements store.Tx.
func (t *Tx) CountTenantRunning(tenantID string) (int64, error) {
	var n int64
	err := t.Q.QueryRowContext(bg, countRunning, tenantID).Scan(&n)
	return n, err
}

// IdempotencyKey implements store.Tx.
func (t *Tx) IdempotencyKey(q store.IdempotencyKeyQuery) (store.IdempotencyRecord, error) {
	tenantID, scope, key, now := q.TenantID, q.Scope, q.Key, q.Now
	r := store.IdempotencyRecord{TenantID: tenantID, Scope: scope, Key: key}
	var created, expires string
	err := t.Q.QueryRowContext(bg, `SELECT request_hash, invocation_id, created_at, expires_at FROM idempotency_keys
		WHERE tenant_id = ? AND scope = ? AND key = ? AND expires_at > ?`, tenantID, scope, key, TS(now)).
		Scan(&r.RequestHash, &r.InvocationID, &created, &expires)
	if err != nil {
		return r, NotFound(err, "idempotency key")
	}
	if r.CreatedAt, err = ParseTS(created); err != nil {
		return r, err
	}
	r.ExpiresAt, err = ParseTS(expires)
	return r, err
}

// PutIdempotencyKey implements store.Tx.
func (t *Tx) PutIdempotencyKey(r store.IdempotencyRecord) error {
	res, err := t.Q.ExecContext(bg, `INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, invocation_id, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, scope, key) DO UPDATE SET request_hash = excluded.request_hash,
		invocation_id = excluded.invocation_id, created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE idempotency_keys.expires_at <= excluded.created_at`,
		r.TenantID, r.Scope, r.Key, r.RequestHash, r.InvocationID, TS(r.CreatedAt), TS(r.ExpiresAt))
	if err != nil {
		return err
	}
	// On PostgreSQL a concurrent insert of the same key waits for the other transaction and then
	// sees its row: a live key leaves nothing inserted or updated.
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("idempotency key %q: %w", r.Key, store.ErrConflict)
	}
	return nil
}

// PutCachedInvocation implements store.Tx.
func (t *Tx) PutCachedInvocation(e store.CacheEntry) error {
	key, tenantID, invocationID, expires := e.Key, e.TenantID, e.InvocationID, e.ExpiresAt
	_, err := t.Q.ExecContext(bg, `INSERT INTO response_cache (cache_key, tenant_id, invocation_id, expires_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (cache_key) DO UPDATE SET tenant_id = excluded.tenant_id, invocation_id = excluded.invocation_id,
		expires_at = excluded.expires_at`, key, tenantID, invocationID, TS(expires))
	return err
}

// CachedInvocation implements store.Reader.
func (s *Reader) CachedInvocation(ctx context.Context, key string, now time.Time) (string, string, error) {
	var tenantID, id string
	err := s.Q.QueryRowContext(ctx, "SELECT tenant_id, invocation_id FROM response_cache WHERE cache_key = ? AND expires_at > ?",
		key, TS(now)).Scan(&tenantID, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", fmt.Errorf("cache entry: %w", store.ErrNotFound)
	}
	return tenantID, id, err
}

// PurgeExpired implements store.Tx.
func (t *Tx) PurgeExpired(now time.Time) (int64, error) {
	var total int64
	for _, q := range []string{"DELETE FROM idempotency_keys WHERE expires_at <= ?", "DELETE FROM response_cache WHERE expires_at <= ?",
		"DELETE FROM worker_nonces WHERE expires_at <= ?"} {
		res, err := t.Q.ExecContext(bg, q, TS(now))
		if err != nil {
			return total, err
		}
		n, _ := res.RowsAffected()
		total += n
	}
	return total, nil
}

// UseNonce implements store.Tx.
func (t *Tx) UseNonce(nonce string, expires time.Time) (bool, error) {
	res, err := t.Q.ExecContext(bg, "INSERT INTO worker_nonces (nonce, expires_at) VALUES (?, ?) ON CONFLICT (nonce) DO NOTHING",
		nonce, TS(expires))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

var invocationFields = odata.Schema{
	"entrypoint_id":  {Column: "entrypoint_id", Type: odata.String, Filter: true, Sort: true, Custom: GTSIDFilter("entrypoint_id")},
	"status":         {Column: "status", Type: odata.Enum, Filter: true, Sort: true, Enum: []string{"queued", "running", "suspended", "succeeded", "failed", "canceled", "compensating", "compensated", "dead_lettered"}},
	"mode":           {Column: "mode", Type: odata.Enum, Filter: true, Sort: true, Enum: []string{"sync", "async"}},
	"correlation_id": {Column: "correlation_id", Type: odata.String, Filter: true, Sort: true},
	"created_at":     {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
}

// invocationSplit are the invocation fields with an index on (tenant_id, field, created_at, id)
// (migration 00016): an "in" list on one of them is read one value at a time (ListSpec.Split).
var invocationSplit = []string{"status", "entrypoint_id", "mode", "correlation_id"}

// invocationScope encodes invocation.Record.VisibleTo as SQL.
func invocationScope(v invocation.Viewer) (string, []any) {
	if v.All {
		return "tenant_id = ?", []any{v.TenantID}
	}
	return "tenant_id = ? AND (entrypoint_owner = '' OR entrypoint_owner = ? OR subject_id = ?)",
		[]any{v.TenantID, v.SubjectID, v.SubjectID}
}

// ListInvocations implements store.Reader.
func (s *Reader) ListInvocations(ctx context.Context, v invocation.Viewer, q store.ListQuery) (store.Page[invocation.Record], error) {
	scope, args := invocationScope(v)
	return ListPage(ctx, s.Q, ListSpec[invocation.Record]{
		From: "invocations", Cols: "record, last_seq, updated_at", Fields: invocationFields, Scope: scope, ScopeArgs: args,
		DefaultOrder: []odata.OrderItem{{Field: "created_at", Desc: true}}, Split: invocationSplit,
		Scan: func(r Scanner) (invocation.Record, error) {
			var doc []byte
			var updated string
			var last int64
			if err := r.Scan(&doc, &last, &updated); err != nil {
				return invocation.Record{}, err
			}
			return decodeRecord(doc, last, updated)
		},
	}, q)
}

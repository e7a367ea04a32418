package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

// Scheduling implements store.Tx.
func (t *tx) Scheduling(tenantID, invocationID string) (store.Scheduling, error) {
	var s store.Scheduling
	var avail, owner, exp sql.NullString
	err := t.t.QueryRowContext(bg, "SELECT available_at, lease_owner, lease_expires_at FROM invocations WHERE id = ? AND tenant_id = ?",
		invocationID, tenantID).Scan(&avail, &owner, &exp)
	if err != nil {
		return s, notFound(err, "invocation")
	}
	if s.AvailableAt, err = parseTSPtr(avail); err != nil {
		return s, err
	}
	s.LeaseOwner = owner.String
	s.LeaseExpiresAt, err = parseTSPtr(exp)
	return s, err
}

// SetScheduling implements store.Tx.
func (t *tx) SetScheduling(tenantID, invocationID string, s store.Scheduling) error {
	var owner any
	if s.LeaseOwner != "" {
		owner = s.LeaseOwner
	}
	res, err := t.t.ExecContext(bg, "UPDATE invocations SET available_at = ?, lease_owner = ?, lease_expires_at = ? WHERE id = ? AND tenant_id = ?",
		tsPtr(s.AvailableAt), owner, tsPtr(s.LeaseExpiresAt), invocationID, tenantID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("invocation %s: %w", invocationID, store.ErrNotFound)
	}
	return nil
}

// Runnable implements store.Tx.
func (t *tx) Runnable(now time.Time, limit int) ([]store.Runnable, error) {
	n := ts(now)
	rows, err := t.t.QueryContext(bg, `SELECT tenant_id, id, 0, available_at FROM invocations WHERE available_at IS NOT NULL AND available_at <= ?
		UNION ALL
		SELECT tenant_id, id, 1, lease_expires_at FROM invocations WHERE lease_expires_at IS NOT NULL AND lease_expires_at <= ?
		ORDER BY 4, 2 LIMIT ?`, n, n, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Runnable
	for rows.Next() {
		var r store.Runnable
		var expired int
		var due string
		if err := rows.Scan(&r.TenantID, &r.InvocationID, &expired, &due); err != nil {
			return nil, err
		}
		r.Expired = expired == 1
		out = append(out, r)
	}
	return out, rows.Err()
}

// NextDue implements store.Reader.
func (s *Store) NextDue(ctx context.Context) (*time.Time, error) {
	var a, b sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT (SELECT min(available_at) FROM invocations WHERE available_at IS NOT NULL),
		(SELECT min(lease_expires_at) FROM invocations WHERE lease_expires_at IS NOT NULL)`).Scan(&a, &b)
	if err != nil {
		return nil, err
	}
	first := a
	if !a.Valid || (b.Valid && b.String < a.String) {
		first = b
	}
	return parseTSPtr(first)
}

const inFlightStatuses = "('queued', 'running', 'suspended', 'compensating')"

// CountTenantInFlight implements store.Reader.
func (s *Store) CountTenantInFlight(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM invocations WHERE tenant_id = ? AND status IN "+inFlightStatuses, tenantID).Scan(&n)
	return n, err
}

// CountTenantInFlight implements store.Tx.
func (t *tx) CountTenantInFlight(tenantID string) (int64, error) {
	var n int64
	err := t.t.QueryRowContext(bg, "SELECT count(*) FROM invocations WHERE tenant_id = ? AND status IN "+inFlightStatuses, tenantID).Scan(&n)
	return n, err
}

// IdempotencyKey implements store.Tx.
func (t *tx) IdempotencyKey(tenantID, scope, key string, now time.Time) (store.IdempotencyRecord, error) {
	r := store.IdempotencyRecord{TenantID: tenantID, Scope: scope, Key: key}
	var created, expires string
	err := t.t.QueryRowContext(bg, `SELECT request_hash, invocation_id, created_at, expires_at FROM idempotency_keys
		WHERE tenant_id = ? AND scope = ? AND key = ? AND expires_at > ?`, tenantID, scope, key, ts(now)).
		Scan(&r.RequestHash, &r.InvocationID, &created, &expires)
	if err != nil {
		return r, notFound(err, "idempotency key")
	}
	if r.CreatedAt, err = parseTS(created); err != nil {
		return r, err
	}
	r.ExpiresAt, err = parseTS(expires)
	return r, err
}

// PutIdempotencyKey implements store.Tx.
func (t *tx) PutIdempotencyKey(r store.IdempotencyRecord) error {
	_, err := t.t.ExecContext(bg, `INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, invocation_id, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, scope, key) DO UPDATE SET request_hash = excluded.request_hash,
		invocation_id = excluded.invocation_id, created_at = excluded.created_at, expires_at = excluded.expires_at`,
		r.TenantID, r.Scope, r.Key, r.RequestHash, r.InvocationID, ts(r.CreatedAt), ts(r.ExpiresAt))
	return err
}

// PutCachedInvocation implements store.Tx.
func (t *tx) PutCachedInvocation(key, tenantID, invocationID string, expires time.Time) error {
	_, err := t.t.ExecContext(bg, `INSERT INTO response_cache (cache_key, tenant_id, invocation_id, expires_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (cache_key) DO UPDATE SET tenant_id = excluded.tenant_id, invocation_id = excluded.invocation_id,
		expires_at = excluded.expires_at`, key, tenantID, invocationID, ts(expires))
	return err
}

// CachedInvocation implements store.Reader.
func (s *Store) CachedInvocation(ctx context.Context, key string, now time.Time) (string, string, error) {
	var tenantID, id string
	err := s.r.QueryRowContext(ctx, "SELECT tenant_id, invocation_id FROM response_cache WHERE cache_key = ? AND expires_at > ?",
		key, ts(now)).Scan(&tenantID, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", fmt.Errorf("cache entry: %w", store.ErrNotFound)
	}
	return tenantID, id, err
}

// PurgeExpired implements store.Tx.
func (t *tx) PurgeExpired(now time.Time) (int64, error) {
	var total int64
	for _, q := range []string{"DELETE FROM idempotency_keys WHERE expires_at <= ?", "DELETE FROM response_cache WHERE expires_at <= ?"} {
		res, err := t.t.ExecContext(bg, q, ts(now))
		if err != nil {
			return total, err
		}
		n, _ := res.RowsAffected()
		total += n
	}
	return total, nil
}

var invocationFields = odata.Schema{
	"entrypoint_id":  {Column: "entrypoint_id", Type: odata.String, Filter: true, Custom: gtsIDFilter("entrypoint_id")},
	"status":         {Column: "status", Type: odata.Enum, Filter: true, Enum: []string{"queued", "running", "suspended", "succeeded", "failed", "canceled", "compensating", "compensated", "dead_lettered"}},
	"mode":           {Column: "mode", Type: odata.Enum, Filter: true, Enum: []string{"sync", "async"}},
	"correlation_id": {Column: "correlation_id", Type: odata.String, Filter: true},
	"created_at":     {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListInvocations implements store.Reader.
func (s *Store) ListInvocations(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[invocation.Record], error) {
	return listPage(ctx, s.r, listSpec[invocation.Record]{
		from: "invocations", cols: "record", fields: invocationFields, scope: "tenant_id = ?", scopeArgs: []any{tenantID},
		defaultOrder: []odata.OrderItem{{Field: "created_at", Desc: true}},
		scan: func(r *sql.Rows) (invocation.Record, error) {
			var doc string
			var rec invocation.Record
			if err := r.Scan(&doc); err != nil {
				return rec, err
			}
			return rec, jsonUnmarshal(doc, &rec)
		},
		key: func(r invocation.Record, f string) any {
			if f == "created_at" {
				return ts(r.CreatedAt)
			}
			return r.ID
		},
	}, q)
}

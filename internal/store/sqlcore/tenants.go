package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

func scanTenant(row *sql.Row) (tenant.Policy, error) {
	var p tenant.Policy
	var doc string
	if err := row.Scan(&doc); err != nil {
		return p, NotFound(err, "tenant")
	}
	err := json.Unmarshal([]byte(doc), &p)
	if p.Fairness.Weight <= 0 {
		p.Fairness.Weight = tenant.DefaultWeight // stored before fairness weights existed
	}
	return p, err
}

// Tenant implements store.Reader.
func (s *Reader) Tenant(ctx context.Context, id string) (tenant.Policy, error) {
	return scanTenant(s.Q.QueryRowContext(ctx, "SELECT policy FROM tenants WHERE tenant_id = ?", id))
}

// Tenant implements store.Tx.
func (t *Tx) Tenant(id string) (tenant.Policy, error) {
	return scanTenant(t.Q.QueryRowContext(bg, "SELECT policy FROM tenants WHERE tenant_id = ?", id))
}

// PutTenant implements store.Tx.
func (t *Tx) PutTenant(p tenant.Policy) error {
	doc, err := json.Marshal(p)
	if err != nil {
		return err
	}
	t.Catalog = true
	_, err = t.Q.ExecContext(bg, `INSERT INTO tenants (tenant_id, enabled, policy, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE SET enabled = excluded.enabled,
		policy = excluded.policy, updated_at = excluded.updated_at`,
		Args([]any{p.TenantID, p.Enabled, string(doc), TS(p.CreatedAt), TS(p.UpdatedAt)})...)
	return err
}

const tokenCols = "id, tenant_id, subject_id, roles, description, hash, created_at, created_by, expires_at, revoked_at"

func scanToken(s Scanner) (auth.Token, error) {
	var tk auth.Token
	var roles, created string
	var expires, revoked sql.NullString
	if err := s.Scan(&tk.ID, &tk.TenantID, &tk.SubjectID, &roles, &tk.Description, &tk.Hash, &created,
		&tk.CreatedBy, &expires, &revoked); err != nil {
		return tk, err
	}
	if err := json.Unmarshal([]byte(roles), &tk.Roles); err != nil {
		return tk, err
	}
	var err error
	if tk.CreatedAt, err = ParseTS(created); err != nil {
		return tk, err
	}
	if tk.ExpiresAt, err = ParseTSPtr(expires); err != nil {
		return tk, err
	}
	tk.RevokedAt, err = ParseTSPtr(revoked)
	return tk, err
}

// TokenByHash implements store.Reader.
func (s *Reader) TokenByHash(ctx context.Context, hash string) (auth.Token, error) {
	tk, err := scanToken(s.Q.QueryRowContext(ctx, "SELECT "+tokenCols+" FROM tokens WHERE hash = ?", hash))
	return tk, NotFound(err, "token")
}

var tokenFields = odata.Schema{
	"tenant_id":  {Column: "tenant_id", Type: odata.String, Filter: true, Sort: true},
	"subject_id": {Column: "subject_id", Type: odata.String, Filter: true, Sort: true},
	"created_at": {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
	"revoked": {Column: "revoked_at", Type: odata.Bool, Filter: true, Custom: func(op string, vals []any) (string, []any, error) {
		b, _ := vals[0].(bool)
		if op == "ne" {
			b = !b
		}
		if b {
			return "(revoked_at IS NOT NULL)", nil, nil
		}
		return "(revoked_at IS NULL)", nil, nil
	}},
}

// ListTokens implements store.Reader.
func (s *Reader) ListTokens(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[auth.Token], error) {
	scope, a := "", []any(nil)
	if tenantID != "" {
		scope, a = "tenant_id = ?", []any{tenantID}
	}
	return ListPage(ctx, s.Q, ListSpec[auth.Token]{
		From: "tokens", Cols: tokenCols, Fields: tokenFields, Scope: scope, ScopeArgs: a,
		DefaultOrder: []odata.OrderItem{{Field: "created_at"}},
		Scan:         func(r Scanner) (auth.Token, error) { return scanToken(r) },
	}, q)
}

// InsertToken implements store.Tx.
func (t *Tx) InsertToken(tk auth.Token) error {
	roles, err := json.Marshal(tk.Roles)
	if err != nil {
		return err
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, "INSERT INTO tokens ("+tokenCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		tk.ID, tk.TenantID, tk.SubjectID, string(roles), tk.Description, tk.Hash, TS(tk.CreatedAt), tk.CreatedBy,
		TSPtr(tk.ExpiresAt), TSPtr(tk.RevokedAt))
	if dup {
		return fmt.Errorf("token: %w", store.ErrConflict)
	}
	return err
}

// Token implements store.Tx.
func (t *Tx) Token(tenantID, id string) (auth.Token, error) {
	q, a := "SELECT "+tokenCols+" FROM tokens WHERE id = ?", []any{id}
	if tenantID != "" {
		q += " AND tenant_id = ?"
		a = append(a, tenantID)
	}
	tk, err := scanToken(t.Q.QueryRowContext(bg, q, a...))
	return tk, NotFound(err, "token")
}

// RevokeToken implements store.Tx.
func (t *Tx) RevokeToken(tenantID, id string, at time.Time) error {
	q, a := "UPDATE tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?", []any{TS(at), id}
	if tenantID != "" {
		q += " AND tenant_id = ?"
		a = append(a, tenantID)
	}
	res, err := t.Q.ExecContext(bg, q, a...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("token %s: %w", id, store.ErrNotFound)
	}
	return nil
}

const auditCols = "id, tenant_id, type, actor_id, resource_type, resource_id, correlation_id, at, details"

// InsertAudit implements store.Tx.
func (t *Tx) InsertAudit(e audit.Event) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("audit event %s: %w", e.ID, err)
	}
	var details any
	if len(e.Details) > 0 {
		details = string(e.Details)
	}
	_, err := t.Q.ExecContext(bg, "INSERT INTO audit_events ("+auditCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		e.ID, e.TenantID, e.Type, e.ActorID, e.ResourceType, e.ResourceID, e.CorrelationID, TS(e.At), details)
	return err
}

var auditFields = odata.Schema{
	"type":           {Column: "type", Type: odata.String, Filter: true, Sort: true},
	"resource_type":  {Column: "resource_type", Type: odata.String, Filter: true, Sort: true},
	"resource_id":    {Column: "resource_id", Type: odata.String, Filter: true, Sort: true},
	"actor_id":       {Column: "actor_id", Type: odata.String, Filter: true, Sort: true},
	"correlation_id": {Column: "correlation_id", Type: odata.String, Filter: true, Sort: true},
	"timestamp":      {Column: "at", Type: odata.Time, Filter: true, Sort: true},
}

// ListAudit implements store.Reader.
func (s *Reader) ListAudit(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[audit.Event], error) {
	scope, a := "", []any(nil)
	if tenantID != "" {
		scope, a = "tenant_id = ?", []any{tenantID}
	}
	return ListPage(ctx, s.Q, ListSpec[audit.Event]{
		From: "audit_events", Cols: auditCols, Fields: auditFields, Scope: scope, ScopeArgs: a,
		DefaultOrder: []odata.OrderItem{{Field: "timestamp"}},
		Scan: func(r Scanner) (audit.Event, error) {
			var e audit.Event
			var at string
			var details sql.NullString
			if err := r.Scan(&e.ID, &e.TenantID, &e.Type, &e.ActorID, &e.ResourceType, &e.ResourceID,
				&e.CorrelationID, &at, &details); err != nil {
				return e, err
			}
			if details.Valid {
				e.Details = json.RawMessage(details.String)
			}
			var err error
			e.At, err = ParseTS(at)
			return e, err
		},
	}, q)
}

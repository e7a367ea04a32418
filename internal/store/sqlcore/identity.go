package sqlcore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

const idpCols = "id, tenant_id, issuer, doc, created_at"

func scanIdentityProvider(s Scanner) (identity.Provider, error) {
	var p identity.Provider
	var id, tenantID, issuer, doc, created string
	if err := s.Scan(&id, &tenantID, &issuer, &doc, &created); err != nil {
		return p, err
	}
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return p, fmt.Errorf("identity provider %s: %w", id, err)
	}
	p.ID, p.TenantID, p.Issuer = id, tenantID, issuer
	var err error
	p.CreatedAt, err = ParseTS(created)
	return p, err
}

// IdentityProviderByIssuer implements store.Reader.
func (s *Reader) IdentityProviderByIssuer(ctx context.Context, issuer string) (identity.Provider, error) {
	p, err := scanIdentityProvider(s.Q.QueryRowContext(ctx, "SELECT "+idpCols+" FROM identity_providers WHERE issuer = ?", issuer))
	return p, NotFound(err, "identity provider")
}

// IdentityProvider implements store.Reader.
func (s *Reader) IdentityProvider(ctx context.Context, tenantID, id string) (identity.Provider, error) {
	q, a := idpQuery(tenantID, id)
	p, err := scanIdentityProvider(s.Q.QueryRowContext(ctx, q, a...))
	return p, NotFound(err, "identity provider")
}

func idpQuery(tenantID, id string) (string, []any) {
	q, a := "SELECT "+idpCols+" FROM identity_providers WHERE id = ?", []any{id}
	if tenantID != "" {
		q += " AND tenant_id = ?"
		a = append(a, tenantID)
	}
	return q, a
}

var idpFields = odata.Schema{
	"tenant_id":  {Column: "tenant_id", Type: odata.String, Filter: true, Sort: true},
	"issuer":     {Column: "issuer", Type: odata.String, Filter: true, Sort: true},
	"created_at": {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListIdentityProviders implements store.Reader.
func (s *Reader) ListIdentityProviders(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[identity.Provider], error) {
	scope, a := "", []any(nil)
	if tenantID != "" {
		scope, a = "tenant_id = ?", []any{tenantID}
	}
	return ListPage(ctx, s.Q, ListSpec[identity.Provider]{
		From: "identity_providers", Cols: idpCols, Fields: idpFields, Scope: scope, ScopeArgs: a,
		DefaultOrder: []odata.OrderItem{{Field: "created_at"}},
		Scan:         func(r Scanner) (identity.Provider, error) { return scanIdentityProvider(r) },
	}, q)
}

// InsertIdentityProvider implements store.Tx.
func (t *Tx) InsertIdentityProvider(p identity.Provider) error {
	doc, err := json.Marshal(p)
	if err != nil {
		return err
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, "INSERT INTO identity_providers ("+idpCols+") VALUES (?, ?, ?, ?, ?)",
		p.ID, p.TenantID, p.Issuer, string(doc), TS(p.CreatedAt))
	if dup {
		return fmt.Errorf("identity provider %s: %w", p.Issuer, store.ErrConflict)
	}
	return err
}

// DeleteIdentityProvider implements store.Tx.
func (t *Tx) DeleteIdentityProvider(tenantID, id string) (identity.Provider, error) {
	q, a := idpQuery(tenantID, id)
	p, err := scanIdentityProvider(t.Q.QueryRowContext(bg, q, a...))
	if err != nil {
		return p, NotFound(err, "identity provider")
	}
	if _, err := t.Q.ExecContext(bg, "DELETE FROM identity_providers WHERE id = ?", id); err != nil {
		return p, err
	}
	return p, nil
}

package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

const secretCols = "tenant_id, name, description, allowed_hosts, version, created_at, updated_at, last_used_at, created_by, updated_by"

func scanSecret(sc interface{ Scan(...any) error }) (store.Secret, error) {
	var s store.Secret
	var hosts, created, updated string
	var used sql.NullString
	if err := sc.Scan(&s.TenantID, &s.Name, &s.Description, &hosts, &s.Version, &created, &updated, &used,
		&s.CreatedBy, &s.UpdatedBy); err != nil {
		return s, err
	}
	if err := json.Unmarshal([]byte(hosts), &s.AllowedHosts); err != nil {
		return s, fmt.Errorf("secret %s: allowed_hosts: %w", s.Name, err)
	}
	var err error
	if s.CreatedAt, err = ParseTS(created); err != nil {
		return s, err
	}
	if s.UpdatedAt, err = ParseTS(updated); err != nil {
		return s, err
	}
	s.LastUsedAt, err = ParseTSPtr(used)
	return s, err
}

func hostsJSON(h []string) (string, error) {
	if h == nil {
		h = []string{}
	}
	b, err := json.Marshal(h)
	return string(b), err
}

const versionMetaCols = "tenant_id, name, version, created_at, created_by, key_id"

func scanVersion(sc interface{ Scan(...any) error }, sealed bool) (store.SecretVersion, error) {
	var v store.SecretVersion
	var created string
	dest := []any{&v.TenantID, &v.Name, &v.Version, &created, &v.CreatedBy, &v.KeyID}
	if sealed {
		dest = append(dest, &v.Sealed)
	}
	if err := sc.Scan(dest...); err != nil {
		return v, err
	}
	var err error
	v.CreatedAt, err = ParseTS(created)
	return v, err
}

// readSecret reads a secret and its versions through q (the reader or a transaction). lock (in a
// transaction) locks the secret's row until the commit (Dialect.ForUpdate): the read of a
// read-modify-write.
func readSecret(ctx context.Context, q Querier, d Dialect, tenantID, name string, lock bool) (store.Secret, error) {
	query := "SELECT " + secretCols + " FROM secrets WHERE tenant_id = ? AND name = ?"
	if lock {
		query += d.ForUpdate()
	}
	s, err := scanSecret(q.QueryRowContext(ctx, query, tenantID, name))
	if err != nil {
		return s, NotFound(err, "secret")
	}
	rows, err := q.QueryContext(ctx, "SELECT "+versionMetaCols+
		" FROM secret_versions WHERE tenant_id = ? AND name = ? ORDER BY version DESC", tenantID, name)
	s.Versions, err = ScanAll(rows, err, func(r *sql.Rows) (store.SecretVersion, error) { return scanVersion(r, false) })
	return s, err
}

// Secret implements store.Reader.
func (s *Reader) Secret(ctx context.Context, tenantID, name string) (store.Secret, error) {
	return readSecret(ctx, s.Q, s.D, tenantID, name, false)
}

var secretFields = odata.Schema{
	"name":       {Column: "name", Type: odata.String, Filter: true, Sort: true},
	"created_at": {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListSecrets implements store.Reader.
func (s *Reader) ListSecrets(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[store.Secret], error) {
	return ListPage(ctx, s.Q, ListSpec[store.Secret]{
		From: "secrets", Cols: secretCols, Fields: secretFields, Scope: "tenant_id = ?", ScopeArgs: []any{tenantID},
		DefaultOrder: []odata.OrderItem{{Field: "name"}},
		Scan:         func(r Scanner) (store.Secret, error) { return scanSecret(r) },
	}, q)
}

// SealedSecret implements store.Reader.
func (s *Reader) SealedSecret(ctx context.Context, tenantID, name string) (store.SealedSecret, error) {
	var out store.SealedSecret
	var hosts, created string
	v := &out.Version
	err := s.Q.QueryRowContext(ctx, `SELECT s.allowed_hosts, v.tenant_id, v.name, v.version, v.created_at, v.created_by, v.key_id, v.sealed
		FROM secrets s JOIN secret_versions v ON v.tenant_id = s.tenant_id AND v.name = s.name AND v.version = s.version
		WHERE s.tenant_id = ? AND s.name = ? AND v.sealed IS NOT NULL`, tenantID, name).
		Scan(&hosts, &v.TenantID, &v.Name, &v.Version, &created, &v.CreatedBy, &v.KeyID, &v.Sealed)
	if err != nil {
		return out, NotFound(err, "secret")
	}
	if err := json.Unmarshal([]byte(hosts), &out.AllowedHosts); err != nil {
		return out, fmt.Errorf("secret %s: allowed_hosts: %w", name, err)
	}
	v.CreatedAt, err = ParseTS(created)
	return out, err
}

// SecretsToRewrap implements store.Reader.
func (s *Reader) SecretsToRewrap(ctx context.Context, q store.RewrapQuery) ([]store.SecretVersion, error) {
	rows, err := s.Q.QueryContext(ctx, "SELECT "+versionMetaCols+`, sealed FROM secret_versions
		WHERE sealed IS NOT NULL AND key_id <> ? AND (tenant_id, name, version) > (?, ?, ?)
		ORDER BY tenant_id, name, version LIMIT ?`,
		q.ExceptKeyID, q.After.TenantID, q.After.Name, q.After.Version, q.Limit)
	return ScanAll(rows, err, func(r *sql.Rows) (store.SecretVersion, error) { return scanVersion(r, true) })
}

// InsertSecret implements store.Tx.
func (t *Tx) InsertSecret(s store.Secret, v store.SecretVersion) error {
	hosts, err := hostsJSON(s.AllowedHosts)
	if err != nil {
		return err
	}
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO secrets (tenant_id, name, description, allowed_hosts, version, created_at,
		updated_at, last_used_at, created_by, updated_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.TenantID, s.Name, s.Description, hosts, s.Version, TS(s.CreatedAt), TS(s.UpdatedAt), TSPtr(s.LastUsedAt),
		s.CreatedBy, s.UpdatedBy)
	if dup {
		return fmt.Errorf("secret %s: %w", s.Name, store.ErrConflict)
	}
	if err != nil {
		return err
	}
	// A deleted secret's versions are gone with it; none of a new one can exist.
	return t.insertVersion(v)
}

func (t *Tx) insertVersion(v store.SecretVersion) error {
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, `INSERT INTO secret_versions (tenant_id, name, version, sealed, key_id, created_at, created_by)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, v.TenantID, v.Name, v.Version, v.Sealed, v.KeyID, TS(v.CreatedAt), v.CreatedBy)
	if dup {
		return fmt.Errorf("secret %s version %d: %w", v.Name, v.Version, store.ErrConflict)
	}
	return err
}

// Secret implements store.Tx. It locks the secret's row (FOR UPDATE): UpdateSecret writes what
// the caller read here, with no revision to check, so another process's update of the secret must
// wait for this transaction, and this read must see an update committed before it (READ COMMITTED
// returns the row's latest version once the lock is granted). On SQLite the single writer gives the
// same guarantee.
func (t *Tx) Secret(tenantID, name string) (store.Secret, error) {
	return readSecret(bg, t.Q, t.D, tenantID, name, true)
}

// UpdateSecret implements store.Tx.
func (t *Tx) UpdateSecret(s store.Secret) error {
	hosts, err := hostsJSON(s.AllowedHosts)
	if err != nil {
		return err
	}
	res, err := t.Q.ExecContext(bg, `UPDATE secrets SET description = ?, allowed_hosts = ?, version = ?, updated_at = ?,
		updated_by = ? WHERE tenant_id = ? AND name = ?`,
		s.Description, hosts, s.Version, TS(s.UpdatedAt), s.UpdatedBy, s.TenantID, s.Name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("secret %s: %w", s.Name, store.ErrNotFound)
	}
	return nil
}

// AddSecretVersion implements store.Tx.
func (t *Tx) AddSecretVersion(v store.SecretVersion, keep int) error {
	if err := t.insertVersion(v); err != nil {
		return err
	}
	if _, err := t.Q.ExecContext(bg, `UPDATE secret_versions SET sealed = NULL, key_id = ''
		WHERE tenant_id = ? AND name = ? AND version < ? AND sealed IS NOT NULL`, v.TenantID, v.Name, v.Version); err != nil {
		return err
	}
	_, err := t.Q.ExecContext(bg, `DELETE FROM secret_versions WHERE tenant_id = ? AND name = ? AND version <= ?`,
		v.TenantID, v.Name, v.Version-int64(max(keep, 1)))
	return err
}

// DeleteSecret implements store.Tx.
func (t *Tx) DeleteSecret(tenantID, name string) error {
	res, err := t.Q.ExecContext(bg, "DELETE FROM secrets WHERE tenant_id = ? AND name = ?", tenantID, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("secret %s: %w", name, store.ErrNotFound)
	}
	_, err = t.Q.ExecContext(bg, "DELETE FROM secret_versions WHERE tenant_id = ? AND name = ?", tenantID, name)
	return err
}

// CountTenantSecrets implements store.Tx.
func (t *Tx) CountTenantSecrets(tenantID string) (int64, error) {
	var n int64
	err := t.Q.QueryRowContext(bg, "SELECT count(*) FROM secrets WHERE tenant_id = ?", tenantID).Scan(&n)
	return n, err
}

// TouchSecret implements store.Tx.
func (t *Tx) TouchSecret(tenantID, name string, at time.Time) error {
	_, err := t.Q.ExecContext(bg, "UPDATE secrets SET last_used_at = ? WHERE tenant_id = ? AND name = ?", TS(at), tenantID, name)
	return err
}

// RewrapSecret implements store.Tx.
func (t *Tx) RewrapSecret(r store.SecretRewrap) (bool, error) {
	res, err := t.Q.ExecContext(bg, `UPDATE secret_versions SET sealed = ?, key_id = ?
		WHERE tenant_id = ? AND name = ? AND version = ? AND key_id = ? AND sealed IS NOT NULL`,
		r.Sealed, r.KeyID, r.Ref.TenantID, r.Ref.Name, r.Ref.Version, r.FromKeyID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

const entrypointCols = "id, tenant_id, gts_id, family, major, minor, has_minor, kind, owner_type, owner_id, shared, " +
	"status, version, title, tags, adapter, definition, meta, revision, created_at, updated_at"

// epMeta holds lifecycle details that are read with the entrypoint but never queried.
type epMeta struct {
	CreatedBy    string                  `json:"created_by,omitempty"`
	ActivatedAt  *time.Time              `json:"activated_at,omitempty"`
	DisabledAt   *time.Time              `json:"disabled_at,omitempty"`
	ArchivedAt   *time.Time              `json:"archived_at,omitempty"`
	ReleaseNotes string                  `json:"release_notes,omitempty"`
	Deprecation  *entrypoint.Deprecation `json:"deprecation,omitempty"`
}

func scanEntrypoint(s Scanner) (entrypoint.Entrypoint, error) {
	var e entrypoint.Entrypoint
	var hasMinor, shared int
	var tags, def, meta, created, updated string
	err := s.Scan(&e.ID, &e.TenantID, &e.GTSID, &e.Family, &e.Major, &e.Minor, &hasMinor, &e.Kind,
		&e.Owner.OwnerType, &e.Owner.ID, &shared, &e.Status, &e.Version, &e.Title, &tags, &e.Adapter,
		&def, &meta, &e.Revision, &created, &updated)
	if err != nil {
		return e, err
	}
	e.HasMinor, e.Shared = hasMinor == 1, shared == 1
	e.Owner.TenantID = e.TenantID
	e.Definition = json.RawMessage(def)
	if err := json.Unmarshal([]byte(tags), &e.Tags); err != nil {
		return e, fmt.Errorf("entrypoint %s tags: %w", e.ID, err)
	}
	var m epMeta
	if err := json.Unmarshal([]byte(meta), &m); err != nil {
		return e, fmt.Errorf("entrypoint %s meta: %w", e.ID, err)
	}
	e.CreatedBy, e.ActivatedAt, e.DisabledAt, e.ArchivedAt = m.CreatedBy, m.ActivatedAt, m.DisabledAt, m.ArchivedAt
	e.ReleaseNotes, e.Deprecation = m.ReleaseNotes, m.Deprecation
	if e.CreatedAt, err = ParseTS(created); err != nil {
		return e, err
	}
	e.UpdatedAt, err = ParseTS(updated)
	return e, err
}

func entrypointArgs(e *entrypoint.Entrypoint) ([]any, error) {
	tags := e.Tags
	if tags == nil {
		tags = []string{}
	}
	tj, err := json.Marshal(tags)
	if err != nil {
		return nil, err
	}
	mj, err := json.Marshal(epMeta{CreatedBy: e.CreatedBy, ActivatedAt: e.ActivatedAt, DisabledAt: e.DisabledAt,
		ArchivedAt: e.ArchivedAt, ReleaseNotes: e.ReleaseNotes, Deprecation: e.Deprecation})
	if err != nil {
		return nil, err
	}
	return []any{e.ID, e.TenantID, e.GTSID, e.Family, e.Major, e.Minor, e.HasMinor, string(e.Kind),
		string(e.Owner.OwnerType), e.Owner.ID, e.Shared, string(e.Status), e.Version, e.Title, string(tj),
		e.Adapter, string(e.Definition), string(mj), e.Revision, TS(e.CreatedAt), TS(e.UpdatedAt)}, nil
}

// visibility encodes entrypoint.Entrypoint.VisibleTo as SQL.
func visibility(v entrypoint.Viewer) (string, []any) {
	if v.Operator {
		return "", nil
	}
	return "((owner_type = 'system' AND status <> 'draft') OR (tenant_id = ? AND (owner_type = 'tenant' OR owner_id = ? OR shared = 1)))",
		[]any{v.TenantID, v.SubjectID}
}

func scoped(base string, v entrypoint.Viewer) (string, []any) {
	w, a := visibility(v)
	if w == "" {
		return base, nil
	}
	return base + " AND " + w, a
}

// entrypointFields are the OData fields of entrypoints in dialect d.
func entrypointFields(d Dialect) odata.Schema {
	return odata.Schema{
		"entrypoint_id": {Column: "gts_id", Type: odata.String, Filter: true, Sort: true, Custom: GTSIDFilter("gts_id")},
		"status": {Column: "status", Type: odata.Enum, Filter: true, Sort: true,
			Enum: []string{"draft", "active", "deprecated", "disabled", "archived"}},
		"owner_type": {Column: "owner_type", Type: odata.Enum, Filter: true, Sort: true, Enum: []string{"user", "tenant", "system"}},
		"kind":       {Column: "kind", Type: odata.Enum, Filter: true, Sort: true, Enum: []string{"function", "workflow"}},
		"adapter":    {Column: "adapter", Type: odata.String, Filter: true, Sort: true},
		"title":      {Column: "title", Type: odata.String, Filter: true, Sort: true},
		"tags":       {Column: "tags", Type: odata.StringArray, Filter: true, Custom: jsonArrayFilter(d, "tags")},
		"created_at": {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
		"updated_at": {Column: "updated_at", Type: odata.Time, Filter: true, Sort: true},
	}
}

// likeEscape escapes LIKE metacharacters for use with ESCAPE '\'.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// GTSIDFilter compiles entrypoint_id predicates: eq/ne/in take exact ids or GTS wildcard patterns
// (one trailing *; "...name.v1.*" also matches "...name.v1~"), startswith a plain prefix.
func GTSIDFilter(col string) func(op string, vals []any) (string, []any, error) {
	return func(op string, vals []any) (string, []any, error) {
		var terms []string
		var a []any
		for _, v := range vals {
			s, ok := v.(string)
			if !ok {
				return "", nil, fmt.Errorf("entrypoint_id takes string values")
			}
			if op == "startswith" {
				terms = append(terms, col+` LIKE ? ESCAPE '\'`)
				a = append(a, likeEscape(s)+"%")
				continue
			}
			if !strings.Contains(s, "*") {
				terms = append(terms, col+" = ?")
				a = append(a, s)
				continue
			}
			p, err := gts.ParsePattern(s)
			if err != nil {
				return "", nil, fmt.Errorf("entrypoint_id pattern: %w", err)
			}
			exact, prefixes := p.Candidates()
			for _, e := range exact {
				terms = append(terms, col+" = ?")
				a = append(a, e)
			}
			for _, pre := range prefixes {
				terms = append(terms, col+` LIKE ? ESCAPE '\'`)
				a = append(a, likeEscape(pre)+"%")
			}
		}
		switch op {
		case "eq", "in", "startswith":
		case "ne":
		default:
			return "", nil, fmt.Errorf("entrypoint_id does not support %s", op)
		}
		if len(terms) == 0 {
			return "(1 = 0)", nil, nil
		}
		w := "(" + strings.Join(terms, " OR ") + ")"
		if op == "ne" {
			w = "(NOT " + w + ")"
		}
		return w, a, nil
	}
}

// jsonArrayFilter compiles membership tests on a JSON array column: eq = contains, in = contains any
// (Dialect.JSONArrayContains).
func jsonArrayFilter(d Dialect, col string) func(op string, vals []any) (string, []any, error) {
	return func(op string, vals []any) (string, []any, error) {
		if op != "eq" && op != "in" {
			return "", nil, fmt.Errorf("%s supports only eq (contains) and in (contains any)", col)
		}
		ph := strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ")
		return d.JSONArrayContains(col, ph), vals, nil
	}
}

// Entrypoint implements store.Reader.
func (s *Reader) Entrypoint(ctx context.Context, v entrypoint.Viewer, id string) (entrypoint.Entrypoint, error) {
	col := "id"
	if strings.HasPrefix(id, "gts.") {
		col = "gts_id"
	}
	w, a := scoped(col+" = ?", v)
	row := s.Q.QueryRowContext(ctx, "SELECT "+entrypointCols+" FROM entrypoints WHERE "+w+
		" ORDER BY (tenant_id = 'platform') DESC, id LIMIT 1", append([]any{id}, a...)...)
	e, err := scanEntrypoint(row)
	return e, NotFound(err, "entrypoint")
}

// ListEntrypoints implements store.Reader.
func (s *Reader) ListEntrypoints(ctx context.Context, v entrypoint.Viewer, q store.ListQuery) (store.Page[entrypoint.Entrypoint], error) {
	w, a := visibility(v)
	return ListPage(ctx, s.Q, ListSpec[entrypoint.Entrypoint]{
		From: "entrypoints", Cols: entrypointCols, Fields: entrypointFields(s.D),
		DefaultOrder: []odata.OrderItem{{Field: "created_at"}},
		Scope:        w, ScopeArgs: a,
		Scan: func(r Scanner) (entrypoint.Entrypoint, error) { return scanEntrypoint(r) },
	}, q)
}

func (s *Reader) queryEntrypoints(ctx context.Context, q Querier, where string, a ...any) ([]entrypoint.Entrypoint, error) {
	rows, err := q.QueryContext(ctx, "SELECT "+entrypointCols+" FROM entrypoints WHERE "+where, a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []entrypoint.Entrypoint
	for rows.Next() {
		e, err := scanEntrypoint(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// EntrypointVersions implements store.Reader.
func (s *Reader) EntrypointVersions(ctx context.Context, v entrypoint.Viewer, family string) ([]entrypoint.Entrypoint, error) {
	w, a := scoped("family = ?", v)
	return s.queryEntrypoints(ctx, s.Q, w+" ORDER BY major, minor, has_minor, tenant_id", append([]any{family}, a...)...)
}

// LatestActive implements store.Reader.
func (s *Reader) LatestActive(ctx context.Context, v entrypoint.Viewer, family string, major int) (entrypoint.Entrypoint, error) {
	w, a := scoped("family = ? AND major = ? AND status = 'active'", v)
	list, err := s.queryEntrypoints(ctx, s.Q, w+" ORDER BY minor DESC, has_minor DESC LIMIT 1", append([]any{family, major}, a...)...)
	if err != nil {
		return entrypoint.Entrypoint{}, err
	}
	if len(list) == 0 {
		return entrypoint.Entrypoint{}, fmt.Errorf("no active version of %s.v%d: %w", family, major, store.ErrNotFound)
	}
	return list[0], nil
}

// InsertEntrypoint implements store.Tx.
func (t *Tx) InsertEntrypoint(e entrypoint.Entrypoint) error {
	scope, a := "tenant_id IN (?, 'platform')", []any{e.TenantID}
	if e.TenantID == entrypoint.PlatformTenant {
		scope, a = "1 = 1", nil
	}
	var n int
	err := t.Q.QueryRowContext(bg, "SELECT count(*) FROM entrypoints WHERE (gts_id = ? OR (family = ? AND major = ? AND minor = ?)) AND "+scope,
		append([]any{e.GTSID, e.Family, e.Major, e.Minor}, a...)...).Scan(&n)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("entrypoint %s: %w", e.GTSID, store.ErrConflict)
	}
	vals, err := entrypointArgs(&e)
	if err != nil {
		return err
	}
	t.Catalog = true
	dup, err := t.D.InsertIgnoreConflict(t.ExpectOne(), t.Q, "INSERT INTO entrypoints ("+entrypointCols+") VALUES (?"+strings.Repeat(", ?", len(vals)-1)+")",
		Args(vals)...)
	if dup {
		return fmt.Errorf("entrypoint %s: %w", e.GTSID, store.ErrConflict)
	}
	return err
}

// EntrypointByRef implements store.Tx.
func (t *Tx) EntrypointByRef(id string) (entrypoint.Entrypoint, error) {
	e, err := scanEntrypoint(t.Q.QueryRowContext(bg, "SELECT "+entrypointCols+" FROM entrypoints WHERE id = ?", id))
	return e, NotFound(err, "entrypoint")
}

// UpdateEntrypoint implements store.Tx.
func (t *Tx) UpdateEntrypoint(e *entrypoint.Entrypoint) error {
	vals, err := entrypointArgs(e)
	if err != nil {
		return err
	}
	t.Catalog = true
	res, err := t.Q.ExecContext(bg, `UPDATE entrypoints SET status = ?, version = ?, title = ?, tags = ?, shared = ?, adapter = ?,
		definition = ?, meta = ?, updated_at = ?, revision = revision + 1 WHERE id = ? AND revision = ?`,
		Args([]any{string(e.Status), e.Version, e.Title, vals[14], e.Shared, e.Adapter, string(e.Definition), vals[17],
			TS(e.UpdatedAt), e.ID, e.Revision})...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := t.EntrypointByRef(e.ID); err != nil {
			return err
		}
		return fmt.Errorf("entrypoint %s revision %d: %w", e.ID, e.Revision, store.ErrStale)
	}
	e.Revision++
	return nil
}

// DeleteEntrypoint implements store.Tx.
func (t *Tx) DeleteEntrypoint(id string) error {
	t.Catalog = true
	res, err := t.Q.ExecContext(bg, "DELETE FROM entrypoints WHERE id = ?", id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("entrypoint %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// CountTenantEntrypoints implements store.Tx.
func (t *Tx) CountTenantEntrypoints(tenantID string) (int64, error) {
	var n int64
	err := t.Q.QueryRowContext(bg, "SELECT count(*) FROM entrypoints WHERE tenant_id = ? AND status <> 'archived'", tenantID).Scan(&n)
	return n, err
}

// CountInFlight implements store.Tx.
// The index on (tenant_id, status, entrypoint_ref) answers it, four seeks.
func (t *Tx) CountInFlight(tenantID, ref string) (int64, error) {
	var n int64
	err := t.Q.QueryRowContext(bg, `SELECT count(*) FROM invocations WHERE tenant_id = ?
		AND status IN ('queued', 'running', 'suspended', 'compensating') AND entrypoint_ref = ?`, tenantID, ref).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

// materializationCols are a materializations row's columns in scanMaterialization's order.
var materializationCols = []string{"tenant_id", "id", "asset_key", "partition_key", "run_id", "task_id", "attempt",
	"state", "output_uri", "row_count", "byte_size", "schema_hash", "checks", "checks_passed", "checks_failed",
	"gating_decision", "created_at", "updated_at", "promoted_at", "decided_by", "decided_at", "reason"}

// matCols selects materializationCols of table alias prefix ("" for none).
func matCols(prefix string) string {
	if prefix == "" {
		return strings.Join(materializationCols, ", ")
	}
	return prefix + "." + strings.Join(materializationCols, ", "+prefix+".")
}

func scanMaterialization(sc Scanner) (asset.Materialization, error) {
	var m asset.Materialization
	var checks, promoted, decided sql.NullString
	var created, updated string
	if err := sc.Scan(&m.TenantID, &m.ID, &m.AssetKey, &m.PartitionKey, &m.RunID, &m.TaskID, &m.Attempt, &m.State,
		&m.OutputURI, &m.RowCount, &m.ByteSize, &m.SchemaHash, &checks, &m.ChecksPassed, &m.ChecksFailed,
		&m.GatingDecision, &created, &updated, &promoted, &m.DecidedBy, &decided, &m.Reason); err != nil {
		return m, err
	}
	if checks.Valid {
		m.Checks = json.RawMessage(checks.String)
	}
	var err error
	if m.CreatedAt, err = ParseTS(created); err != nil {
		return m, err
	}
	if m.UpdatedAt, err = ParseTS(updated); err != nil {
		return m, err
	}
	if m.PromotedAt, err = ParseTSPtr(promoted); err != nil {
		return m, err
	}
	m.DecidedAt, err = ParseTSPtr(decided)
	return m, err
}

const assetCols = `tenant_id, asset_key, latest_materialization_id, latest_at, latest_partition_key, consecutive_failures,
	last_failure_at, last_success_at, last_check_passed, last_gating_decision, updated_at`

func scanAsset(sc Scanner) (asset.Asset, error) {
	var a asset.Asset
	var latest, failed, succeeded sql.NullString
	var passed sql.NullInt64
	var updated string
	if err := sc.Scan(&a.TenantID, &a.AssetKey, &a.LatestMaterializationID, &latest, &a.LatestPartitionKey,
		&a.ConsecutiveFailures, &failed, &succeeded, &passed, &a.LastGatingDecision, &updated); err != nil {
		return a, err
	}
	if passed.Valid {
		p := passed.Int64 != 0
		a.LastCheckPassed = &p
	}
	var err error
	if a.LatestAt, err = ParseTSPtr(latest); err != nil {
		return a, err
	}
	if a.LastFailureAt, err = ParseTSPtr(failed); err != nil {
		return a, err
	}
	if a.LastSuccessAt, err = ParseTSPtr(succeeded); err != nil {
		return a, err
	}
	a.UpdatedAt, err = ParseTS(updated)
	return a, err
}

func readMaterialization(ctx context.Context, q Querier, tenantID, id string) (asset.Materialization, error) {
	m, err := scanMaterialization(q.QueryRowContext(ctx, "SELECT "+matCols("")+
		" FROM materializations WHERE tenant_id = ? AND id = ?", tenantID, id))
	return m, NotFound(err, "materialization "+id)
}

func readLatest(ctx context.Context, q Querier, tenantID, assetKey, partitionKey string) (asset.Materialization, error) {
	m, err := scanMaterialization(q.QueryRowContext(ctx, "SELECT "+matCols("m")+` FROM asset_latest l
		JOIN materializations m ON m.tenant_id = l.tenant_id AND m.id = l.materialization_id
		WHERE l.tenant_id = ? AND l.asset_key = ? AND l.partition_key = ?`, tenantID, assetKey, partitionKey))
	return m, NotFound(err, "latest materialization of "+assetKey)
}

func readAsset(ctx context.Context, q Querier, tenantID, assetKey string) (asset.Asset, error) {
	a, err := scanAsset(q.QueryRowContext(ctx, "SELECT "+assetCols+" FROM asset_states WHERE tenant_id = ? AND asset_key = ?",
		tenantID, assetKey))
	return a, NotFound(err, "asset "+assetKey)
}

var assetFields = odata.Schema{
	"asset_key":            {Column: "asset_key", Type: odata.String, Filter: true, Sort: true},
	"last_gating_decision": {Column: "last_gating_decision", Type: odata.String, Filter: true},
	"consecutive_failures": {Column: "consecutive_failures", Type: odata.Int, Filter: true},
	"updated_at":           {Column: "updated_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListAssets implements store.Reader.
func (s *Reader) ListAssets(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[asset.Asset], error) {
	return ListPage(ctx, s.Q, ListSpec[asset.Asset]{
		From: "asset_states", Cols: assetCols, Fields: assetFields, Scope: "tenant_id = ?", ScopeArgs: []any{tenantID},
		DefaultOrder: []odata.OrderItem{{Field: "asset_key"}},
		Scan:         scanAsset,
	}, q)
}

// Asset implements store.Reader.
func (s *Reader) Asset(ctx context.Context, tenantID, assetKey string) (asset.Asset, error) {
	return readAsset(ctx, s.Q, tenantID, assetKey)
}

var materializationFields = odata.Schema{
	"asset_key":     {Column: "asset_key", Type: odata.String, Filter: true},
	"partition_key": {Column: "partition_key", Type: odata.String, Filter: true},
	"state":         {Column: "state", Type: odata.String, Filter: true},
	"run_id":        {Column: "run_id", Type: odata.String, Filter: true},
	"created_at":    {Column: "created_at", Type: odata.Time, Filter: true, Sort: true},
}

// ListMaterializations implements store.Reader.
func (s *Reader) ListMaterializations(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[asset.Materialization], error) {
	return ListPage(ctx, s.Q, ListSpec[asset.Materialization]{
		From: "materializations", Cols: matCols(""), Fields: materializationFields, Scope: "tenant_id = ?",
		ScopeArgs: []any{tenantID}, DefaultOrder: []odata.OrderItem{{Field: "created_at", Desc: true}},
		Scan: scanMaterialization,
	}, q)
}

// Materialization implements store.Reader.
func (s *Reader) Materialization(ctx context.Context, tenantID, id string) (asset.Materialization, error) {
	return readMaterialization(ctx, s.Q, tenantID, id)
}

// LatestMaterialization implements store.Reader.
func (s *Reader) LatestMaterialization(ctx context.Context, tenantID, assetKey, partitionKey string) (asset.Materialization, error) {
	return readLatest(ctx, s.Q, tenantID, assetKey, partitionKey)
}

// Materialization implements store.Tx.
func (t *Tx) Materialization(tenantID, id string) (asset.Materialization, error) {
	return readMaterialization(bg, t.Q, tenantID, id)
}

// LatestMaterialization implements store.Tx.
func (t *Tx) LatestMaterialization(tenantID, assetKey, partitionKey string) (asset.Materialization, error) {
	return readLatest(bg, t.Q, tenantID, assetKey, partitionKey)
}

// nullText is s, or NULL when it is empty.
func nullText(s []byte) any {
	if len(s) == 0 {
		return nil
	}
	return string(s)
}

// PutMaterialization implements store.Tx.
func (t *Tx) PutMaterialization(m asset.Materialization) (asset.Materialization, error) {
	switch {
	case m.TenantID == "" || m.ID == "" || m.AssetKey == "":
		return m, errors.New("materialization: tenant, id and asset key are required")
	case !m.State.Initial():
		return m, fmt.Errorf("materialization %s: cannot be recorded %q", m.ID, m.State)
	case m.GatingDecision != "" && !m.GatingDecision.Valid():
		return m, fmt.Errorf("materialization %s: unknown gating decision %q", m.ID, m.GatingDecision)
	}
	dup, err := t.D.InsertIgnoreConflict(bg, t.Q, "INSERT INTO materializations ("+matCols("")+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.TenantID, m.ID, m.AssetKey, m.PartitionKey, m.RunID, m.TaskID, m.Attempt, string(m.State), m.OutputURI,
		m.RowCount, m.ByteSize, m.SchemaHash, nullText(m.Checks), m.ChecksPassed, m.ChecksFailed,
		string(m.GatingDecision), TS(m.CreatedAt), TS(m.UpdatedAt), TSPtr(m.PromotedAt), m.DecidedBy,
		TSPtr(m.DecidedAt), m.Reason)
	if err != nil {
		return m, err
	}
	if dup {
		return readMaterialization(bg, t.Q, m.TenantID, m.ID)
	}
	if _, err := t.Q.ExecContext(bg, `INSERT INTO asset_states (tenant_id, asset_key, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (tenant_id, asset_key) DO NOTHING`, m.TenantID, m.AssetKey, TS(m.CreatedAt)); err != nil {
		return m, err
	}
	return readMaterialization(bg, t.Q, m.TenantID, m.ID)
}

// move is one state change of a materialization (SetMaterializationState, Promote).
type move struct {
	store.MaterializationChange
	// promote sets promoted_at; outputURI, when set, replaces output_uri.
	promote   bool
	outputURI string
}

// moveState applies a move if the materialization is in a state it may make it from, and reads
// the row: moved says whether it changed. A row already in mv.To is returned unchanged; a row in
// another state is an *asset.TransitionError.
func (t *Tx) moveState(mv move) (m asset.Materialization, moved bool, err error) {
	from := mv.To.From()
	set := "state = ?, updated_at = ?"
	args := []any{string(mv.To), TS(mv.At)}
	if mv.promote {
		set += ", promoted_at = ?"
		args = append(args, TS(mv.At))
	}
	if mv.DecidedBy != "" || mv.Reason != "" {
		set += ", decided_by = ?, decided_at = ?, reason = ?"
		args = append(args, mv.DecidedBy, TS(mv.At), mv.Reason)
	}
	if mv.outputURI != "" {
		set += ", output_uri = ?"
		args = append(args, mv.outputURI)
	}
	args = append(args, mv.TenantID, mv.ID)
	for _, f := range from {
		args = append(args, string(f))
	}
	var n int64
	if len(from) > 0 { // no move leads to staged: only a no-op can
		res, err := t.Q.ExecContext(bg, "UPDATE materializations SET "+set+" WHERE tenant_id = ? AND id = ? AND state IN (?"+
			strings.Repeat(", ?", len(from)-1)+")", args...)
		if err != nil {
			return m, false, err
		}
		if n, err = res.RowsAffected(); err != nil {
			return m, false, err
		}
	}
	if m, err = readMaterialization(bg, t.Q, mv.TenantID, mv.ID); err != nil {
		return m, false, err
	}
	if n == 0 && m.State != mv.To {
		return m, false, &asset.TransitionError{ID: mv.ID, From: m.State, To: mv.To}
	}
	return m, n > 0, nil
}

// SetMaterializationState implements store.Tx.
func (t *Tx) SetMaterializationState(c store.MaterializationChange) (asset.Materialization, error) {
	switch {
	case c.To == asset.StatePromoted:
		return asset.Materialization{}, fmt.Errorf("materialization %s: a promotion goes through Promote", c.ID)
	case !c.To.Valid():
		return asset.Materialization{}, fmt.Errorf("materialization %s: unknown state %q", c.ID, c.To)
	}
	m, _, err := t.moveState(move{MaterializationChange: c})
	return m, err
}

// Promote implements store.Tx. The conditional update of the materialization's state decides
// which of two concurrent promotions of one id applies (the other finds it promoted and changes
// nothing); the latest pointer is an upsert on its (tenant, asset, partition) key, so concurrent
// promotions of two ids leave exactly one latest, the one committed last.
func (t *Tx) Promote(p store.Promotion) (asset.Materialization, error) {
	m, moved, err := t.moveState(move{promote: true, outputURI: p.OutputURI, MaterializationChange: store.MaterializationChange{
		TenantID: p.TenantID, ID: p.ID, To: asset.StatePromoted, At: p.At, DecidedBy: p.DecidedBy, Reason: p.Reason}})
	if err != nil || !moved {
		return m, err
	}
	if _, err := t.Q.ExecContext(bg, `INSERT INTO asset_latest (tenant_id, asset_key, partition_key, materialization_id, promoted_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, asset_key, partition_key) DO UPDATE SET
		materialization_id = excluded.materialization_id, promoted_at = excluded.promoted_at`,
		m.TenantID, m.AssetKey, m.PartitionKey, m.ID, TS(p.At)); err != nil {
		return m, err
	}
	_, err = t.Q.ExecContext(bg, `INSERT INTO asset_states (tenant_id, asset_key, latest_materialization_id, latest_at,
		latest_partition_key, updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, asset_key) DO UPDATE SET
		latest_materialization_id = excluded.latest_materialization_id, latest_at = excluded.latest_at,
		latest_partition_key = excluded.latest_partition_key, updated_at = excluded.updated_at`,
		m.TenantID, m.AssetKey, m.ID, TS(p.At), m.PartitionKey, TS(p.At))
	return m, err
}

// RecordAssetOutcome implements store.Tx. The inserted row is the outcome's effect on a new asset
// (one failure, or none); the update reads the same values through excluded, so no bound value
// appears in an expression whose type PostgreSQL would have to guess.
func (t *Tx) RecordAssetOutcome(o store.AssetOutcome) (asset.Asset, error) {
	if o.GatingDecision != "" && !o.GatingDecision.Valid() {
		return asset.Asset{}, fmt.Errorf("asset %s: unknown gating decision %q", o.AssetKey, o.GatingDecision)
	}
	failures, success, failure := 1, any(nil), any(TS(o.At))
	if o.Succeeded {
		failures, success, failure = 0, TS(o.At), nil
	}
	var passed any
	if o.ChecksPassed != nil {
		passed = Args([]any{*o.ChecksPassed})[0]
	}
	_, err := t.Q.ExecContext(bg, `INSERT INTO asset_states (tenant_id, asset_key, consecutive_failures, last_failure_at,
		last_success_at, last_check_passed, last_gating_decision, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, asset_key) DO UPDATE SET
		consecutive_failures = CASE WHEN excluded.consecutive_failures = 0 THEN 0 ELSE asset_states.consecutive_failures + 1 END,
		last_failure_at = coalesce(excluded.last_failure_at, asset_states.last_failure_at),
		last_success_at = coalesce(excluded.last_success_at, asset_states.last_success_at),
		last_check_passed = coalesce(excluded.last_check_passed, asset_states.last_check_passed),
		last_gating_decision = CASE WHEN excluded.last_gating_decision = '' THEN asset_states.last_gating_decision
			ELSE excluded.last_gating_decision END,
		updated_at = excluded.updated_at`,
		o.TenantID, o.AssetKey, failures, failure, success, passed, string(o.GatingDecision), TS(o.At))
	if err != nil {
		return asset.Asset{}, err
	}
	return readAsset(bg, t.Q, o.TenantID, o.AssetKey)
}

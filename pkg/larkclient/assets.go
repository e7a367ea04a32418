package larkclient

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"time"
)

// Asset is an asset of the caller's tenant: its latest promoted materialization and its health
// (docs/dag.md, "Assets").
type Asset struct {
	Raw
	AssetKey                string     `json:"asset_key"`
	LatestMaterializationID string     `json:"latest_materialization_id,omitempty"` // the one promoted last
	LatestAt                *time.Time `json:"latest_at,omitempty"`                 // when
	LatestPartitionKey      string     `json:"latest_partition_key,omitempty"`      // for which partition
	ConsecutiveFailures     int        `json:"consecutive_failures"`
	LastSuccessAt           *time.Time `json:"last_success_at,omitempty"`
	LastFailureAt           *time.Time `json:"last_failure_at,omitempty"`
	LastCheckPassed         *bool      `json:"last_check_passed,omitempty"`    // nil until checks ran
	LastGatingDecision      string     `json:"last_gating_decision,omitempty"` // allow, allow_with_warning, quarantine or block
	UpdatedAt               time.Time  `json:"updated_at"`
}

// Materialization is one task attempt's output of an asset for a partition.
type Materialization struct {
	Raw
	MaterializationID string `json:"materialization_id"` // mat_…
	AssetKey          string `json:"asset_key"`
	PartitionKey      string `json:"partition_key"` // "" for an unpartitioned DAG
	RunID             string `json:"run_id"`        // the DAG run's invocation id
	TaskID            string `json:"task_id"`
	Attempt           int    `json:"attempt"`
	// State is staged, committed, promoted, quarantined or rejected.
	State          string          `json:"state"`
	GatingDecision string          `json:"gating_decision"`
	RowCount       int64           `json:"row_count"`
	ByteSize       int64           `json:"byte_size"`
	SchemaHash     string          `json:"schema_hash,omitempty"`
	Checks         json.RawMessage `json:"checks,omitempty"` // the check results
	ChecksPassed   int             `json:"checks_passed"`
	ChecksFailed   int             `json:"checks_failed"`
	OutputURI      string          `json:"output_uri"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	PromotedAt     *time.Time      `json:"promoted_at,omitempty"`
	DecidedBy      string          `json:"decided_by,omitempty"` // who approved or rejected it
	DecidedAt      *time.Time      `json:"decided_at,omitempty"`
	Reason         string          `json:"reason,omitempty"`
}

// MaterializationFilter narrows GET /assets/{asset_key}/materializations.
type MaterializationFilter struct {
	PartitionKey string // only this partition's ("" for any)
	State        string // only those in this state ("" for any)
}

// ListAssets returns one page of the tenant's assets.
func (c *Client) ListAssets(ctx context.Context, opts ListOptions) (*Page[Asset], error) {
	return listPage[Asset](ctx, c, "/assets", opts.values())
}

// AllAssets iterates every asset matching opts.
func (c *Client) AllAssets(ctx context.Context, opts ListOptions) iter.Seq2[Asset, error] {
	return all(ctx, opts, c.ListAssets)
}

// GetAsset returns one asset.
func (c *Client) GetAsset(ctx context.Context, key string) (*Asset, error) {
	if err := need(key); err != nil {
		return nil, err
	}
	var a Asset
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/assets/" + esc(key)}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ListMaterializations returns one page of an asset's materializations, newest first.
func (c *Client) ListMaterializations(ctx context.Context, key string, f MaterializationFilter, opts ListOptions) (*Page[Materialization], error) {
	if err := need(key); err != nil {
		return nil, err
	}
	q := opts.values()
	if f.PartitionKey != "" {
		q.Set("partition_key", f.PartitionKey)
	}
	if f.State != "" {
		q.Set("state", f.State)
	}
	return listPage[Materialization](ctx, c, "/assets/"+esc(key)+"/materializations", q)
}

// AllMaterializations iterates every materialization of an asset matching f and opts.
func (c *Client) AllMaterializations(ctx context.Context, key string, f MaterializationFilter, opts ListOptions) iter.Seq2[Materialization, error] {
	return all(ctx, opts, func(ctx context.Context, o ListOptions) (*Page[Materialization], error) {
		return c.ListMaterializations(ctx, key, f, o)
	})
}

// ApproveMaterialization promotes a quarantined materialization (developer role); reason may be
// "".
func (c *Client) ApproveMaterialization(ctx context.Context, key, id, reason string) (*Materialization, error) {
	return c.decideMaterialization(ctx, key, id, "approve", reason)
}

// RejectMaterialization discards a quarantined materialization (developer role); reason may be "".
func (c *Client) RejectMaterialization(ctx context.Context, key, id, reason string) (*Materialization, error) {
	return c.decideMaterialization(ctx, key, id, "reject", reason)
}

func (c *Client) decideMaterialization(ctx context.Context, key, id, action, reason string) (*Materialization, error) {
	if err := need(key); err != nil {
		return nil, err
	}
	if err := need(id); err != nil {
		return nil, err
	}
	body := map[string]string{}
	if reason != "" {
		body["reason"] = reason
	}
	var m Materialization
	path := "/assets/" + esc(key) + "/materializations/" + esc(id) + ":" + action
	if _, err := c.call(ctx, request{method: http.MethodPost, path: path, body: body}, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

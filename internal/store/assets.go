package store

import (
	"context"
	"time"

	"github.com/larkrun/lark/internal/asset"
)

// AssetReader holds the reads of assets and their materializations (004 §16), all scoped by
// tenant.
type AssetReader interface {
	// ListAssets lists a tenant's assets: every asset that has a materialization or a recorded
	// outcome. Filters: asset_key (eq, startswith, ...), last_gating_decision,
	// consecutive_failures, updated_at; order: asset_key (default) or updated_at.
	ListAssets(ctx context.Context, tenantID string, q ListQuery) (Page[asset.Asset], error)
	// Asset reads one asset of a tenant; ErrNotFound when it has none of that key.
	Asset(ctx context.Context, tenantID, assetKey string) (asset.Asset, error)
	// ListMaterializations lists a tenant's materializations, newest first by default. Filters:
	// asset_key, partition_key, state, run_id, created_at; order: created_at.
	ListMaterializations(ctx context.Context, tenantID string, q ListQuery) (Page[asset.Materialization], error)
	// Materialization reads one materialization of a tenant; ErrNotFound when there is none.
	Materialization(ctx context.Context, tenantID, id string) (asset.Materialization, error)
	// LatestMaterialization reads the latest promoted materialization of an asset for a partition
	// ("" when unpartitioned); ErrNotFound when none was promoted.
	LatestMaterialization(ctx context.Context, tenantID, assetKey, partitionKey string) (asset.Materialization, error)
}

// AssetTx holds the writes of materializations through the output commit protocol, the latest
// pointer of each (asset, partition) and the assets' health rows.
type AssetTx interface {
	// PutMaterialization records a new materialization, in a state where one may start
	// (asset.State.Initial), and the asset's row if it has none, and returns it. If the tenant
	// has one with the same id already, it changes nothing and returns the stored one (a report
	// repeated after a crash or a retry).
	PutMaterialization(m asset.Materialization) (asset.Materialization, error)
	// Materialization is Reader.Materialization inside the transaction.
	Materialization(tenantID, id string) (asset.Materialization, error)
	// SetMaterializationState moves a materialization to c.To and returns it: a move the protocol
	// forbids (asset.State.CanMove) is an *asset.TransitionError and changes nothing; a move to
	// the state it is in already changes nothing and is not an error; ErrNotFound when the
	// tenant has none of that id. A promotion goes through Promote, never here.
	SetMaterializationState(c MaterializationChange) (asset.Materialization, error)
	// Promote makes a committed or quarantined (approved) materialization promoted and, in the
	// same write, the latest of its (asset, partition), in place of the one before, and its
	// asset's latest materialization. Promoting one that is promoted already changes nothing
	// (the latest stays what it is) and is not an error; another state is an
	// *asset.TransitionError; ErrNotFound when the tenant has none of that id.
	Promote(p Promotion) (asset.Materialization, error)
	// LatestMaterialization is Reader.LatestMaterialization inside the transaction.
	LatestMaterialization(tenantID, assetKey, partitionKey string) (asset.Materialization, error)
	// RecordAssetOutcome updates an asset's health with a task's outcome (creating its row if it
	// has none) and returns the row.
	RecordAssetOutcome(o AssetOutcome) (asset.Asset, error)
}

// MaterializationChange moves a materialization to another state (AssetTx.SetMaterializationState).
type MaterializationChange struct {
	TenantID string
	ID       string
	To       asset.State
	// At is the time of the change (the row's updated_at).
	At time.Time
	// DecidedBy and Reason, when either is set, record a decision (a rejection): who made it and
	// why, with At as its time.
	DecidedBy, Reason string
}

// Promotion promotes a materialization (AssetTx.Promote).
type Promotion struct {
	TenantID string
	ID       string
	// At is the time of the promotion (promoted_at, and the latest pointer's).
	At time.Time
	// DecidedBy and Reason, when either is set, record the decision (an approval of a
	// quarantined materialization), with At as its time.
	DecidedBy, Reason string
	// OutputURI, when set, is the materialization's data from now on (an approved one, committed
	// out of quarantine).
	OutputURI string
}

// AssetOutcome is one task outcome for an asset's health row (AssetTx.RecordAssetOutcome).
type AssetOutcome struct {
	TenantID string
	AssetKey string
	At       time.Time
	// Succeeded resets the asset's consecutive failures and sets its last success to At;
	// otherwise the failures go up by one and the last failure is At.
	Succeeded bool
	// ChecksPassed is whether every check of the outcome passed; nil (no check ran) leaves the
	// stored one.
	ChecksPassed *bool
	// GatingDecision is the outcome's gating decision; "" leaves the stored one.
	GatingDecision asset.GatingDecision
}

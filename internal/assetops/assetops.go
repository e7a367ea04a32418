// Package assetops serves the Assets API (004 §14, §16; docs/dag.md "Assets"): a tenant's assets
// with their health, their materializations with their metadata and data (read from the blob store
// the DAG engine committed them to), and the human decision on a quarantined materialization:
// approve (it is promoted, the latest of its asset and partition) or reject (it is discarded and
// its data deleted). Every use case is scoped by the caller's tenant; another tenant's asset is not
// found.
package assetops

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
)

// Audit event types of the decisions on quarantined materializations.
const (
	AuditApproved = audit.TypeBase + "x.core.serverless.audit.materialization_approved.v1~"
	AuditRejected = audit.TypeBase + "x.core.serverless.audit.materialization_rejected.v1~"
)

// MaxDataBytes bounds the data Data reads back: the payload limit a task's output was held to.
const MaxDataBytes = 2 << 20

// MaxReasonBytes bounds a decision's reason.
const MaxReasonBytes = 1024

// Store is the store methods the service uses (store.Store has them all): the asset reads, and
// Update for the decisions and their audit events.
type Store interface {
	store.AssetReader
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Options configure a Service.
type Options struct {
	Clock  clock.Clock
	IDs    idgen.Generator
	Logger *slog.Logger
}

// Service implements the asset use cases.
type Service struct {
	store Store
	blobs blob.Store
	o     Options
}

// New returns a Service over the store and the blob store the DAG engine writes outputs to.
func New(st Store, blobs blob.Store, o Options) *Service {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.IDs == nil {
		o.IDs = idgen.UUIDv7{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{store: st, blobs: blobs, o: o}
}

// Filter narrows a list of materializations beyond its $filter: each member set is an equality.
type Filter struct {
	// PartitionKey, when not nil, keeps the materializations of that partition ("" for an
	// unpartitioned DAG's).
	PartitionKey *string
	// State, when not nil, keeps the materializations in that state (one of asset.States).
	State *string
}

// Decision is the optional body of :approve and :reject.
type Decision struct {
	// Reason says why (at most MaxReasonBytes); it is stored on the materialization and audited.
	Reason string `json:"reason"`
}

func canRead(sc auth.SecurityContext) error {
	return auth.RequireTenantRole(sc, auth.RoleViewer, "reading assets")
}

func canDecide(sc auth.SecurityContext) error {
	return auth.RequireTenantRole(sc, auth.RoleDeveloper, "approving or rejecting materializations")
}

// listErr maps a list's store error to its problem.
func listErr(err error) error {
	var qe *store.QueryError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &qe):
		return problem.BadRequest("%s", qe.Error())
	case errors.Is(err, store.ErrBadCursor):
		return problem.BadRequest("invalid cursor")
	}
	return problem.Internal(err)
}

// resourceErr maps a store error about the asset or materialization what to its problem.
func resourceErr(what string, err error) error {
	var pe *problem.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, store.ErrNotFound):
		return problem.NotFound("%s not found", what)
	}
	return problem.Internal(err)
}

// ListAssets lists the caller's tenant's assets with their health and latest materialization.
func (s *Service) ListAssets(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[asset.Asset], error) {
	if err := canRead(sc); err != nil {
		return store.Page[asset.Asset]{}, err
	}
	page, err := s.store.ListAssets(ctx, sc.TenantID, q)
	return page, listErr(err)
}

// Asset reads one asset of the caller's tenant.
func (s *Service) Asset(ctx context.Context, sc auth.SecurityContext, key string) (asset.Asset, error) {
	if err := canRead(sc); err != nil {
		return asset.Asset{}, err
	}
	a, err := s.store.Asset(ctx, sc.TenantID, key)
	return a, resourceErr("asset "+key, err)
}

// ListMaterializations lists the materializations of asset key (newest first by default), with
// f's conditions and q's $filter combined.
func (s *Service) ListMaterializations(ctx context.Context, sc auth.SecurityContext, key string, f Filter,
	q store.ListQuery) (store.Page[asset.Materialization], error) {
	if _, err := s.Asset(ctx, sc, key); err != nil {
		return store.Page[asset.Materialization]{}, err
	}
	if f.State != nil && !asset.State(*f.State).Valid() {
		return store.Page[asset.Materialization]{}, problem.BadRequest(
			"state must be one of staged, committed, promoted, quarantined, rejected; got %q", *f.State)
	}
	q.Filter = and(q.Filter, eq("asset_key", key))
	if f.PartitionKey != nil {
		q.Filter = and(q.Filter, eq("partition_key", *f.PartitionKey))
	}
	if f.State != nil {
		q.Filter = and(q.Filter, eq("state", *f.State))
	}
	page, err := s.store.ListMaterializations(ctx, sc.TenantID, q)
	return page, listErr(err)
}

// eq is the condition field eq 'value'.
func eq(field, value string) odata.Expr {
	return &odata.Compare{Field: field, Op: odata.OpEq, Value: odata.Literal{Kind: odata.LitString, Str: value}}
}

// and is l and r (r alone when l is nil).
func and(l, r odata.Expr) odata.Expr {
	if l == nil {
		return r
	}
	return &odata.And{L: l, R: r}
}

// Materialization reads materialization id of asset key: with its row count, byte size, schema
// hash, checks, gating decision, state, run and task.
func (s *Service) Materialization(ctx context.Context, sc auth.SecurityContext, key, id string) (asset.Materialization, error) {
	if err := canRead(sc); err != nil {
		return asset.Materialization{}, err
	}
	m, err := s.store.Materialization(ctx, sc.TenantID, id)
	if err == nil && m.AssetKey != key {
		err = store.ErrNotFound
	}
	return m, resourceErr("materialization "+id+" of asset "+key, err)
}

// Data reads the data of materialization id of asset key from the blob store (at most
// MaxDataBytes): 404 when it is gone (rejected, or deleted from the store).
func (s *Service) Data(ctx context.Context, sc auth.SecurityContext, key, id string) (json.RawMessage, error) {
	m, err := s.Materialization(ctx, sc, key, id)
	if err != nil {
		return nil, err
	}
	if m.State == asset.StateRejected || m.OutputURI == "" {
		return nil, problem.NotFound("materialization %s has no data: it is %s", id, m.State)
	}
	b, err := blob.ReadAll(ctx, s.blobs, m.OutputURI, MaxDataBytes)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil, problem.NotFound("the data of materialization %s is no longer in the blob store", id)
	case errors.Is(err, blob.ErrTooLarge):
		return nil, problem.Conflict("data_too_large", "the data of materialization %s is larger than %d bytes", id, MaxDataBytes)
	case err != nil:
		return nil, problem.Internal(err)
	}
	return b, nil
}

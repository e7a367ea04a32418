package invoke

import (
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/dispatch"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// ClaimConfig is the configuration of the claim stage that feeds this service's Run
// (dispatch.NewStoreClaimer): its store and clock, its catalog (the service's caches of tenants'
// policies and parsed definitions), and the node and lease grace its leases are taken under, which
// Run's completions check.
func (s *Service) ClaimConfig() dispatch.ClaimConfig {
	return dispatch.ClaimConfig{Store: s.cfg.Store, Catalog: claimCatalog{s}, Clock: s.cfg.Clock, Node: s.cfg.Node,
		LeaseGrace: s.cfg.LeaseGrace}
}

// claimCatalog is the service's dispatch.Catalog: what a claim learns of tenants and entrypoint
// versions, from the same caches the request paths use.
type claimCatalog struct{ s *Service }

// Policy implements dispatch.Catalog.
func (c claimCatalog) Policy(tx store.Tx, tenantID string, now time.Time) (tenant.Policy, error) {
	return c.s.txPolicy(tx, tenantID, now)
}

// Version implements dispatch.Catalog: the pinned version's definition is immutable, so it comes
// from the cache when this process has seen it, else it is read through tx and parsed (and cached).
func (c claimCatalog) Version(tx store.Tx, ref string) (entrypoint.Entrypoint, dispatch.Limits, error) {
	ep, d, ok := c.s.cachedByRef(ref)
	if !ok {
		var err error
		if ep, err = tx.EntrypointByRef(ref); err != nil {
			return ep, dispatch.Limits{}, fmt.Errorf("%w: %w", dispatch.ErrVersionUnreadable, err)
		}
		if d, err = c.s.definition(ep); err != nil {
			return ep, dispatch.Limits{}, err
		}
	}
	return ep, dispatch.Limits{Timeout: d.timeout(), MaxConcurrent: d.Traits.Limits.MaxConcurrent}, nil
}

// txPolicy is policy for the dispatcher, read in its transaction.
func (s *Service) txPolicy(tx store.Tx, tenantID string, now time.Time) (tenant.Policy, error) {
	return s.policies.get(tenantID, s.cfg.Store.CatalogGeneration(), now, func() (tenant.Policy, error) {
		p, err := tx.Tenant(tenantID)
		if errors.Is(err, store.ErrNotFound) {
			return tenant.New(tenantID, now), nil
		}
		return p, err
	})
}

package catalog

import (
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/dispatch"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// ForClaims is the catalog as the claim stage asks it (dispatch.Catalog): what a claim learns of
// tenants and entrypoint versions, from the same caches the request paths use.
func (c *Catalog) ForClaims() dispatch.Catalog { return claimCatalog{c} }

type claimCatalog struct{ c *Catalog }

// Policy implements dispatch.Catalog.
func (c claimCatalog) Policy(tx store.Tx, tenantID string, now time.Time) (tenant.Policy, error) {
	return c.c.TxPolicy(tx, tenantID, now)
}

// Version implements dispatch.Catalog: the pinned version's definition is immutable, so it comes
// from the cache when this process has seen it, else it is read through tx and parsed (and cached).
func (c claimCatalog) Version(tx store.Tx, ref string) (entrypoint.Entrypoint, dispatch.Limits, error) {
	ep, d, ok := c.c.CachedByRef(ref)
	if !ok {
		var err error
		if ep, err = tx.EntrypointByRef(ref); err != nil {
			return ep, dispatch.Limits{}, fmt.Errorf("%w: %w", dispatch.ErrVersionUnreadable, err)
		}
		if d, err = c.c.Definition(ep); err != nil {
			return ep, dispatch.Limits{}, err
		}
	}
	return ep, dispatch.Limits{Timeout: d.Timeout(), MaxConcurrent: d.Traits.Limits.MaxConcurrent}, nil
}

// TxPolicy is Policy for the dispatcher, read in its transaction.
func (c *Catalog) TxPolicy(tx store.Tx, tenantID string, now time.Time) (tenant.Policy, error) {
	return c.policies.get(tenantID, c.store.CatalogGeneration(), now, func() (tenant.Policy, error) {
		p, err := tx.Tenant(tenantID)
		if errors.Is(err, store.ErrNotFound) {
			return tenant.New(tenantID, now), nil
		}
		return p, err
	})
}

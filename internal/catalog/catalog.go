package catalog

import (
	"context"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
)

// Store is the store methods the catalog reads (store.Store has them all): tenants' policies,
// entrypoints as a viewer sees them, pinned versions, and the catalog generation its caches key on.
type Store interface {
	store.TenantReader
	Entrypoint(ctx context.Context, v entrypoint.Viewer, id string) (entrypoint.Entrypoint, error)
	EntrypointVersions(ctx context.Context, v entrypoint.Viewer, family string) ([]entrypoint.Entrypoint, error)
	LatestActive(ctx context.Context, v entrypoint.Viewer, family string, major int) (entrypoint.Entrypoint, error)
	// CatalogGeneration moves after every committed catalog write (store.Store.CatalogGeneration).
	CatalogGeneration() uint64
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Config wires a Catalog.
type Config struct {
	Store   Store
	Schemas *schema.Registry
	Clock   clock.Clock
	// MaxPayloadBytes bounds params, encoded as JSON (default sandbox.DefaultMaxPayloadBytes).
	MaxPayloadBytes int
}

// Catalog resolves entrypoints, parses their definitions and reads tenants' policies, through its
// caches (cache.go).
type Catalog struct {
	store      Store
	schemas    *schema.Registry
	clock      clock.Clock
	maxPayload int
	defs       definitionCache
	resolved   resolveCache
	policies   policyCache
}

// New returns a Catalog.
func New(cfg Config) *Catalog {
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = sandbox.DefaultMaxPayloadBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Catalog{store: cfg.Store, schemas: cfg.Schemas, clock: cfg.Clock, maxPayload: cfg.MaxPayloadBytes}
}

// MaxPayloadBytes is the bound on params, results and other payloads the catalog was built with.
func (c *Catalog) MaxPayloadBytes() int { return c.maxPayload }

// ByRef reads a pinned entrypoint version (unscoped: the invocation that names it was authorized).
func (c *Catalog) ByRef(ctx context.Context, ref string) (entrypoint.Entrypoint, error) {
	var e entrypoint.Entrypoint
	err := c.store.Update(ctx, func(tx store.Tx) error {
		var err error
		e, err = tx.EntrypointByRef(ref)
		return err
	})
	return e, err
}

// Lookup is a pinned version and its definition: from the cache when this process has seen it,
// else read (ByRef) and parsed.
func (c *Catalog) Lookup(ctx context.Context, ref string) (entrypoint.Entrypoint, Definition, error) {
	if e, d, ok := c.CachedByRef(ref); ok {
		return e, d, nil
	}
	e, err := c.ByRef(ctx, ref)
	if err != nil {
		return e, Definition{}, err
	}
	d, err := c.Definition(e)
	return e, d, err
}

// LookupTx is Lookup inside a transaction (read with it when this process has not seen the version).
func (c *Catalog) LookupTx(tx store.EntrypointTx, ref string) (entrypoint.Entrypoint, Definition, error) {
	if e, d, ok := c.CachedByRef(ref); ok {
		return e, d, nil
	}
	e, err := tx.EntrypointByRef(ref)
	if err != nil {
		return e, Definition{}, err
	}
	d, err := c.Definition(e)
	return e, d, err
}

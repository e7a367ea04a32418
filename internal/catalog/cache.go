package catalog

import (
	"sync"
	"time"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/tenant"
)

// The catalog caches keep what every invocation reads and hardly ever changes: the entrypoint an id
// resolves to (resolve) and the tenants' policies (policy, and the dispatcher's weights and quotas).
//
// An entry is used only while the store's CatalogGeneration is the one it was filled under: every
// committed write to the entrypoints or tenants table in this process moves the generation before
// its Update returns, so a status change, a new minor or a policy PATCH applies to the next request
// with no caller to remember. The generation is read before the store is, so a fill that races a
// write is tagged with the older generation and never used. Writes by other processes sharing the
// database are not seen by the generation: entries also expire after catalogCacheTTL, the bound
// those already have on authentication and tenants' enabled flags (tokens.AuthCacheTTL,
// tenancy.EnabledCacheTTL).
//
// Only successes are cached: a 404 or 409 not_active is read again on every request.

// catalogCacheTTL is how long an entry may serve, for writes made by other processes.
const catalogCacheTTL = time.Second

// Bounds of the caches: reaching one empties the cache (as definitionCache does), which costs one
// read per key afterwards.
const (
	resolveCacheMax = 4096
	policyCacheMax  = 10000
)

// fresh reports whether an entry filled at at under generation gen may still serve at now, when the
// store's generation is cur.
func fresh(gen, cur uint64, at, now time.Time) bool {
	return gen == cur && !now.Before(at) && now.Sub(at) < catalogCacheTTL
}

// resolveKey is everything a resolution depends on: who looks (visibility) and the id asked for.
type resolveKey struct {
	v  entrypoint.Viewer
	id string
}

type resolved struct {
	e   entrypoint.Entrypoint
	gen uint64
	at  time.Time
}

// resolveCache keeps resolve's successful answers.
type resolveCache struct {
	mu sync.RWMutex
	m  map[resolveKey]resolved
}

func (c *resolveCache) get(k resolveKey, cur uint64, now time.Time) (entrypoint.Entrypoint, bool) {
	c.mu.RLock()
	r, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || !fresh(r.gen, cur, r.at, now) {
		return entrypoint.Entrypoint{}, false
	}
	return r.e, true
}

func (c *resolveCache) put(k resolveKey, e entrypoint.Entrypoint, gen uint64, now time.Time) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= resolveCacheMax {
		c.m = map[resolveKey]resolved{}
	}
	c.m[k] = resolved{e: e, gen: gen, at: now}
	c.mu.Unlock()
}

type cachedPolicy struct {
	p   tenant.Policy
	gen uint64
	at  time.Time
}

// policyCache keeps tenants' policies, for Start and the other request paths (policy) and for the
// dispatcher's claims (claimCatalog, for dispatch.StoreClaimer), which read them inside their write transaction. Such a read may
// see a write of an earlier closure of the same group-commit batch before it commits; that write's
// Update moves the generation once the batch is done (committed or not), so the entry is dropped.
type policyCache struct {
	mu sync.RWMutex
	m  map[string]cachedPolicy
}

// get returns tenantID's policy, from the cache when fresh, else from load (under generation cur,
// which the caller read before load reads the store).
func (c *policyCache) get(tenantID string, cur uint64, now time.Time, load func() (tenant.Policy, error)) (tenant.Policy, error) {
	c.mu.RLock()
	e, ok := c.m[tenantID]
	c.mu.RUnlock()
	if ok && fresh(e.gen, cur, e.at, now) {
		return e.p, nil
	}
	p, err := load()
	if err != nil {
		return p, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= policyCacheMax {
		c.m = map[string]cachedPolicy{}
	}
	c.m[tenantID] = cachedPolicy{p: p, gen: cur, at: now}
	c.mu.Unlock()
	return p, nil
}

package dispatch

import (
	"sort"
	"time"

	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// claimQueue is the fairness.Queue of one StoreClaimer.Claim: it reads the queue through the claim's transaction
// and enforces, per tenant, max_concurrent_executions (running invocations) and each entrypoint
// version's traits.limits.max_concurrent. Items it takes are collected in picks.
type claimQueue struct {
	cat     Catalog
	room    func(tenantID string, max int) int // ClaimConfig.Room (nil: no bound)
	tx      store.Tx
	now     time.Time
	limit   int
	tenants map[string]*tenantQueue
	picks   []store.Runnable
}

// tenantQueue is one tenant's due work as this claim sees it.
type tenantQueue struct {
	cands    []store.Runnable // fetched due items of the versions below their limit, oldest first
	refs     []string         // versions with due work and room under their limit
	fetched  int              // how many items per version were asked for
	taken    map[string]bool  // invocation ids picked in this claim
	headroom int64            // how many more may run under max_concurrent_executions (-1: no limit)
	perRef   map[string]int64 // how many more of each limited version may run
}

// Tenants implements fairness.Queue.
func (q *claimQueue) Tenants(after string, n int) ([]string, error) {
	return q.tx.DueTenants(after, q.now, n)
}

// Weight implements fairness.Queue.
func (q *claimQueue) Weight(tenantID string) float64 {
	p, err := q.cat.Policy(q.tx, tenantID, q.now)
	if err != nil {
		return tenant.DefaultWeight
	}
	return p.DispatchWeight()
}

// Take implements fairness.Queue.
func (q *claimQueue) Take(tenantID string, n int) (int, error) {
	tq, err := q.load(tenantID)
	if err != nil {
		return 0, err
	}
	got := 0
	for got < n && tq.headroom != 0 {
		if len(tq.cands) == 0 {
			if more, err := q.fetch(tenantID, tq, n-got); err != nil || !more {
				return got, err
			}
		}
		c := tq.cands[0]
		tq.cands = tq.cands[1:]
		left, limited := tq.perRef[c.EntrypointRef]
		if limited && left == 0 {
			continue
		}
		q.picks = append(q.picks, c)
		tq.taken[c.InvocationID] = true
		got++
		if tq.headroom > 0 {
			tq.headroom--
		}
		if limited {
			tq.perRef[c.EntrypointRef] = left - 1
		}
	}
	return got, nil
}

// fetch reads up to want more of a tenant's due items (per version: the ones already fetched plus
// want) and reports whether it found any not yet taken. A tenant asked for one item at a time
// costs one short read per version, and a tenant that takes many in one claim a few longer ones.
func (q *claimQueue) fetch(tenantID string, tq *tenantQueue, want int) (bool, error) {
	if tq.fetched >= q.limit {
		return false, nil // the claim cannot take more than it already saw
	}
	per := min(tq.fetched+max(want, tq.fetched), q.limit)
	var out []store.Runnable
	for _, ref := range tq.refs {
		if left, limited := tq.perRef[ref]; limited && left == 0 {
			continue
		}
		work, err := q.tx.DueWork(store.DueWorkQuery{TenantID: tenantID, EntrypointRef: ref, Now: q.now, Limit: per})
		if err != nil {
			return false, err
		}
		for _, w := range work {
			if !tq.taken[w.InvocationID] {
				out = append(out, w)
			}
		}
	}
	tq.fetched = per
	if len(tq.refs) > 1 {
		sort.SliceStable(out, func(i, j int) bool { return out[i].Due.Before(out[j].Due) })
	}
	tq.cands = out
	return len(out) > 0, nil
}

// load reads a tenant's limits, running counts and versions with due work once per claim.
func (q *claimQueue) load(tenantID string) (*tenantQueue, error) {
	if tq := q.tenants[tenantID]; tq != nil {
		return tq, nil
	}
	tq := &tenantQueue{headroom: -1, perRef: map[string]int64{}, taken: map[string]bool{}}
	q.tenants[tenantID] = tq
	if q.room != nil {
		// What this process can start of the tenant's work soon (admission); the rest stays queued.
		if tq.headroom = int64(max(q.room(tenantID, q.limit), 0)); tq.headroom == 0 {
			return tq, nil
		}
	}
	p, err := q.cat.Policy(q.tx, tenantID, q.now)
	if err != nil {
		return nil, err
	}
	// The running counts are read only when a limit needs them (a read less per claim otherwise).
	var running map[string]int64
	readRunning := func() error {
		if running != nil {
			return nil
		}
		var err error
		running, err = q.tx.RunningByEntrypoint(tenantID)
		return err
	}
	if quota := p.Quotas.MaxConcurrentExecutions; quota != nil {
		if err := readRunning(); err != nil {
			return nil, err
		}
		var total int64
		for _, n := range running {
			total += n
		}
		if left := max(*quota-total, 0); tq.headroom < 0 || left < tq.headroom {
			tq.headroom = left
		}
		if tq.headroom == 0 {
			return tq, nil
		}
	}
	refs, err := q.tx.DueEntrypoints(tenantID, q.now)
	if err != nil {
		return nil, err
	}
	for _, ref := range refs {
		if limit := q.maxConcurrent(ref); limit > 0 {
			if err := readRunning(); err != nil {
				return nil, err
			}
			left := limit - running[ref]
			if left <= 0 {
				continue // at its limit: its queue waits, the tenant's other versions do not
			}
			tq.perRef[ref] = left
		}
		tq.refs = append(tq.refs, ref)
	}
	return tq, nil
}

// maxConcurrent is an entrypoint version's traits.limits.max_concurrent (0: no limit, or the version
// cannot be read, which the claim then drops as stale).
func (q *claimQueue) maxConcurrent(ref string) int64 {
	_, lim, err := q.cat.Version(q.tx, ref)
	if err != nil {
		return 0
	}
	return lim.MaxConcurrent
}

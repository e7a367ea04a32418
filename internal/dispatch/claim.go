package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/fairness"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// Limits is what a claim must know of an entrypoint version besides the version itself.
type Limits struct {
	// Timeout is the version's traits.limits.timeout_seconds (with its default): the lease of an
	// attempt outlives it by the claimer's LeaseGrace.
	Timeout time.Duration
	// MaxConcurrent is the version's traits.limits.max_concurrent (0: no limit).
	MaxConcurrent int64
}

// ErrVersionUnreadable is wrapped by a Catalog's Version error when the version could not be read
// from the store (it is gone, or the read failed): a claim drops the work pinned to it as stale,
// where any other Version error (an unparsable definition) ends the claim.
var ErrVersionUnreadable = errors.New("entrypoint version unreadable")

// Catalog is what a claim learns from the tenant and entrypoint catalog, inside its transaction
// (catalog.Catalog.ForClaims answers it from the caches the request paths use, so a claim re-reads
// and re-parses nothing this process has seen).
type Catalog interface {
	// Policy is a tenant's policy (the default policy of a tenant never configured), read through tx.
	Policy(tx store.Tx, tenantID string, now time.Time) (tenant.Policy, error)
	// Version is the entrypoint version ref (entrypoint.Entrypoint.ID) and its limits, read through
	// tx unless cached. An error wrapping ErrVersionUnreadable says the version could not be read.
	Version(tx store.Tx, ref string) (entrypoint.Entrypoint, Limits, error)
}

// Store is the store methods the claim stage uses (store.Store has them all): the queue's next due
// time, and Update for its claims and purges.
type Store interface {
	store.QueueReader
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// ClaimConfig configures a StoreClaimer.
type ClaimConfig struct {
	// Store holds the queue and the leases.
	Store Store
	// Catalog supplies tenants' policies and entrypoint versions.
	Catalog Catalog
	// Clock tells the time of claims, leases and purges (default clock.Real).
	Clock clock.Clock
	// Node names this process in the leases it takes (attempt.LeaseOwner); it must be the node the
	// Runner completes attempts as.
	Node string
	// LeaseGrace is how long a lease outlives its attempt's timeout (default 30 s).
	LeaseGrace time.Duration
	// Fairness keeps the deficit round-robin state between claims (default fairness.New()).
	Fairness *fairness.DRR
	// Room, if set, is how many more attempts of a tenant this process should claim now, at most
	// max (admission.Gate.Room): a tenant whose executions cannot start here soon keeps its work
	// queued in the store, where it stays visible as queued and another node may take it.
	Room func(tenantID string, max int) int
	// ExpiredEvery is how often, at most, a claim looks for work whose lease expired (default 1 s;
	// negative: every claim). A lease expires LeaseGrace after its attempt's timeout, so the wait
	// this adds to a reclaim is small beside it, and the claims in between skip a read.
	ExpiredEvery time.Duration
}

// StoreClaimer is the claim stage: a Claimer over a store's queue and leases. It claims work whose
// runner's lease expired first, then queued work that is due, tenant by tenant in deficit
// round-robin order within each tenant's max_concurrent_executions and each entrypoint version's
// max_concurrent. Every claim takes a lease and comes back as data, an attempt.Attempt.
//
// NextDue and Purge are here too: they are plain store calls on the same queue, and the
// dispatcher's only other needs from the store.
type StoreClaimer struct {
	cfg ClaimConfig
	mu  sync.Mutex
	// nextExpired is when a claim next looks for expired leases (ExpiredEvery).
	nextExpired time.Time
}

// NewStoreClaimer returns a StoreClaimer.
func NewStoreClaimer(cfg ClaimConfig) *StoreClaimer {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.LeaseGrace <= 0 {
		cfg.LeaseGrace = 30 * time.Second
	}
	if cfg.Fairness == nil {
		cfg.Fairness = fairness.New()
	}
	if cfg.ExpiredEvery == 0 {
		cfg.ExpiredEvery = time.Second
	}
	return &StoreClaimer{cfg: cfg}
}

// Claim leases up to limit runnable invocations to this process (queued work that is due, and work
// whose runner's lease expired) and returns them as attempts. Each claim appends started (or
// resumed, or reclaimed) in the same transaction that takes the lease; a canceled workflow whose
// step compensations are due is claimed as an attempt.KindCompensate under a lease of its own
// (attempt.CompensationLease), with no event. Queue state that no longer matches its invocation
// (canceled meanwhile, or pinned to a version that cannot be read) is dropped.
func (c *StoreClaimer) Claim(ctx context.Context, limit int) ([]attempt.Attempt, error) {
	var list []attempt.Attempt
	started := c.cfg.Clock.Now()
	// Most wake-ups after a write find nothing due (a sync call that ended, work another node
	// took): a read says so outside the writer, where a claim would have taken a transaction.
	// Work committed before the wake-up is visible to it; work queued after wakes the dispatcher
	// again.
	if due, err := c.cfg.Store.HasDue(ctx, started); err == nil && !due {
		return nil, nil
	}
	c.mu.Lock()
	lookExpired := !started.Before(c.nextExpired)
	c.mu.Unlock()
	expired := 0
	// Optimistic (store.Optimistic): the claim acts on nothing outside its transaction but list and
	// expired, which each run starts afresh. It may run on any writer (store.AnyWriter): its rows
	// are locked FOR UPDATE SKIP LOCKED, as against another process's claims.
	err := c.cfg.Store.Update(store.AnyWriter(store.Optimistic(ctx)), func(tx store.Tx) error {
		list, expired = list[:0], 0
		now := c.cfg.Clock.Now()
		// Work whose runner died first (it already holds its tenant's slot), then queued work, tenant
		// by tenant in deficit round-robin order within each tenant's concurrency limits.
		var rs []store.Runnable
		if lookExpired {
			var err error
			if rs, err = tx.ExpiredLeases(now, limit); err != nil {
				return err
			}
			expired = len(rs)
		}
		q := &claimQueue{cat: c.cfg.Catalog, room: c.cfg.Room, tx: tx, now: now, limit: limit - len(rs), tenants: map[string]*tenantQueue{}}
		if _, err := c.cfg.Fairness.Claim(q, q.limit); err != nil {
			return err
		}
		rs = append(rs, q.picks...)
		// The picks' projections in one read (a round trip, where each is one on a remote store).
		recs, err := tx.Invocations(rs)
		if err != nil {
			return err
		}
		byID := make(map[string]invocation.Record, len(recs))
		for _, rec := range recs {
			byID[rec.ID] = rec
		}
		for _, r := range rs {
			rec, found := byID[r.InvocationID]
			if !found {
				return fmt.Errorf("invocation %s: %w", r.InvocationID, store.ErrNotFound)
			}
			a, ok, err := c.claimOne(tx, r, rec, now)
			if err != nil {
				return err
			}
			if ok {
				list = append(list, a)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if lookExpired && expired < limit {
		// All expired work was taken: the next look can wait. A full page may have left more.
		c.mu.Lock()
		c.nextExpired = started.Add(c.cfg.ExpiredEvery)
		c.mu.Unlock()
	}
	return list, nil
}

// claimOne leases one picked item, whose projection is rec, inside tx, or drops it as stale (ok
// false).
func (c *StoreClaimer) claimOne(tx store.Tx, r store.Runnable, rec invocation.Record, now time.Time) (a attempt.Attempt, ok bool, err error) {
	want := invocation.StatusQueued
	compensate := rec.Status == invocation.StatusCanceled || rec.Status == invocation.StatusCompensating
	switch {
	case compensate:
		want = rec.Status // a canceled workflow's step compensations (or their run's lease expired)
	case r.Expired:
		want = invocation.StatusRunning
	case rec.Status == invocation.StatusSuspended:
		want = invocation.StatusSuspended // a workflow's durable timer is due
	}
	// The pinned version is immutable: the catalog answers from its cache when this process has
	// seen it, sparing the writer a read and a parse.
	ep, lim, verr := c.cfg.Catalog.Version(tx, rec.EntrypointRef)
	if verr != nil && !errors.Is(verr, ErrVersionUnreadable) {
		if rec.Status == want {
			return a, false, verr
		}
		verr = nil // stale all the same: dropped below without its definition
	}
	if rec.Status != want || verr != nil {
		// Stale queue state (e.g. canceled meanwhile): drop it.
		return a, false, tx.SetScheduling(r.TenantID, r.InvocationID, store.Scheduling{})
	}
	until := now.Add(lim.Timeout + c.cfg.LeaseGrace)
	if compensate {
		lease := attempt.Lease{Owner: attempt.CompensationLease(attempt.LeaseOwner(c.cfg.Node, rec)), ExpiresAt: until}
		if err := tx.SetScheduling(rec.TenantID, rec.ID, store.Scheduling{LeaseOwner: lease.Owner, LeaseExpiresAt: &until}); err != nil {
			return a, false, err
		}
		return attempt.Attempt{Kind: attempt.KindCompensate, Invocation: rec, Lease: lease, Entrypoint: ep}, true, nil
	}
	next, err := c.begin(tx, rec, until, now)
	if err != nil {
		return a, false, err
	}
	return attempt.Attempt{Kind: attempt.KindRun, Invocation: next,
		Lease: attempt.Lease{Owner: attempt.LeaseOwner(c.cfg.Node, next), ExpiresAt: until}, Entrypoint: ep, Due: r.Due}, true, nil
}

// begin starts an attempt of queued (or orphaned, or suspended) work inside tx: the started event
// (resumed for a suspended workflow, reclaimed for an expired lease) and a lease for this process
// until `until`. It returns the record as the event left it.
func (c *StoreClaimer) begin(tx store.Tx, rec invocation.Record, until, now time.Time) (invocation.Record, error) {
	engine := rec.EngineAttempt + 1
	ev := invocation.Event{Type: invocation.EventStarted, EngineAttempt: engine, LogicalAttempt: rec.Attempt, At: now,
		IdempotencyKey: invocation.IdempotencyKey(rec.ID, "", rec.Attempt, invocation.EventStarted, "")}
	node := c.cfg.Node
	var err error
	switch rec.Status {
	case invocation.StatusSuspended:
		reason := rec.Wake
		if reason == "" {
			reason = invocation.ResumeTimer
		}
		ev.Type = invocation.EventResumed
		ev.IdempotencyKey = invocation.IdempotencyKey(rec.ID, fmt.Sprintf("resume-%d", rec.LastSeq), rec.Attempt, invocation.EventResumed, "")
		ev, err = ev.WithData(invocation.Resumed{Reason: reason, Node: node})
	case invocation.StatusRunning:
		ev.Type = invocation.EventReclaimed
		ev.IdempotencyKey = invocation.IdempotencyKey(rec.ID, fmt.Sprintf("reclaim-%d", engine), rec.Attempt, invocation.EventReclaimed, "")
		ev, err = ev.WithData(invocation.Reclaimed{EngineAttempt: engine, Reason: "lease expired", Node: node})
	default:
		ev, err = ev.WithData(invocation.Started{Node: node})
	}
	if err != nil {
		return rec, err
	}
	next := rec
	next.EngineAttempt = engine
	out, _, err := tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: []invocation.Event{ev},
		AppendOptions: store.AppendOptions{Schedule: &store.Scheduling{LeaseOwner: attempt.LeaseOwner(c.cfg.Node, next), LeaseExpiresAt: &until}, Expect: &rec}})
	return out, err
}

// NextDue is when queued work or a lease expiry next falls due after now. Work already due that a
// claim left queued is held back by a concurrency limit: the end of a running invocation (which
// wakes the dispatcher) frees its slot.
func (c *StoreClaimer) NextDue(ctx context.Context) (*time.Time, error) {
	return c.cfg.Store.NextDue(ctx, c.cfg.Clock.Now())
}

// Purge deletes expired idempotency keys and cache entries.
func (c *StoreClaimer) Purge(ctx context.Context) error {
	return c.cfg.Store.Update(ctx, func(tx store.Tx) error {
		_, err := tx.PurgeExpired(c.cfg.Clock.Now())
		return err
	})
}

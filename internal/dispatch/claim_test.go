package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/dispatch"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/store/storetest"
	"github.com/larkrun/lark/internal/tenant"
)

// catalog is a fake dispatch.Catalog: tenants' policies and entrypoint versions by ref, with the
// versions that fail to load.
type catalog struct {
	mu       sync.Mutex
	policies map[string]tenant.Policy
	versions map[string]dispatch.Limits
	broken   map[string]error // refs whose Version fails with this error
}

func (c *catalog) Policy(_ store.Tx, tenantID string, now time.Time) (tenant.Policy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.policies[tenantID]; ok {
		return p, nil
	}
	return tenant.New(tenantID, now), nil
}

func (c *catalog) Version(_ store.Tx, ref string) (entrypoint.Entrypoint, dispatch.Limits, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.broken[ref]; err != nil {
		return entrypoint.Entrypoint{}, dispatch.Limits{}, err
	}
	lim, ok := c.versions[ref]
	if !ok {
		return entrypoint.Entrypoint{}, dispatch.Limits{}, fmt.Errorf("%w: %s: %w", dispatch.ErrVersionUnreadable, ref, store.ErrNotFound)
	}
	return entrypoint.Entrypoint{ID: ref}, lim, nil
}

// claimEnv is a claim stage over a real SQLite store, with a fake clock and catalog.
type claimEnv struct {
	t     *testing.T
	store store.Store
	clock *clock.Fake
	cat   *catalog
	n     int
}

func newClaimEnv(t *testing.T) *claimEnv {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "c.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return &claimEnv{t: t, store: st, clock: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
		cat: &catalog{policies: map[string]tenant.Policy{}, versions: map[string]dispatch.Limits{
			"ep-a": {Timeout: 5 * time.Second}, "ep-b": {Timeout: 5 * time.Second}}, broken: map[string]error{}}}
}

// claimer is a claim stage of node.
func (e *claimEnv) claimer(node string) *dispatch.StoreClaimer {
	return dispatch.NewStoreClaimer(dispatch.ClaimConfig{Store: e.store, Catalog: e.cat, Clock: e.clock, Node: node})
}

// queue writes n queued async invocations of version ref for a tenant, due now, oldest first, and
// returns their ids.
func (e *claimEnv) queue(tenantID, ref string, n int) []string {
	e.t.Helper()
	var ids []string
	require.NoError(e.t, e.store.Update(context.Background(), func(tx store.Tx) error {
		for range n {
			e.n++
			now := e.clock.Now().Add(time.Duration(e.n) * time.Microsecond)
			rec := invocation.Record{ID: fmt.Sprintf("inv_%05d", e.n), TenantID: tenantID, EntrypointRef: ref, EntrypointID: ref,
				SubjectID: "s", Status: invocation.StatusQueued, Mode: invocation.ModeAsync, Params: json.RawMessage(`{}`),
				Attempt: 1, CreatedAt: now}
			first, err := storetest.CreatedEvent(rec)
			if err != nil {
				return err
			}
			if _, err := tx.StartInvocation([]invocation.Event{first}, store.Scheduling{AvailableAt: &now}); err != nil {
				return err
			}
			ids = append(ids, rec.ID)
		}
		return nil
	}))
	e.clock.Advance(time.Second)
	return ids
}

func (e *claimEnv) claim(c *dispatch.StoreClaimer, limit int) []attempt.Attempt {
	e.t.Helper()
	as, err := c.Claim(context.Background(), limit)
	require.NoError(e.t, err)
	return as
}

// events is the event log of tenant acme's invocation id.
func (e *claimEnv) events(id string) []invocation.Event {
	e.t.Helper()
	evs, err := e.store.Events(context.Background(), store.EventLogQuery{TenantID: "acme", InvocationID: id, Limit: 100})
	require.NoError(e.t, err)
	return evs
}

func countBy(as []attempt.Attempt, key func(attempt.Attempt) string) map[string]int {
	m := map[string]int{}
	for _, a := range as {
		m[key(a)]++
	}
	return m
}

// TestClaimLeasesQueuedWork: a claim is data — the started record, the lease (timeout + grace,
// under attempt.LeaseOwner) and the pinned version — written with its started event.
func TestClaimLeasesQueuedWork(t *testing.T) {
	e := newClaimEnv(t)
	ids := e.queue("acme", "ep-a", 1)
	now := e.clock.Now()
	c := e.claimer("node-a")
	as := e.claim(c, 4)
	require.Len(t, as, 1)
	a := as[0]
	require.Equal(t, attempt.KindRun, a.Kind)
	require.Equal(t, ids[0], a.Invocation.ID)
	require.Equal(t, invocation.StatusRunning, a.Invocation.Status)
	require.Equal(t, 1, a.Invocation.EngineAttempt)
	require.Equal(t, attempt.Lease{Owner: "node-a/1/1", ExpiresAt: now.Add(5*time.Second + 30*time.Second)}, a.Lease)
	require.Equal(t, "ep-a", a.Entrypoint.ID)
	evs := e.events(ids[0])
	require.Len(t, evs, 2)
	require.Equal(t, invocation.EventStarted, evs[1].Type)
	require.Equal(t, invocation.IdempotencyKey(ids[0], "", 1, invocation.EventStarted, ""), evs[1].IdempotencyKey)
	require.Equal(t, 1, evs[1].EngineAttempt)
	require.Empty(t, e.claim(c, 4), "leased: not claimed again")

	due, err := c.NextDue(context.Background())
	require.NoError(t, err)
	require.NotNil(t, due)
	require.True(t, a.Lease.ExpiresAt.Equal(*due), "the next due time is the lease's expiry")
	require.NoError(t, c.Purge(context.Background()))
}

// TestClaimReclaimsExpiredLeases: once a lease expires, another process reclaims the work as the
// next engine attempt (reclaimed event), before any queued work.
func TestClaimReclaimsExpiredLeases(t *testing.T) {
	e := newClaimEnv(t)
	ids := e.queue("acme", "ep-a", 1)
	a := e.claimer("node-a")
	require.Len(t, e.claim(a, 1), 1)
	b := e.claimer("node-b")
	require.Empty(t, e.claim(b, 1), "the lease holds")
	e.clock.Advance(35 * time.Second)
	e.queue("acme", "ep-a", 1)
	as := e.claim(b, 1)
	require.Len(t, as, 1)
	require.Equal(t, ids[0], as[0].Invocation.ID, "expired leases first")
	require.Equal(t, "node-b/1/2", as[0].Lease.Owner)
	require.Equal(t, 2, as[0].Invocation.EngineAttempt)
	evs := e.events(ids[0])
	last := evs[len(evs)-1]
	require.Equal(t, invocation.EventReclaimed, last.Type)
	require.Equal(t, invocation.IdempotencyKey(ids[0], "reclaim-2", 1, invocation.EventReclaimed, ""), last.IdempotencyKey)
	require.JSONEq(t, `{"reason":"lease expired","engine_attempt":2,"node":"node-b"}`, string(last.Data), "the event names the node that took it")
}

// TestClaimLooksForExpiredLeasesEverySecond: a claim looks for expired leases at most once per
// ExpiredEvery; the claims in between take queued work only, and the next look reclaims.
func TestClaimLooksForExpiredLeasesEverySecond(t *testing.T) {
	e := newClaimEnv(t)
	ids := e.queue("acme", "ep-a", 3)
	require.Len(t, e.claim(e.claimer("node-a"), 1), 1) // ids[0], leased for 5 s + 30 s
	b := e.claimer("node-b")
	e.clock.Advance(34*time.Second + 500*time.Millisecond)
	as := e.claim(b, 1)
	require.Len(t, as, 1)
	require.Equal(t, ids[1], as[0].Invocation.ID, "b looked: the lease holds, so queued work")
	e.clock.Advance(700 * time.Millisecond) // the lease expired; b's next look is 300 ms away
	as = e.claim(b, 1)
	require.Len(t, as, 1)
	require.Equal(t, ids[2], as[0].Invocation.ID, "no look yet: queued work")
	e.clock.Advance(500 * time.Millisecond)
	as = e.claim(b, 1)
	require.Len(t, as, 1)
	require.Equal(t, ids[0], as[0].Invocation.ID, "the look came: the expired lease is reclaimed")
	require.Equal(t, 2, as[0].Invocation.EngineAttempt)
}

// TestClaimFairness: a tenant with a deep backlog cannot hold back another: claims alternate
// between backlogged tenants in proportion to their weights.
func TestClaimFairness(t *testing.T) {
	e := newClaimEnv(t)
	e.queue("flood", "ep-a", 100)
	e.queue("quiet", "ep-b", 2)
	c := e.claimer("node-a")
	got := countBy(e.claim(c, 4), func(a attempt.Attempt) string { return a.Invocation.TenantID })
	require.Equal(t, map[string]int{"flood": 2, "quiet": 2}, got)

	gold := tenant.New("gold", e.clock.Now())
	gold.Fairness.Weight = 3
	e.cat.policies["gold"] = gold
	e.queue("gold", "ep-b", 100)
	total := map[string]int{}
	for range 10 {
		for k, v := range countBy(e.claim(c, 4), func(a attempt.Attempt) string { return a.Invocation.TenantID }) {
			total[k] += v
		}
	}
	require.Equal(t, 40, total["flood"]+total["gold"])
	require.InDelta(t, 30, total["gold"], 2, "weight 3 against 1: %v", total)
}

// TestClaimLimits: max_concurrent_executions bounds a tenant's running work, and a version's
// max_concurrent holds back only that version's queue.
func TestClaimLimits(t *testing.T) {
	e := newClaimEnv(t)
	p := tenant.New("acme", e.clock.Now())
	quota := int64(3)
	p.Quotas.MaxConcurrentExecutions = &quota
	e.cat.policies["acme"] = p
	e.cat.versions["ep-a"] = dispatch.Limits{Timeout: 5 * time.Second, MaxConcurrent: 1}
	e.queue("acme", "ep-a", 3)
	e.queue("acme", "ep-b", 3)
	c := e.claimer("node-a")
	got := countBy(e.claim(c, 16), func(a attempt.Attempt) string { return a.Entrypoint.ID })
	require.Equal(t, map[string]int{"ep-a": 1, "ep-b": 2}, got, "one of ep-a (its max_concurrent), three in all (the tenant's quota)")
	require.Empty(t, e.claim(c, 16), "at both limits")
}

// TestClaimDropsStaleWork: queued work pinned to a version that cannot be read is dropped; a version
// that cannot be parsed fails the claim.
func TestClaimDropsStaleWork(t *testing.T) {
	e := newClaimEnv(t)
	e.queue("acme", "ep-gone", 1)
	c := e.claimer("node-a")
	require.Empty(t, e.claim(c, 4))
	due, err := c.NextDue(context.Background())
	require.NoError(t, err)
	require.Nil(t, due, "its queue state is gone")

	e.queue("acme", "ep-a", 1)
	e.cat.broken["ep-a"] = errors.New("definition unparsable")
	_, err = c.Claim(context.Background(), 4)
	require.ErrorContains(t, err, "definition unparsable")
}

// TestClaimCompensation: a canceled workflow whose compensations are due is claimed under a lease of
// its own, with no event.
func TestClaimCompensation(t *testing.T) {
	e := newClaimEnv(t)
	ids := e.queue("acme", "ep-a", 1)
	now := e.clock.Now()
	require.NoError(t, e.store.Update(context.Background(), func(tx store.Tx) error {
		rec, err := tx.Invocation("acme", ids[0])
		if err != nil {
			return err
		}
		ev := invocation.Event{InvocationID: rec.ID, Type: invocation.EventCanceled, LogicalAttempt: 1, At: now,
			IdempotencyKey: invocation.IdempotencyKey(rec.ID, "", 1, invocation.EventCanceled, "")}
		_, _, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: rec.ID, Events: []invocation.Event{ev},
			AppendOptions: store.AppendOptions{Schedule: &store.Scheduling{AvailableAt: &now}, Expect: &rec}})
		return err
	}))
	before := len(e.events(ids[0]))
	as := e.claim(e.claimer("node-a"), 4)
	require.Len(t, as, 1)
	require.Equal(t, attempt.KindCompensate, as[0].Kind)
	require.Equal(t, invocation.StatusCanceled, as[0].Invocation.Status)
	require.Equal(t, "node-a/1/0/compensate", as[0].Lease.Owner)
	require.Len(t, e.events(ids[0]), before, "no event")
}

// TestClaimResumesSuspendedWork: a suspended workflow whose timer is due is claimed as the next
// engine attempt with a resumed event (reason timer), keyed by the log's last seq.
func TestClaimResumesSuspendedWork(t *testing.T) {
	e := newClaimEnv(t)
	ids := e.queue("acme", "ep-a", 1)
	c := e.claimer("node-a")
	as := e.claim(c, 1)
	require.Len(t, as, 1)
	running := as[0].Invocation
	wake := e.clock.Now().Add(time.Minute)
	var suspended invocation.Record
	require.NoError(t, e.store.Update(context.Background(), func(tx store.Tx) error {
		ev := invocation.Event{InvocationID: running.ID, Type: invocation.EventSuspended, EngineAttempt: 1, LogicalAttempt: 1,
			At: e.clock.Now(), IdempotencyKey: invocation.IdempotencyKey(running.ID, "s", 1, invocation.EventSuspended, "")}
		var err error
		suspended, _, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: running.ID, Events: []invocation.Event{ev},
			AppendOptions: store.AppendOptions{RequireLease: as[0].Lease.Owner, Schedule: &store.Scheduling{AvailableAt: &wake}, Expect: &running}})
		return err
	}))
	require.Equal(t, invocation.StatusSuspended, suspended.Status)
	require.Empty(t, e.claim(c, 1), "its timer is not due")
	e.clock.Set(wake)
	as = e.claim(c, 1)
	require.Len(t, as, 1)
	require.Equal(t, invocation.StatusRunning, as[0].Invocation.Status)
	require.Equal(t, "node-a/1/2", as[0].Lease.Owner)
	evs := e.events(ids[0])
	last := evs[len(evs)-1]
	require.Equal(t, invocation.EventResumed, last.Type)
	require.Equal(t, invocation.IdempotencyKey(ids[0], fmt.Sprintf("resume-%d", suspended.LastSeq), 1, invocation.EventResumed, ""), last.IdempotencyKey)
	require.JSONEq(t, `{"reason":"timer","node":"node-a"}`, string(last.Data), "the event names the node that took it")
}

// countingStore counts the write transactions a claim stage opens.
type countingStore struct {
	dispatch.Store
	updates int
}

func (s *countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.updates++
	return s.Store.Update(ctx, fn)
}

// TestClaimWithNothingDueWritesNothing: a claim that a read shows has nothing to find (an empty
// queue, work not due yet) opens no write transaction; due work, or a lease that expired, does.
func TestClaimWithNothingDueWritesNothing(t *testing.T) {
	e := newClaimEnv(t)
	cs := &countingStore{Store: e.store}
	c := dispatch.NewStoreClaimer(dispatch.ClaimConfig{Store: cs, Catalog: e.cat, Clock: e.clock, Node: "node-a"})
	require.Empty(t, e.claim(c, 10))
	require.Zero(t, cs.updates, "an empty queue: no transaction")
	e.queue("acme", "ep-a", 1)
	e.clock.Advance(-time.Second) // the work is due a second from now
	require.Empty(t, e.claim(c, 10))
	require.Zero(t, cs.updates, "nothing due yet: no transaction")
	e.clock.Advance(time.Second)
	require.Len(t, e.claim(c, 10), 1)
	require.Equal(t, 1, cs.updates)
	require.Empty(t, e.claim(c, 10))
	require.Equal(t, 1, cs.updates, "leased, not expired: nothing to find")
	e.clock.Advance(36 * time.Second) // 5 s timeout + 30 s grace: the lease expired
	require.Len(t, e.claim(c, 10), 1, "the expired lease is reclaimed")
	require.Equal(t, 2, cs.updates)
}

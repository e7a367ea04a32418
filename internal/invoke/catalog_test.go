package invoke_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/registry"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// countingStore counts the catalog reads the caches are meant to spare.
type countingStore struct {
	store.Store
	latest, byID, tenants atomic.Int64
}

func (c *countingStore) LatestActive(ctx context.Context, v entrypoint.Viewer, family string, major int) (entrypoint.Entrypoint, error) {
	c.latest.Add(1)
	return c.Store.LatestActive(ctx, v, family, major)
}

func (c *countingStore) Entrypoint(ctx context.Context, v entrypoint.Viewer, id string) (entrypoint.Entrypoint, error) {
	c.byID.Add(1)
	return c.Store.Entrypoint(ctx, v, id)
}

func (c *countingStore) Tenant(ctx context.Context, id string) (tenant.Policy, error) {
	c.tenants.Add(1)
	return c.Store.Tenant(ctx, id)
}

// runs starts id in sync mode and returns the version it ran.
func (e *env) runs(id string) (string, error) {
	e.t.Helper()
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: id, Mode: "sync", Params: json.RawMessage(`{"amount": 1}`)}, invoke.StartOptions{})
	return st.Record.EntrypointID, err
}

func problemType(err error) string {
	if err == nil {
		return ""
	}
	return problem.From(err).Type
}

// TestResolveCacheFollowsStatusChanges: after invocations have filled the resolution cache, every
// status change made through the registry applies to the very next Start (the clock never moves
// here, so the 1 s bound plays no part).
func TestResolveCacheFollowsStatusChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	major := fnPrefix + "cached.v1~"
	v10 := e.fn("cached", taxSource, func(b map[string]any) { b["entrypoint_id"] = fnPrefix + "cached.v1.0~" })
	for range 2 {
		got, err := e.runs(major)
		require.NoError(t, err)
		require.Equal(t, v10.GTSID, got)
		got, err = e.runs(v10.GTSID)
		require.NoError(t, err)
		require.Equal(t, v10.GTSID, got)
		_, err = e.runs(v10.ID)
		require.NoError(t, err, "by opaque id")
	}

	// A new active minor: the major-only id moves to it.
	v11 := e.fn("cached", taxSource, func(b map[string]any) { b["entrypoint_id"] = fnPrefix + "cached.v1.1~" })
	got, err := e.runs(major)
	require.NoError(t, err)
	require.Equal(t, v11.GTSID, got, "the new minor, on the next request")

	// Deprecated: still callable by its exact id, no longer the major's latest active.
	_, err = e.reg.ChangeStatus(ctx, dev, v11.ID, registry.StatusRequest{Action: entrypoint.ActionDeprecate})
	require.NoError(t, err)
	got, err = e.runs(major)
	require.NoError(t, err)
	require.Equal(t, v10.GTSID, got, "back to the active minor")
	got, err = e.runs(v11.GTSID)
	require.NoError(t, err)
	require.Equal(t, v11.GTSID, got)

	// Disabled: 409 by its exact and opaque ids; the major falls back to the deprecated minor.
	_, err = e.reg.ChangeStatus(ctx, dev, v10.ID, registry.StatusRequest{Action: entrypoint.ActionDisable})
	require.NoError(t, err)
	_, err = e.runs(v10.GTSID)
	require.Equal(t, problem.TypeNotActive, problemType(err))
	_, err = e.runs(v10.ID)
	require.Equal(t, problem.TypeNotActive, problemType(err))
	got, err = e.runs(major)
	require.NoError(t, err)
	require.Equal(t, v11.GTSID, got, "the deprecated fallback")

	// Deleted (archived, since it was invoked): nothing of the major is callable.
	_, _, err = e.reg.Delete(ctx, dev, v11.ID, false)
	require.NoError(t, err)
	_, err = e.runs(v11.GTSID)
	require.Equal(t, problem.TypeNotActive, problemType(err))
	_, err = e.runs(major)
	require.Equal(t, problem.TypeNotActive, problemType(err))

	// Enabled again: callable on the next request (an error was never cached).
	_, err = e.reg.ChangeStatus(ctx, dev, v10.ID, registry.StatusRequest{Action: entrypoint.ActionEnable})
	require.NoError(t, err)
	got, err = e.runs(major)
	require.NoError(t, err)
	require.Equal(t, v10.GTSID, got)
}

// TestPolicyCacheFollowsPatches: a tenant policy PATCH applies to the next Start and the next
// claim, with the clock standing still.
func TestPolicyCacheFollowsPatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ep := e.fn("quota", taxSource, nil)
	for range 2 {
		_, err := e.runs(ep.GTSID)
		require.NoError(t, err)
	}
	// Two queued, one claimed: the dispatcher's policy is cached too, with no limit. The claimed
	// job is never run: it stays running.
	for range 2 {
		_, err := e.start(bob, invoke.StartRequest{EntrypointID: ep.GTSID, Mode: "async", Params: json.RawMessage(`{"amount": 1}`)}, invoke.StartOptions{})
		require.NoError(t, err)
	}
	jobs, err := e.claimerOf(e.svc).Claim(ctx, 1)
	require.NoError(t, err)
	require.Len(t, jobs, 1)

	_, err = e.ten.Patch(ctx, operatorSC, "acme", []byte(`{"quotas":{"max_concurrent_executions":1}}`))
	require.NoError(t, err)
	jobs, err = e.claimerOf(e.svc).Claim(ctx, 4)
	require.NoError(t, err)
	require.Empty(t, jobs, "the dispatcher, at the new limit on the next claim")
	_, err = e.runs(ep.GTSID)
	require.Equal(t, problem.TypeQuotaExceeded, problemType(err), "Start, at the new limit on the next request: %v", err)

	_, err = e.ten.Patch(ctx, operatorSC, "acme", []byte(`{"quotas":{"max_concurrent_executions":null}}`))
	require.NoError(t, err)
	_, err = e.runs(ep.GTSID)
	require.NoError(t, err, "the limit lifted on the next request")
	jobs, err = e.claimerOf(e.svc).Claim(ctx, 4)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "and on the next claim")
}

// TestCatalogCacheHits: repeated Starts read the entrypoint and the policy once; a write to the
// catalog or the 1 s bound reads them again.
func TestCatalogCacheHits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ep := e.fn("hits", taxSource, nil)
	cs := &countingStore{Store: e.store}
	e.reconfigure(func(c *invoke.Config) { c.Store = cs })
	reads := func() [3]int64 { return [3]int64{cs.latest.Load(), cs.byID.Load(), cs.tenants.Load()} }
	for range 5 {
		_, err := e.runs(ep.GTSID) // major-only: LatestActive
		require.NoError(t, err)
		_, err = e.runs(ep.ID) // opaque id: Entrypoint
		require.NoError(t, err)
	}
	require.Equal(t, [3]int64{1, 1, 1}, reads(), "one read of each, then hits")

	e.clock.Advance(time.Second)
	_, err := e.runs(ep.GTSID)
	require.NoError(t, err)
	require.Equal(t, [3]int64{2, 1, 2}, reads(), "expired after 1 s (writes of other processes)")

	// An unrelated tenant's policy still moves the generation (a miss, not a stale answer).
	_, err = e.ten.Patch(context.Background(), operatorSC, "acme", []byte(`{"quotas":{"max_concurrent_executions":100}}`))
	require.NoError(t, err)
	_, err = e.runs(ep.GTSID)
	require.NoError(t, err)
	require.Equal(t, [3]int64{3, 1, 3}, reads(), "a catalog write empties the caches")
	for range 3 {
		_, err = e.runs(ep.GTSID)
		require.NoError(t, err)
	}
	require.Equal(t, [3]int64{3, 1, 3}, reads(), "invocations' own writes do not")
}

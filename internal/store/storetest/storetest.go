// Package storetest is the conformance suite every store.Store implementation must pass. The SQLite
// store runs it today; the PostgreSQL store of a later issue runs it unchanged.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// Factory returns a fresh, empty, migrated store, independent of every other store it returned;
// the suite closes it. Run calls it from parallel cases.
type Factory func(t *testing.T) store.Store

// Run runs the whole suite against stores made by f. Every case runs in parallel with the others
// (t.Parallel) on its own fresh store, so f must return an independent store (its own file, schema
// or database) on every call, and must be safe to call from several goroutines at once.
func Run(t *testing.T, f Factory) {
	tests := map[string]func(*testing.T, store.Store){
		"Tenants":                   testTenants,
		"Tokens":                    testTokens,
		"EntrypointCRUD":            testEntrypointCRUD,
		"EntrypointConflicts":       testEntrypointConflicts,
		"EntrypointVisibility":      testEntrypointVisibility,
		"EntrypointVersions":        testEntrypointVersions,
		"EntrypointListFilter":      testEntrypointListFilter,
		"EntrypointListPaging":      testEntrypointListPaging,
		"EntrypointListErrors":      testEntrypointListErrors,
		"InvocationEventLog":        testInvocationEventLog,
		"InvocationHead":            testInvocationHead,
		"LeaseOwners":               testLeaseOwners,
		"WorkerNonces":              testWorkerNonces,
		"Workers":                   testWorkers,
		"InvocationIsolation":       testInvocationIsolation,
		"InvocationInFlight":        testInvocationInFlight,
		"TenantLoads":               testTenantLoads,
		"GroupCommitIsolation":      testGroupCommitIsolation,
		"GroupCommitConcurrency":    testGroupCommitConcurrency,
		"Audit":                     testAudit,
		"UpdateRollsBackOnError":    testUpdateRollsBack,
		"UpdateRecoversFromPanic":   testUpdateRecoversPanic,
		"QueueAndLeases":            testQueueAndLeases,
		"DueQueues":                 testDueQueues,
		"IdempotencyKeys":           testIdempotencyKeys,
		"ResponseCache":             testResponseCache,
		"ListInvocations":           testListInvocations,
		"ListInvocationsVisibility": testListInvocationsVisibility,
		"ListInvocationsSplit":      testListInvocationsSplit,
		"StartAndConditionalAppend": testStartAndConditionalAppend,
		"InformationalAppend":       testInformationalAppend,
		"BatchedAppend":             testBatchedAppend,
		"Events":                    testEvents,
		"ListByteBudget":            testListByteBudget,
		"EventWaits":                testEventWaits,
		"UsageAggregates":           testUsageAggregates,
		"CountTenantEntrypoints":    testCountTenantEntrypoints,
		"RetentionMeasure":          testRetentionMeasure,
		"RetentionPurgeAge":         testRetentionPurgeAge,
		"RetentionPurgeCap":         testRetentionPurgeCap,
		"RetentionPurgeBatches":     testRetentionPurgeBatches,
		"RetentionPurgeEvents":      testRetentionPurgeEvents,
		"RetentionPurgeAudit":       testRetentionPurgeAudit,
		"AllTenants":                testAllTenants,
		"Schedules":                 testSchedules,
		"Backfills":                 testBackfills,
		"Secrets":                   testSecrets,
		"IdentityProviders":         testIdentityProviders,
		"Webhooks":                  testWebhooks,
		"EventTypes":                testEventTypes,
		"Triggers":                  testTriggers,
		"TriggerMatching":           testTriggerMatching,
		"TriggerDeadLetters":        testTriggerDeadLetters,
		"TriggerMetrics":            testTriggerMetrics,
		"TriggerHistoryPurge":       testTriggerHistoryPurge,
		"CatalogGeneration":         testCatalogGeneration,
		"AfterCommit":               testAfterCommit,
		"TxContext":                 testTxContext,
		"LeaderLease":               testLeaderLease,
		"ProjectionsAgree":          testProjectionsAgree,
		"ProjectionReads":           testProjectionReads,
		"ProjectionRewrite":         testProjectionRewrite,
		"ProjectionLock":            testProjectionLock,
		"ProjectionConsumptions":    testProjectionConsumptions,
		"InvocationsBatchRead":      testInvocationsBatchRead,
		"Materializations":          testMaterializations,
		"MaterializationStates":     testMaterializationStates,
		"Promote":                   testPromote,
		"PromoteConcurrent":         testPromoteConcurrent,
		"AssetOutcomes":             testAssetOutcomes,
		"AssetLists":                testAssetLists,
	}
	runCases(t, f, tests)
}

// runCases runs each case in parallel on a fresh store of f.
func runCases(t *testing.T, f Factory, tests map[string]func(*testing.T, store.Store)) {
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := f(t)
			defer s.Close()
			fn(t, s)
		})
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)

const fnBase = gts.FunctionType

func update(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	require.NoError(t, s.Update(context.Background(), fn))
}

// NewEntrypoint builds a valid entrypoint row for tests.
func NewEntrypoint(id, tenantID string, owner entrypoint.OwnerType, ownerID, name string, major, minor int, hasMinor bool, at time.Time) entrypoint.Entrypoint {
	ver := fmt.Sprintf("v%d", major)
	if hasMinor {
		ver += fmt.Sprintf(".%d", minor)
	}
	gid := fnBase + "vendor.app.billing." + name + "." + ver + "~"
	return entrypoint.Entrypoint{
		ID: id, GTSID: gid, Family: fnBase + "vendor.app.billing." + name, Major: major, Minor: minor, HasMinor: hasMinor,
		Kind: entrypoint.KindFunction, TenantID: tenantID,
		Owner:  entrypoint.Owner{OwnerType: owner, ID: ownerID, TenantID: tenantID},
		Status: entrypoint.StatusDraft, Version: fmt.Sprintf("%d.%d.0", major, minor), Title: name,
		Tags: []string{"billing"}, Adapter: "gts.x.core.serverless.adapter.starlark.v1~",
		Definition: json.RawMessage(`{"title":"` + name + `"}`), Revision: 1, CreatedAt: at, UpdatedAt: at, CreatedBy: ownerID,
	}
}

func testTenants(t *testing.T, s store.Store) {
	ctx := context.Background()
	_, err := s.Tenant(ctx, "acme")
	require.ErrorIs(t, err, store.ErrNotFound)
	p := tenant.New("acme", t0)
	p.Enabled = true
	n := int64(5)
	p.Quotas.MaxDefinitions = &n
	p.Policies.AllowedOutboundDomains = []string{"*.example.com"}
	update(t, s, func(tx store.Tx) error { return tx.PutTenant(p) })
	got, err := s.Tenant(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, p, got)
	p.Enabled = false
	p.UpdatedAt = t0.Add(time.Hour)
	update(t, s, func(tx store.Tx) error { return tx.PutTenant(p) })
	got, err = s.Tenant(ctx, "acme")
	require.NoError(t, err)
	require.False(t, got.Enabled)
	require.Equal(t, t0.Add(time.Hour), got.UpdatedAt)
	update(t, s, func(tx store.Tx) error {
		g, err := tx.Tenant("acme")
		require.NoError(t, err)
		require.Equal(t, p, g)
		return nil
	})
}

func testTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	mk := func(id, ten, hash string, at time.Time) auth.Token {
		return auth.Token{ID: id, TenantID: ten, SubjectID: "u_" + id, Roles: []auth.Role{auth.RoleViewer, auth.RoleAdmin},
			Hash: hash, CreatedAt: at, CreatedBy: "operator"}
	}
	update(t, s, func(tx store.Tx) error {
		for i, tk := range []auth.Token{mk("tok_1", "a", "h1", t0), mk("tok_2", "a", "h2", t0.Add(time.Second)), mk("tok_3", "b", "h3", t0)} {
			if err := tx.InsertToken(tk); err != nil {
				return fmt.Errorf("token %d: %w", i, err)
			}
		}
		return nil
	})
	err := s.Update(ctx, func(tx store.Tx) error { return tx.InsertToken(mk("tok_4", "a", "h1", t0)) })
	require.ErrorIs(t, err, store.ErrConflict, "duplicate hash")
	got, err := s.TokenByHash(ctx, "h2")
	require.NoError(t, err)
	require.Equal(t, mk("tok_2", "a", "h2", t0.Add(time.Second)), got)
	_, err = s.TokenByHash(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)

	page, err := s.ListTokens(ctx, "a", store.ListQuery{})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	require.Equal(t, "tok_1", page.Items[0].ID)
	all, err := s.ListTokens(ctx, "", store.ListQuery{})
	require.NoError(t, err)
	require.Len(t, all.Items, 3)

	err = s.Update(ctx, func(tx store.Tx) error { return tx.RevokeToken("b", "tok_1", t0) })
	require.ErrorIs(t, err, store.ErrNotFound, "another tenant cannot revoke")
	update(t, s, func(tx store.Tx) error { return tx.RevokeToken("a", "tok_1", t0.Add(time.Minute)) })
	got, err = s.TokenByHash(ctx, "h1")
	require.NoError(t, err)
	require.NotNil(t, got.RevokedAt)
	require.Equal(t, t0.Add(time.Minute), *got.RevokedAt)
	require.False(t, got.Active(t0.Add(time.Hour)))
	f, err := odata.ParseFilter("revoked eq false")
	require.NoError(t, err)
	page, err = s.ListTokens(ctx, "a", store.ListQuery{Filter: f})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, "tok_2", page.Items[0].ID)
}

func testEntrypointCRUD(t *testing.T, s store.Store) {
	ctx := context.Background()
	e := NewEntrypoint("ep_1", "acme", entrypoint.OwnerTenant, "acme", "calculate_tax", 1, 0, false, t0)
	update(t, s, func(tx store.Tx) error { return tx.InsertEntrypoint(e) })
	v := entrypoint.Viewer{TenantID: "acme", SubjectID: "u1"}
	got, err := s.Entrypoint(ctx, v, "ep_1")
	require.NoError(t, err)
	require.Equal(t, e, got)
	got, err = s.Entrypoint(ctx, v, e.GTSID)
	require.NoError(t, err)
	require.Equal(t, "ep_1", got.ID)

	// Update with the right revision succeeds and bumps it; a stale one fails.
	act := t0.Add(time.Minute)
	got.Status, got.ActivatedAt, got.ReleaseNotes, got.UpdatedAt = entrypoint.StatusActive, &act, "first", act
	stale := got
	update(t, s, func(tx store.Tx) error { return tx.UpdateEntrypoint(&got) })
	require.Equal(t, int64(2), got.Revision)
	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateEntrypoint(&stale) })
	require.ErrorIs(t, err, store.ErrStale)
	reread, err := s.Entrypoint(ctx, v, "ep_1")
	require.NoError(t, err)
	require.Equal(t, got, reread)

	update(t, s, func(tx store.Tx) error {
		n, err := tx.CountTenantEntrypoints("acme")
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		r, err := tx.EntrypointByRef("ep_1")
		require.NoError(t, err)
		require.Equal(t, got, r)
		return tx.DeleteEntrypoint("ep_1")
	})
	_, err = s.Entrypoint(ctx, v, "ep_1")
	require.ErrorIs(t, err, store.ErrNotFound)
	err = s.Update(ctx, func(tx store.Tx) error { return tx.DeleteEntrypoint("ep_1") })
	require.ErrorIs(t, err, store.ErrNotFound)
	missing := NewEntrypoint("ep_404", "acme", entrypoint.OwnerTenant, "acme", "nothing", 1, 0, false, t0)
	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateEntrypoint(&missing) })
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testEntrypointConflicts(t *testing.T, s store.Store) {
	ctx := context.Background()
	insert := func(e entrypoint.Entrypoint) error {
		return s.Update(ctx, func(tx store.Tx) error { return tx.InsertEntrypoint(e) })
	}
	require.NoError(t, insert(NewEntrypoint("ep_1", "acme", entrypoint.OwnerTenant, "acme", "tax", 1, 0, false, t0)))
	require.ErrorIs(t, insert(NewEntrypoint("ep_2", "acme", entrypoint.OwnerUser, "u1", "tax", 1, 0, false, t0)), store.ErrConflict, "same id, same tenant")
	require.ErrorIs(t, insert(NewEntrypoint("ep_3", "acme", entrypoint.OwnerTenant, "acme", "tax", 1, 0, true, t0)), store.ErrConflict, "v1~ and v1.0~ are the same version")
	require.NoError(t, insert(NewEntrypoint("ep_4", "other", entrypoint.OwnerTenant, "other", "tax", 1, 0, false, t0)), "another tenant may use the id")
	require.NoError(t, insert(NewEntrypoint("ep_5", "acme", entrypoint.OwnerTenant, "acme", "tax", 1, 1, true, t0)), "a new minor")
	// Platform scope.
	require.NoError(t, insert(NewEntrypoint("ep_6", entrypoint.PlatformTenant, entrypoint.OwnerSystem, "operator", "shared_fn", 1, 0, false, t0)))
	require.ErrorIs(t, insert(NewEntrypoint("ep_7", "acme", entrypoint.OwnerTenant, "acme", "shared_fn", 1, 0, false, t0)), store.ErrConflict, "exists at platform scope")
	require.ErrorIs(t, insert(NewEntrypoint("ep_8", entrypoint.PlatformTenant, entrypoint.OwnerSystem, "operator", "tax", 1, 0, false, t0)), store.ErrConflict, "platform id taken by a tenant")
	require.ErrorIs(t, insert(NewEntrypoint("ep_1", "zeta", entrypoint.OwnerTenant, "zeta", "unique_id", 1, 0, false, t0)), store.ErrConflict, "duplicate opaque id")
}

func testEntrypointVisibility(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		for _, e := range []entrypoint.Entrypoint{
			NewEntrypoint("ep_tenant", "acme", entrypoint.OwnerTenant, "acme", "t_fn", 1, 0, false, t0),
			NewEntrypoint("ep_alice", "acme", entrypoint.OwnerUser, "alice", "alice_fn", 1, 0, false, t0.Add(1*time.Second)),
			func() entrypoint.Entrypoint {
				e := NewEntrypoint("ep_shared", "acme", entrypoint.OwnerUser, "alice", "shared_fn", 1, 0, false, t0.Add(2*time.Second))
				e.Shared = true
				return e
			}(),
			func() entrypoint.Entrypoint {
				e := NewEntrypoint("ep_system", entrypoint.PlatformTenant, entrypoint.OwnerSystem, "operator", "sys_fn", 1, 0, false, t0.Add(3*time.Second))
				e.Status = entrypoint.StatusActive
				return e
			}(),
			NewEntrypoint("ep_sysdraft", entrypoint.PlatformTenant, entrypoint.OwnerSystem, "operator", "sys_draft", 1, 0, false, t0.Add(5*time.Second)),
			NewEntrypoint("ep_other", "other", entrypoint.OwnerTenant, "other", "o_fn", 1, 0, false, t0.Add(4*time.Second)),
		} {
			if err := tx.InsertEntrypoint(e); err != nil {
				return err
			}
		}
		return nil
	})
	cases := []struct {
		v    entrypoint.Viewer
		want []string
	}{
		{entrypoint.Viewer{TenantID: "acme", SubjectID: "alice"}, []string{"ep_tenant", "ep_alice", "ep_shared", "ep_system"}},
		{entrypoint.Viewer{TenantID: "acme", SubjectID: "bob"}, []string{"ep_tenant", "ep_shared", "ep_system"}},
		{entrypoint.Viewer{TenantID: "other", SubjectID: "alice"}, []string{"ep_system", "ep_other"}},
		{entrypoint.Viewer{Operator: true}, []string{"ep_tenant", "ep_alice", "ep_shared", "ep_system", "ep_other", "ep_sysdraft"}},
	}
	for _, c := range cases {
		page, err := s.ListEntrypoints(ctx, c.v, store.ListQuery{})
		require.NoError(t, err)
		var ids []string
		for _, e := range page.Items {
			ids = append(ids, e.ID)
			require.True(t, e.VisibleTo(c.v), "store and domain visibility agree")
		}
		require.Equal(t, c.want, ids, "viewer %+v", c.v)
		for _, id := range []string{"ep_tenant", "ep_alice", "ep_shared", "ep_system", "ep_other", "ep_sysdraft"} {
			_, err := s.Entrypoint(ctx, c.v, id)
			visible := false
			for _, w := range c.want {
				visible = visible || w == id
			}
			if visible {
				require.NoError(t, err, "%s visible to %+v", id, c.v)
			} else {
				require.ErrorIs(t, err, store.ErrNotFound, "%s hidden from %+v", id, c.v)
			}
		}
	}
}

func testEntrypointVersions(t *testing.T, s store.Store) {
	ctx := context.Background()
	v := entrypoint.Viewer{TenantID: "acme", SubjectID: "u"}
	mk := func(id string, major, minor int, has bool, st entrypoint.Status) entrypoint.Entrypoint {
		e := NewEntrypoint(id, "acme", entrypoint.OwnerTenant, "acme", "tax", major, minor, has, t0)
		e.Status = st
		return e
	}
	update(t, s, func(tx store.Tx) error {
		for _, e := range []entrypoint.Entrypoint{
			mk("ep_a", 1, 0, false, entrypoint.StatusDeprecated),
			mk("ep_b", 1, 1, true, entrypoint.StatusActive),
			mk("ep_c", 1, 2, true, entrypoint.StatusActive),
			mk("ep_d", 1, 3, true, entrypoint.StatusDraft),
			mk("ep_e", 2, 0, false, entrypoint.StatusDraft),
			NewEntrypoint("ep_x", "other", entrypoint.OwnerTenant, "other", "tax", 1, 9, true, t0),
		} {
			if e.ID == "ep_x" {
				e.Status = entrypoint.StatusActive
			}
			if err := tx.InsertEntrypoint(e); err != nil {
				return err
			}
		}
		return nil
	})
	family := fnBase + "vendor.app.billing.tax"
	list, err := s.EntrypointVersions(ctx, v, family)
	require.NoError(t, err)
	var ids []string
	for _, e := range list {
		ids = append(ids, e.ID)
	}
	require.Equal(t, []string{"ep_a", "ep_b", "ep_c", "ep_d", "ep_e"}, ids)
	latest, err := s.LatestActive(ctx, v, family, 1)
	require.NoError(t, err)
	require.Equal(t, "ep_c", latest.ID, "latest active minor, not the newer draft nor the other tenant's v1.9")
	_, err = s.LatestActive(ctx, v, family, 2)
	require.ErrorIs(t, err, store.ErrNotFound, "v2 has no active minor")
}

func seedList(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for i := 0; i < 7; i++ {
			e := NewEntrypoint(fmt.Sprintf("ep_%02d", i), "acme", entrypoint.OwnerTenant, "acme", fmt.Sprintf("fn_%d", i), 1, 0, false, t0.Add(time.Duration(i/2)*time.Second))
			if i%2 == 0 {
				e.Status = entrypoint.StatusActive
				e.Tags = []string{"billing", "even"}
			} else {
				e.Tags = []string{"odd"}
			}
			if err := tx.InsertEntrypoint(e); err != nil {
				return err
			}
		}
		return tx.InsertEntrypoint(NewEntrypoint("ep_other", "other", entrypoint.OwnerTenant, "other", "fn_0", 1, 0, false, t0))
	})
}

func listIDs(t *testing.T, s store.Store, filter, order string) []string {
	t.Helper()
	q := store.ListQuery{Limit: 100}
	var err error
	if filter != "" {
		q.Filter, err = odata.ParseFilter(filter)
		require.NoError(t, err)
	}
	if order != "" {
		q.OrderBy, err = odata.ParseOrderBy(order)
		require.NoError(t, err)
	}
	page, err := s.ListEntrypoints(context.Background(), entrypoint.Viewer{TenantID: "acme", SubjectID: "u"}, q)
	require.NoError(t, err, filter)
	ids := []string{}
	for _, e := range page.Items {
		ids = append(ids, e.ID)
	}
	return ids
}

func testEntrypointListFilter(t *testing.T, s store.Store) {
	seedList(t, s)
	cases := []struct {
		filter, order string
		want          []string
	}{
		{"status eq 'active'", "", []string{"ep_00", "ep_02", "ep_04", "ep_06"}},
		{"status eq 'active' and tags eq 'even'", "", []string{"ep_00", "ep_02", "ep_04", "ep_06"}},
		{"tags eq 'odd'", "", []string{"ep_01", "ep_03", "ep_05"}},
		{"tags in ('odd', 'even')", "", []string{"ep_00", "ep_01", "ep_02", "ep_03", "ep_04", "ep_05", "ep_06"}},
		{"not (status eq 'active') or entrypoint_id eq '" + fnBase + "vendor.app.billing.fn_0.v1~'", "", []string{"ep_00", "ep_01", "ep_03", "ep_05"}},
		{"entrypoint_id eq '" + fnBase + "vendor.app.billing.fn_1.*'", "", []string{"ep_01"}},
		{"entrypoint_id eq '" + fnBase + "vendor.app.*'", "", []string{"ep_00", "ep_01", "ep_02", "ep_03", "ep_04", "ep_05", "ep_06"}},
		{"startswith(entrypoint_id, '" + fnBase + "vendor.app.billing.fn_6')", "", []string{"ep_06"}},
		{"owner_type eq 'tenant' and kind eq 'function'", "entrypoint_id desc", []string{"ep_06", "ep_05", "ep_04", "ep_03", "ep_02", "ep_01", "ep_00"}},
		{"created_at ge 2026-01-02T03:04:07.123456Z", "", []string{"ep_04", "ep_05", "ep_06"}},
		{"", "created_at desc", []string{"ep_06", "ep_04", "ep_05", "ep_02", "ep_03", "ep_00", "ep_01"}},
		{"", "status asc, entrypoint_id desc", []string{"ep_06", "ep_04", "ep_02", "ep_00", "ep_05", "ep_03", "ep_01"}},
		{"adapter eq 'gts.x.core.serverless.adapter.starlark.v1~' and status in ('draft')", "", []string{"ep_01", "ep_03", "ep_05"}},
		{"entrypoint_id eq 'gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~*'", "", []string{}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, listIDs(t, s, c.filter, c.order), "filter %q order %q", c.filter, c.order)
	}
}

func testEntrypointListPaging(t *testing.T, s store.Store) {
	seedList(t, s)
	ctx := context.Background()
	v := entrypoint.Viewer{TenantID: "acme", SubjectID: "u"}
	for _, order := range []string{"", "created_at desc", "entrypoint_id", "updated_at desc, entrypoint_id", "status, created_at desc", "status desc, title"} {
		ob, err := odata.ParseOrderBy(order)
		require.NoError(t, err)
		want := listIDs(t, s, "", order)
		var got []string
		var pages []store.Page[entrypoint.Entrypoint]
		q := store.ListQuery{Limit: 3, OrderBy: ob}
		for {
			page, err := s.ListEntrypoints(ctx, v, q)
			require.NoError(t, err)
			pages = append(pages, page)
			for _, e := range page.Items {
				got = append(got, e.ID)
			}
			if !page.HasMore {
				require.Empty(t, page.NextCursor)
				break
			}
			require.NotEmpty(t, page.NextCursor)
			q.Cursor = page.NextCursor
		}
		require.Equal(t, want, got, "forward paging with order %q visits every row once", order)
		require.Len(t, pages, 3)
		require.Empty(t, pages[0].PrevCursor)
		// Walk back from the last page.
		back, err := s.ListEntrypoints(ctx, v, store.ListQuery{Limit: 3, OrderBy: ob, Cursor: pages[2].PrevCursor})
		require.NoError(t, err)
		require.Equal(t, pages[1].Items, back.Items, "prev cursor returns the previous page, order %q", order)
		require.NotEmpty(t, back.PrevCursor)
		require.NotEmpty(t, back.NextCursor)
		first, err := s.ListEntrypoints(ctx, v, store.ListQuery{Limit: 3, OrderBy: ob, Cursor: back.PrevCursor})
		require.NoError(t, err)
		require.Equal(t, pages[0].Items, first.Items)
		require.Empty(t, first.PrevCursor, "no page before the first")
	}
}

func testEntrypointListErrors(t *testing.T, s store.Store) {
	seedList(t, s)
	ctx := context.Background()
	v := entrypoint.Viewer{TenantID: "acme", SubjectID: "u"}
	var qe *store.QueryError
	for _, f := range []string{"nosuch eq 1", "status eq 'bogus'", "created_at eq 'yesterday'", "entrypoint_id eq 'gts.BAD*'"} {
		expr, err := odata.ParseFilter(f)
		require.NoError(t, err, f)
		_, err = s.ListEntrypoints(ctx, v, store.ListQuery{Filter: expr})
		require.ErrorAs(t, err, &qe, f)
	}
	ob, _ := odata.ParseOrderBy("status, tags")
	_, err := s.ListEntrypoints(ctx, v, store.ListQuery{OrderBy: ob})
	require.ErrorAs(t, err, &qe, "tags is not sortable")
	_, err = s.ListEntrypoints(ctx, v, store.ListQuery{Cursor: "!!garbage"})
	require.ErrorAs(t, err, &qe)
	require.ErrorIs(t, err, store.ErrBadCursor)
	page, err := s.ListEntrypoints(ctx, v, store.ListQuery{Limit: 2})
	require.NoError(t, err)
	ob, _ = odata.ParseOrderBy("created_at desc")
	_, err = s.ListEntrypoints(ctx, v, store.ListQuery{Limit: 2, OrderBy: ob, Cursor: page.NextCursor})
	require.ErrorIs(t, err, store.ErrBadCursor, "a cursor cannot be reused with another order")
	big, err := s.ListEntrypoints(ctx, v, store.ListQuery{Limit: 100000})
	require.NoError(t, err)
	require.Len(t, big.Items, 7)
}

// NewInvocationEvent returns the created event of a fresh invocation.
// CreatedEvent is the first event of a new invocation rec: created, with the initial record as its
// data (tests that queue invocations of their own shape start them with it).
func CreatedEvent(rec invocation.Record) (invocation.Event, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return invocation.Event{}, err
	}
	return invocation.Event{InvocationID: rec.ID, Type: invocation.EventCreated, Data: data, LogicalAttempt: 1, At: rec.CreatedAt,
		IdempotencyKey: invocation.IdempotencyKey(rec.ID, "", 1, invocation.EventCreated, "")}, nil
}

// mustJSON encodes v, a value of the suite's own making (records, maps of numbers and strings);
// failing to encode one is a bug in the suite.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("storetest: encoding %T: %v", v, err))
	}
	return b
}

func NewInvocationEvent(id, tenantID, ref string, at time.Time) invocation.Event {
	rec := invocation.Record{ID: id, TenantID: tenantID, EntrypointRef: ref,
		EntrypointID: fnBase + "vendor.app.billing.tax.v1~", EntrypointVersion: "1.0.0", SubjectID: "u1",
		Mode: invocation.ModeAsync, Params: json.RawMessage(`{"amount":100}`), CorrelationID: "corr_1", CreatedAt: at}
	return invocation.Event{InvocationID: id, Type: invocation.EventCreated, Data: mustJSON(rec),
		IdempotencyKey: invocation.IdempotencyKey(id, "", 1, invocation.EventCreated, ""), LogicalAttempt: 1, At: at}
}

func ev(id string, typ invocation.EventType, step string, data string, at time.Time) invocation.Event {
	e := invocation.Event{Type: typ, IdempotencyKey: invocation.IdempotencyKey(id, step, 1, typ, ""), EngineAttempt: 1, LogicalAttempt: 1, At: at}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return e
}

// testInvocationHead: the head is the tip of the log (status, last seq and the last event's key),
// read in a transaction; another tenant's invocation has none.
func testInvocationHead(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		_, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent("inv_h", "acme", "ep_1", t0)}, store.Scheduling{})
		return err
	})
	var appended []invocation.Event
	update(t, s, func(tx store.Tx) error {
		var err error
		_, appended, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_h", Events: []invocation.Event{
			ev("inv_h", invocation.EventStarted, "", "", t0.Add(time.Millisecond)),
			ev("inv_h", invocation.EventLog, "line1", `{"message":"hello"}`, t0.Add(2*time.Millisecond)),
		}})
		return err
	})
	update(t, s, func(tx store.Tx) error {
		h, err := tx.InvocationHead("acme", "inv_h")
		require.NoError(t, err)
		require.Equal(t, store.Head{Status: invocation.StatusRunning, LastSeq: 3, LastKey: appended[1].IdempotencyKey}, h)
		_, err = tx.InvocationHead("other", "inv_h")
		require.ErrorIs(t, err, store.ErrNotFound, "another tenant's invocation has no head")
		return nil
	})
}

// testLeaseOwners: the lease owner of each invocation asked for, "" for one without a lease, none for
// an id that names no invocation.
func testLeaseOwners(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for _, id := range []string{"inv_l1", "inv_l2"} {
			if _, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(id, "acme", "ep_1", t0)}, store.Scheduling{}); err != nil {
				return err
			}
		}
		return tx.SetScheduling("acme", "inv_l1", store.Scheduling{LeaseOwner: "n1/1/1", LeaseExpiresAt: ptr(t0.Add(time.Minute))})
	})
	got, err := s.LeaseOwners(context.Background(), []string{"inv_l1", "inv_l2", "inv_none"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"inv_l1": "n1/1/1", "inv_l2": ""}, got)
}

// testWorkerNonces: a nonce is new once; it is purged once expired, with the other expired keys.
func testWorkerNonces(t *testing.T, s store.Store) {
	use := func(nonce string, exp time.Time) (fresh bool) {
		update(t, s, func(tx store.Tx) error {
			var err error
			fresh, err = tx.UseNonce(nonce, exp)
			return err
		})
		return fresh
	}
	require.True(t, use("n1", t0.Add(time.Minute)))
	require.False(t, use("n1", t0.Add(time.Minute)), "a nonce is new once")
	require.True(t, use("n2", t0.Add(time.Hour)))
	update(t, s, func(tx store.Tx) error {
		_, err := tx.PurgeExpired(t0.Add(2 * time.Minute))
		return err
	})
	require.True(t, use("n1", t0.Add(3*time.Minute)), "purged once expired")
	require.False(t, use("n2", t0.Add(time.Hour)), "not purged before it expires")
}

func testInvocationEventLog(t *testing.T, s store.Store) {
	ctx := context.Background()
	var rec invocation.Record
	update(t, s, func(tx store.Tx) error {
		var err error
		rec, err = tx.StartInvocation([]invocation.Event{NewInvocationEvent("inv_1", "acme", "ep_1", t0)}, store.Scheduling{})
		return err
	})
	require.Equal(t, invocation.StatusQueued, rec.Status)
	require.Equal(t, int64(1), rec.LastSeq)
	require.Equal(t, 1, rec.Attempt)

	var appended []invocation.Event
	update(t, s, func(tx store.Tx) error {
		var err error
		rec, appended, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_1", Events: []invocation.Event{
			ev("inv_1", invocation.EventStarted, "", "", t0.Add(time.Millisecond)),
			ev("inv_1", invocation.EventLog, "line1", `{"message":"hello"}`, t0.Add(2*time.Millisecond)),
		}})
		return err
	})
	require.Len(t, appended, 2)
	require.Equal(t, []int64{2, 3}, []int64{appended[0].Seq, appended[1].Seq})
	require.Equal(t, invocation.StatusRunning, rec.Status)
	require.Equal(t, t0.Add(time.Millisecond), *rec.StartedAt)

	// Re-appending an event with a known idempotency key is a no-op (003 §1.3).
	update(t, s, func(tx store.Tx) error {
		var err error
		rec, appended, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_1", Events: []invocation.Event{ev("inv_1", invocation.EventStarted, "", "", t0.Add(time.Hour))}})
		return err
	})
	require.Empty(t, appended)
	require.Equal(t, int64(3), rec.LastSeq)

	// An invalid transition appends nothing and leaves the projection alone.
	err := s.Update(ctx, func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_1", Events: []invocation.Event{
			ev("inv_1", invocation.EventLog, "line2", `{}`, t0),
			ev("inv_1", invocation.EventResumed, "", "", t0),
		}})
		return err
	})
	var te *invocation.TransitionError
	require.ErrorAs(t, err, &te)
	got, err := s.Invocation(ctx, "acme", "inv_1")
	require.NoError(t, err)
	require.Equal(t, rec, got)

	// An entry stamped earlier than the last one logged (collected during an attempt, written
	// later) is logged at that one's time: at never goes backwards with seq.
	update(t, s, func(tx store.Tx) error {
		var err error
		rec, appended, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_1", Events: []invocation.Event{ev("inv_1", invocation.EventLog, "early", `{}`, t0)}})
		return err
	})
	require.Len(t, appended, 1)
	require.Equal(t, t0.Add(2*time.Millisecond), appended[0].At)
	checkLogAfterOutcome(t, s)
}

// checkLogAfterOutcome ends testInvocationEventLog's inv_1 with an outcome: the projection, the
// log's seqs and times, a rebuild from the log, a read from a seq, and the unique id.
func checkLogAfterOutcome(t *testing.T, s store.Store) {
	ctx := context.Background()
	var rec invocation.Record
	outcome := `{"result":{"tax":10},"metrics":{"duration_ms":5,"billed_duration_ms":5,"cpu_time_ms":1,"memory_limit_mb":128,"max_memory_used_mb":1,"step_count":3}}`
	update(t, s, func(tx store.Tx) error {
		var err error
		rec, _, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_1", Events: []invocation.Event{ev("inv_1", invocation.EventSucceeded, "", outcome, t0.Add(3*time.Millisecond))}})
		return err
	})
	require.Equal(t, invocation.StatusSucceeded, rec.Status)
	require.JSONEq(t, `{"tax":10}`, string(rec.Result))
	require.Equal(t, int64(5), *rec.Metrics.DurationMS)
	require.Equal(t, t0.Add(3*time.Millisecond), *rec.FinishedAt)

	events, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_1", AfterSeq: 0, Limit: 100})
	require.NoError(t, err)
	require.Len(t, events, 5)
	for i, e := range events {
		require.Equal(t, int64(i+1), e.Seq)
		require.Equal(t, "inv_1", e.InvocationID)
		if i > 0 {
			require.False(t, e.At.Before(events[i-1].At), "at of seq %d goes backwards", e.Seq)
		}
	}
	require.Equal(t, t0.Add(2*time.Millisecond), events[3].At)
	rebuilt, err := invocation.Rebuild(events)
	require.NoError(t, err)
	stored, err := s.Invocation(ctx, "acme", "inv_1")
	require.NoError(t, err)
	require.Equal(t, stored, rebuilt, "the projection can be rebuilt from the log")
	tail, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_1", AfterSeq: 2, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, int64(3), tail[0].Seq)

	err = s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent("inv_1", "acme", "ep_1", t0)}, store.Scheduling{})
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict, "invocation ids are unique")
}

func testInvocationIsolation(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		_, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent("inv_a", "acme", "ep_1", t0)}, store.Scheduling{})
		return err
	})
	_, err := s.Invocation(ctx, "other", "inv_a")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.Events(ctx, store.EventLogQuery{TenantID: "other", InvocationID: "inv_a", AfterSeq: 0, Limit: 10})
	require.ErrorIs(t, err, store.ErrNotFound)
	err = s.Update(ctx, func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: "other", InvocationID: "inv_a", Events: []invocation.Event{ev("inv_a", invocation.EventStarted, "", "", t0)}})
		return err
	})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testInvocationInFlight(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for i, st := range []invocation.EventType{"", invocation.EventStarted, invocation.EventCanceled} {
			id := fmt.Sprintf("inv_%d", i)
			if _, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(id, "acme", "ep_1", t0)}, store.Scheduling{}); err != nil {
				return err
			}
			if st != "" {
				if _, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id, Events: []invocation.Event{ev(id, st, "", "", t0)}}); err != nil {
					return err
				}
			}
		}
		_, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent("inv_x", "acme", "ep_2", t0)}, store.Scheduling{})
		return err
	})
	update(t, s, func(tx store.Tx) error {
		n, err := tx.CountInFlight("acme", "ep_1")
		require.NoError(t, err)
		require.Equal(t, int64(2), n, "queued and running count, canceled does not")
		n, err = tx.CountInFlight("other", "ep_1")
		require.NoError(t, err)
		require.Zero(t, n, "another tenant's count")
		n, err = tx.CountInFlight("acme", "ep_none")
		require.NoError(t, err)
		require.Zero(t, n)
		return nil
	})
}

// testGroupCommitIsolation: closures batched together succeed or fail on their own.
func testGroupCommitIsolation(t *testing.T, s store.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(ctx, func(tx store.Tx) error {
				p := tenant.New(fmt.Sprintf("t%02d", i), t0)
				if err := tx.PutTenant(p); err != nil {
					return err
				}
				if i%3 == 0 {
					return errors.New("deliberate failure")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		_, gerr := s.Tenant(ctx, fmt.Sprintf("t%02d", i))
		if i%3 == 0 {
			require.EqualError(t, err, "deliberate failure")
			require.ErrorIs(t, gerr, store.ErrNotFound, "a failed closure leaves no trace")
		} else {
			require.NoError(t, err)
			require.NoError(t, gerr, "its batch neighbours commit")
		}
	}
}

func testGroupCommitConcurrency(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		_, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent("inv_c", "acme", "ep_1", t0)}, store.Scheduling{})
		return err
	})
	const writers = 32
	var wg sync.WaitGroup
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
				_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_c", Events: []invocation.Event{ev("inv_c", invocation.EventLog, fmt.Sprint(i), `{}`, t0)}})
				return err
			}))
		}()
	}
	wg.Wait()
	events, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_c", AfterSeq: 0, Limit: 1000})
	require.NoError(t, err)
	require.Len(t, events, writers+1, "every concurrent append landed exactly once, without gaps")
}

func testAudit(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		for i := 0; i < 3; i++ {
			ten := "acme"
			if i == 2 {
				ten = "other"
			}
			if err := tx.InsertAudit(audit.Event{ID: fmt.Sprintf("aud_%d", i), TenantID: ten, Type: audit.EntrypointCreated,
				ActorID: "u1", ResourceType: "entrypoint", ResourceID: "ep_1", At: t0.Add(time.Duration(i) * time.Second),
				Details: json.RawMessage(`{"x":1}`)}); err != nil {
				return err
			}
		}
		return nil
	})
	page, err := s.ListAudit(ctx, "acme", store.ListQuery{})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	require.Equal(t, "aud_0", page.Items[0].ID)
	require.JSONEq(t, `{"x":1}`, string(page.Items[0].Details))
	require.Equal(t, t0, page.Items[0].At)
}

func testUpdateRollsBack(t *testing.T, s store.Store) {
	ctx := context.Background()
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutTenant(tenant.New("ghost", t0)); err != nil {
			return err
		}
		return errors.New("boom")
	})
	require.EqualError(t, err, "boom")
	_, err = s.Tenant(ctx, "ghost")
	require.ErrorIs(t, err, store.ErrNotFound)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	err = s.Update(canceled, func(tx store.Tx) error { return tx.PutTenant(tenant.New("late", t0)) })
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Tenant(ctx, "late")
	require.ErrorIs(t, err, store.ErrNotFound, "a cancelled update is not applied")
}

func testUpdateRecoversPanic(t *testing.T, s store.Store) {
	ctx := context.Background()
	err := s.Update(ctx, func(tx store.Tx) error { panic("bad closure") })
	require.ErrorContains(t, err, "bad closure")
	update(t, s, func(tx store.Tx) error { return tx.PutTenant(tenant.New("after", t0)) })
	_, err = s.Tenant(ctx, "after")
	require.NoError(t, err, "the store keeps working after a panicking write")
}

// testInvocationsBatchRead: Tx.Invocations reads the projections of several runnable items in
// their order, skipping those that do not exist or belong to another tenant.
func testInvocationsBatchRead(t *testing.T, s store.Store) {
	var want []invocation.Record
	update(t, s, func(tx store.Tx) error {
		want = want[:0]
		for _, id := range []string{"inv_b1", "inv_b2", "inv_b3"} {
			rec, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(id, "acme", "ep_1", t0)}, store.Scheduling{})
			if err != nil {
				return err
			}
			want = append(want, rec)
		}
		return nil
	})
	var got []invocation.Record
	update(t, s, func(tx store.Tx) error {
		var err error
		got, err = tx.Invocations([]store.Runnable{{TenantID: "acme", InvocationID: "inv_b3"}, {TenantID: "acme", InvocationID: "inv_none"},
			{TenantID: "globex", InvocationID: "inv_b2"}, {TenantID: "acme", InvocationID: "inv_b1"}})
		return err
	})
	require.Len(t, got, 2)
	for i, w := range []invocation.Record{want[2], want[0]} {
		require.Equal(t, w.ID, got[i].ID)
		require.Equal(t, w.LastSeq, got[i].LastSeq)
		require.Equal(t, w.Status, got[i].Status)
		require.True(t, w.UpdatedAt.Equal(got[i].UpdatedAt))
	}
	update(t, s, func(tx store.Tx) error {
		var err error
		got, err = tx.Invocations(nil)
		return err
	})
	require.Empty(t, got)
}

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

	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

// newMaterialization is a staged materialization of asset key for partition, made at.
func newMaterialization(tenantID, id, key, partition string, at time.Time) asset.Materialization {
	return asset.Materialization{ID: id, TenantID: tenantID, AssetKey: key, PartitionKey: partition,
		RunID: "inv_run_" + id, TaskID: "clean", Attempt: 1, State: asset.StateStaged,
		OutputURI: "assets/" + key + "/staging/" + id, RowCount: 42, ByteSize: 1024, SchemaHash: "sha256:abc",
		Checks:       json.RawMessage(`[{"name":"has_rows","passed":true,"severity":"CRITICAL"}]`),
		ChecksPassed: 1, GatingDecision: asset.GatingAllow, CreatedAt: at, UpdatedAt: at}
}

func putMaterialization(t *testing.T, s store.Store, m asset.Materialization) asset.Materialization {
	t.Helper()
	var got asset.Materialization
	update(t, s, func(tx store.Tx) error {
		var err error
		got, err = tx.PutMaterialization(m)
		return err
	})
	return got
}

func promote(s store.Store, tenantID, id string, at time.Time) (asset.Materialization, error) {
	return promoteWith(context.Background(), s, tenantID, id, at)
}

// promoteWith is promote with the Update's context.
func promoteWith(ctx context.Context, s store.Store, tenantID, id string, at time.Time) (asset.Materialization, error) {
	var got asset.Materialization
	err := s.Update(ctx, func(tx store.Tx) error {
		var err error
		got, err = tx.Promote(store.Promotion{TenantID: tenantID, ID: id, At: at})
		return err
	})
	return got, err
}

func setState(s store.Store, c store.MaterializationChange) (asset.Materialization, error) {
	var got asset.Materialization
	err := s.Update(context.Background(), func(tx store.Tx) error {
		var err error
		got, err = tx.SetMaterializationState(c)
		return err
	})
	return got, err
}

// testMaterializations pins the record of a materialization: it reads back as written, a second
// record of the same id is a no-op that answers the stored one, a state that cannot start is
// refused, the asset's row appears with it, and another tenant sees none of it.
func testMaterializations(t *testing.T, s store.Store) {
	ctx := context.Background()
	m := newMaterialization("acme", "mat_1", "sales.clean", "2026-01-01", t0)
	require.Equal(t, m, putMaterialization(t, s, m))
	got, err := s.Materialization(ctx, "acme", "mat_1")
	require.NoError(t, err)
	require.Equal(t, m, got)

	again := m
	again.RowCount, again.State = 7, asset.StateCommitted
	require.Equal(t, m, putMaterialization(t, s, again), "the same id again answers the stored row")
	got, err = s.Materialization(ctx, "acme", "mat_1")
	require.NoError(t, err)
	require.Equal(t, m, got, "and changes nothing")

	plain := newMaterialization("acme", "mat_2", "sales.raw", "", t0)
	plain.Checks, plain.ChecksPassed, plain.GatingDecision, plain.State = nil, 0, "", asset.StateQuarantined
	require.Equal(t, plain, putMaterialization(t, s, plain), "unpartitioned, no checks, recorded quarantined")

	for _, st := range []asset.State{asset.StatePromoted, asset.StateRejected, "done"} {
		bad := newMaterialization("acme", "mat_bad", "sales.clean", "", t0)
		bad.State = st
		require.Error(t, s.Update(ctx, func(tx store.Tx) error { _, err := tx.PutMaterialization(bad); return err }), st)
	}
	_, err = s.Materialization(ctx, "acme", "mat_bad")
	require.ErrorIs(t, err, store.ErrNotFound)

	a, err := s.Asset(ctx, "acme", "sales.clean")
	require.NoError(t, err)
	require.Equal(t, asset.Asset{TenantID: "acme", AssetKey: "sales.clean", UpdatedAt: t0}, a,
		"recording a materialization creates its asset's row, with no latest and no health yet")

	// Another tenant: the same id is another materialization; it reads nothing of acme's.
	other := newMaterialization("globex", "mat_1", "sales.clean", "2026-01-01", t0.Add(time.Hour))
	require.Equal(t, other, putMaterialization(t, s, other))
	got, err = s.Materialization(ctx, "acme", "mat_1")
	require.NoError(t, err)
	require.Equal(t, m, got)
	_, err = s.Materialization(ctx, "initech", "mat_1")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.Asset(ctx, "initech", "sales.clean")
	require.ErrorIs(t, err, store.ErrNotFound)
	update(t, s, func(tx store.Tx) error {
		got, err := tx.Materialization("globex", "mat_1")
		require.NoError(t, err)
		require.Equal(t, other, got)
		_, err = tx.Materialization("globex", "mat_2")
		require.ErrorIs(t, err, store.ErrNotFound)
		return nil
	})
}

// testMaterializationStates pins the protocol's moves: the allowed ones apply (with the decision
// of a rejection), the forbidden ones are a *asset.TransitionError that changes nothing, a move
// to the current state is a no-op, and a promotion never goes through SetMaterializationState.
func testMaterializationStates(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i, from := range asset.States {
		for j, to := range asset.States {
			if to == asset.StatePromoted {
				continue
			}
			id := fmt.Sprintf("mat_%d_%d", i, j)
			putAt(t, s, id, from)
			c := store.MaterializationChange{TenantID: "acme", ID: id, To: to, At: t0.Add(time.Hour)}
			got, err := setState(s, c)
			switch {
			case from == to:
				require.NoError(t, err, "%s -> %s is a no-op", from, to)
				require.Equal(t, from, got.State)
				require.Equal(t, t0, got.UpdatedAt, "a no-op changes nothing")
			case from.CanMove(to):
				require.NoError(t, err, "%s -> %s", from, to)
				require.Equal(t, to, got.State)
				require.Equal(t, t0.Add(time.Hour), got.UpdatedAt)
			default:
				var te *asset.TransitionError
				require.ErrorAs(t, err, &te, "%s -> %s is refused", from, to)
				require.Equal(t, asset.TransitionError{ID: id, From: from, To: to}, *te)
				stored, err := s.Materialization(ctx, "acme", id)
				require.NoError(t, err)
				require.Equal(t, from, stored.State, "a refused move changes nothing")
			}
		}
	}

	putAt(t, s, "mat_q", asset.StateQuarantined)
	_, err := setState(s, store.MaterializationChange{TenantID: "acme", ID: "mat_q", To: asset.StatePromoted, At: t0})
	require.Error(t, err, "a promotion goes through Promote")
	got, err := setState(s, store.MaterializationChange{TenantID: "acme", ID: "mat_q", To: asset.StateRejected,
		At: t0.Add(time.Minute), DecidedBy: "alice", Reason: "rows are duplicated"})
	require.NoError(t, err)
	at := t0.Add(time.Minute)
	require.Equal(t, "alice", got.DecidedBy)
	require.Equal(t, &at, got.DecidedAt)
	require.Equal(t, "rows are duplicated", got.Reason)
	require.Nil(t, got.PromotedAt)
	_, err = setState(s, store.MaterializationChange{TenantID: "acme", ID: "mat_none", To: asset.StateRejected, At: t0})
	require.ErrorIs(t, err, store.ErrNotFound)
	putAt(t, s, "mat_s", asset.StateStaged)
	_, err = setState(s, store.MaterializationChange{TenantID: "globex", ID: "mat_s", To: asset.StateCommitted, At: t0})
	require.ErrorIs(t, err, store.ErrNotFound, "another tenant cannot move it")
}

// putAt records materialization id of acme in state st (moving it there through the protocol
// when it cannot start in it).
func putAt(t *testing.T, s store.Store, id string, st asset.State) {
	t.Helper()
	m := newMaterialization("acme", id, "sales.clean", "", t0)
	switch st {
	case asset.StatePromoted:
		m.State = asset.StateCommitted
		putMaterialization(t, s, m)
		_, err := promote(s, "acme", id, t0)
		require.NoError(t, err)
		return
	case asset.StateRejected:
		putMaterialization(t, s, m)
		_, err := setState(s, store.MaterializationChange{TenantID: "acme", ID: id, To: asset.StateRejected, At: t0})
		require.NoError(t, err)
		return
	}
	m.State = st
	putMaterialization(t, s, m)
}

// testPromote pins promotion: a committed materialization becomes promoted and the latest of its
// (asset, partition) and its asset's latest; the next one replaces it; a repeated promotion
// changes nothing; partitions are independent; quarantined ones are promoted by an approval;
// staged and rejected ones are refused; another tenant can promote nothing.
func testPromote(t *testing.T, s store.Store) {
	ctx := context.Background()
	_, err := s.LatestMaterialization(ctx, "acme", "sales.clean", "2026-01-01")
	require.ErrorIs(t, err, store.ErrNotFound)
	for i, id := range []string{"mat_a", "mat_b", "mat_c"} {
		m := newMaterialization("acme", id, "sales.clean", "2026-01-01", t0.Add(time.Duration(i)*time.Minute))
		m.State = asset.StateCommitted
		putMaterialization(t, s, m)
	}
	_, err = promote(s, "globex", "mat_a", t0)
	require.ErrorIs(t, err, store.ErrNotFound, "another tenant cannot promote it")

	p1 := t0.Add(time.Hour)
	got, err := promote(s, "acme", "mat_a", p1)
	require.NoError(t, err)
	require.Equal(t, asset.StatePromoted, got.State)
	require.Equal(t, &p1, got.PromotedAt)
	requireLatest(t, s, "sales.clean", "2026-01-01", "mat_a")

	p2 := t0.Add(2 * time.Hour)
	_, err = promote(s, "acme", "mat_b", p2)
	require.NoError(t, err)
	requireLatest(t, s, "sales.clean", "2026-01-01", "mat_b")
	a, err := s.Asset(ctx, "acme", "sales.clean")
	require.NoError(t, err)
	require.Equal(t, "mat_b", a.LatestMaterializationID)
	require.Equal(t, &p2, a.LatestAt)
	require.Equal(t, "2026-01-01", a.LatestPartitionKey)
	old, err := s.Materialization(ctx, "acme", "mat_a")
	require.NoError(t, err)
	require.Equal(t, asset.StatePromoted, old.State, "the replaced latest stays promoted")

	// Promoting mat_a again (a retried call) changes nothing: mat_b stays the latest.
	again, err := promote(s, "acme", "mat_a", t0.Add(3*time.Hour))
	require.NoError(t, err)
	require.Equal(t, old, again)
	requireLatest(t, s, "sales.clean", "2026-01-01", "mat_b")

	// Another partition has its own latest.
	d := newMaterialization("acme", "mat_d", "sales.clean", "2026-01-02", t0)
	d.State = asset.StateCommitted
	putMaterialization(t, s, d)
	_, err = promote(s, "acme", "mat_d", t0.Add(4*time.Hour))
	require.NoError(t, err)
	requireLatest(t, s, "sales.clean", "2026-01-02", "mat_d")
	requireLatest(t, s, "sales.clean", "2026-01-01", "mat_b")

	approve(t, s)

	// Staged and rejected ones are refused, and the latest stays.
	putAt(t, s, "mat_staged", asset.StateStaged)
	putAt(t, s, "mat_rejected", asset.StateRejected)
	for id, from := range map[string]asset.State{"mat_staged": asset.StateStaged, "mat_rejected": asset.StateRejected} {
		_, err = promote(s, "acme", id, t0.Add(6*time.Hour))
		var te *asset.TransitionError
		require.ErrorAs(t, err, &te, id)
		require.Equal(t, from, te.From)
	}
	requireLatest(t, s, "sales.clean", "", "mat_none")
	_, err = promote(s, "acme", "mat_none", t0)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// requireLatest checks the latest of acme's (key, partition) is id (through the reader and a
// transaction); id "mat_none": there is none.
func requireLatest(t *testing.T, s store.Store, key, partition, id string) {
	t.Helper()
	got, err := s.LatestMaterialization(context.Background(), "acme", key, partition)
	if id == "mat_none" {
		require.ErrorIs(t, err, store.ErrNotFound)
		return
	}
	require.NoError(t, err)
	require.Equal(t, id, got.ID)
	require.Equal(t, asset.StatePromoted, got.State)
	update(t, s, func(tx store.Tx) error {
		in, err := tx.LatestMaterialization("acme", key, partition)
		require.NoError(t, err)
		require.Equal(t, got, in)
		return nil
	})
	_, err = s.LatestMaterialization(context.Background(), "globex", key, partition)
	require.ErrorIs(t, err, store.ErrNotFound, "another tenant has no latest")
}

// testPromoteConcurrent promotes two materializations of one (asset, partition) at once, from two
// goroutines, and the same one twice at once: both promotions apply, exactly one of the two is
// the latest, and the asset's row names the same one; the repeated one applies once. The writes
// are store.AnyWriter's, as the dispatcher's attempts are: on PostgreSQL they run on several
// writers at once, ordered only by the database.
func testPromoteConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	for round := range 10 {
		part := fmt.Sprintf("p%02d", round)
		ids := []string{"mat_" + part + "_x", "mat_" + part + "_y"}
		for _, id := range ids {
			m := newMaterialization("acme", id, "sales.clean", part, t0)
			m.State = asset.StateCommitted
			putMaterialization(t, s, m)
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = promoteWith(store.AnyWriter(ctx), s, "acme", ids[i%2], t0.Add(time.Duration(round)*time.Hour))
			}()
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		latest, err := s.LatestMaterialization(ctx, "acme", "sales.clean", part)
		require.NoError(t, err)
		require.Contains(t, ids, latest.ID)
		a, err := s.Asset(ctx, "acme", "sales.clean")
		require.NoError(t, err)
		require.Equal(t, latest.ID, a.LatestMaterializationID, "the pointer and the asset's row agree")
		f, err := odata.ParseFilter("partition_key eq '" + part + "' and state eq 'promoted'")
		require.NoError(t, err)
		page, err := s.ListMaterializations(ctx, "acme", store.ListQuery{Filter: f})
		require.NoError(t, err)
		require.Len(t, page.Items, 2, "both promotions applied")
	}
}

// testAssetOutcomes pins the health row: failures count up until a success resets them; the
// check result and gating decision stay until an outcome carries new ones.
func testAssetOutcomes(t *testing.T, s store.Store) {
	ctx := context.Background()
	record := func(o store.AssetOutcome) asset.Asset {
		t.Helper()
		var a asset.Asset
		update(t, s, func(tx store.Tx) error {
			var err error
			a, err = tx.RecordAssetOutcome(o)
			return err
		})
		return a
	}
	no, yes := false, true
	f1, f2, ok := t0, t0.Add(time.Minute), t0.Add(2*time.Minute)
	a := record(store.AssetOutcome{TenantID: "acme", AssetKey: "sales.clean", At: f1, ChecksPassed: &no, GatingDecision: asset.GatingBlock})
	require.Equal(t, asset.Asset{TenantID: "acme", AssetKey: "sales.clean", ConsecutiveFailures: 1, LastFailureAt: &f1,
		LastCheckPassed: &no, LastGatingDecision: asset.GatingBlock, UpdatedAt: f1}, a, "an outcome creates the row")
	a = record(store.AssetOutcome{TenantID: "acme", AssetKey: "sales.clean", At: f2})
	require.Equal(t, 2, a.ConsecutiveFailures)
	require.Equal(t, &f2, a.LastFailureAt)
	require.Equal(t, &no, a.LastCheckPassed, "an outcome without checks leaves the last result")
	require.Equal(t, asset.GatingBlock, a.LastGatingDecision)
	a = record(store.AssetOutcome{TenantID: "acme", AssetKey: "sales.clean", At: ok, Succeeded: true, ChecksPassed: &yes,
		GatingDecision: asset.GatingAllowWithWarning})
	require.Equal(t, asset.Asset{TenantID: "acme", AssetKey: "sales.clean", LastFailureAt: &f2, LastSuccessAt: &ok,
		LastCheckPassed: &yes, LastGatingDecision: asset.GatingAllowWithWarning, UpdatedAt: ok}, a)
	got, err := s.Asset(ctx, "acme", "sales.clean")
	require.NoError(t, err)
	require.Equal(t, a, got)
	err = s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.RecordAssetOutcome(store.AssetOutcome{TenantID: "acme", AssetKey: "x", At: t0, GatingDecision: "maybe"})
		return err
	})
	require.Error(t, err)
	_, err = s.Asset(ctx, "globex", "sales.clean")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// testAssetLists pins the two lists: keyset pages, their filters and orders, tenant scope.
func testAssetLists(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := range 7 {
		key := []string{"sales.clean", "sales.raw", "ops.events"}[i%3]
		m := newMaterialization("acme", fmt.Sprintf("mat_%d", i), key, fmt.Sprintf("2026-01-0%d", 1+i%2), t0.Add(time.Duration(i)*time.Minute))
		m.RunID = fmt.Sprintf("inv_run_%d", i%2)
		if i%3 == 0 {
			m.State = asset.StateQuarantined
		}
		putMaterialization(t, s, m)
	}
	putMaterialization(t, s, newMaterialization("globex", "mat_g", "sales.clean", "", t0))

	// Newest first, in pages of 3.
	var ids []string
	q := store.ListQuery{Limit: 3}
	for {
		page, err := s.ListMaterializations(ctx, "acme", q)
		require.NoError(t, err)
		for _, m := range page.Items {
			ids = append(ids, m.ID)
		}
		if !page.HasMore {
			break
		}
		q.Cursor = page.NextCursor
	}
	require.Equal(t, []string{"mat_6", "mat_5", "mat_4", "mat_3", "mat_2", "mat_1", "mat_0"}, ids)

	list := func(filter, orderBy string) []string {
		t.Helper()
		q, err := listQuery(filter, orderBy)
		require.NoError(t, err)
		page, err := s.ListMaterializations(ctx, "acme", q)
		require.NoError(t, err)
		var out []string
		for _, m := range page.Items {
			out = append(out, m.ID)
		}
		return out
	}
	require.Equal(t, []string{"mat_6", "mat_3", "mat_0"}, list("asset_key eq 'sales.clean'", ""))
	require.Equal(t, []string{"mat_0", "mat_3", "mat_6"}, list("asset_key eq 'sales.clean'", "created_at asc"))
	require.Equal(t, []string{"mat_6", "mat_0"}, list("asset_key eq 'sales.clean' and partition_key eq '2026-01-01'", ""))
	require.Equal(t, []string{"mat_6", "mat_3", "mat_0"}, list("state eq 'quarantined'", ""))
	require.Equal(t, []string{"mat_5", "mat_3", "mat_1"}, list("run_id eq 'inv_run_1'", ""))
	require.Empty(t, list("asset_key eq 'nope'", ""))
	_, err := s.ListMaterializations(ctx, "acme", store.ListQuery{Filter: mustFilter(t, "row_count eq 1")})
	var qe *store.QueryError
	require.ErrorAs(t, err, &qe, "an unknown field is the caller's error")

	// Assets by key, in pages of 2; filters; globex's are its own.
	var keys []string
	q = store.ListQuery{Limit: 2}
	for {
		page, err := s.ListAssets(ctx, "acme", q)
		require.NoError(t, err)
		for _, a := range page.Items {
			keys = append(keys, a.AssetKey)
		}
		if !page.HasMore {
			break
		}
		q.Cursor = page.NextCursor
	}
	require.Equal(t, []string{"ops.events", "sales.clean", "sales.raw"}, keys)
	page, err := s.ListAssets(ctx, "acme", store.ListQuery{Filter: mustFilter(t, "startswith(asset_key, 'sales.')")})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	page, err = s.ListAssets(ctx, "acme", store.ListQuery{Filter: mustFilter(t, "consecutive_failures gt 0")})
	require.NoError(t, err)
	require.Empty(t, page.Items)
	page, err = s.ListAssets(ctx, "globex", store.ListQuery{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, "globex", page.Items[0].TenantID)
}

func mustFilter(t *testing.T, s string) odata.Expr {
	t.Helper()
	f, err := odata.ParseFilter(s)
	require.NoError(t, err)
	return f
}

// approve: a quarantined materialization is promoted by an approval, which records the decision
// and the data it committed out of quarantine.
func approve(t *testing.T, s store.Store) {
	q := newMaterialization("acme", "mat_q", "sales.clean", "2026-01-01", t0)
	q.State, q.GatingDecision, q.OutputURI = asset.StateQuarantined, asset.GatingQuarantine, "quarantine/mat_q/data.json"
	putMaterialization(t, s, q)
	p5 := t0.Add(5 * time.Hour)
	update(t, s, func(tx store.Tx) error {
		got, err := tx.Promote(store.Promotion{TenantID: "acme", ID: "mat_q", At: p5, DecidedBy: "bob", Reason: "known outlier",
			OutputURI: "materializations/mat_q/data.json"})
		require.NoError(t, err)
		require.Equal(t, "materializations/mat_q/data.json", got.OutputURI)
		require.Equal(t, "bob", got.DecidedBy)
		require.Equal(t, &p5, got.DecidedAt)
		require.Equal(t, "known outlier", got.Reason)
		latest, err := tx.LatestMaterialization("acme", "sales.clean", "2026-01-01")
		require.NoError(t, err)
		require.Equal(t, got, latest, "the transaction reads its own promotion")
		return nil
	})
	requireLatest(t, s, "sales.clean", "2026-01-01", "mat_q")

}

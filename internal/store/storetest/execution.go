package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

func ptr(t time.Time) *time.Time { return &t }

func testQueueAndLeases(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		for i, at := range []time.Duration{0, time.Second, time.Hour} {
			id := fmt.Sprintf("inv_q%d", i)
			if _, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(id, "acme", "ep_1", t0)}, store.Scheduling{}); err != nil {
				return err
			}
			if err := tx.SetScheduling("acme", id, store.Scheduling{AvailableAt: ptr(t0.Add(at))}); err != nil {
				return err
			}
		}
		return nil
	})
	next, err := s.NextDue(ctx, t0.Add(-time.Nanosecond))
	require.NoError(t, err)
	require.Equal(t, t0, *next)
	next, err = s.NextDue(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Second), *next, "NextDue is strictly after its argument")
	due := func(tx store.Tx, at time.Time) []string {
		refs, err := tx.DueEntrypoints("acme", at)
		require.NoError(t, err)
		var ids []string
		for _, ref := range refs {
			r, err := tx.DueWork(store.DueWorkQuery{TenantID: "acme", EntrypointRef: ref, Now: at, Limit: 10})
			require.NoError(t, err)
			for _, x := range r {
				ids = append(ids, x.InvocationID)
			}
		}
		return ids
	}
	update(t, s, func(tx store.Tx) error {
		require.Equal(t, []string{"inv_q0", "inv_q1"}, due(tx, t0.Add(time.Second)), "due work, oldest first; the future one waits")
		r, err := tx.DueWork(store.DueWorkQuery{TenantID: "acme", EntrypointRef: "ep_1", Now: t0.Add(time.Second), Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []store.Runnable{{TenantID: "acme", InvocationID: "inv_q0", EntrypointRef: "ep_1", Due: t0},
			{TenantID: "acme", InvocationID: "inv_q1", EntrypointRef: "ep_1", Due: t0.Add(time.Second)}}, r)
		// Claim inv_q0: lease it.
		require.NoError(t, tx.SetScheduling("acme", "inv_q0", store.Scheduling{LeaseOwner: "node-a", LeaseExpiresAt: ptr(t0.Add(30 * time.Second))}))
		sc, err := tx.Scheduling("acme", "inv_q0")
		require.NoError(t, err)
		require.Equal(t, store.Scheduling{LeaseOwner: "node-a", LeaseExpiresAt: ptr(t0.Add(30 * time.Second))}, sc)
		require.Equal(t, []string{"inv_q1"}, due(tx, t0.Add(time.Second)), "a leased invocation is not runnable while its lease holds")
		r, err = tx.DueWork(store.DueWorkQuery{TenantID: "acme", EntrypointRef: "ep_1", Now: t0.Add(31 * time.Second), Limit: 1})
		require.NoError(t, err)
		require.Len(t, r, 1, "limit respected")
		r, err = tx.ExpiredLeases(t0.Add(29*time.Second), 10)
		require.NoError(t, err)
		require.Empty(t, r)
		r, err = tx.ExpiredLeases(t0.Add(31*time.Second), 10)
		require.NoError(t, err)
		require.Equal(t, []store.Runnable{{TenantID: "acme", InvocationID: "inv_q0", EntrypointRef: "ep_1", Due: t0.Add(30 * time.Second), Expired: true}}, r,
			"an expired lease makes work claimable again")
		// Ending every live lease makes its work claimable at once.
		n, err := tx.ExpireLeases(t0.Add(2 * time.Second))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		r, err = tx.ExpiredLeases(t0.Add(2*time.Second), 10)
		require.NoError(t, err)
		require.Len(t, r, 1)
		require.Equal(t, t0.Add(2*time.Second), r[0].Due)
		_, err = tx.Scheduling("other", "inv_q0")
		require.ErrorIs(t, err, store.ErrNotFound)
		require.ErrorIs(t, tx.SetScheduling("other", "inv_q0", store.Scheduling{}), store.ErrNotFound)
		return nil
	})
}

// testDueQueues checks the walks fair dispatch is built on: tenants with due work in id order from a
// cursor, a tenant's entrypoint versions with due work, and running counts per version.
func testDueQueues(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		add := func(id, tenantID, ref string, at time.Duration, running bool) {
			_, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(id, tenantID, ref, t0)}, store.Scheduling{})
			require.NoError(t, err)
			if running {
				_, _, err := tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: []invocation.Event{{Type: invocation.EventStarted, IdempotencyKey: id + "-started", EngineAttempt: 1, LogicalAttempt: 1, At: t0}}})
				require.NoError(t, err)
				return
			}
			require.NoError(t, tx.SetScheduling(tenantID, id, store.Scheduling{AvailableAt: ptr(t0.Add(at))}))
		}
		add("d1", "t-b", "ep_x", 0, false)
		add("d2", "t-a", "ep_x", time.Minute, false) // t-a has only future work
		add("d3", "t-c", "ep_y", 0, false)
		add("d4", "t-c", "ep_x", 2*time.Second, false)
		add("d5", "t-c", "ep_x", time.Second, false)
		add("d6", "t-d", "ep_x", 0, false)
		add("r1", "t-c", "ep_x", 0, true)
		add("r2", "t-c", "ep_x", 0, true)
		add("r3", "t-c", "ep_y", 0, true)

		tenants := func(after string, at time.Duration, limit int) []string {
			got, err := tx.DueTenants(after, t0.Add(at), limit)
			require.NoError(t, err)
			return got
		}
		require.Equal(t, []string{"t-b", "t-c", "t-d"}, tenants("", 0, 10), "tenants with due work, in id order")
		require.Equal(t, []string{"t-a", "t-b", "t-c", "t-d"}, tenants("", time.Hour, 10))
		require.Equal(t, []string{"t-c", "t-d"}, tenants("t-b", 0, 10), "a cursor starts after a tenant")
		require.Equal(t, []string{"t-b", "t-c"}, tenants("", 0, 2), "limit")
		require.Empty(t, tenants("t-d", 0, 10))

		refs, err := tx.DueEntrypoints("t-c", t0)
		require.NoError(t, err)
		require.Equal(t, []string{"ep_y"}, refs, "ep_x's work is not due yet")
		refs, err = tx.DueEntrypoints("t-c", t0.Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, []string{"ep_x", "ep_y"}, refs)
		work, err := tx.DueWork(store.DueWorkQuery{TenantID: "t-c", EntrypointRef: "ep_x", Now: t0.Add(5 * time.Second), Limit: 10})
		require.NoError(t, err)
		require.Len(t, work, 2)
		require.Equal(t, []string{"d5", "d4"}, []string{work[0].InvocationID, work[1].InvocationID}, "oldest available_at first")

		running, err := tx.RunningByEntrypoint("t-c")
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"ep_x": 2, "ep_y": 1}, running)
		running, err = tx.RunningByEntrypoint("t-b")
		require.NoError(t, err)
		require.Empty(t, running)
		return nil
	})
	n, err := s.CountTenantRunning(context.Background(), "t-c")
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
}

func testIdempotencyKeys(t *testing.T, s store.Store) {
	rec := store.IdempotencyRecord{TenantID: "acme", Scope: "s", Key: "k1", RequestHash: "h1", InvocationID: "inv_1", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	update(t, s, func(tx store.Tx) error { return tx.PutIdempotencyKey(rec) })
	update(t, s, func(tx store.Tx) error {
		got, err := tx.IdempotencyKey(store.IdempotencyKeyQuery{TenantID: "acme", Scope: "s", Key: "k1", Now: t0.Add(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, rec, got)
		_, err = tx.IdempotencyKey(store.IdempotencyKeyQuery{TenantID: "other", Scope: "s", Key: "k1", Now: t0})
		require.ErrorIs(t, err, store.ErrNotFound, "keys are per tenant")
		_, err = tx.IdempotencyKey(store.IdempotencyKeyQuery{TenantID: "acme", Scope: "s", Key: "k1", Now: t0.Add(time.Hour)})
		require.ErrorIs(t, err, store.ErrNotFound, "an expired key is gone")
		next := rec
		next.RequestHash, next.InvocationID, next.CreatedAt, next.ExpiresAt = "h2", "inv_2", t0.Add(30*time.Minute), t0.Add(90*time.Minute)
		require.ErrorIs(t, tx.PutIdempotencyKey(next), store.ErrConflict, "a live key is never replaced (another request holds it)")
		got, err = tx.IdempotencyKey(store.IdempotencyKeyQuery{TenantID: "acme", Scope: "s", Key: "k1", Now: t0.Add(30 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, rec, got, "the refused put changed nothing")
		next.CreatedAt, next.ExpiresAt = t0.Add(2*time.Hour), t0.Add(3*time.Hour)
		require.NoError(t, tx.PutIdempotencyKey(next), "an expired key can be reused")
		got, err = tx.IdempotencyKey(store.IdempotencyKeyQuery{TenantID: "acme", Scope: "s", Key: "k1", Now: t0.Add(2 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, "inv_2", got.InvocationID)
		n, err := tx.PurgeExpired(t0.Add(4 * time.Hour))
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		return nil
	})
}

func testResponseCache(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		return tx.PutCachedInvocation(store.CacheEntry{Key: "key", TenantID: "acme", InvocationID: "inv_1", ExpiresAt: t0.Add(time.Minute)})
	})
	ten, id, err := s.CachedInvocation(ctx, "key", t0)
	require.NoError(t, err)
	require.Equal(t, []string{"acme", "inv_1"}, []string{ten, id})
	_, _, err = s.CachedInvocation(ctx, "key", t0.Add(time.Minute))
	require.ErrorIs(t, err, store.ErrNotFound, "TTL expiry")
	_, _, err = s.CachedInvocation(ctx, "other", t0)
	require.ErrorIs(t, err, store.ErrNotFound)
	update(t, s, func(tx store.Tx) error {
		return tx.PutCachedInvocation(store.CacheEntry{Key: "key", TenantID: "acme", InvocationID: "inv_2", ExpiresAt: t0.Add(time.Hour)})
	})
	_, id, err = s.CachedInvocation(ctx, "key", t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, "inv_2", id, "a fresh result repopulates the entry")
}

// testListInvocationsVisibility: a list shows a subject the invocations it started and those of
// entrypoints that are not user-owned; an invocation of a user-owned entrypoint only to its owner
// (and its starter); a viewer with All everything of the tenant (invocation.Record.VisibleTo).
func testListInvocationsVisibility(t *testing.T, s store.Store) {
	ctx := context.Background()
	mk := func(id, subject, owner string) invocation.Event {
		e := NewInvocationEvent(id, "acme", "ep_1", t0)
		var rec invocation.Record
		require.NoError(t, json.Unmarshal(e.Data, &rec))
		rec.SubjectID, rec.EntrypointOwner = subject, owner
		var err error
		e.Data, err = json.Marshal(rec)
		require.NoError(t, err)
		return e
	}
	update(t, s, func(tx store.Tx) error {
		for _, e := range []invocation.Event{
			mk("inv_tenant_ep", "alice", ""),       // a tenant-owned entrypoint: everyone
			mk("inv_alice_priv", "alice", "alice"), // alice's private entrypoint, run by alice
			mk("inv_bob_shared", "bob", "alice"),   // alice's shared entrypoint, run by bob
			mk("inv_carol_own", "carol", "carol"),
		} {
			if _, err := tx.StartInvocation([]invocation.Event{e}, store.Scheduling{}); err != nil {
				return err
			}
		}
		return nil
	})
	ids := func(v invocation.Viewer) []string {
		page, err := s.ListInvocations(ctx, v, store.ListQuery{Limit: 50, OrderBy: []odata.OrderItem{{Field: "created_at"}}})
		require.NoError(t, err)
		out := []string{}
		for _, r := range page.Items {
			require.True(t, r.VisibleTo(v), "the list and VisibleTo agree on %s", r.ID)
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	assert.Equal(t, []string{"inv_alice_priv", "inv_bob_shared", "inv_tenant_ep"}, ids(invocation.Viewer{TenantID: "acme", SubjectID: "alice"}))
	assert.Equal(t, []string{"inv_bob_shared", "inv_tenant_ep"}, ids(invocation.Viewer{TenantID: "acme", SubjectID: "bob"}))
	assert.Equal(t, []string{"inv_tenant_ep"}, ids(invocation.Viewer{TenantID: "acme", SubjectID: "dave"}))
	assert.Equal(t, []string{"inv_alice_priv", "inv_bob_shared", "inv_carol_own", "inv_tenant_ep"}, ids(invocation.Viewer{TenantID: "acme", SubjectID: "dave", All: true}))
	assert.Empty(t, ids(invocation.Viewer{TenantID: "other", SubjectID: "alice", All: true}))
}

func testListInvocations(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		for i := 0; i < 5; i++ {
			id := fmt.Sprintf("inv_%d", i)
			if _, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(id, "acme", "ep_1", t0.Add(time.Duration(i)*time.Second))}, store.Scheduling{}); err != nil {
				return err
			}
			if i%2 == 1 {
				if _, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id, Events: []invocation.Event{ev(id, invocation.EventStarted, "", "", t0)}}); err != nil {
					return err
				}
			}
		}
		_, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent("inv_other", "other", "ep_9", t0)}, store.Scheduling{})
		return err
	})
	ids := func(filter string) []string {
		q := store.ListQuery{Limit: 50}
		if filter != "" {
			var err error
			q.Filter, err = odata.ParseFilter(filter)
			require.NoError(t, err)
		}
		page, err := s.ListInvocations(ctx, invocation.Viewer{TenantID: "acme", All: true}, q)
		require.NoError(t, err, filter)
		out := []string{}
		for _, r := range page.Items {
			out = append(out, r.ID)
		}
		return out
	}
	require.Equal(t, []string{"inv_4", "inv_3", "inv_2", "inv_1", "inv_0"}, ids(""), "newest first by default; other tenants never")
	require.Equal(t, []string{"inv_3", "inv_1"}, ids("status eq 'running'"))
	require.Equal(t, []string{"inv_4", "inv_2", "inv_0"}, ids("status eq 'queued' and mode eq 'async' and correlation_id eq 'corr_1'"))
	require.Equal(t, []string{"inv_2", "inv_1"}, ids("created_at ge 2026-01-02T03:04:06.123456Z and created_at lt 2026-01-02T03:04:08.123456Z"))
	require.Equal(t, []string{"inv_4", "inv_3", "inv_2", "inv_1", "inv_0"}, ids("entrypoint_id eq '"+fnBase+"vendor.app.billing.tax.*'"))
	n, err := s.CountTenantInFlight(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
}

func testStartAndConditionalAppend(t *testing.T, s store.Store) {
	ctx := context.Background()
	lease := store.Scheduling{LeaseOwner: "node-a/1/1", LeaseExpiresAt: ptr(t0.Add(time.Minute))}
	var rec invocation.Record
	update(t, s, func(tx store.Tx) error {
		var err error
		rec, err = tx.StartInvocation([]invocation.Event{NewInvocationEvent("inv_s", "acme", "ep_1", t0),
			ev("inv_s", invocation.EventStarted, "", "", t0.Add(time.Millisecond))}, lease)
		return err
	})
	require.Equal(t, invocation.StatusRunning, rec.Status)
	require.Equal(t, int64(2), rec.LastSeq)
	update(t, s, func(tx store.Tx) error {
		sc, err := tx.Scheduling("acme", "inv_s")
		require.NoError(t, err)
		require.Equal(t, lease, sc, "created and leased in one write")
		_, _, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_s", Events: []invocation.Event{ev("inv_s", invocation.EventSucceeded, "", "", t0)}, AppendOptions: store.AppendOptions{RequireLease: "node-b/1/1"}})
		require.ErrorIs(t, err, store.ErrLeaseLost, "another runner's lease")
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		r, appended, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_s", Events: []invocation.Event{ev("inv_s", invocation.EventSucceeded, "", "", t0)}, AppendOptions: store.AppendOptions{RequireLease: "node-a/1/1", Schedule: &store.Scheduling{}}})
		require.NoError(t, err)
		require.Len(t, appended, 1)
		require.Equal(t, invocation.StatusSucceeded, r.Status)
		sc, err := tx.Scheduling("acme", "inv_s")
		require.NoError(t, err)
		require.Equal(t, store.Scheduling{}, sc, "the lease is released in the same write")
		// Replaying an already-logged event that no longer applies is a no-op, not an error.
		_, appended, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_s", Events: []invocation.Event{ev("inv_s", invocation.EventStarted, "", "", t0)}})
		require.NoError(t, err)
		require.Empty(t, appended)
		return nil
	})
	evs, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_s", AfterSeq: 0, Limit: 10})
	require.NoError(t, err)
	require.Len(t, evs, 3)

	// Expect: a current projection is used as is; a stale one falls back to the stored projection.
	update(t, s, func(tx store.Tx) error {
		cur, err := tx.Invocation("acme", "inv_s")
		require.NoError(t, err)
		stale := cur
		stale.LastSeq--
		stale.Status = invocation.StatusRunning
		r, appended, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_s", Events: []invocation.Event{ev("inv_s", invocation.EventLog, "after", `{}`, t0)}, AppendOptions: store.AppendOptions{Expect: &stale}})
		require.NoError(t, err)
		require.Len(t, appended, 1)
		require.Equal(t, invocation.StatusSucceeded, r.Status, "the stale expectation was not used")
		require.Equal(t, cur.LastSeq+1, r.LastSeq)
		r2, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_s", Events: []invocation.Event{ev("inv_s", invocation.EventLog, "again", `{}`, t0)}, AppendOptions: store.AppendOptions{Expect: &r}})
		require.NoError(t, err)
		require.Equal(t, r.LastSeq+1, r2.LastSeq)
		stored, err := tx.Invocation("acme", "inv_s")
		require.NoError(t, err)
		require.Equal(t, r2, stored)
		return nil
	})
	err = s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.StartInvocation([]invocation.Event{ev("inv_x", invocation.EventStarted, "", "", t0)}, store.Scheduling{})
		return err
	})
	require.Error(t, err, "the first event must be created")
}

// testInformationalAppend: appends that only advance the projection (timeline and journal events;
// a store may write just last_seq and updated_at for them) leave a stored record equal to the one
// Append returned, byte for byte in its JSON fields, and to the one rebuilt from the log; a status
// change after them is applied in full.
func testInformationalAppend(t *testing.T, s store.Store) {
	ctx := context.Background()
	first := NewInvocationEvent("inv_i", "acme", "ep_1", t0)
	var init invocation.Record
	require.NoError(t, json.Unmarshal(first.Data, &init))
	init.Params = json.RawMessage(`{"html":"<b>&amp;</b>","u":"é ☃ \u2028 \ud83d\ude00","big":123456789012345678901234567890,` +
		`"f":1.5e300,"neg":-0.0,"nested":{"a":[1,2,{"b":null}],"e":{}},"esc":"line\nbreak \"q\" \\ \/"}`)
	var err error
	first.Data, err = json.Marshal(init)
	require.NoError(t, err)
	var rec invocation.Record
	update(t, s, func(tx store.Tx) error {
		var err error
		rec, err = tx.StartInvocation([]invocation.Event{first, ev("inv_i", invocation.EventStarted, "", "", t0.Add(time.Millisecond))}, store.Scheduling{})
		return err
	})
	for i := 1; i <= 3; i++ {
		at := t0.Add(time.Duration(i)*time.Second + 789*time.Nanosecond) // finer than the store's timestamp columns
		update(t, s, func(tx store.Tx) error {
			var err error
			var appended []invocation.Event
			rec, appended, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_i", Events: []invocation.Event{
				ev("inv_i", invocation.EventStepStarted, fmt.Sprint("started-", i), `{"step":"s"}`, at),
				ev("inv_i", invocation.EventJournal, fmt.Sprint("journal-", i), `{"seq":1,"result":"<ok>"}`, at),
			}})
			require.Len(t, appended, 2)
			return err
		})
		require.Equal(t, int64(2+2*i), rec.LastSeq)
		require.Equal(t, at.Truncate(time.Microsecond), rec.UpdatedAt, "the store keeps times to the microsecond, projection and log alike")
		stored, err := s.Invocation(ctx, "acme", "inv_i")
		require.NoError(t, err)
		require.Equal(t, rec, stored)
		page, err := s.ListInvocations(ctx, invocation.Viewer{TenantID: "acme", All: true}, store.ListQuery{Limit: 10})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		require.Equal(t, rec, page.Items[0], "lists show the same projection")
	}
	// An event that is not a status change but still changes the projection is applied in full.
	update(t, s, func(tx store.Tx) error {
		var err error
		rec, _, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_i", Events: []invocation.Event{
			ev("inv_i", invocation.EventLog, "rotate", `{"message":"rotate"}`, t0.Add(time.Minute)),
			ev("inv_i", invocation.EventContinuedAsNew, "", `{"generation":1}`, t0.Add(time.Minute)),
		}})
		return err
	})
	require.Equal(t, 1, rec.Generation)
	stored, err := s.Invocation(ctx, "acme", "inv_i")
	require.NoError(t, err)
	require.Equal(t, rec, stored)
	update(t, s, func(tx store.Tx) error {
		var err error
		rec, _, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_i", Events: []invocation.Event{
			ev("inv_i", invocation.EventLog, "before", `{"message":"done"}`, t0.Add(time.Minute)),
			ev("inv_i", invocation.EventSucceeded, "", `{"result":{"ok":true}}`, t0.Add(time.Minute)),
		}})
		return err
	})
	require.Equal(t, invocation.StatusSucceeded, rec.Status)
	stored, err = s.Invocation(ctx, "acme", "inv_i")
	require.NoError(t, err)
	require.Equal(t, rec, stored)
	evs, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_i", AfterSeq: 0, Limit: 100})
	require.NoError(t, err)
	rebuilt, err := invocation.Rebuild(evs)
	require.NoError(t, err)
	rebuilt.Params, stored.Params = nil, nil // the created event's Data keeps the params as written
	rebuilt.UpdatedAt, stored.UpdatedAt = time.Time{}, time.Time{}
	require.Equal(t, stored, rebuilt)
	page, err := s.ListInvocations(ctx, invocation.Viewer{TenantID: "acme", All: true}, store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, rec.LastSeq, page.Items[0].LastSeq)
}

// testBatchedAppend: an Append of several events logs them together (multi-row inserts, past the
// rows of one statement) with consecutive seqs; one that holds replays (keys already in the log,
// or twice in the request) logs only the new events, numbered on from the log's last seq, as one
// event at a time would; StartInvocation does the same with its events. Each runs in a plain and
// an optimistic closure (pipelined on PostgreSQL).
func testBatchedAppend(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"plain", ctx}, {"optimistic", store.Optimistic(ctx)}} {
		id := "inv_batch_" + c.name
		step := func(i int) invocation.Event {
			return ev(id, invocation.EventLog, fmt.Sprint("log-", i), `{"message":"m"}`, t0.Add(time.Duration(i)*time.Millisecond))
		}
		run := func(fn func(tx store.Tx) error) { require.NoError(t, s.Update(c.ctx, fn)) }
		run(func(tx store.Tx) error {
			_, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(id, "acme", "ep_1", t0), step(0), step(1)}, store.Scheduling{})
			return err
		})
		var many []invocation.Event
		for i := 2; i < 152; i++ {
			many = append(many, step(i))
		}
		var appended []invocation.Event
		run(func(tx store.Tx) error {
			var err error
			_, appended, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id, Events: many})
			return err
		})
		require.Len(t, appended, 150, c.name)
		require.Equal(t, int64(4), appended[0].Seq)
		require.Equal(t, int64(153), appended[149].Seq)
		var rec invocation.Record
		run(func(tx store.Tx) error {
			var err error
			rec, appended, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id,
				Events: []invocation.Event{step(1), step(200), step(100), step(201), step(200)}})
			return err
		})
		require.Len(t, appended, 2, c.name+": the replays are no-ops")
		require.Equal(t, []int64{154, 155}, []int64{appended[0].Seq, appended[1].Seq})
		require.Equal(t, int64(155), rec.LastSeq)
		log, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: id, Limit: 1000})
		require.NoError(t, err)
		require.Len(t, log, 155)
		for i, e := range log {
			require.Equal(t, int64(i+1), e.Seq)
		}
		require.Equal(t, invocation.IdempotencyKey(id, "log-201", 1, invocation.EventLog, ""), log[154].IdempotencyKey)
		stored, err := s.Invocation(ctx, "acme", id)
		require.NoError(t, err)
		rebuilt, err := invocation.Rebuild(log)
		require.NoError(t, err)
		require.Equal(t, rebuilt, stored)
	}
}

package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/store/storetest"
	"github.com/larkrun/lark/internal/tenant"
)

var dt0 = time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC)

// openAt opens the store at path; the caller closes it.
func openAt(tb testing.TB, path string) *sqlstore.Store {
	tb.Helper()
	s, err := sqlstore.OpenSQLite(context.Background(), path, sqlstore.Options{})
	require.NoError(tb, err)
	return s
}

// rawDB opens the store's file behind its back, as an operator or a corrupting process would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func logEvent(invID, step string, at time.Time) invocation.Event {
	return invocation.Event{Type: invocation.EventLog, Data: json.RawMessage(`{"message":"` + step + `"}`),
		IdempotencyKey: invocation.IdempotencyKey(invID, step, 1, invocation.EventLog, ""), EngineAttempt: 1, LogicalAttempt: 1, At: at}
}

func statusEvent(invID string, typ invocation.EventType, data string, at time.Time) invocation.Event {
	e := invocation.Event{Type: typ, IdempotencyKey: invocation.IdempotencyKey(invID, "", 1, typ, ""), EngineAttempt: 1, LogicalAttempt: 1, At: at}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return e
}

// snapshot is everything durability checks read back.
type snapshot struct {
	Tenants     map[string]tenant.Policy
	Token       auth.Token
	Entrypoints map[string]entrypoint.Entrypoint
	Versions    []entrypoint.Entrypoint
	Invocations map[string]invocation.Record
	Events      map[string][]invocation.Event
	Audit       []audit.Event
}

var (
	durTenants     = []string{"acme", "beta"}
	durEntrypoints = []string{"ep_1", "ep_2", "ep_sys"}
	durInvocations = []string{"inv_1", "inv_2", "inv_3"}
)

func readSnapshot(t *testing.T, s store.Store) snapshot {
	t.Helper()
	ctx := context.Background()
	snap := snapshot{Tenants: map[string]tenant.Policy{}, Entrypoints: map[string]entrypoint.Entrypoint{},
		Invocations: map[string]invocation.Record{}, Events: map[string][]invocation.Event{}}
	for _, id := range durTenants {
		p, err := s.Tenant(ctx, id)
		require.NoError(t, err)
		snap.Tenants[id] = p
	}
	var err error
	snap.Token, err = s.TokenByHash(ctx, "hash_1")
	require.NoError(t, err)
	v := entrypoint.Viewer{TenantID: "acme", SubjectID: "u1"}
	for _, id := range durEntrypoints {
		e, err := s.Entrypoint(ctx, v, id)
		require.NoError(t, err)
		snap.Entrypoints[id] = e
	}
	snap.Versions, err = s.EntrypointVersions(ctx, v, snap.Entrypoints["ep_1"].Family)
	require.NoError(t, err)
	for _, id := range durInvocations {
		r, err := s.Invocation(ctx, "acme", id)
		require.NoError(t, err)
		snap.Invocations[id] = r
		evs, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: id, AfterSeq: 0, Limit: 1000})
		require.NoError(t, err)
		snap.Events[id] = evs
	}
	page, err := s.ListAudit(ctx, "acme", store.ListQuery{})
	require.NoError(t, err)
	snap.Audit = page.Items
	return snap
}

// (a) Everything written through a Store survives Close and reopening the same file, identical.
func TestReopenPreservesData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "data", "lark.db")
	s := openAt(t, path)

	acme := tenant.New("acme", dt0)
	acme.Enabled = true
	limit := int64(7)
	acme.Quotas.MaxDefinitions = &limit
	acme.Policies.AllowedOutboundDomains = []string{"*.example.com", "api.example.org"}
	beta := tenant.New("beta", dt0.Add(time.Second))
	token := auth.Token{ID: "tok_1", TenantID: "acme", SubjectID: "u1", Roles: []auth.Role{auth.RoleAdmin, auth.RoleViewer},
		Description: "ci", Hash: "hash_1", CreatedAt: dt0, CreatedBy: "operator"}
	ep1 := storetest.NewEntrypoint("ep_1", "acme", entrypoint.OwnerTenant, "acme", "calculate_tax", 1, 0, false, dt0)
	ep2 := storetest.NewEntrypoint("ep_2", "acme", entrypoint.OwnerTenant, "acme", "calculate_tax", 1, 1, true, dt0.Add(time.Minute))
	ep2.Status = entrypoint.StatusActive
	act := dt0.Add(2 * time.Minute)
	ep2.ActivatedAt = &act
	epSys := storetest.NewEntrypoint("ep_sys", entrypoint.PlatformTenant, entrypoint.OwnerSystem, "platform", "send_mail", 2, 0, false, dt0)
	epSys.Status = entrypoint.StatusActive

	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		for _, p := range []tenant.Policy{acme, beta} {
			if err := tx.PutTenant(p); err != nil {
				return err
			}
		}
		if err := tx.InsertToken(token); err != nil {
			return err
		}
		for _, e := range []entrypoint.Entrypoint{ep1, ep2, epSys} {
			if err := tx.InsertEntrypoint(e); err != nil {
				return fmt.Errorf("%s: %w", e.ID, err)
			}
		}
		return tx.InsertAudit(audit.Event{ID: "aud_1", TenantID: "acme", Type: audit.EntrypointCreated, ActorID: "u1",
			ResourceType: "entrypoint", ResourceID: "ep_1", CorrelationID: "corr_9", At: dt0, Details: json.RawMessage(`{"x":1}`)})
	}))

	// Invocations written by separate, concurrent updates so they go through batched commits.
	errs := make(chan error, len(durInvocations))
	for i, id := range durInvocations {
		go func() {
			errs <- s.Update(ctx, func(tx store.Tx) error {
				if _, err := tx.StartInvocation([]invocation.Event{storetest.NewInvocationEvent(id, "acme", "ep_1", dt0)}, store.Scheduling{}); err != nil {
					return err
				}
				evs := []invocation.Event{statusEvent(id, invocation.EventStarted, "", dt0.Add(time.Millisecond))}
				for j := range i + 1 {
					evs = append(evs, logEvent(id, fmt.Sprint("line", j), dt0.Add(time.Duration(j+2)*time.Millisecond)))
				}
				if id == "inv_3" {
					evs = append(evs, statusEvent(id, invocation.EventSucceeded, `{"result":{"ok":true}}`, dt0.Add(time.Second)))
				}
				_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id, Events: evs})
				return err
			})
		}()
	}
	for range durInvocations {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("timed out waiting for the invocation writes")
		}
	}
	before := readSnapshot(t, s)
	require.Equal(t, acme, before.Tenants["acme"])
	require.Equal(t, beta, before.Tenants["beta"])
	require.Equal(t, token, before.Token)
	require.Equal(t, ep1, before.Entrypoints["ep_1"])
	require.Equal(t, ep2, before.Entrypoints["ep_2"])
	require.Equal(t, epSys, before.Entrypoints["ep_sys"])
	require.Len(t, before.Versions, 2)
	require.Len(t, before.Events["inv_1"], 3)
	require.Len(t, before.Events["inv_2"], 4)
	require.Len(t, before.Events["inv_3"], 6)
	require.Equal(t, invocation.StatusSucceeded, before.Invocations["inv_3"].Status)
	require.Len(t, before.Audit, 1)
	require.NoError(t, s.Close())

	err := s.Update(ctx, func(tx store.Tx) error { return tx.PutTenant(tenant.New("late", dt0)) })
	require.ErrorIs(t, err, store.ErrClosed, "a closed store refuses writes")

	s2 := openAt(t, path)
	defer s2.Close()
	require.NoError(t, s2.Ping(ctx))
	after := readSnapshot(t, s2)
	require.Equal(t, before, after, "reopened store reads back exactly what was written")
	for id, evs := range after.Events {
		rebuilt, err := invocation.Rebuild(evs)
		require.NoError(t, err)
		require.Equal(t, after.Invocations[id], rebuilt, "%s: projection matches its log after reopen", id)
	}
	_, err = s2.Tenant(ctx, "late")
	require.ErrorIs(t, err, store.ErrNotFound)

	// Writing continues where the log left off.
	var appended []invocation.Event
	require.NoError(t, s2.Update(ctx, func(tx store.Tx) error {
		var err error
		_, appended, err = tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_2", Events: []invocation.Event{logEvent("inv_2", "after-reopen", dt0.Add(time.Hour))}})
		return err
	}))
	require.Len(t, appended, 1)
	require.Equal(t, int64(5), appended[0].Seq)
	evs, err := s2.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_2", AfterSeq: 0, Limit: 100})
	require.NoError(t, err)
	require.Len(t, evs, 5)
}

// (b) A hole in the stored event log is reported as a *store.GapError, never skipped over.
func TestEventsReportGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lark.db")
	s := openAt(t, path)
	defer s.Close()
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.StartInvocation([]invocation.Event{storetest.NewInvocationEvent("inv_g", "acme", "ep_1", dt0)}, store.Scheduling{}); err != nil {
			return err
		}
		_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_g", Events: []invocation.Event{
			statusEvent("inv_g", invocation.EventStarted, "", dt0.Add(time.Millisecond)),
			logEvent("inv_g", "l1", dt0.Add(2*time.Millisecond)),
		}})
		return err
	}))
	evs, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_g", AfterSeq: 0, Limit: 100})
	require.NoError(t, err)
	require.Len(t, evs, 3)

	res, err := rawDB(t, path).Exec("DELETE FROM invocation_events WHERE invocation_id = ? AND seq = 2", "inv_g")
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	for _, after := range []int64{0, 1} {
		evs, err = s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_g", AfterSeq: after, Limit: 100})
		require.Nil(t, evs, "after %d", after)
		var gap *store.GapError
		require.True(t, errors.As(err, &gap), "after %d: want *store.GapError, got %v", after, err)
		require.Equal(t, "inv_g", gap.InvocationID)
		require.Equal(t, int64(2), gap.Missing)
		require.Contains(t, err.Error(), "gap at seq 2")
	}
	// Reading past the hole is allowed.
	evs, err = s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_g", AfterSeq: 2, Limit: 100})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, int64(3), evs[0].Seq)
}

// (c) Opening an already-migrated database applies nothing, keeps the data and pings clean —
// sequentially and with two stores open on the same file at once.
func TestMigrationsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lark.db")
	s := openAt(t, path)
	require.NoError(t, s.Ping(ctx))
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutTenant(tenant.New("acme", dt0)) }))
	require.NoError(t, s.Close())

	raw := rawDB(t, path)
	versions := func() []int64 {
		rows, err := raw.Query("SELECT version_id FROM goose_db_version WHERE is_applied ORDER BY id")
		require.NoError(t, err)
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var v int64
			require.NoError(t, rows.Scan(&v))
			out = append(out, v)
		}
		require.NoError(t, rows.Err())
		return out
	}
	migrated := versions()
	require.NotEmpty(t, migrated)

	for i := range 2 {
		s := openAt(t, path)
		require.NoError(t, s.Ping(ctx), "reopen %d", i)
		p, err := s.Tenant(ctx, "acme")
		require.NoError(t, err, "reopen %d", i)
		require.Equal(t, tenant.New("acme", dt0), p)
		require.NoError(t, s.Close())
		require.Equal(t, migrated, versions(), "reopen %d records no new migration", i)
	}

	// A second process on an open database is refused before it migrates anything.
	a := openAt(t, path)
	defer a.Close()
	_, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.ErrorContains(t, err, "another lark process is using this database")
	require.NoError(t, a.Ping(ctx))
	require.Equal(t, migrated, versions())
}

func TestEventsReportsLostTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tail.db")
	s, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.StartInvocation([]invocation.Event{storetest.NewInvocationEvent("inv_t", "acme", "ep_1", time.Now().UTC())}, store.Scheduling{}); err != nil {
			return err
		}
		_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_t", Events: []invocation.Event{{Type: invocation.EventStarted, IdempotencyKey: "s", At: time.Now().UTC()}}})
		return err
	}))
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer raw.Close()
	_, err = raw.Exec("DELETE FROM invocation_events WHERE invocation_id = 'inv_t' AND seq = 2")
	require.NoError(t, err)
	_, err = s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_t", AfterSeq: 0, Limit: 100})
	var gap *store.GapError
	require.ErrorAs(t, err, &gap, "the last event is gone: the log ends before the projection's last_seq")
	require.Equal(t, int64(2), gap.Missing)
}

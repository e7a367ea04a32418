package projection_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the corrupting SQL on PostgreSQL
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/bench"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/projection"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/store/storetest"
	"github.com/larkrun/lark/internal/tenant"
)

const (
	operator = "admin-secret"
	fnPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~"
	wfPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~"
	flakyID  = fnPrefix + "vendor.app.prj.flaky.v1~"
	rbID     = fnPrefix + "vendor.app.prj.rollback.v1~"
	orderID  = wfPrefix + "vendor.app.prj.order.v1~"
	brokenID = wfPrefix + "vendor.app.prj.broken.v1~"
	sleepID  = wfPrefix + "vendor.app.prj.sleeper.v1~"
	retryID  = wfPrefix + "vendor.app.prj.retrying.v1~"
	waiterID = wfPrefix + "vendor.app.prj.waiter.v1~"
	// approved is the event type the waiter workflow waits for.
	approved = "gts.x.core.events.event.v1~vendor.app.prj.approved.v1~"
)

// definition is a registration body: base with the members of mods replaced (dotted paths).
func definition(t *testing.T, base []byte, mods map[string]any) []byte {
	t.Helper()
	var body map[string]any
	require.NoError(t, json.Unmarshal(base, &body))
	for path, v := range mods {
		m := body
		parts := strings.Split(path, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = v
	}
	b, err := json.Marshal(body)
	require.NoError(t, err)
	return b
}

func function(t *testing.T, id, source string, mods map[string]any) []byte {
	t.Helper()
	all := map[string]any{"implementation.code.source": source, "schema.params": map[string]any{"type": "object"}}
	for k, v := range mods {
		all[k] = v
	}
	return definition(t, bench.UnlimitedTaxDefinition(id), all)
}

// fixture is a server with finished invocations of every kind: a function that succeeded, one
// retried then dead-lettered, workflows with steps that succeeded, failed and were compensated by
// an on_failure handler, failed in a step retried by the entrypoint's policy and
// were dead-lettered, one canceled while it slept, and one that consumed a published event.
type fixture struct {
	api   *bench.API
	token string
	ids   map[string]string // name → invocation id
}

func (f *fixture) call(t *testing.T, method, path string, body any, want int) []byte {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		raw, err = json.Marshal(body)
		require.NoError(t, err)
	}
	_, b, err := f.api.Call(context.Background(), method, path, f.token, raw, want)
	require.NoError(t, err)
	return b
}

func (f *fixture) register(t *testing.T, def []byte, id string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, f.api.Register(ctx, f.token, def))
	require.NoError(t, f.api.Activate(ctx, f.token, id))
}

func (f *fixture) start(t *testing.T, name, entrypoint string, params any) {
	t.Helper()
	b := f.call(t, http.MethodPost, "/invocations", map[string]any{"entrypoint_id": entrypoint, "mode": "async", "params": params}, http.StatusAccepted)
	var r struct {
		Record struct {
			ID string `json:"invocation_id"`
		} `json:"record"`
	}
	require.NoError(t, json.Unmarshal(b, &r))
	require.NotEmpty(t, r.Record.ID, "%s", b)
	f.ids[name] = r.Record.ID
}

// wait polls the invocation until its status is one of want, for at most a minute.
func (f *fixture) wait(t *testing.T, name string, want ...string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(f.call(t, http.MethodGet, "/invocations/"+f.ids[name], nil, http.StatusOK), &rec))
		if slices.Contains(want, rec["status"].(string)) {
			return rec
		}
		require.True(t, time.Now().Before(deadline), "%s still %v, want %v", name, rec["status"], want)
		time.Sleep(10 * time.Millisecond)
	}
}

// newFixture starts the server and its dispatcher and runs the invocations; stop (also run at the
// end of the test) stops the dispatcher, then the server, once.
func newFixture(t *testing.T, cfg server.Config) (stop func(), f *fixture) {
	t.Helper()
	ctx := context.Background()
	cfg.AdminToken = operator
	srv, err := server.New(ctx, cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.RunDispatcher(dctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			ts.Close()
			require.NoError(t, srv.Close())
		})
	}
	t.Cleanup(stop)
	f = &fixture{api: &bench.API{URL: ts.URL, Client: ts.Client()}, ids: map[string]string{}}
	f.token, err = f.api.Provision(ctx, operator)
	require.NoError(t, err)

	f.register(t, bench.UnlimitedTaxDefinition(bench.TaxID), bench.TaxID)
	f.register(t, function(t, flakyID, "def main(ctx, input):\n  fail(\"upstream down\")\n",
		map[string]any{"traits.retry": map[string]any{"max_attempts": 2, "initial_delay_ms": 1, "max_delay_ms": 1, "backoff_multiplier": 1.0}}), flakyID)
	f.register(t, function(t, rbID, "def main(ctx, input):\n  return {\"rolled_back\": True}\n",
		map[string]any{"schema.params": map[string]any{"$ref": "gts://gts.x.core.serverless.compensation_context.v1~"}}), rbID)
	steps := "def ok(ctx, input):\n  return {\"id\": input}\n\ndef broken(ctx, input):\n  fail(\"label printer jammed\")\n\n"
	f.register(t, bench.WorkflowDefinition(orderID, steps+"def main(ctx, input):\n  a = r_run_step_v1(\"reserve\", ok, \"R1\")\n  b = r_run_step_v1(\"charge\", ok, \"C1\")\n  return {\"reserved\": a.value, \"charged\": b.value}\n"), orderID)
	f.register(t, definition(t, bench.WorkflowDefinition(brokenID, steps+"def main(ctx, input):\n  r_run_step_v1(\"reserve\", ok, \"R1\")\n  r_run_step_v1(\"label\", broken, \"L1\")\n  return {}\n"),
		map[string]any{"traits.workflow.compensation": map[string]any{"on_failure": rbID, "on_cancel": nil}}), brokenID)
	f.register(t, definition(t, bench.WorkflowDefinition(retryID, steps+"def main(ctx, input):\n  r_run_step_v1(\"reserve\", ok, \"R1\")\n  r_run_step_v1(\"label\", broken, \"L1\")\n  return {}\n"),
		map[string]any{"traits.retry": map[string]any{"max_attempts": 3, "initial_delay_ms": 1, "max_delay_ms": 1, "backoff_multiplier": 1.0}}), retryID)
	f.register(t, bench.WorkflowDefinition(sleepID, "def main(ctx, input):\n  r_sleep(3600000)\n  return {}\n"), sleepID)
	f.register(t, bench.WorkflowDefinition(waiterID, fmt.Sprintf("def main(ctx, input):\n  e = r_await(r_wait_event_v1(%q, timeout_ms=3600000))\n  return {\"event\": e.value[\"event_id\"]}\n", approved)), waiterID)

	require.NoError(t, f.api.InvokeSync(ctx, f.token, bench.TaxSyncRequest))
	f.start(t, "tax", bench.TaxID, map[string]any{"invoice_id": "i2", "amount": 7})
	f.start(t, "flaky", flakyID, map[string]any{})
	f.start(t, "order", orderID, map[string]any{})
	f.start(t, "broken", brokenID, map[string]any{})
	f.start(t, "sleeper", sleepID, map[string]any{})
	f.start(t, "retrying", retryID, map[string]any{})
	f.wait(t, "tax", "succeeded")
	flaky := f.wait(t, "flaky", "dead_lettered")
	require.EqualValues(t, 2, flaky["attempt"], "retried once: %v", flaky)
	f.wait(t, "order", "succeeded")
	f.wait(t, "broken", "compensated")
	f.wait(t, "retrying", "dead_lettered")
	timeline := f.call(t, http.MethodGet, "/invocations/"+f.ids["retrying"]+"/timeline?limit=200", nil, http.StatusOK)
	require.Contains(t, string(timeline), `"step_retried"`, "its failing step was retried")
	f.wait(t, "sleeper", "suspended")
	f.call(t, http.MethodPost, "/invocations/"+f.ids["sleeper"]+":control", map[string]any{"action": "cancel"}, http.StatusOK)
	f.wait(t, "sleeper", "canceled")
	f.start(t, "waiter", waiterID, map[string]any{})
	f.wait(t, "waiter", "suspended")
	f.call(t, http.MethodPost, "/events", map[string]any{"event_type_id": approved, "payload": map[string]any{}}, http.StatusAccepted)
	f.wait(t, "waiter", "succeeded")
	return stop, f
}

func verify(t *testing.T, st store.Store, o projection.Options) []projection.Diff {
	t.Helper()
	var diffs []projection.Diff
	_, err := projection.Verify(context.Background(), st, o, func(d projection.Diff) error { diffs = append(diffs, d); return nil })
	require.NoError(t, err)
	return diffs
}

// keys are diffs as "invocation <id> <field>" and "usage <entrypoint> <field>", sorted.
func keys(diffs []projection.Diff) []string {
	var out []string
	for _, d := range diffs {
		if d.Kind == projection.KindUsage {
			out = append(out, "usage "+d.EntrypointID+" "+d.Field)
		} else {
			out = append(out, "invocation "+d.InvocationID+" "+d.Field)
		}
	}
	slices.Sort(out)
	return out
}

// usageFigures are the usage_hourly columns that are non-zero for an entrypoint, summed over hours
// and shards.
func usageFigures(t *testing.T, db *sql.DB, q func(string) string, ep string) []string {
	t.Helper()
	cols := []string{"invocations", "succeeded", "failed", "canceled", "dead_lettered", "compensated", "executions",
		"duration_ms", "billed_duration_ms", "cpu_time_ms", "memory_mb_ms", "egress_bytes", "cost"}
	var out []string
	for _, c := range cols {
		var v float64
		require.NoError(t, db.QueryRow(q("SELECT coalesce(sum("+c+"), 0) FROM usage_hourly WHERE entrypoint_id = ?"), ep).Scan(&v))
		if v != 0 {
			out = append(out, "usage "+ep+" "+c)
		}
	}
	return out
}

// corrupt damages the projections behind the server's back, as a bug or a hand edit would, and
// returns the differences verify must report, exactly.
func corrupt(t *testing.T, db *sql.DB, q func(string) string, f *fixture) []string {
	t.Helper()
	exec := func(query string, args ...any) {
		t.Helper()
		res, err := db.Exec(q(query), args...)
		require.NoError(t, err)
		n, err := res.RowsAffected()
		require.NoError(t, err)
		require.NotZero(t, n, "%s %v changed nothing", query, args)
	}
	// A wrong status column (the record JSON is right).
	exec("UPDATE invocations SET status = 'running' WHERE id = ?", f.ids["tax"])
	// A wrong result inside the record.
	exec(`UPDATE invocations SET record = replace(record, '"charged":{"id":"C1"}', '"charged":{"id":"FORGED"}') WHERE id = ?`, f.ids["order"])
	// A wrong status in both the column and the record.
	exec(`UPDATE invocations SET status = 'failed', record = replace(record, '"status":"compensated"', '"status":"failed"') WHERE id = ?`, f.ids["broken"])
	// A deleted usage row (every hour and shard of the flaky function).
	want := usageFigures(t, db, q, flakyID)
	require.Contains(t, want, "usage "+flakyID+" dead_lettered")
	exec("DELETE FROM usage_hourly WHERE entrypoint_id = ?", flakyID)
	// A wrong aggregate.
	exec("UPDATE usage_hourly SET succeeded = succeeded + 5 WHERE entrypoint_id = ? AND succeeded > 0", bench.TaxID)
	// A lost record of the event the waiter consumed (a later wait of it could take the event again).
	exec("DELETE FROM event_consumptions WHERE invocation_id = ?", f.ids["waiter"])
	want = append(want,
		"invocation "+f.ids["waiter"]+" "+projection.FieldConsumptions,
		"invocation "+f.ids["tax"]+" column status",
		"invocation "+f.ids["order"]+" result",
		"invocation "+f.ids["broken"]+" status", "invocation "+f.ids["broken"]+" column status",
		"usage "+bench.TaxID+" succeeded")
	slices.Sort(want)
	return want
}

// TestVerifyRebuildSQLite: on a SQLite data directory with real invocations, a clean database
// verifies clean; damaged projections are reported exactly; rebuild (offline: the server is
// stopped, and a running server's lock keeps the command out) repairs them and verify is then
// clean.
func TestVerifyRebuildSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stop, f := newFixture(t, server.Config{DataDir: dir})
	ctx := context.Background()
	path := filepath.Join(dir, "lark.db")

	_, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.ErrorContains(t, err, "another lark process", "the server holds the database: an offline rebuild cannot start")
	stop()

	st, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.NoError(t, err)
	o := projection.Options{PageSize: 2}
	require.Empty(t, verify(t, st, o), "a clean database verifies clean")
	require.NoError(t, st.Close())

	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	want := corrupt(t, db, func(s string) string { return s }, f)
	require.NoError(t, db.Close())

	st, err = sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	require.Equal(t, want, keys(verify(t, st, o)))
	require.Empty(t, verify(t, st, projection.Options{TenantID: "nobody"}), "another tenant's projections are not looked at")

	sum, err := projection.Rebuild(ctx, st, o, nil)
	require.NoError(t, err)
	require.EqualValues(t, 4, sum.RebuiltInvocations)
	require.NotZero(t, sum.RebuiltUsageHours)
	require.Empty(t, verify(t, st, o), "rebuilt projections verify clean")
	rec, err := st.Invocation(ctx, bench.BenchTenant, f.ids["order"])
	require.NoError(t, err)
	require.JSONEq(t, `{"reserved":{"id":"R1"},"charged":{"id":"C1"}}`, string(rec.Result))
	list, err := st.CountTenantRunning(ctx, bench.BenchTenant)
	require.NoError(t, err)
	require.Zero(t, list, "the status column is right again: nothing runs")
	consumed, err := st.EventConsumptions(ctx, bench.BenchTenant, f.ids["waiter"])
	require.NoError(t, err)
	require.Len(t, consumed, 1, "the waiter's consumed event is recorded again")
}

// TestVerifyRebuildPostgres: the same on PostgreSQL, online: the server keeps running (and serving)
// while verify and rebuild run from another store handle on the same schema.
func TestVerifyRebuildPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	_, f := newFixture(t, server.Config{DataDir: t.TempDir(), Store: url})
	ctx := context.Background()
	st, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 4})
	require.NoError(t, err)
	defer st.Close()
	o := projection.Options{PageSize: 2}
	require.Empty(t, verify(t, st, o), "a clean database verifies clean")

	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer db.Close()
	q := func(s string) string {
		var b strings.Builder
		n := 0
		for _, r := range s {
			if r == '?' {
				n++
				fmt.Fprintf(&b, "$%d", n)
				continue
			}
			b.WriteRune(r)
		}
		return b.String()
	}
	want := corrupt(t, db, q, f)
	require.Equal(t, want, keys(verify(t, st, o)))

	// A second rebuild cannot start while one holds the lock.
	release, err := st.LockProjections(ctx)
	require.NoError(t, err)
	_, err = projection.Rebuild(ctx, st, o, nil)
	require.ErrorIs(t, err, store.ErrConflict)
	require.NoError(t, release())

	sum, err := projection.Rebuild(ctx, st, o, nil)
	require.NoError(t, err)
	require.EqualValues(t, 4, sum.RebuiltInvocations)
	require.Empty(t, verify(t, st, o), "rebuilt projections verify clean")

	// The server still works and its new writes land on the rebuilt projections.
	require.NoError(t, f.api.InvokeSync(ctx, f.token, bench.TaxSyncRequest))
	require.Empty(t, verify(t, st, o))
}

// TestRebuildUnderLoadPostgres: a usage rebuild on PostgreSQL while the server keeps appending to
// the same hour and entrypoint: the aggregates are locked while the hour is recomputed, so the
// appends that commit before, during and after the rebuild are each counted once.
func TestRebuildUnderLoadPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	_, f := newFixture(t, server.Config{DataDir: t.TempDir(), Store: url})
	ctx := context.Background()
	st, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 4})
	require.NoError(t, err)
	defer st.Close()
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer db.Close()
	stop := make(chan struct{})
	load := make(chan error, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				if n == 0 {
					load <- fmt.Errorf("no invocation ran during the rebuild")
					return
				}
				load <- nil
				return
			default:
			}
			if err := f.api.InvokeSync(ctx, f.token, bench.TaxSyncRequest); err != nil {
				load <- err
				return
			}
			n++
		}
	}()
	for range 5 {
		_, err = db.Exec("UPDATE usage_hourly SET invocations = invocations + 100 WHERE entrypoint_id = $1", bench.TaxID)
		require.NoError(t, err)
		sum, err := projection.Rebuild(ctx, st, projection.Options{}, nil)
		require.NoError(t, err)
		require.NotZero(t, sum.RebuiltUsageHours)
	}
	close(stop)
	require.NoError(t, <-load)
	require.Empty(t, verify(t, st, projection.Options{}), "every append counted once")
}

// TestUnreplayableLog: a log with a hole is reported (field log) and left alone by rebuild, which
// fails; the tenant's usage is not rewritten from a partial replay.
func TestUnreplayableLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "lark.db")
	st, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.NoError(t, err)
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		for _, id := range []string{"inv_1", "inv_2"} {
			created := storetest.NewInvocationEvent(id, "acme", "ep_1", at)
			started := invocation.Event{Type: invocation.EventStarted, At: at, EngineAttempt: 1, LogicalAttempt: 1,
				IdempotencyKey: invocation.IdempotencyKey(id, "", 1, invocation.EventStarted, "")}
			log := invocation.Event{Type: invocation.EventLog, At: at, EngineAttempt: 1, LogicalAttempt: 1, IdempotencyKey: id + "-log"}
			if _, err := tx.StartInvocation([]invocation.Event{created, started, log}, store.Scheduling{}); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, st.Close())
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	_, err = db.Exec("DELETE FROM invocation_events WHERE invocation_id = 'inv_1' AND seq = 2")
	require.NoError(t, err)
	_, err = db.Exec("DELETE FROM invocation_events WHERE invocation_id = 'inv_2' AND seq = 3") // a lost tail
	require.NoError(t, err)
	_, err = db.Exec("UPDATE usage_hourly SET invocations = 5")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	st, err = sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	o := projection.Options{Now: at.Add(time.Hour)}
	diffs := verify(t, st, o)
	require.Equal(t, []string{"invocation inv_1 log", "invocation inv_2 log",
		"usage gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.tax.v1~ invocations"}, keys(diffs))
	require.Contains(t, diffs[0].Recomputed, "gap at seq 2")
	require.Contains(t, diffs[1].Recomputed, "the log ends at seq 2 but the projection has reached seq 3")

	sum, err := projection.Rebuild(ctx, st, o, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, sum.Unreplayable)
	require.Equal(t, []string{"acme"}, sum.SkippedUsageTenants)
	require.Zero(t, sum.RebuiltInvocations)
	require.Zero(t, sum.RebuiltUsageHours)
	require.Len(t, verify(t, st, o), 3, "nothing was rewritten")
}

// TestUsageWindow: the usage of hours the retention job may have purged invocations from (older
// than the tenant's execution_history_days) is neither checked nor rewritten; --since narrows the
// window further; a tenant with a policy and no invocation left still has its aggregates checked.
func TestUsageWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "lark.db")
	st, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.NoError(t, err)
	now := at.Add(72 * time.Hour)
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		p := tenant.New("acme", at)
		p.Retention.ExecutionHistoryDays = 2
		if err := tx.PutTenant(p); err != nil {
			return err
		}
		if err := tx.PutTenant(tenant.New("idle", at)); err != nil {
			return err
		}
		for i, created := range []time.Time{at, now.Add(-time.Hour)} { // three days old; one hour old
			if _, err := tx.StartInvocation([]invocation.Event{storetest.NewInvocationEvent(fmt.Sprintf("inv_%d", i), "acme", "ep_1", created)}, store.Scheduling{}); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, st.Close())
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	_, err = db.Exec("UPDATE usage_hourly SET invocations = 9")
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO usage_hourly (tenant_id, hour, entrypoint_id, invocations) VALUES ('idle', ?, 'ep', 4)", now.Unix()/3600)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	st, err = sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	diffs := verify(t, st, projection.Options{Now: now})
	require.Len(t, diffs, 2, "%v", diffs)
	require.Equal(t, "acme", diffs[0].TenantID)
	require.Equal(t, now.Add(-time.Hour).Truncate(time.Hour), diffs[0].Hour, "only the hour inside the retention window")
	require.Equal(t, "idle", diffs[1].TenantID)
	require.Empty(t, verify(t, st, projection.Options{Now: now, TenantID: "acme", Since: now}), "--since after the damage")

	sum, err := projection.Rebuild(ctx, st, projection.Options{Now: now}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, sum.RebuiltUsageHours)
	require.Empty(t, verify(t, st, projection.Options{Now: now}))
	rows, err := st.UsageHistory(ctx, "acme", store.UsageQuery{From: at.Truncate(time.Hour), To: at.Truncate(time.Hour).Add(time.Hour), Width: time.Hour})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.EqualValues(t, 9, rows[0].Usage.Invocations, "the hour before the window is left as it was")
}

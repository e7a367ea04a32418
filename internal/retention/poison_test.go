package retention_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/retention"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// failures counts the job's reported failures by job name.
type failures struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *failures) add(job string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[job]++
}

func (f *failures) get(job string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[job]
}

// poisoned stores, bypassing every API check, a finished invocation of tenantID whose params are
// nested 1,100 levels deep: more than SQLite's JSON functions parse (about 1,000).
func (f *fixture) poisoned(tenantID, id string, at time.Time) {
	f.t.Helper()
	deep := `{"x":` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}`
	rec := invocation.Record{ID: id, TenantID: tenantID, EntrypointRef: "ep_1", EntrypointID: "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.tax.v1~",
		Mode: invocation.ModeAsync, Params: json.RawMessage(deep), CreatedAt: at}
	data, err := json.Marshal(rec)
	require.NoError(f.t, err)
	f.update(func(tx store.Tx) error {
		if _, err := tx.StartInvocation([]invocation.Event{invocation.Event{Type: invocation.EventCreated, Data: data, IdempotencyKey: id + "-created",
			LogicalAttempt: 1, At: at}}, store.Scheduling{}); err != nil {
			return err
		}
		_, _, err := tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: []invocation.Event{f.event(id, invocation.EventStarted, "", at)}})
		return err
	})
	f.log(tenantID, id, 2, 10, at) // appends that only advance the record patch it in place, where they can
	f.finish(tenantID, id, at)
}

// TestPoisonedRowDoesNotStopThePass: one tenant's stored record that SQLite's JSON functions cannot
// parse neither fails the pass nor stops the tenants after it: their expired history, events and
// audit events are still purged, and the poisoned tenant's own history is still measured and
// purged by age.
func TestPoisonedRowDoesNotStopThePass(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "lark.db"))
	defer s.Close()
	f := &fixture{t: t, s: s}
	clk := clock.NewFake(t0)
	logs := &logBuffer{}
	var fails failures
	job := retention.New(s, retention.Options{Clock: clk, Logger: slog.New(slog.NewJSONHandler(logs, nil)), Failed: fails.add})

	for _, ten := range []string{"aaa", "zzz"} { // the poisoned tenant comes first
		f.tenant(ten, func(p *tenant.Policy) { p.Retention = tenant.Retention{ExecutionHistoryDays: 7, AuditLogDays: 7} })
		f.finished(ten, "inv_old_"+ten, t0, 3, 100)
		f.finished(ten, "inv_recent_"+ten, t0.Add(6*day), 3, 100)
		f.published(ten, "evt_old_"+ten, t0)
		f.audit(ten, "aud_old_"+ten, t0)
	}
	f.poisoned("aaa", "inv_deep_aaa", t0)

	clk.Set(t0.Add(10 * day))
	res, err := job.RunOnce(context.Background())
	require.NoError(t, err)
	for _, ten := range []string{"aaa", "zzz"} {
		require.False(t, f.exists(ten, "inv_old_"+ten), "%s: expired history is purged", ten)
		require.True(t, f.exists(ten, "inv_recent_"+ten), "%s: newer history is kept", ten)
		require.Empty(t, f.eventIDs(ten), "%s: expired events are purged", ten)
		require.Empty(t, f.auditIDs(ten), "%s: expired audit events are purged", ten)
	}
	require.False(t, f.exists("aaa", "inv_deep_aaa"), "the poisoned row itself is measured and purged by age")
	require.EqualValues(t, 2, res["aaa"].Invocations)
	require.EqualValues(t, 1, res["zzz"].Invocations)
	require.Zero(t, fails.get("retention"))
}

// measureFailsStore fails measuring the history of one tenant.
type measureFailsStore struct {
	store.Store
	tenantID string
}

func (s measureFailsStore) MeasureHistory(ctx context.Context, tenantID string, limit int) ([]store.HistorySize, error) {
	if tenantID == s.tenantID {
		return nil, errSimulated
	}
	return s.Store.MeasureHistory(ctx, tenantID, limit)
}

type simulatedError struct{}

func (simulatedError) Error() string { return "simulated: malformed JSON" }

var errSimulated = simulatedError{}

// TestFailingTenantIsIsolated: a tenant whose pass fails is logged with its id and counted, and the
// pass goes on with its other steps and with the next tenants.
func TestFailingTenantIsIsolated(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "lark.db"))
	defer s.Close()
	f := &fixture{t: t, s: s}
	clk := clock.NewFake(t0)
	logs := &logBuffer{}
	var fails failures
	job := retention.New(measureFailsStore{Store: s, tenantID: "aaa"}, retention.Options{Clock: clk,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Failed: fails.add})
	for _, ten := range []string{"aaa", "zzz"} {
		f.tenant(ten, func(p *tenant.Policy) { p.Retention = tenant.Retention{ExecutionHistoryDays: 7, AuditLogDays: 30} })
		f.finished(ten, "inv_old_"+ten, t0, 3, 100)
		f.published(ten, "evt_old_"+ten, t0)
		f.audit(ten, "aud_old_"+ten, t0)
	}
	clk.Set(t0.Add(40 * day))
	_, err := job.RunOnce(context.Background())
	require.ErrorIs(t, err, errSimulated, "the pass reports what failed")
	require.Equal(t, 1, fails.get("retention"))
	require.Contains(t, logs.String(), `"msg":"retention: tenant failed","tenant_id":"aaa"`)
	require.Contains(t, logs.String(), "simulated: malformed JSON")
	require.False(t, f.exists("zzz", "inv_old_zzz"), "the next tenant is still purged")
	require.Empty(t, f.eventIDs("aaa"), "the failing tenant's other steps still run")
	require.Empty(t, f.auditIDs("aaa"))
}

// TestMalformedPolicyIsIsolated: a tenant whose stored policy no longer decodes (written around the
// API) is logged with its id and counted, and the pass still purges every other tenant.
func TestMalformedPolicyIsIsolated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lark.db")
	s := open(t, path)
	defer s.Close()
	f := &fixture{t: t, s: s}
	clk := clock.NewFake(t0)
	logs := &logBuffer{}
	var fails failures
	job := retention.New(s, retention.Options{Clock: clk, Logger: slog.New(slog.NewJSONHandler(logs, nil)), Failed: fails.add})
	for _, ten := range []string{"aaa", "zzz"} {
		f.tenant(ten, func(p *tenant.Policy) { p.Retention = tenant.Retention{ExecutionHistoryDays: 7, AuditLogDays: 7} })
		f.finished(ten, "inv_old_"+ten, t0, 3, 100)
		f.audit(ten, "aud_old_"+ten, t0)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`UPDATE tenants SET policy = '{"tenant_id": "aaa", "retention": ' WHERE tenant_id = 'aaa'`)
	require.NoError(t, err)

	clk.Set(t0.Add(10 * day))
	res, err := job.RunOnce(context.Background())
	require.Error(t, err, "the pass reports the policy it could not read")
	require.Contains(t, err.Error(), "tenant aaa: policy")
	require.Equal(t, 1, fails.get("retention"))
	require.Contains(t, logs.String(), `"msg":"retention: tenant failed","tenant_id":"aaa","step":"policy"`)
	require.False(t, f.exists("zzz", "inv_old_zzz"), "the other tenant's expired history is purged")
	require.Empty(t, f.auditIDs("zzz"))
	require.EqualValues(t, 1, res["zzz"].Invocations)
	require.True(t, f.exists("aaa", "inv_old_aaa"), "the tenant without a readable policy is left alone")
}

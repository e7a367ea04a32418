package retention_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/retention"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/tenant"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

func open(t *testing.T, path string) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenSQLite(context.Background(), path, sqlstore.Options{})
	require.NoError(t, err)
	return s
}

// fixture writes tenants, invocations, events and audit events straight into a store.
type fixture struct {
	t *testing.T
	s store.Store
	n int
}

func (f *fixture) update(fn func(store.Tx) error) {
	f.t.Helper()
	require.NoError(f.t, f.s.Update(context.Background(), fn))
}

func (f *fixture) tenant(id string, mod func(*tenant.Policy)) {
	p := tenant.New(id, t0)
	p.Enabled = true
	if mod != nil {
		mod(&p)
	}
	f.update(func(tx store.Tx) error { return tx.PutTenant(p) })
}

func (f *fixture) event(id string, typ invocation.EventType, data string, at time.Time) invocation.Event {
	f.n++
	e := invocation.Event{Type: typ, IdempotencyKey: fmt.Sprintf("%s-%d", id, f.n), EngineAttempt: 1, LogicalAttempt: 1, At: at}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return e
}

// start creates a running invocation created at at; parent makes it a child of that workflow.
func (f *fixture) start(tenantID, id, parent string, at time.Time) {
	f.t.Helper()
	rec := invocation.Record{ID: id, TenantID: tenantID, EntrypointRef: "ep_1", EntrypointID: "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.tax.v1~",
		Mode: invocation.ModeAsync, Params: json.RawMessage(`{}`), CreatedAt: at, ParentID: parent}
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
}

// log appends n log events of about size bytes each.
func (f *fixture) log(tenantID, id string, n, size int, at time.Time) {
	f.t.Helper()
	var evs []invocation.Event
	for range n {
		evs = append(evs, f.event(id, invocation.EventLog, `"`+strings.Repeat("x", size)+`"`, at))
	}
	f.update(func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: evs})
		return err
	})
}

func (f *fixture) finish(tenantID, id string, at time.Time) {
	f.t.Helper()
	f.update(func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: []invocation.Event{f.event(id, invocation.EventSucceeded, `{"result":{}}`, at)}})
		return err
	})
}

// finished creates an invocation that finished at at with n log events of size bytes.
func (f *fixture) finished(tenantID, id string, at time.Time, n, size int) {
	f.t.Helper()
	f.start(tenantID, id, "", at)
	f.log(tenantID, id, n, size, at)
	f.finish(tenantID, id, at)
}

func (f *fixture) audit(tenantID, id string, at time.Time) {
	f.update(func(tx store.Tx) error {
		return tx.InsertAudit(audit.Event{ID: id, TenantID: tenantID, Type: audit.TokenCreated, ActorID: "admin",
			ResourceType: "token", ResourceID: "tok_1", At: at})
	})
}

func (f *fixture) published(tenantID, id string, at time.Time) {
	f.update(func(tx store.Tx) error {
		_, _, err := tx.InsertEvent(events.Event{ID: id, TenantID: tenantID, TypeID: "gts.x.core.events.event.v1~acme.shop.orders.paid.v1~",
			Payload: json.RawMessage(`{}`), ReceivedAt: at})
		return err
	})
}

func (f *fixture) exists(tenantID, id string) bool {
	f.t.Helper()
	_, err := f.s.Invocation(context.Background(), tenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	require.NoError(f.t, err)
	return true
}

func (f *fixture) auditIDs(tenantID string) []string {
	f.t.Helper()
	page, err := f.s.ListAudit(context.Background(), tenantID, store.ListQuery{Limit: store.MaxLimit})
	require.NoError(f.t, err)
	var out []string
	for _, e := range page.Items {
		out = append(out, e.ID)
	}
	return out
}

func (f *fixture) eventIDs(tenantID string) []string {
	f.t.Helper()
	page, err := f.s.ListEvents(context.Background(), tenantID, store.ListQuery{Limit: store.MaxLimit})
	require.NoError(f.t, err)
	var out []string
	for _, e := range page.Items {
		out = append(out, e.ID)
	}
	return out
}

// historyBytes is tenant acme's history size.
func (f *fixture) historyBytes() int64 {
	f.t.Helper()
	n, err := f.s.TenantHistoryBytes(context.Background(), "acme")
	require.NoError(f.t, err)
	return n
}

// logBuffer collects the job's log records.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestRetentionByAge(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "lark.db"))
	defer s.Close()
	f := &fixture{t: t, s: s}
	clk := clock.NewFake(t0)
	logs := &logBuffer{}
	job := retention.New(s, retention.Options{Clock: clk, Logger: slog.New(slog.NewJSONHandler(logs, nil))})

	// acme keeps history 7 days and audit 30; globex the defaults (7 and 90).
	f.tenant("acme", func(p *tenant.Policy) { p.Retention = tenant.Retention{ExecutionHistoryDays: 7, AuditLogDays: 30} })
	f.tenant("globex", nil)
	for _, ten := range []string{"acme", "globex"} {
		f.finished(ten, "inv_old_"+ten, t0, 3, 100)               // finished on day 0
		f.finished(ten, "inv_recent_"+ten, t0.Add(6*day), 3, 100) // finished on day 6
		f.start(ten, "inv_running_"+ten, "", t0)                  // running since day 0
		f.start(ten, "inv_parent_"+ten, "", t0)                   // a workflow running since day 0 ...
		f.start(ten, "inv_child_"+ten, "inv_parent_"+ten, t0)     // ... whose child
		f.finish(ten, "inv_child_"+ten, t0.Add(time.Hour))        // finished on day 0
		f.published(ten, "evt_old_"+ten, t0)                      // published on day 0
		f.published(ten, "evt_recent_"+ten, t0.Add(6*day))        // on day 6
		f.audit(ten, "aud_old_"+ten, t0)                          // day 0
		f.audit(ten, "aud_mid_"+ten, t0.Add(40*day))              // day 40
		f.audit(ten, "aud_recent_"+ten, t0.Add(75*day))           // day 75
	}
	f.audit("platform", "aud_platform_old", t0)
	f.audit("platform", "aud_platform_recent", t0.Add(75*day))

	// Day 6: nothing is past a window yet.
	clk.Set(t0.Add(6 * day))
	res, err := job.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, res["acme"].Invocations)
	require.Equal(t, 3, res["acme"].Measured, "the three finished invocations were measured")
	require.Positive(t, f.historyBytes())
	require.NotContains(t, logs.String(), "retention: purged", "a pass that deletes nothing logs nothing at info")

	// Day 8: day-0 history is past 7 days.
	clk.Set(t0.Add(8 * day))
	before := f.historyBytes()
	res, err = job.RunOnce(context.Background())
	require.NoError(t, err)
	for _, ten := range []string{"acme", "globex"} {
		require.False(t, f.exists(ten, "inv_old_"+ten), "%s: finished history older than the window is purged", ten)
		require.True(t, f.exists(ten, "inv_recent_"+ten), "%s: newer history is kept", ten)
		require.True(t, f.exists(ten, "inv_running_"+ten), "%s: in-flight work is never purged", ten)
		require.True(t, f.exists(ten, "inv_parent_"+ten), "%s: in-flight work is never purged", ten)
		require.True(t, f.exists(ten, "inv_child_"+ten), "%s: a finished child whose parent still runs is kept", ten)
		require.Equal(t, []string{"evt_recent_" + ten}, f.eventIDs(ten), "%s: published events follow the history window", ten)
		require.EqualValues(t, 1, res[ten].Invocations)
		require.EqualValues(t, 1, res[ten].Events)
		require.Zero(t, res[ten].AuditEvents, "%s: the audit log has its own, longer window", ten)
	}
	require.Less(t, f.historyBytes(), before)
	require.Equal(t, f.historyBytes(), res["acme"].HistoryBytes)
	require.Contains(t, logs.String(), `"msg":"retention: purged","tenant_id":"acme","invocations":1`)
	require.Contains(t, logs.String(), `"tenant_id":"globex"`)

	// Day 41: acme's audit window (30 days) has passed for day 0's event, globex's (90) has not.
	clk.Set(t0.Add(41 * day))
	_, err = job.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"aud_mid_acme", "aud_recent_acme"}, f.auditIDs("acme"))
	require.Equal(t, []string{"aud_old_globex", "aud_mid_globex", "aud_recent_globex"}, f.auditIDs("globex"))
	require.Equal(t, []string{"aud_platform_old", "aud_platform_recent"}, f.auditIDs("platform"))

	// The parent finishes on day 41: the child (finished day 0) and, 7 days later, the parent go.
	f.finish("acme", "inv_parent_acme", t0.Add(41*day))
	_, err = job.RunOnce(context.Background())
	require.NoError(t, err)
	require.False(t, f.exists("acme", "inv_child_acme"))
	require.True(t, f.exists("acme", "inv_parent_acme"))
	require.True(t, f.exists("globex", "inv_child_globex"), "globex's parent still runs")

	// Day 100: day-0 audit events of globex (90 days) and of the platform (90 by default) age out;
	// running work stays.
	clk.Set(t0.Add(100 * day))
	_, err = job.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"aud_mid_globex", "aud_recent_globex"}, f.auditIDs("globex"))
	require.Equal(t, []string{"aud_platform_recent"}, f.auditIDs("platform"))
	require.False(t, f.exists("acme", "inv_parent_acme"))
	require.False(t, f.exists("acme", "inv_recent_acme"))
	require.True(t, f.exists("acme", "inv_running_acme"), "in-flight work is never purged, however old")
	require.Zero(t, f.historyBytes(), "only in-flight work is left, and it is not counted")
}

func TestRetentionSizeCap(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "lark.db"))
	defer s.Close()
	f := &fixture{t: t, s: s}
	clk := clock.NewFake(t0.Add(time.Hour))
	job := retention.New(s, retention.Options{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	one := int64(1)
	f.tenant("acme", func(p *tenant.Policy) { p.Quotas.MaxExecutionHistoryMB = &one })
	// Five invocations of about 300 KB each, finished a minute apart (all well within 7 days).
	for i := range 5 {
		f.finished("acme", fmt.Sprintf("inv_%d", i), t0.Add(time.Duration(i)*time.Minute), 3, 100_000)
	}
	f.start("acme", "inv_running", "", t0)
	f.log("acme", "inv_running", 10, 100_000, t0) // 1 MB in flight: not history yet

	res, err := job.RunOnce(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 2, res["acme"].Invocations, "1.5 MB of history over a 1 MB cap: the two oldest go")
	for i := range 5 {
		require.Equal(t, i >= 2, f.exists("acme", fmt.Sprintf("inv_%d", i)), "inv_%d: oldest first", i)
	}
	require.True(t, f.exists("acme", "inv_running"))
	total := f.historyBytes()
	require.LessOrEqual(t, total, int64(retention.MB))
	require.Greater(t, total, int64(retention.MB)-300_000, "purging stops as soon as the tenant is under its cap")

	// The running one finishes: history is over the cap again, and the oldest go until it is under.
	f.finish("acme", "inv_running", t0.Add(time.Hour))
	res, err = job.RunOnce(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 3, res["acme"].Invocations)
	require.True(t, f.exists("acme", "inv_running"), "the newest finished history is kept while it fits")
	require.LessOrEqual(t, f.historyBytes(), int64(retention.MB))
}

// failingStore makes every Update after the first n fail, as a process killed mid-pass would leave
// the batches after the n-th uncommitted.
type failingStore struct {
	store.Store
	mu sync.Mutex
	n  int
}

var errKilled = errors.New("killed")

func (s *failingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.mu.Lock()
	s.n--
	left := s.n
	s.mu.Unlock()
	if left < 0 {
		return errKilled
	}
	return s.Store.Update(ctx, fn)
}

func TestRetentionSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lark.db")
	s := open(t, path)
	f := &fixture{t: t, s: s}
	f.tenant("acme", func(p *tenant.Policy) { p.Retention.AuditLogDays = 1 })
	measure := func() {
		t.Helper()
		_, err := retention.New(s, retention.Options{Clock: clock.NewFake(t0), Logger: slog.New(slog.DiscardHandler)}).RunOnce(context.Background())
		require.NoError(t, err)
	}
	// What will be kept: ten invocations finished on day 10. Their measured size is what the
	// tenant's total must come back to.
	for i := range 10 {
		f.finished("acme", fmt.Sprintf("inv_new_%02d", i), t0.Add(10*day), 2, 50)
	}
	measure()
	kept := f.historyBytes()
	require.Positive(t, kept)
	// What will go: thirty small invocations, a large one (1 + 103 rows: more than a batch of 25),
	// and 60 audit events, all from day 0.
	for i := range 30 {
		f.finished("acme", fmt.Sprintf("inv_old_%02d", i), t0.Add(time.Duration(i)*time.Second), 2, 50)
	}
	f.start("acme", "inv_large", "", t0)
	for range 5 {
		f.log("acme", "inv_large", 20, 50, t0)
	}
	f.finish("acme", "inv_large", t0)
	for i := range 60 {
		f.audit("acme", fmt.Sprintf("aud_%02d", i), t0.Add(time.Duration(i)*time.Second))
	}
	measure()
	require.Greater(t, f.historyBytes(), kept)

	// Day 8: two passes are killed, after one and after three committed batches.
	opts := retention.Options{Clock: clock.NewFake(t0.Add(8 * day)), BatchRows: 25, Logger: slog.New(slog.DiscardHandler)}
	for _, kill := range []int{1, 3} {
		_, err := retention.New(&failingStore{Store: s, n: kill}, opts).RunOnce(context.Background())
		require.ErrorIs(t, err, errKilled, "the pass stops at the failed batch")
	}
	require.False(t, f.exists("acme", "inv_large"), "the large invocation is hidden from the first batch that reaches it")
	require.Greater(t, f.historyBytes(), kept, "the passes were cut short")
	require.NoError(t, s.Close())

	// The process restarts: the next pass carries on from where the last committed batch left it.
	s = open(t, path)
	defer s.Close()
	f.s = s
	res, err := retention.New(s, opts).RunOnce(context.Background())
	require.NoError(t, err)
	require.Positive(t, res["acme"].Invocations)
	require.EqualValues(t, 60, res["acme"].AuditEvents)
	page, err := s.ListInvocations(context.Background(), invocation.Viewer{TenantID: "acme", All: true}, store.ListQuery{Limit: store.MaxLimit})
	require.NoError(t, err)
	require.Len(t, page.Items, 10)
	for _, r := range page.Items {
		require.True(t, strings.HasPrefix(r.ID, "inv_new_"), "only the new invocations are left: %s", r.ID)
	}
	require.Empty(t, f.auditIDs("acme"))
	require.Equal(t, kept, f.historyBytes(), "the running total matches what is left, byte for byte")
	res, err = retention.New(s, opts).RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, retention.Purged{HistoryBytes: kept}, res["acme"], "a further pass has nothing to do")
}

// TestRunLoop: Run makes a pass at once and one per interval, and returns when its context ends.
func TestRunLoop(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "lark.db"))
	defer s.Close()
	f := &fixture{t: t, s: s}
	f.tenant("acme", nil)
	f.finished("acme", "inv_1", t0, 1, 10)
	clk := clock.NewFake(t0)
	job := retention.New(s, retention.Options{Clock: clk, Interval: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); job.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "timed out waiting: %s", what)
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("the first pass measures the finished invocation", func() bool { return f.historyBytes() > 0 })
	require.True(t, f.exists("acme", "inv_1"))
	clk.Advance(8 * day)
	waitFor("a later pass purges it once the clock says it is old", func() bool { return !f.exists("acme", "inv_1") })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestRetentionWorkers: a pass deletes the workers not seen for seven days, in batches, and keeps
// the others; what it deleted is reported under the platform tenant and to Passed.
func TestRetentionWorkers(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "lark.db"))
	defer s.Close()
	ctx := context.Background()
	var ws []store.Worker
	for i := range 3 {
		ws = append(ws, store.Worker{WorkerID: fmt.Sprintf("old-%d", i), Node: "n1", FirstSeenAt: t0, LastSeenAt: t0})
	}
	ws = append(ws, store.Worker{WorkerID: "recent", Node: "n1", FirstSeenAt: t0, LastSeenAt: t0.Add(2 * day)})
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error { return tx.RecordWorkers(ws) }))
	var total retention.Purged
	job := retention.New(s, retention.Options{Clock: clock.NewFake(t0.Add(8 * day)), BatchRows: 2, Logger: slog.New(slog.DiscardHandler),
		Passed: func(_ bool, p retention.Purged) { total = p }})
	out, err := job.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), out["platform"].Workers)
	require.Equal(t, int64(3), total.Workers)
	page, err := s.ListWorkers(ctx, store.WorkerQuery{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, "recent", page.Items[0].WorkerID)
}

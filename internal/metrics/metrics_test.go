package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/metrics"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// samples gathers reg into name{label="value",...} → value, labels sorted by name; histograms
// give their _count and _sum.
func samples(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			labels := "{" + strings.Join(ls, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[mf.GetName()+labels] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[mf.GetName()+labels] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[mf.GetName()+"_count"+labels] = float64(m.GetHistogram().GetSampleCount())
				out[mf.GetName()+"_sum"+labels] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// only keeps the samples whose name starts with prefix.
func only(all map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// nonZero keeps the samples that are not 0.
func nonZero(all map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func finishedRec(tenantID, ep string, status invocation.Status, took time.Duration) invocation.Record {
	start := t0
	return invocation.Record{ID: "inv", TenantID: tenantID, EntrypointID: ep, Status: status, StartedAt: &start, UpdatedAt: t0.Add(took)}
}

func TestEventCounters(t *testing.T) {
	m := metrics.New(metrics.Options{})
	m.Created(invocation.Record{TenantID: "acme", EntrypointID: "ep1"})
	m.Created(invocation.Record{TenantID: "acme", EntrypointID: "ep1"})
	m.Finished(finishedRec("acme", "ep1", invocation.StatusSucceeded, 2*time.Second))
	m.Finished(finishedRec("acme", "ep1", invocation.StatusDeadLettered, 500*time.Millisecond))
	canceledQueued := invocation.Record{TenantID: "acme", EntrypointID: "ep1", Status: invocation.StatusCanceled, UpdatedAt: t0}
	m.Finished(canceledQueued)
	m.Dequeued(invocation.Record{TenantID: "acme"}, 3*time.Second)
	m.RateLimited("acme", "ep1")
	m.QuotaExceeded("acme", "max_definitions")
	got := samples(t, m.Registry())
	want := map[string]float64{
		`lark_invocations_started_total{entrypoint="ep1",tenant="acme"}`:                         2,
		`lark_invocations_finished_total{entrypoint="ep1",status="succeeded",tenant="acme"}`:     1,
		`lark_invocations_finished_total{entrypoint="ep1",status="dead_lettered",tenant="acme"}`: 1,
		`lark_invocations_finished_total{entrypoint="ep1",status="canceled",tenant="acme"}`:      1,
		`lark_invocations_finished_total{entrypoint="ep1",status="failed",tenant="acme"}`:        0,
		`lark_invocations_finished_total{entrypoint="ep1",status="compensated",tenant="acme"}`:   0,
		`lark_invocation_duration_seconds_count{entrypoint="ep1",tenant="acme"}`:                 2,
		`lark_invocation_duration_seconds_sum{entrypoint="ep1",tenant="acme"}`:                   2.5,
		`lark_invocation_queue_wait_seconds_count{tenant="acme"}`:                                1,
		`lark_invocation_queue_wait_seconds_sum{tenant="acme"}`:                                  3,
		`lark_invocations_rate_limited_total{entrypoint="ep1",tenant="acme"}`:                    1,
		`lark_quota_exceeded_total{quota="max_definitions",tenant="acme"}`:                       1,
	}
	for k, v := range want {
		require.Contains(t, got, k)
		require.Equal(t, v, got[k], k)
	}
	require.Empty(t, nonZero(only(got, "lark_metrics_labels_dropped_total")), "nothing dropped")
	require.Equal(t, float64(0), got[`lark_metrics_labels_dropped_total{metric="lark_invocations_started_total"}`],
		"every family's dropped counter shows from the start, at 0")
	require.Contains(t, got, "go_goroutines{}", "the Go collector is registered")
	require.Contains(t, got, "process_cpu_seconds_total{}", "the process collector is registered")
}

// TestLabelCap: past MaxLabelSets pairs, new pairs are counted under __other__ and the family's
// labels-dropped counter rises by one per observation; pairs admitted before keep their series.
func TestLabelCap(t *testing.T) {
	m := metrics.New(metrics.Options{MaxLabelSets: 2})
	for i := range 5 {
		m.Created(invocation.Record{TenantID: fmt.Sprintf("t%d", i), EntrypointID: "ep"})
	}
	m.Created(invocation.Record{TenantID: "t0", EntrypointID: "ep"})
	m.Created(invocation.Record{TenantID: "t0", EntrypointID: "ep2"})
	m.RateLimited("t9", "ep")
	got := samples(t, m.Registry())
	require.Equal(t, map[string]float64{
		`lark_invocations_started_total{entrypoint="ep",tenant="t0"}`:               2,
		`lark_invocations_started_total{entrypoint="ep",tenant="t1"}`:               1,
		`lark_invocations_started_total{entrypoint="__other__",tenant="__other__"}`: 4,
	}, only(got, "lark_invocations_started_total"))
	require.Equal(t, map[string]float64{
		`lark_metrics_labels_dropped_total{metric="lark_invocations_started_total"}`: 4,
		`lark_metrics_labels_dropped_total{metric="lark_runs_started_total"}`:        3, // (tenant, trigger): t2, t3, t4
	}, nonZero(only(got, "lark_metrics_labels_dropped_total")), "the rate-limit family has its own cap")
	require.Equal(t, map[string]float64{`lark_invocations_rate_limited_total{entrypoint="ep",tenant="t9"}`: 1},
		only(got, "lark_invocations_rate_limited_total"))
}

// TestLabelCapConcurrent: under concurrent first observations the cap holds and nothing is lost.
func TestLabelCapConcurrent(t *testing.T) {
	m := metrics.New(metrics.Options{MaxLabelSets: 10})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				m.Finished(finishedRec(fmt.Sprintf("t%d", (g*100+i)%40), "ep", invocation.StatusSucceeded, time.Second))
			}
		})
	}
	wg.Wait()
	all := samples(t, m.Registry())
	got := only(all, `lark_invocations_finished_total`)
	var total float64
	for _, v := range got {
		total += v
	}
	require.Equal(t, float64(800), total, "nothing lost")
	require.Len(t, got, 11*5, "10 pairs and __other__, five statuses each")
	other := got[`lark_invocations_finished_total{entrypoint="__other__",status="succeeded",tenant="__other__"}`]
	require.Positive(t, other)
	require.Equal(t, other, all[`lark_metrics_labels_dropped_total{metric="lark_invocations_finished_total"}`])
}

// TestObserveAllocations: recording into a known label set allocates nothing.
func TestObserveAllocations(t *testing.T) {
	m := metrics.New(metrics.Options{})
	rec := finishedRec("acme", "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.tax.v1~", invocation.StatusSucceeded, time.Second)
	m.Finished(rec)
	m.Created(rec)
	allocs := testing.AllocsPerRun(1000, func() {
		m.Created(rec)
		m.Finished(rec)
		m.RateLimited(rec.TenantID, rec.EntrypointID)
	})
	require.Zero(t, allocs)
}

type fakeSource struct {
	loads []store.TenantLoad
	err   error
	now   time.Time
}

func (f *fakeSource) TenantLoads(_ context.Context, now time.Time) ([]store.TenantLoad, error) {
	f.now = now
	return f.loads, f.err
}

func i64(v int64) *int64 { return &v }

func TestScrapeTimeGauges(t *testing.T) {
	src := &fakeSource{loads: []store.TenantLoad{
		{TenantID: "acme", Ready: 3, Delayed: 1, LeaseExpired: 1, Definitions: 2,
			InFlight: map[invocation.Status]int64{invocation.StatusQueued: 4, invocation.StatusRunning: 1},
			Quotas:   tenant.Quotas{MaxConcurrentExecutions: i64(10), MaxDefinitions: i64(8)}},
		{TenantID: "globex", Ready: 2, InFlight: map[invocation.Status]int64{invocation.StatusQueued: 2}},
		{TenantID: "initech", Ready: 5, InFlight: map[invocation.Status]int64{invocation.StatusQueued: 5, invocation.StatusSuspended: 1},
			Quotas: tenant.Quotas{MaxConcurrentExecutions: i64(2)}},
	}}
	clk := clock.NewFake(t0)
	m := metrics.New(metrics.Options{Source: src, Clock: clk, MaxLabelSets: 2, Slots: func() (int, int) { return 3, 64 }})
	got := samples(t, m.Registry())
	require.Equal(t, t0, src.now, "the queue is read as of the injected clock")
	require.Equal(t, map[string]float64{
		`lark_queue_depth{state="ready",tenant="acme"}`:              3,
		`lark_queue_depth{state="delayed",tenant="acme"}`:            1,
		`lark_queue_depth{state="lease_expired",tenant="acme"}`:      1,
		`lark_queue_depth{state="ready",tenant="globex"}`:            2,
		`lark_queue_depth{state="delayed",tenant="globex"}`:          0,
		`lark_queue_depth{state="lease_expired",tenant="globex"}`:    0,
		`lark_queue_depth{state="ready",tenant="__other__"}`:         5,
		`lark_queue_depth{state="delayed",tenant="__other__"}`:       0,
		`lark_queue_depth{state="lease_expired",tenant="__other__"}`: 0,
	}, only(got, "lark_queue_depth"))
	require.Equal(t, float64(4), got[`lark_invocations_in_flight{status="queued",tenant="acme"}`])
	require.Equal(t, float64(1), got[`lark_invocations_in_flight{status="running",tenant="acme"}`])
	require.Equal(t, float64(0), got[`lark_invocations_in_flight{status="compensating",tenant="acme"}`])
	require.Equal(t, float64(1), got[`lark_invocations_in_flight{status="suspended",tenant="__other__"}`])
	require.Equal(t, map[string]float64{
		`lark_quota_usage_ratio{quota="max_concurrent_executions",tenant="acme"}`: 0.1, // 1 running of 10
		`lark_quota_usage_ratio{quota="max_definitions",tenant="acme"}`:           0.25,
	}, only(got, "lark_quota_usage_ratio"), "globex has no quotas; initech's ratio is past the cap and cannot be summed")
	require.Equal(t, map[string]float64{
		`lark_metrics_labels_dropped_total{metric="lark_queue_depth"}`:           1,
		`lark_metrics_labels_dropped_total{metric="lark_invocations_in_flight"}`: 1,
		`lark_metrics_labels_dropped_total{metric="lark_quota_usage_ratio"}`:     1,
	}, nonZero(only(got, "lark_metrics_labels_dropped_total")))
	require.Equal(t, float64(3), got["lark_dispatcher_slots_busy{}"])
	require.Equal(t, float64(64), got["lark_dispatcher_slots{}"])
}

// TestScrapeSurvivesStoreErrors: when the store cannot be read, /metrics still answers with the
// rest, and the failure is counted.
func TestScrapeSurvivesStoreErrors(t *testing.T) {
	src := &fakeSource{err: errors.New("database is locked")}
	m := metrics.New(metrics.Options{Source: src, Logger: slog.New(slog.DiscardHandler)})
	m.Created(invocation.Record{TenantID: "acme", EntrypointID: "ep1"})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	scrape := func() string {
		res, err := http.Get(srv.URL)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode, string(b))
		require.Contains(t, res.Header.Get("Content-Type"), "text/plain")
		return string(b)
	}
	body := scrape()
	require.Contains(t, body, `lark_invocations_started_total{entrypoint="ep1",tenant="acme"} 1`)
	require.NotContains(t, body, "lark_queue_depth{")
	require.Contains(t, scrape(), `promhttp_metric_handler_errors_total{cause="gathering"} 1`)
}

// TestMaintenanceFailures: every maintenance job's failure counter shows from the start at 0 and
// counts the failures reported for it.
func TestMaintenanceFailures(t *testing.T) {
	m := metrics.New(metrics.Options{})
	m.MaintenanceFailure("retention")
	m.MaintenanceFailure("retention")
	m.MaintenanceFailure("backfill")
	got := only(samples(t, m.Registry()), "lark_maintenance_failures_total")
	require.Equal(t, map[string]float64{
		`lark_maintenance_failures_total{job="retention"}`: 2,
		`lark_maintenance_failures_total{job="scheduler"}`: 0,
		`lark_maintenance_failures_total{job="backfill"}`:  1,
		`lark_maintenance_failures_total{job="triggers"}`:  0,
	}, got)
}

// TestDAGCounters: the DAG families count tasks by state (with their duration), check results and
// materializations.
func TestDAGCounters(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{})
	m.TaskEnded("acme", "succeeded", 3*time.Second)
	m.TaskEnded("acme", "skipped", 0)
	m.CheckRan("acme", "passed")
	m.CheckRan("acme", "failed")
	m.Materialized("acme", "quarantined")
	got := samples(t, m.Registry())
	want := map[string]float64{
		`lark_dag_tasks_total{state="succeeded",tenant="acme"}`:          1,
		`lark_dag_tasks_total{state="skipped",tenant="acme"}`:            1,
		`lark_dag_task_duration_seconds_count{tenant="acme"}`:            1,
		`lark_dag_task_duration_seconds_sum{tenant="acme"}`:              3,
		`lark_dag_checks_total{result="passed",tenant="acme"}`:           1,
		`lark_dag_checks_total{result="failed",tenant="acme"}`:           1,
		`lark_materializations_total{state="quarantined",tenant="acme"}`: 1,
	}
	for k, v := range want {
		require.Contains(t, got, k)
		require.Equal(t, v, got[k], k)
	}
}

// TestFlowFamilies: runs are labelled by what started them; the NATS bridge's counters are read
// at scrape time; NATS messages and webhook deliveries are counted by outcome, without a tenant.
func TestFlowFamilies(t *testing.T) {
	t.Parallel()
	stats := metrics.NATSStats{Mirrored: 7, Duplicates: 1, Dropped: 2, Queued: 3}
	m := metrics.New(metrics.Options{NATS: func() metrics.NATSStats { return stats }})
	for _, rec := range []invocation.Record{
		{TenantID: "acme"},
		{TenantID: "acme", ParentID: "inv_p"},
		{TenantID: "acme", ParentID: "inv_p", CompensationFor: "inv_p"},
		{TenantID: "acme", Replay: "inv_r"},
		{TenantID: "acme", Via: invocation.ViaTrigger},
		{TenantID: "acme", Via: invocation.ViaTrigger, Origin: invocation.OriginEventTrigger},
		{TenantID: "acme", Origin: invocation.OriginSchedule},
		{TenantID: "acme", Origin: invocation.OriginBackfill},
		{TenantID: "acme", Origin: invocation.OriginWebhook},
	} {
		m.Created(rec)
	}
	m.NATSMessage("published")
	m.NATSMessage("refused")
	m.WebhookDelivery("replayed")
	got := samples(t, m.Registry())
	require.Equal(t, map[string]float64{
		`lark_runs_started_total{tenant="acme",trigger="api"}`:           1,
		`lark_runs_started_total{tenant="acme",trigger="child"}`:         1,
		`lark_runs_started_total{tenant="acme",trigger="compensation"}`:  1,
		`lark_runs_started_total{tenant="acme",trigger="replay"}`:        1,
		`lark_runs_started_total{tenant="acme",trigger="event_trigger"}`: 2,
		`lark_runs_started_total{tenant="acme",trigger="schedule"}`:      1,
		`lark_runs_started_total{tenant="acme",trigger="backfill"}`:      1,
		`lark_runs_started_total{tenant="acme",trigger="webhook"}`:       1,
	}, only(got, "lark_runs_started_total"))
	require.Equal(t, map[string]float64{
		`lark_nats_messages_total{outcome="published"}`: 1,
		`lark_nats_messages_total{outcome="refused"}`:   1,
		`lark_nats_messages_total{outcome="failed"}`:    0,
	}, only(got, "lark_nats_messages_total"))
	require.Equal(t, 1.0, got[`lark_webhook_deliveries_total{outcome="replayed"}`])
	require.Equal(t, 0.0, got[`lark_webhook_deliveries_total{outcome="accepted"}`])
	require.Equal(t, 7.0, got[`lark_nats_mirrored_total{}`])
	require.Equal(t, 1.0, got[`lark_nats_mirror_duplicates_total{}`])
	require.Equal(t, 2.0, got[`lark_nats_mirror_dropped_total{}`])
	require.Equal(t, 3.0, got[`lark_nats_mirror_queued{}`])

	none := samples(t, metrics.New(metrics.Options{}).Registry())
	_, found := none[`lark_nats_mirrored_total{}`]
	require.False(t, found, "without NATS, no bridge families")
}

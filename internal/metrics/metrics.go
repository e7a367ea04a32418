// Package metrics is Lark's Prometheus surface (004 §9.1, with servo_* names mapped onto lark_*):
// counters and histograms the invocation engine feeds as work is created, refused, dequeued and
// finished (it implements writer.Observer and registry.QuotaObserver); gauges read from the store
// at scrape time (queue depth, in-flight work, quota use); the dispatcher's slots; and the Go
// runtime and process collectors. Every family keyed by tenant holds a bounded number of label
// sets (Options.MaxLabelSets): one tenant with thousands of entrypoints, or thousands of tenants,
// cannot grow the server's memory or the scraper's without bound.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/larkrun/lark/internal/admission"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// DefaultMaxLabelSets is the default cap on the label sets of one family.
const DefaultMaxLabelSets = 5000

// Buckets of the histograms (seconds). Invocation durations run from milliseconds (functions) to
// days (workflows that wait); queue waits from milliseconds to an hour.
var (
	DurationBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400}
	QueueWaitBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600}
)

// Source is what the scrape-time gauges read (store.Store implements it).
type Source interface {
	TenantLoads(ctx context.Context, now time.Time) ([]store.TenantLoad, error)
}

// Options configure New.
type Options struct {
	// Source gives the tenants' loads at scrape time (nil: no queue, in-flight or quota gauges).
	Source Source
	// Slots reports the dispatcher's busy and total execution slots at scrape time (nil: none).
	Slots func() (busy, total int)
	// Admission reports the admission gate's figures at scrape time (nil: no admission gauges).
	Admission func() admission.Stats
	// BulkWaiting reports the bulky requests waiting for their tenant's lane (nil: no gauge).
	BulkWaiting func() int64
	// NATS reports the NATS bridge's mirror counters at scrape time (nil: no lark_nats_mirror* families).
	NATS func() NATSStats
	// MaxLabelSets caps the distinct (tenant, entrypoint) — or (tenant, quota), or tenant — label
	// sets of each family (default DefaultMaxLabelSets).
	MaxLabelSets int
	// ScrapeTimeout bounds the store reads of one scrape (default 5 s).
	ScrapeTimeout time.Duration
	Clock         clock.Clock
	Logger        *slog.Logger
}

// Metrics holds Lark's metric families in a registry of its own.
type Metrics struct {
	o   Options
	reg *prometheus.Registry

	dropped     *prometheus.CounterVec
	started     *capped[prometheus.Counter]
	finished    *capped[*byStatus]
	duration    *capped[prometheus.Observer]
	queueWait   *capped[prometheus.Observer]
	rateLimited *capped[prometheus.Counter]
	quota       *capped[prometheus.Counter]
	maintenance *prometheus.CounterVec
	ops         *ops // ops.go
	dag         *dagFamilies
	flow        *flow // flow.go
}

// New builds the metric families and registers them with the Go and process collectors.
func New(o Options) *Metrics {
	if o.MaxLabelSets <= 0 {
		o.MaxLabelSets = DefaultMaxLabelSets
	}
	if o.ScrapeTimeout <= 0 {
		o.ScrapeTimeout = 5 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m := &Metrics{o: o, reg: prometheus.NewRegistry()}
	m.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_metrics_labels_dropped_total",
		Help: "Observations recorded under tenant=\"__other__\" because their family held its maximum of label sets (for gauges computed at scrape time: label sets folded at each scrape)."},
		[]string{"metric"})
	tenantEntrypoint := []string{"tenant", "entrypoint"}

	started := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_invocations_started_total",
		Help: "Invocations created: API starts, replays, r_invoke_v1 children and compensation handlers."}, tenantEntrypoint)
	m.started = newCapped(o.MaxLabelSets, m.dropped.WithLabelValues("lark_invocations_started_total"),
		func(t, e string) prometheus.Counter { return started.WithLabelValues(t, e) })

	finished := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_invocations_finished_total",
		Help: "Invocations that reached a terminal status (succeeded, failed, canceled, compensated, dead_lettered)."},
		[]string{"tenant", "entrypoint", "status"})
	m.finished = newCapped(o.MaxLabelSets, m.dropped.WithLabelValues("lark_invocations_finished_total"),
		func(t, e string) *byStatus { return newByStatus(finished, t, e) })

	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lark_invocation_duration_seconds",
		Help: "Time from an invocation's first start to its terminal status (retries, backoff and suspensions included).", Buckets: DurationBuckets},
		tenantEntrypoint)
	m.duration = newCapped(o.MaxLabelSets, m.dropped.WithLabelValues("lark_invocation_duration_seconds"),
		func(t, e string) prometheus.Observer { return duration.WithLabelValues(t, e) })

	queueWait := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lark_invocation_queue_wait_seconds",
		Help: "Time a queued invocation waited from its creation to the start of its first attempt's execution: in the queue, then for admission.", Buckets: QueueWaitBuckets},
		[]string{"tenant"})
	m.queueWait = newCapped(o.MaxLabelSets, m.dropped.WithLabelValues("lark_invocation_queue_wait_seconds"),
		func(t, _ string) prometheus.Observer { return queueWait.WithLabelValues(t) })

	rateLimited := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_invocations_rate_limited_total",
		Help: "Invocation starts refused by the entrypoint's rate limit (429 rate_limited)."}, tenantEntrypoint)
	m.rateLimited = newCapped(o.MaxLabelSets, m.dropped.WithLabelValues("lark_invocations_rate_limited_total"),
		func(t, e string) prometheus.Counter { return rateLimited.WithLabelValues(t, e) })

	quota := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_quota_exceeded_total",
		Help: "Requests refused by a tenant quota (429 quota_exceeded), by quota."}, []string{"tenant", "quota"})
	m.quota = newCapped(o.MaxLabelSets, m.dropped.WithLabelValues("lark_quota_exceeded_total"),
		func(t, q string) prometheus.Counter { return quota.WithLabelValues(t, q) })

	// Labelled by job only: the jobs are a fixed, small set (retention, scheduler, backfill, triggers); the
	// tenant of a failure is in the log line.
	m.maintenance = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_maintenance_failures_total",
		Help: "Failures of maintenance work for one tenant or one row (a retention step of a tenant, a due schedule, a backfill, a trigger's due batch): logged with the tenant id and skipped, the rest of the pass goes on."},
		[]string{"job"})
	for _, job := range []string{"retention", "scheduler", "backfill", "triggers"} { // shown from the start, at 0
		m.maintenance.WithLabelValues(job)
	}

	m.reg.MustRegister(started, finished, duration, queueWait, rateLimited, quota, m.maintenance,
		newLoadCollector(m), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.newOps()...)
	m.dag = m.newDAG()
	m.flow = m.newFlow()
	if o.Admission != nil {
		m.reg.MustRegister(newAdmissionCollector(o.Admission))
	}
	if o.BulkWaiting != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lark_bulk_requests_waiting",
			Help: "Requests with large bodies waiting for their tenant's bulk lane (a tenant's large requests are served one at a time)."},
			func() float64 { return float64(o.BulkWaiting()) }))
	}
	return m
}

// MaintenanceFailure counts one failure of a maintenance job (lark_maintenance_failures_total{job}):
// a tenant's retention step, a schedule the firing loop could not fire, a backfill step, a trigger's
// due batch the flusher could not flush.
func (m *Metrics) MaintenanceFailure(job string) { m.maintenance.WithLabelValues(job).Inc() }

// Registry is the registry holding every family (for tests and for adding collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text exposition format. A scrape whose store read
// fails still answers, without the gauges that read needed (the failure is logged and counted in
// promhttp_metric_handler_errors_total).
func (m *Metrics) Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(m.o.Logger.Handler(), slog.LevelWarn),
		Registry:      m.reg,
	}))
}

// Created implements writer.Observer.
func (m *Metrics) Created(rec invocation.Record) {
	m.started.get(rec.TenantID, rec.EntrypointID).Inc()
	m.flow.runs.get(rec.TenantID, runTrigger(rec)).Inc()
}

// Dequeued implements writer.Observer.
func (m *Metrics) Dequeued(rec invocation.Record, waited time.Duration) {
	m.queueWait.get(rec.TenantID, "").Observe(max(waited, 0).Seconds())
}

// Finished implements writer.Observer.
func (m *Metrics) Finished(rec invocation.Record) {
	m.finished.get(rec.TenantID, rec.EntrypointID).inc(rec.Status)
	if rec.StartedAt != nil {
		m.duration.get(rec.TenantID, rec.EntrypointID).Observe(max(rec.UpdatedAt.Sub(*rec.StartedAt), 0).Seconds())
	}
}

// RateLimited implements writer.Observer.
func (m *Metrics) RateLimited(tenantID, entrypointID string) {
	m.rateLimited.get(tenantID, entrypointID).Inc()
}

// QuotaExceeded implements writer.Observer and registry.QuotaObserver.
func (m *Metrics) QuotaExceeded(tenantID, quota string) {
	m.quota.get(tenantID, quota).Inc()
}

// terminal lists the statuses an invocation finishes in.
var terminal = [...]invocation.Status{invocation.StatusSucceeded, invocation.StatusFailed, invocation.StatusCanceled,
	invocation.StatusCompensated, invocation.StatusDeadLettered}

// byStatus is the finished counters of one (tenant, entrypoint), one per terminal status, made
// together so that every status shows (at 0) as soon as the pair finishes anything.
type byStatus struct {
	vec       *prometheus.CounterVec
	tenant, e string
	c         [len(terminal)]prometheus.Counter
}

func newByStatus(vec *prometheus.CounterVec, tenant, e string) *byStatus {
	b := &byStatus{vec: vec, tenant: tenant, e: e}
	for i, s := range terminal {
		b.c[i] = vec.WithLabelValues(tenant, e, string(s))
	}
	return b
}

func (b *byStatus) inc(s invocation.Status) {
	for i := range terminal {
		if terminal[i] == s {
			b.c[i].Inc()
			return
		}
	}
	b.vec.WithLabelValues(b.tenant, b.e, string(s)).Inc() // a status added later: slower, still counted
}

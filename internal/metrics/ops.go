package metrics

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkrun/lark/internal/groupcommit"
	"github.com/larkrun/lark/internal/retention"
)

// Buckets of the operational histograms (seconds).
var (
	HTTPBuckets    = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	FireLagBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
)

// CommitSource is what the group-commit families read at scrape time (both stores implement
// it); a Source that does not has no lark_groupcommit_* families.
type CommitSource interface {
	CommitHistograms() (size, latency groupcommit.Histogram)
	// CommitReruns is how many batches were run again (groupcommit's Reruns and Replays).
	CommitReruns() uint64
}

// ops holds the families of the process's own machinery: HTTP requests, the group commit, the
// schedule firing loop, the retention job and the build.
type ops struct {
	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	fireLag      prometheus.Histogram
	retention    *prometheus.CounterVec
	purged       *prometheus.CounterVec
	retentionOK  prometheus.Gauge
}

// newOps builds and registers the operational families on reg.
func (m *Metrics) newOps() []prometheus.Collector {
	o := &ops{}
	// Labelled by route template (the router's, a fixed set, or "unmatched"), method and status
	// code: never by raw path, tenant or id.
	o.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_http_requests_total",
		Help: "HTTP requests answered, by route template, method and status code."}, []string{"route", "method", "code"})
	o.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lark_http_request_duration_seconds",
		Help: "Time to answer an HTTP request, by route template and method.", Buckets: HTTPBuckets}, []string{"route", "method"})
	o.fireLag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lark_scheduler_fire_lag_seconds",
		Help:    "Time from a schedule run's instant to the commit that records it and queues its invocation (0 for runs queued ahead of their instant).",
		Buckets: FireLagBuckets})
	o.retention = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_retention_passes_total",
		Help: "Passes of the retention job that ran to their end, by outcome (ok: every step succeeded; failed: some tenant's step failed, see lark_maintenance_failures_total)."},
		[]string{"outcome"})
	o.purged = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_retention_purged_total",
		Help: "What the retention job deleted, by kind: invocations, rows (invocation and event rows), events, audit_events, schedule_runs, trigger_rows, workers."},
		[]string{"kind"})
	o.retentionOK = prometheus.NewGauge(prometheus.GaugeOpts{Name: "lark_retention_last_success_timestamp_seconds",
		Help: "Unix time of the end of the last retention pass whose every step succeeded (0: none yet in this process)."})
	for _, out := range []string{"ok", "failed"} {
		o.retention.WithLabelValues(out)
	}
	for _, k := range purgedKinds {
		o.purged.WithLabelValues(k)
	}
	m.ops = o
	cols := []prometheus.Collector{o.httpRequests, o.httpDuration, o.fireLag, o.retention, o.purged, o.retentionOK, buildInfo()}
	if cs, ok := m.o.Source.(CommitSource); ok {
		cols = append(cols, newCommitCollector(cs))
	}
	return cols
}

var purgedKinds = []string{"invocations", "rows", "events", "audit_events", "schedule_runs", "trigger_rows", "workers"}

// methodLabel bounds the method label to the methods the API serves.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// ObserveRequest implements api.HTTPObserver: route is a route template (or "unmatched").
func (m *Metrics) ObserveRequest(route, method string, status int, d time.Duration) {
	method = methodLabel(method)
	m.ops.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.ops.httpDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

// FireLag observes the fire lag of one schedule run (scheduler.Options.FireLag).
func (m *Metrics) FireLag(lag time.Duration) { m.ops.fireLag.Observe(max(lag, 0).Seconds()) }

// RetentionPassed counts one retention pass and what it purged (retention.Options.Passed).
func (m *Metrics) RetentionPassed(ok bool, total retention.Purged) {
	if ok {
		m.ops.retention.WithLabelValues("ok").Inc()
		m.ops.retentionOK.Set(float64(m.o.Clock.Now().Unix()))
	} else {
		m.ops.retention.WithLabelValues("failed").Inc()
	}
	for i, n := range []int64{total.Invocations, total.Rows, total.Events, total.AuditEvents, total.ScheduleRuns, total.TriggerRows, total.Workers} {
		m.ops.purged.WithLabelValues(purgedKinds[i]).Add(float64(n))
	}
}

// buildInfo is lark_build_info{version, commit, go_version} 1, from the binary's build information.
func buildInfo() prometheus.Collector {
	version, commit := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				commit = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "lark_build_info",
		Help:        "Always 1: the version, VCS commit and Go version this binary was built with.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "go_version": runtime.Version()}})
	g.Set(1)
	return g
}

// commitCollector exposes the group commit's histograms, read from the store at scrape time.
type commitCollector struct {
	src                   CommitSource
	size, latency, reruns *prometheus.Desc
}

func newCommitCollector(src CommitSource) *commitCollector {
	return &commitCollector{src: src,
		size: prometheus.NewDesc("lark_groupcommit_batch_size",
			"Writes (closures) carried by each committed group-commit transaction of this process's store.", nil, nil),
		latency: prometheus.NewDesc("lark_groupcommit_batch_duration_seconds",
			"Time of each committed group-commit transaction, from BEGIN to the end of COMMIT (the fsync included).", nil, nil),
		reruns: prometheus.NewDesc("lark_groupcommit_reruns_total",
			"Group-commit batches run a second time: a closure failed in a batch run without savepoints, or a pipelined batch could not be carried out as sent.", nil, nil)}
}

// Describe implements prometheus.Collector.
func (c *commitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.latency
	ch <- c.reruns
}

// Collect implements prometheus.Collector.
func (c *commitCollector) Collect(ch chan<- prometheus.Metric) {
	size, latency := c.src.CommitHistograms()
	ch <- prometheus.MustNewConstHistogram(c.size, size.Count, size.Sum, size.Buckets)
	ch <- prometheus.MustNewConstHistogram(c.latency, latency.Count, latency.Sum, latency.Buckets)
	ch <- prometheus.MustNewConstMetric(c.reruns, prometheus.CounterValue, float64(c.src.CommitReruns()))
}

package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// inFlight lists the statuses lark_invocations_in_flight reports (the ones the
// max_concurrent_executions quota counts).
var inFlight = [...]invocation.Status{invocation.StatusQueued, invocation.StatusRunning, invocation.StatusSuspended,
	invocation.StatusCompensating}

// loadCollector computes the gauges that describe the present at each scrape: the tenants' queues,
// in-flight work and quota use (one store read, Source.TenantLoads) and the dispatcher's slots.
// Tenants past the label-set cap (in tenant id order) are summed under tenant="__other__"; their
// quota ratios, which do not add up, are left out. It also collects lark_metrics_labels_dropped_total,
// after the gauges, so that a scrape shows the label sets it folded itself.
type loadCollector struct {
	m                                       *Metrics
	depth, inFlight, quota, busy, slots     *prometheus.Desc
	droppedDepth, droppedFlight, droppedQuo prometheus.Counter
}

func newLoadCollector(m *Metrics) *loadCollector {
	return &loadCollector{m: m,
		depth: prometheus.NewDesc("lark_queue_depth",
			"Queued work by tenant and state: ready (due, waiting for a slot), delayed (retry backoff, durable timers), lease_expired (its runner died; the next claim reclaims it).",
			[]string{"tenant", "state"}, nil),
		inFlight: prometheus.NewDesc("lark_invocations_in_flight",
			"Invocations by tenant in each in-flight status (queued, running, suspended, compensating).",
			[]string{"tenant", "status"}, nil),
		quota: prometheus.NewDesc("lark_quota_usage_ratio",
			"Use of a tenant's quota: 1 or more means the next request it limits is refused (max_concurrent_executions: in-flight invocations / the quota; max_definitions: entrypoints not archived / the quota); tenants without the quota are absent.",
			[]string{"tenant", "quota"}, nil),
		busy:          prometheus.NewDesc("lark_dispatcher_slots_busy", "Execution slots of this process's dispatcher running claimed work.", nil, nil),
		slots:         prometheus.NewDesc("lark_dispatcher_slots", "Execution slots of this process's dispatcher (--workers).", nil, nil),
		droppedDepth:  m.dropped.WithLabelValues("lark_queue_depth"),
		droppedFlight: m.dropped.WithLabelValues("lark_invocations_in_flight"),
		droppedQuo:    m.dropped.WithLabelValues("lark_quota_usage_ratio"),
	}
}

// Describe implements prometheus.Collector.
func (c *loadCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.inFlight, c.quota, c.busy, c.slots} {
		ch <- d
	}
	c.m.dropped.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *loadCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectLoads(ch)
	c.m.dropped.Collect(ch)
}

func (c *loadCollector) collectLoads(ch chan<- prometheus.Metric) {
	if f := c.m.o.Slots; f != nil {
		busy, total := f()
		ch <- prometheus.MustNewConstMetric(c.busy, prometheus.GaugeValue, float64(busy))
		ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(total))
	}
	src := c.m.o.Source
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.m.o.ScrapeTimeout)
	defer cancel()
	loads, err := src.TenantLoads(ctx, c.m.o.Clock.Now())
	if err != nil {
		c.m.o.Logger.Warn("metrics: reading tenant loads", "err", err)
		ch <- prometheus.NewInvalidMetric(c.depth, err)
		return
	}
	keep := min(len(loads), c.m.o.MaxLabelSets)
	for i := range loads[:keep] {
		c.emit(ch, &loads[i], loads[i].TenantID)
	}
	if rest := loads[keep:]; len(rest) > 0 {
		other := store.TenantLoad{InFlight: map[invocation.Status]int64{}}
		quotas := 0
		for _, l := range rest {
			other.Ready += l.Ready
			other.Delayed += l.Delayed
			other.LeaseExpired += l.LeaseExpired
			for s, n := range l.InFlight {
				other.InFlight[s] += n
			}
			if l.Quotas.MaxConcurrentExecutions != nil {
				quotas++
			}
			if l.Quotas.MaxDefinitions != nil {
				quotas++
			}
		}
		c.emit(ch, &other, Other)
		c.droppedDepth.Add(float64(len(rest)))
		c.droppedFlight.Add(float64(len(rest)))
		c.droppedQuo.Add(float64(quotas))
	}
}

// emit sends one tenant's queue, in-flight and quota gauges (other's quotas are unset).
func (c *loadCollector) emit(ch chan<- prometheus.Metric, l *store.TenantLoad, tenant string) {
	gauge := func(d *prometheus.Desc, v float64, label string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, tenant, label)
	}
	gauge(c.depth, float64(l.Ready), "ready")
	gauge(c.depth, float64(l.Delayed), "delayed")
	gauge(c.depth, float64(l.LeaseExpired), "lease_expired")
	var total int64
	for _, s := range inFlight {
		n := l.InFlight[s]
		total += n
		gauge(c.inFlight, float64(n), string(s))
	}
	if q := l.Quotas.MaxConcurrentExecutions; q != nil && *q > 0 {
		// The quota counts running invocations (queued and suspended work holds no slot).
		gauge(c.quota, float64(l.InFlight[invocation.StatusRunning])/float64(*q), "max_concurrent_executions")
	}
	if q := l.Quotas.MaxDefinitions; q != nil && *q > 0 {
		gauge(c.quota, float64(l.Definitions)/float64(*q), "max_definitions")
	}
}

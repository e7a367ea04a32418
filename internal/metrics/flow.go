package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkrun/lark/internal/invocation"
)

// NATSStats are the NATS bridge's mirror counters, read at scrape time (natsbridge.Bridge's
// Mirrored, Duplicates, Dropped and Queued).
type NATSStats struct {
	Mirrored, Duplicates, Dropped, Queued int64
}

// flow holds the families of what starts work and what flows between services: runs by what
// started them, attempts by kind and outcome, events, event triggers, webhook deliveries and
// NATS messages. The tenant-keyed ones are capped like the invocation families; webhook
// deliveries and NATS messages have no tenant label (a refused delivery names a tenant the sender
// chose).
type flow struct {
	runs     *capped[prometheus.Counter]
	attempts *capped[prometheus.Counter]
	events   *capped[prometheus.Counter]
	waits    *capped[prometheus.Counter]
	triggers *capped[prometheus.Counter]
	webhooks *prometheus.CounterVec
	nats     *prometheus.CounterVec
}

// Label values shown (at 0) from the start, so that rate() and alerts see them before the first
// occurrence.
var (
	webhookOutcomes = []string{"accepted", "redelivered", "not_found", "source_not_allowed", "payload_too_large",
		"unauthorized", "replayed", "rate_limited", "invalid_payload", "failed"}
	natsOutcomes = []string{"published", "refused", "failed"}
)

// joined is two label values as the second half of a capped pair (split again by split).
func joined(a, b string) string { return a + "\x00" + b }

// split undoes joined; the __other__ pair of a full family gives (__other__, __other__).
func split(s string) (string, string) {
	a, b, ok := strings.Cut(s, "\x00")
	if !ok {
		return Other, Other
	}
	return a, b
}

// newFlow builds and registers the flow families.
func (m *Metrics) newFlow() *flow {
	f := &flow{}
	capped2 := func(name, help, label string) *capped[prometheus.Counter] {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"tenant", label})
		m.reg.MustRegister(v)
		return newCapped(m.o.MaxLabelSets, m.dropped.WithLabelValues(name),
			func(t, l string) prometheus.Counter { return v.WithLabelValues(t, l) })
	}
	capped1 := func(name, help string) *capped[prometheus.Counter] {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"tenant"})
		m.reg.MustRegister(v)
		return newCapped(m.o.MaxLabelSets, m.dropped.WithLabelValues(name),
			func(t, _ string) prometheus.Counter { return v.WithLabelValues(t) })
	}
	f.runs = capped2("lark_runs_started_total",
		"Invocations created, by what started them: api, replay, child, compensation, schedule, backfill, webhook, event_trigger.", "trigger")
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_attempts_total",
		Help: "Attempts that ended (function attempts, workflow and DAG activations), by kind and outcome."}, []string{"tenant", "kind", "outcome"})
	m.reg.MustRegister(attempts)
	f.attempts = newCapped(m.o.MaxLabelSets, m.dropped.WithLabelValues("lark_attempts_total"),
		func(t, ko string) prometheus.Counter { k, o := split(ko); return attempts.WithLabelValues(t, k, o) })
	f.events = capped1("lark_events_published_total", "Events stored (POST /events, r_emit_v1, NATS messages); replayed event ids are not.")
	f.waits = capped1("lark_events_delivered_total", "Waiting workflows (r_wait_event_v1) resumed by an event as it was published.")
	f.triggers = capped2("lark_trigger_outcomes_total",
		"What event triggers did: fired (an invocation started), refused (it could not be started), dead_lettered, redriven.", "outcome")
	f.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_webhook_deliveries_total",
		Help: "Webhook deliveries answered, by outcome: accepted, redelivered, or why they were refused."}, []string{"outcome"})
	f.nats = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_nats_messages_total",
		Help: "Messages received by event triggers' NATS subscriptions, by outcome: published, refused (dropped), failed (redelivered)."}, []string{"outcome"})
	for _, o := range webhookOutcomes {
		f.webhooks.WithLabelValues(o)
	}
	for _, o := range natsOutcomes {
		f.nats.WithLabelValues(o)
	}
	m.reg.MustRegister(f.webhooks, f.nats)
	if m.o.NATS != nil {
		m.reg.MustRegister(natsCollectors(m.o.NATS)...)
	}
	return f
}

// natsCollectors are the NATS bridge's mirror counters and queue, read at scrape time.
func natsCollectors(stats func() NATSStats) []prometheus.Collector {
	counter := func(name, help string, v func(NATSStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(stats())) })
	}
	return []prometheus.Collector{
		counter("lark_nats_mirrored_total", "Events mirrored to NATS (acknowledged by the stream).", func(s NATSStats) int64 { return s.Mirrored }),
		counter("lark_nats_mirror_duplicates_total", "Mirrored events the stream already held (its duplicate window).", func(s NATSStats) int64 { return s.Duplicates }),
		counter("lark_nats_mirror_dropped_total", "Events not mirrored to NATS (queue full, bridge closed, publish failed): the database keeps them.", func(s NATSStats) int64 { return s.Dropped }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lark_nats_mirror_queued", Help: "Events waiting in the mirror queue."},
			func() float64 { return float64(stats().Queued) }),
	}
}

// runTrigger is what started rec, as lark_runs_started_total's trigger label says it.
func runTrigger(rec invocation.Record) string {
	switch {
	case rec.Origin != "":
		return rec.Origin
	case rec.CompensationFor != "":
		return "compensation"
	case rec.ParentID != "":
		return "child"
	case rec.Replay != "":
		return "replay"
	case rec.Via == invocation.ViaTrigger:
		return invocation.OriginEventTrigger
	}
	return "api"
}

// AttemptEnded implements writer.AttemptObserver.
func (m *Metrics) AttemptEnded(rec invocation.Record, kind, outcome string) {
	m.flow.attempts.get(rec.TenantID, joined(kind, outcome)).Inc()
}

// EventPublished implements eventbus.Observer.
func (m *Metrics) EventPublished(tenantID string, delivered int) {
	m.flow.events.get(tenantID, "").Inc()
	if delivered > 0 {
		m.flow.waits.get(tenantID, "").Add(float64(delivered))
	}
}

// TriggerOutcome implements eventtrigger.Observer.
func (m *Metrics) TriggerOutcome(tenantID, outcome string) {
	m.flow.triggers.get(tenantID, outcome).Inc()
}

// WebhookDelivery implements webhookrecv.Observer.
func (m *Metrics) WebhookDelivery(outcome string) { m.flow.webhooks.WithLabelValues(outcome).Inc() }

// NATSMessage implements natsfeed.Observer.
func (m *Metrics) NATSMessage(outcome string) { m.flow.nats.WithLabelValues(outcome).Inc() }

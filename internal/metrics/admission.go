package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkrun/lark/internal/admission"
)

// admissionCollector reports the admission gate's figures at scrape time (Options.Admission):
// executions admitted and waiting, executions waiting for memory, and the memory reserved.
type admissionCollector struct {
	stats                              func() admission.Stats
	admitted, waiting, growing, memory *prometheus.Desc
}

func newAdmissionCollector(stats func() admission.Stats) *admissionCollector {
	return &admissionCollector{stats: stats,
		admitted: prometheus.NewDesc("lark_executions_admitted", "Executions of this process admitted to run (their timeouts running).", nil, nil),
		waiting: prometheus.NewDesc("lark_executions_waiting",
			"Executions of this process waiting to be admitted (a tenant's runnable bound or the memory budgets), their timeouts not yet started.", nil, nil),
		growing: prometheus.NewDesc("lark_executions_waiting_memory",
			"Admitted executions paused until the memory they need is given back by others.", nil, nil),
		memory: prometheus.NewDesc("lark_execution_memory_reserved_bytes",
			"Memory reserved by this process's running executions (their accounted allocations, rounded up).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.admitted, c.waiting, c.growing, c.memory} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.admitted, prometheus.GaugeValue, float64(s.Admitted))
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(s.Waiting))
	ch <- prometheus.MustNewConstMetric(c.growing, prometheus.GaugeValue, float64(s.Growing))
	ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, float64(s.Reserved))
}

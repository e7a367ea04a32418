package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// dagFamilies are the DAG families (004 §9.1, as Lark names them): tasks ended by state with their
// duration, quality check results, and materializations by state. They are labelled by tenant and
// state or result only: asset keys and check names are unbounded user strings (the Assets API
// has them per asset).
type dagFamilies struct {
	tasks        *capped[prometheus.Counter]
	taskDuration *capped[prometheus.Observer]
	checks       *capped[prometheus.Counter]
	mats         *capped[prometheus.Counter]
}

// TaskDurationBuckets are lark_dag_task_duration_seconds's buckets (004 §9.1).
var TaskDurationBuckets = []float64{1, 5, 15, 60, 300, 900, 3600}

// newDAG builds and registers the DAG families.
func (m *Metrics) newDAG() *dagFamilies {
	tasks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_dag_tasks_total",
		Help: "DAG tasks that ended, by state (succeeded, failed, skipped, cancelled)."}, []string{"tenant", "state"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lark_dag_task_duration_seconds",
		Help: "Time from a DAG task's queueing to its end (its child's queue wait, attempts and retries included).", Buckets: TaskDurationBuckets},
		[]string{"tenant"})
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_dag_checks_total",
		Help: "Quality checks run on DAG task outputs, by result (passed, failed, skipped)."}, []string{"tenant", "result"})
	mats := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lark_materializations_total",
		Help: "Asset materializations recorded, by state (promoted, quarantined)."}, []string{"tenant", "state"})
	m.reg.MustRegister(tasks, dur, checks, mats)
	cap2 := func(name string, v *prometheus.CounterVec) *capped[prometheus.Counter] {
		return newCapped(m.o.MaxLabelSets, m.dropped.WithLabelValues(name),
			func(t, s string) prometheus.Counter { return v.WithLabelValues(t, s) })
	}
	return &dagFamilies{tasks: cap2("lark_dag_tasks_total", tasks), checks: cap2("lark_dag_checks_total", checks),
		mats: cap2("lark_materializations_total", mats),
		taskDuration: newCapped(m.o.MaxLabelSets, m.dropped.WithLabelValues("lark_dag_task_duration_seconds"),
			func(t, _ string) prometheus.Observer { return dur.WithLabelValues(t) })}
}

// TaskEnded implements dagrun.Observer.
func (m *Metrics) TaskEnded(tenantID, state string, queued time.Duration) {
	m.dag.tasks.get(tenantID, state).Inc()
	if queued > 0 {
		m.dag.taskDuration.get(tenantID, "").Observe(queued.Seconds())
	}
}

// CheckRan implements dagrun.Observer.
func (m *Metrics) CheckRan(tenantID, result string) { m.dag.checks.get(tenantID, result).Inc() }

// Materialized implements dagrun.Observer.
func (m *Metrics) Materialized(tenantID, state string) { m.dag.mats.get(tenantID, state).Inc() }

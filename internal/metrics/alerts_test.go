package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/larkrun/lark/internal/admission"
	"github.com/larkrun/lark/internal/groupcommit"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/metrics"
	"github.com/larkrun/lark/internal/retention"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// alertsFile is the alerting rules the docs point operators to (docs/observability.md, "Alerts").
const alertsFile = "../../deploy/prometheus/alerts.yml"

// commitSource is a Source with group-commit histograms (both stores are).
type commitSource struct{ fakeSource }

func (*commitSource) CommitHistograms() (size, latency groupcommit.Histogram) {
	return groupcommit.Histogram{}, groupcommit.Histogram{}
}

func (*commitSource) CommitReruns() uint64 { return 0 }

// exportedFamilies is every family name a fully wired Metrics exposes, each observer having been
// called once (a labelled family shows only once it has a series).
func exportedFamilies(t *testing.T) map[string]bool {
	t.Helper()
	src := &commitSource{fakeSource{loads: []store.TenantLoad{{TenantID: "acme", Ready: 1,
		InFlight: map[invocation.Status]int64{invocation.StatusRunning: 1}, Quotas: tenant.Quotas{MaxConcurrentExecutions: i64(2)}}}}}
	m := metrics.New(metrics.Options{Source: src, Slots: func() (int, int) { return 1, 2 }, Admission: func() admission.Stats { return admission.Stats{} },
		BulkWaiting: func() int64 { return 0 }, NATS: func() metrics.NATSStats { return metrics.NATSStats{} }})
	h := m.Handler() // registers the promhttp_* families
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/metrics", nil))
	rec := finishedRec("acme", "ep", invocation.StatusSucceeded, time.Second)
	m.Created(rec)
	m.Dequeued(rec, time.Second)
	m.Finished(rec)
	m.RateLimited("acme", "ep")
	m.QuotaExceeded("acme", "max_definitions")
	m.MaintenanceFailure("retention")
	m.ObserveRequest("/healthz", http.MethodGet, http.StatusOK, time.Millisecond)
	m.FireLag(time.Second)
	m.RetentionPassed(true, retention.Purged{})
	m.TaskEnded("acme", "succeeded", time.Second)
	m.CheckRan("acme", "passed")
	m.Materialized("acme", "promoted")
	m.AttemptEnded(rec, "function", "succeeded")
	m.EventPublished("acme", 1)
	m.TriggerOutcome("acme", "fired")
	m.WebhookDelivery("accepted")
	m.NATSMessage("published")
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	out := map[string]bool{}
	for _, mf := range mfs {
		out[mf.GetName()] = true
	}
	return out
}

// promqlWords are the PromQL keywords and functions an expression may use besides metric names.
var promqlWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true}

var (
	promqlStrings = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promqlLabels  = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent   = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
)

// metricNames lists the metric names a PromQL expression selects: identifiers that are not
// functions (followed by "("), keywords, label names or values, durations or numbers.
func metricNames(expr string) []string {
	expr = promqlStrings.ReplaceAllString(expr, `""`)
	expr = promqlLabels.ReplaceAllString(expr, " ")
	var out []string
	for _, m := range promqlIdent.FindAllStringSubmatch(expr, -1) {
		if m[1] != "" || promqlWords[strings.ToLower(m[0])] {
			continue
		}
		out = append(out, m[0])
	}
	return out
}

func TestMetricNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"lark_a_total", "lark_b_bucket"}, metricNames(
		`sum by (tenant, le) (rate(lark_a_total{status=~"a|b", x='y'}[5m])) / on(tenant) histogram_quantile(0.9, lark_b_bucket[1h]) > 2 * 0.5`))
}

// TestAlertRulesNameExportedFamilies: every expression of the alerting rules selects only series
// Lark exports (a family, or a histogram's _bucket, _sum or _count), so renaming or removing a
// family cannot silently break an alert. promtool check rules (CI) checks the syntax.
func TestAlertRulesNameExportedFamilies(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(alertsFile)
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	families := exportedFamilies(t)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Expr, "rule %s/%s", g.Name, r.Alert)
			names := metricNames(r.Expr)
			require.NotEmpty(t, names, "rule %s selects no metric: %s", r.Alert, r.Expr)
			for _, name := range names {
				base := name
				for _, sfx := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(name, sfx); ok && families[b] {
						base = b
					}
				}
				require.True(t, families[base], "rule %s names %s, which Lark does not export", r.Alert, name)
			}
			n++
		}
	}
	require.Positive(t, n)
}

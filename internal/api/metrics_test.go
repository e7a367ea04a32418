package api_test

// GET /metrics: the Prometheus exposition an operator scrapes, parsed as Prometheus would, after
// real invocations (succeeded, failed, rate-limited, over quota, queued then dispatched).

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/ratelimit"
	"github.com/larkrun/lark/internal/server"
)

// scrape is one parsed answer of GET /metrics.
type scrape map[string]*dto.MetricFamily

// scrapeMetrics GETs /metrics with token ("" for none), requires 200 in the text format and parses it.
func (e *env) scrapeMetrics(t *testing.T, token string) scrape {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.ts.URL+"/metrics", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := e.client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", body)
	require.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain; version=0.0.4"), "the text exposition format: %s", res.Header.Get("Content-Type"))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "%s", body)
	return fams
}

// value returns the sample of a family whose labels are exactly labels (name=value pairs); for a
// histogram, name may end in _count or _sum. The second result says whether there is one.
func (s scrape) value(name string, labels ...string) (float64, bool) {
	suffix := ""
	fam := s[name]
	for _, sfx := range []string{"_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, sfx); fam == nil && ok && s[base] != nil {
			fam, suffix = s[base], sfx
		}
	}
	if fam == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range fam.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			match = match && want[l.GetName()] == l.GetValue()
		}
		if !match {
			continue
		}
		switch {
		case suffix == "_count":
			return float64(m.GetHistogram().GetSampleCount()), true
		case suffix == "_sum":
			return m.GetHistogram().GetSampleSum(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// require asserts the sample's value.
func (s scrape) require(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	v, ok := s.value(name, labels...)
	require.True(t, ok, "no sample %s%v", name, labels)
	require.Equal(t, want, v, "%s%v", name, labels)
}

// series lists the label values of one label across a family's samples.
func (s scrape) series(name, label string) []string {
	var out []string
	for _, m := range s[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out = append(out, l.GetValue())
			}
		}
	}
	return out
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.Clock = clk })
	acme := invTenant(t, e, "acme")
	globex := invTenant(t, e, "globex")
	const ret = "def main(ctx, input):\n    return {\"ok\": True}\n"
	ok := e.registerActive(t, acme, invFn(t, "metrics.ok.v1~", ret))["entrypoint_id"].(string)
	broken := e.registerActive(t, acme, invFn(t, "metrics.broken.v1~", "def main(ctx, input):\n    fail(\"boom\")\n"))["entrypoint_id"].(string)
	limited := e.registerActive(t, acme, invFn(t, "metrics.limited.v1~", ret,
		set("traits.rate_limit", obj{"strategy": ratelimit.TokenBucketStrategy, "config": obj{"max_requests_per_minute": 1}})))["entrypoint_id"].(string)
	globexOK := e.registerActive(t, globex, invFn(t, "metrics.ok.v1~", ret))["entrypoint_id"].(string)
	start := func(tok, id, mode string, status int) {
		t.Helper()
		r := invStart(t, e, tok, obj{"entrypoint_id": id, "mode": mode, "params": obj{}}, nil)
		require.Equal(t, status, r.Status, "%s", r)
	}

	t.Run("only the platform operator may scrape", func(t *testing.T) {
		e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, "/metrics", "", nil)
		e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, "/metrics", "lark_wrong", nil)
		r := e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, "/metrics", acme, nil)
		require.Contains(t, r.Body["detail"], "platform operator")
		e.scrapeMetrics(t, operator)
	})

	for range 2 {
		start(acme, ok, "sync", http.StatusOK)
	}
	start(acme, broken, "sync", http.StatusOK) // a failed invocation is still a 200 InvocationResult
	start(acme, limited, "sync", http.StatusOK)
	start(acme, limited, "sync", http.StatusTooManyRequests)
	start(acme, limited, "sync", http.StatusTooManyRequests)
	start(globex, globexOK, "sync", http.StatusOK)
	// Quotas: acme may run 2 at once (the two async starts queue; 2 s later a claim runs both — the
	// dispatcher is not running, so their attempts wait below — and a third start is refused);
	// globex may hold 1 definition (it has one).
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"quotas": obj{"max_concurrent_executions": 2}})
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("globex"), operator, obj{"quotas": obj{"max_definitions": 1}})
	start(acme, ok, "async", http.StatusAccepted)
	start(acme, ok, "async", http.StatusAccepted)
	clk.Advance(2 * time.Second)
	claimed, err := e.srv.Claims.Claim(context.Background(), 8)
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	start(acme, ok, "async", http.StatusTooManyRequests)
	e.expectProblem(t, http.StatusTooManyRequests, "quota_exceeded", http.MethodPost, base+"/entrypoints", globex,
		invFn(t, "metrics.other.v1~", ret))

	t.Run("counters by tenant, entrypoint and status; queue and quota gauges", func(t *testing.T) {
		s := e.scrapeMetrics(t, operator)
		s.require(t, 4, "lark_invocations_started_total", "tenant", "acme", "entrypoint", ok)
		s.require(t, 1, "lark_invocations_started_total", "tenant", "acme", "entrypoint", broken)
		s.require(t, 1, "lark_invocations_started_total", "tenant", "acme", "entrypoint", limited)
		s.require(t, 1, "lark_invocations_started_total", "tenant", "globex", "entrypoint", globexOK)
		s.require(t, 2, "lark_invocations_finished_total", "tenant", "acme", "entrypoint", ok, "status", "succeeded")
		s.require(t, 0, "lark_invocations_finished_total", "tenant", "acme", "entrypoint", ok, "status", "dead_lettered")
		s.require(t, 1, "lark_invocations_finished_total", "tenant", "acme", "entrypoint", broken, "status", "dead_lettered")
		s.require(t, 0, "lark_invocations_finished_total", "tenant", "acme", "entrypoint", broken, "status", "succeeded")
		s.require(t, 1, "lark_invocations_finished_total", "tenant", "globex", "entrypoint", globexOK, "status", "succeeded")
		s.require(t, 2, "lark_invocation_duration_seconds_count", "tenant", "acme", "entrypoint", ok)
		s.require(t, 2, "lark_invocations_rate_limited_total", "tenant", "acme", "entrypoint", limited)
		_, found := s.value("lark_invocations_rate_limited_total", "tenant", "globex", "entrypoint", globexOK)
		require.False(t, found, "no refusals, no series")
		s.require(t, 1, "lark_quota_exceeded_total", "tenant", "acme", "quota", "max_concurrent_executions")
		s.require(t, 1, "lark_quota_exceeded_total", "tenant", "globex", "quota", "max_definitions")

		s.require(t, 0, "lark_queue_depth", "tenant", "acme", "state", "ready")
		s.require(t, 0, "lark_queue_depth", "tenant", "acme", "state", "delayed")
		s.require(t, 0, "lark_queue_depth", "tenant", "globex", "state", "ready")
		s.require(t, 0, "lark_invocations_in_flight", "tenant", "acme", "status", "queued")
		s.require(t, 2, "lark_invocations_in_flight", "tenant", "acme", "status", "running")
		s.require(t, 1, "lark_quota_usage_ratio", "tenant", "acme", "quota", "max_concurrent_executions")
		s.require(t, 1, "lark_quota_usage_ratio", "tenant", "globex", "quota", "max_definitions")
		_, found = s.value("lark_quota_usage_ratio", "tenant", "globex", "quota", "max_concurrent_executions")
		require.False(t, found, "globex has no concurrency quota")
		s.require(t, 0, "lark_dispatcher_slots_busy")
		s.require(t, 64, "lark_dispatcher_slots")
		require.NotNil(t, s["go_goroutines"], "Go runtime collector")
		require.NotNil(t, s["process_resident_memory_bytes"], "process collector")
	})

	t.Run("claimed work finishes: queue wait observed on the injected clock", func(t *testing.T) {
		for _, a := range claimed {
			e.srv.Invoke.Runner().Run(context.Background(), a)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := e.scrapeMetrics(t, operator)
			if v, _ := s.value("lark_invocations_finished_total", "tenant", "acme", "entrypoint", ok, "status", "succeeded"); v == 4 {
				s.require(t, 0, "lark_queue_depth", "tenant", "acme", "state", "ready")
				s.require(t, 0, "lark_invocations_in_flight", "tenant", "acme", "status", "queued")
				s.require(t, 0, "lark_quota_usage_ratio", "tenant", "acme", "quota", "max_concurrent_executions")
				s.require(t, 2, "lark_invocation_queue_wait_seconds_count", "tenant", "acme")
				s.require(t, 4, "lark_invocation_queue_wait_seconds_sum", "tenant", "acme")
				return
			}
			require.True(t, time.Now().Before(deadline), "the queued invocations did not finish")
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestMetricsLabelCap: past --metrics-max-label-sets label sets, a family records new ones under
// __other__ and lark_metrics_labels_dropped_total rises; gauges fold the tenants past the cap.
func TestMetricsLabelCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MetricsMaxLabelSets = 2 })
	acme := invTenant(t, e, "acme")
	invTenant(t, e, "globex")
	invTenant(t, e, "initech")
	var ids []string
	for _, name := range []string{"a", "b", "c", "d"} {
		id := e.registerActive(t, acme, invFn(t, "cap."+name+".v1~", "def main(ctx, input):\n    return {}\n"))["entrypoint_id"].(string)
		ids = append(ids, id)
		invCall(t, e, acme, http.StatusOK, obj{"entrypoint_id": id, "params": obj{}}, nil)
	}
	s := e.scrapeMetrics(t, operator)
	s.require(t, 1, "lark_invocations_started_total", "tenant", "acme", "entrypoint", ids[0])
	s.require(t, 1, "lark_invocations_started_total", "tenant", "acme", "entrypoint", ids[1])
	s.require(t, 2, "lark_invocations_started_total", "tenant", "__other__", "entrypoint", "__other__")
	require.Len(t, s["lark_invocations_started_total"].GetMetric(), 3, "two label sets and __other__")
	s.require(t, 2, "lark_invocations_finished_total", "tenant", "__other__", "entrypoint", "__other__", "status", "succeeded")
	s.require(t, 2, "lark_metrics_labels_dropped_total", "metric", "lark_invocations_started_total")
	s.require(t, 2, "lark_metrics_labels_dropped_total", "metric", "lark_invocations_finished_total")
	s.require(t, 2, "lark_metrics_labels_dropped_total", "metric", "lark_invocation_duration_seconds")
	require.ElementsMatch(t, []string{"acme", "acme", "acme", "globex", "globex", "globex", "__other__", "__other__", "__other__"},
		s.series("lark_queue_depth", "tenant"), "initech, third in tenant order, is folded")
	s.require(t, 1, "lark_metrics_labels_dropped_total", "metric", "lark_queue_depth")
}

// TestMetricsPublic: with --metrics-public, /metrics answers without a token.
func TestMetricsPublic(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MetricsPublic = true })
	s := e.scrapeMetrics(t, "")
	require.NotNil(t, s["lark_dispatcher_slots"])
}

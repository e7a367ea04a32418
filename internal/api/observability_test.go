package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
)

// logSink collects a server's JSON log lines.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// lines returns the decoded log lines whose msg is msg.
func (s *logSink) lines(t *testing.T, msg string) []obj {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []obj
	for _, l := range strings.Split(strings.TrimSpace(s.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m obj
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// loggedEnv is a server logging JSON into a sink at a run-time level (PUT /admin/log-level).
func loggedEnv(t *testing.T, mod ...func(*server.Config)) (*env, *logSink, *slog.LevelVar) {
	t.Helper()
	sink := &logSink{}
	level := new(slog.LevelVar)
	e := newEnv(t, append([]func(*server.Config){func(c *server.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: level}))
		c.Telemetry.LogLevel = level
	}}, mod...)...)
	return e, sink, level
}

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestAccessLog: each request writes one info line once answered, carrying the route template,
// the status, the correlation and trace ids and, once authentication found them, the tenant and
// subject; never the query string. --access-log=false moves the lines to debug.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	e, sink, _ := loggedEnv(t)
	adm := e.tenant(t, "acme")
	r := e.send(t, request{method: http.MethodGet, path: epPath("ep_missing") + "?include_source=true", token: adm,
		header: map[string]string{"X-Correlation-Id": "corr-access-1"}})
	require.Equal(t, http.StatusNotFound, r.Status)
	var line obj
	for _, l := range sink.lines(t, "http request") {
		if l["correlation_id"] == "corr-access-1" {
			require.Nil(t, line, "one line per request")
			line = l
		}
	}
	require.NotNil(t, line)
	require.Equal(t, "INFO", line["level"])
	require.Equal(t, "acme", line["tenant_id"])
	require.Equal(t, "admin", line["subject_id"])
	require.Equal(t, "GET", line["method"])
	require.Equal(t, base+"/entrypoints/{id}", line["route"])
	require.Equal(t, base+"/entrypoints/ep_missing", line["path"], "the path, never the query")
	require.EqualValues(t, 404, line["status"])
	require.Equal(t, r.Body["trace_id"], line["trace_id"])
	require.Regexp(t, hex32, line["trace_id"])

	// A request that fails authentication is logged without a tenant.
	e.send(t, request{method: http.MethodGet, path: base + "/entrypoints", token: "nope", header: map[string]string{"X-Correlation-Id": "corr-access-2"}})
	for _, l := range sink.lines(t, "http request") {
		if l["correlation_id"] == "corr-access-2" {
			require.EqualValues(t, 401, l["status"])
			require.NotContains(t, l, "tenant_id")
		}
	}

	off, offSink, _ := loggedEnv(t, func(c *server.Config) { c.Telemetry.AccessLogOff = true })
	off.expect(t, http.StatusOK, http.MethodGet, "/healthz", "", nil)
	require.Empty(t, offSink.lines(t, "http request"), "--access-log=false: no line at info")
}

// TestLogLevelAtRunTime: the platform operator reads and changes the level with GET and PUT
// /admin/log-level; a lower level shows lines at once (here the access log's debug lines); a
// tenant cannot; a bad level is 422.
func TestLogLevelAtRunTime(t *testing.T) {
	t.Parallel()
	e, sink, level := loggedEnv(t, func(c *server.Config) { c.Telemetry.AccessLogOff = true })
	adm := e.tenant(t, "acme")
	require.Equal(t, obj{"level": "info"}, e.expect(t, http.StatusOK, http.MethodGet, base+"/admin/log-level", operator, nil).Body)
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPut, base+"/admin/log-level", adm, obj{"level": "debug"})
	e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPut, base+"/admin/log-level", operator, obj{"level": "loud"})
	e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPut, base+"/admin/log-level", operator, obj{"level": "info", "x": 1})

	e.expect(t, http.StatusOK, http.MethodGet, "/healthz", "", nil)
	require.Empty(t, sink.lines(t, "http request"), "debug lines hidden at info")
	require.Equal(t, obj{"level": "debug"}, e.expect(t, http.StatusOK, http.MethodPut, base+"/admin/log-level", operator, obj{"level": "debug"}).Body)
	require.Equal(t, slog.LevelDebug, level.Level())
	require.Len(t, sink.lines(t, "log level changed"), 1)
	e.expect(t, http.StatusOK, http.MethodGet, "/healthz", "", nil)
	var health []obj
	for _, l := range sink.lines(t, "http request") {
		if l["route"] == "/healthz" {
			health = append(health, l)
		}
	}
	require.Len(t, health, 1, "the debug line shows once the level is debug")
	require.Equal(t, "DEBUG", health[0]["level"])
	require.Equal(t, obj{"level": "debug"}, e.expect(t, http.StatusOK, http.MethodGet, base+"/admin/log-level", operator, nil).Body)
}

// TestRunLogLines: a succeeded invocation writes one debug line "run finished" (none at info), a
// dead-lettered one a warn line "run dead-lettered", each with tenant, entrypoint, invocation,
// correlation and trace ids.
func TestRunLogLines(t *testing.T) {
	t.Parallel()
	e, sink, level := loggedEnv(t)
	adm := invTenant(t, e, "acme")
	e.registerActive(t, adm, invFn(t, "logs.ok.v1~", "def main(ctx, input):\n  return {}\n"))
	e.registerActive(t, adm, invFn(t, "logs.bad.v1~", "def main(ctx, input):\n  fail(\"boom\")\n"))
	invSync(t, e, adm, fnPrefix+"vendor.app.logs.ok.v1~", obj{}, nil)
	require.Empty(t, sink.lines(t, "run finished"), "a succeeded run logs nothing at info")
	level.Set(slog.LevelDebug)
	ok := invSync(t, e, adm, fnPrefix+"vendor.app.logs.ok.v1~", obj{}, map[string]string{"X-Correlation-Id": "corr-run-ok"})
	level.Set(slog.LevelInfo)
	bad, _ := invCall(t, e, adm, http.StatusOK, obj{"entrypoint_id": fnPrefix + "vendor.app.logs.bad.v1~", "mode": "sync", "params": obj{}},
		map[string]string{"X-Correlation-Id": "corr-run-bad"})
	require.Equal(t, "dead_lettered", bad["status"])

	check := func(l obj, rec obj, entrypoint, corr string) {
		t.Helper()
		require.Equal(t, "acme", l["tenant_id"])
		require.Equal(t, entrypoint, l["entrypoint_id"])
		require.Equal(t, invID(rec), l["invocation_id"])
		require.Equal(t, corr, l["correlation_id"])
		require.Equal(t, rec["observability"].(obj)["trace_id"], l["trace_id"])
		require.Regexp(t, hex32, l["trace_id"])
	}
	finished := sink.lines(t, "run finished")
	require.Len(t, finished, 1)
	require.Equal(t, "DEBUG", finished[0]["level"])
	require.Equal(t, "succeeded", finished[0]["status"])
	check(finished[0], ok, fnPrefix+"vendor.app.logs.ok.v1~", "corr-run-ok")
	dead := sink.lines(t, "run dead-lettered")
	require.Len(t, dead, 1)
	require.Equal(t, "WARN", dead[0]["level"])
	check(dead[0], bad, fnPrefix+"vendor.app.logs.bad.v1~", "corr-run-bad")
}

// TestOperationalMetrics: /metrics shows the HTTP, group-commit, fire-lag, retention and build
// families; HTTP requests are labelled by route template, never by raw path or id.
func TestOperationalMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")
	e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints", adm, nil)
	e.expect(t, http.StatusNotFound, http.MethodGet, epPath("ep_0123456789abcdef"), adm, nil)
	e.probesUnknownRoutes() // an unknown path: its metrics must not carry it
	e.expect(t, http.StatusNotFound, http.MethodGet, "/no/such/path/ep_fedcba", "", nil)
	_, err := e.srv.Retention.RunOnce(t.Context())
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, e.ts.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+operator)
	res, err := e.client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	text := string(raw)
	for _, want := range []string{
		`lark_http_requests_total{code="200",method="GET",route="/api/serverless-runtime/v1/entrypoints"} 1`,
		`lark_http_requests_total{code="404",method="GET",route="/api/serverless-runtime/v1/entrypoints/{id}"} 1`,
		`lark_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`lark_http_request_duration_seconds_bucket{method="GET",route="/api/serverless-runtime/v1/entrypoints",le="+Inf"} 1`,
		`lark_groupcommit_batch_size_bucket{le="1"}`,
		`lark_groupcommit_batch_duration_seconds_count`,
		`lark_scheduler_fire_lag_seconds_count 0`,
		`lark_retention_passes_total{outcome="ok"} 1`,
		`lark_retention_passes_total{outcome="failed"} 0`,
		`lark_retention_purged_total{kind="invocations"} 0`,
		`lark_build_info{commit=`,
		`lark_invocation_queue_wait_seconds`,
	} {
		require.Contains(t, text, want)
	}
	require.Regexp(t, `lark_build_info\{commit="[^"]+",go_version="go[^"]+",version="[^"]+"\} 1`, text)
	require.NotContains(t, text, "ep_0123456789abcdef", "no raw ids in labels")
	require.NotContains(t, text, "/no/such/path")
	require.NotRegexp(t, `lark_groupcommit_batch_size_count 0\n`, text, "the writes above were committed in batches")
}

// TestTracingOffByDefault: without an endpoint there is no exporter; requests still get trace ids
// (a caller's traceparent is kept) and records carry them. It stays serial: t.Setenv (the
// environment is the process's) forbids t.Parallel.
func TestTracingOffByDefault(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	e := newEnv(t)
	require.False(t, e.srv.Tracing.Enabled(), "no exporter")
	adm := invTenant(t, e, "acme")
	e.registerActive(t, adm, invFn(t, "off.ok.v1~", "def main(ctx, input):\n  return {}\n"))
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	rec := invSync(t, e, adm, fnPrefix+"vendor.app.off.ok.v1~", obj{}, map[string]string{"Traceparent": "00-" + traceID + "-b7ad6b7169203331-01"})
	require.Equal(t, traceID, rec["observability"].(obj)["trace_id"])
	require.Regexp(t, `^[0-9a-f]{16}$`, rec["observability"].(obj)["span_id"])
	require.NotEqual(t, "b7ad6b7169203331", rec["observability"].(obj)["span_id"], "a span of its own")
}

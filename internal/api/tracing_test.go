package api_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/workerclient"
	"github.com/larkrun/lark/internal/workerexec"
)

// otlpReceiver is an in-process OTLP/HTTP collector: it decodes the protobuf export requests the
// server sends to /v1/traces and keeps their spans.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want protobuf on /v1/traces", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		out, err := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// named returns the spans received so far whose name starts with prefix.
func (rc *otlpReceiver) named(prefix string) []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rc.spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// await flushes the server's spans until cond holds of the receiver, or fails after 10 s.
func (rc *otlpReceiver) await(t *testing.T, tr *tracing.Tracing, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "spans never arrived: %s", what)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		require.NoError(t, tr.ForceFlush(ctx))
		cancel()
		time.Sleep(10 * time.Millisecond)
	}
}

func hexID(b []byte) string { return hex.EncodeToString(b) }

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key != key {
			continue
		}
		if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
			return strconv.FormatInt(v.IntValue, 10)
		}
		return kv.Value.GetStringValue()
	}
	return ""
}

// upstream is an HTTP service user code calls; it keeps the traceparent of each request.
type upstream struct {
	*httptest.Server
	mu           sync.Mutex
	traceparents []string
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.traceparents = append(u.traceparents, r.Header.Get("Traceparent"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.traceparents...)
}

// exportingTo is tracing exporting over OTLP/HTTP to rc (the production exporter).
func exportingTo(t *testing.T, rc *otlpReceiver) *tracing.Tracing {
	t.Helper()
	tr, err := tracing.New(context.Background(), tracing.Config{Endpoint: rc.URL, Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	require.True(t, tr.Enabled())
	return tr
}

// tracedEnv is a server exporting its spans over OTLP/HTTP to rc.
func tracedEnv(t *testing.T, rc *otlpReceiver) (*env, *tracing.Tracing) {
	t.Helper()
	tr := exportingTo(t, rc)
	e := newEnv(t, func(c *server.Config) {
		c.UnsafeEgressAllowLoopback = true
		c.Telemetry.Tracing = tr
	})
	return e, tr
}

// TestTraceOfASyncWorkflow: a sync workflow invoked with a W3C traceparent exports the span tree
// request → attempt → steps → r_http calls in the caller's trace, to an OTLP/HTTP collector; the
// upstream the steps call receives a traceparent of that trace naming the r_http span; the record's
// trace_id is the caller's. Attributes carry ids, never params or URLs.
func TestTraceOfASyncWorkflow(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	up := newUpstream(t)
	e, tr := tracedEnv(t, rc)
	adm := invTenant(t, e, "acme")
	src := `
def call(ctx, input):
    return r_await(r_http_get_v1("` + up.URL + `/thing?secret=shh", timeout_ms=5000)).response.status_code

def main(ctx, input):
    a = r_run_step_v1("first", call, 1)
    b = r_run_step_v1("second", call, 2)
    return {"a": a.ok, "b": b.ok}
`
	e.registerActive(t, adm, wfBody(t, "traced.v1~", src))
	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	rec := invSync(t, e, adm, wfPrefix+"vendor.app.orders.traced.v1~", obj{"card": "4111-secret"},
		map[string]string{"Traceparent": "00-" + traceID + "-" + callerSpan + "-01"})
	require.Equal(t, "succeeded", rec["status"], "%v", rec)
	require.Equal(t, traceID, rec["observability"].(obj)["trace_id"])

	rc.await(t, tr, "request, attempt, 2 steps, 2 r_http", func() bool {
		return len(rc.named("POST /api/serverless-runtime/v1/invocations")) == 1 && len(rc.named("invocation.attempt")) == 1 &&
			len(rc.named("workflow.step")) == 2 && len(rc.named("r_http")) == 2
	})
	req := rc.named("POST /api/serverless-runtime/v1/invocations")[0]
	require.Equal(t, traceID, hexID(req.TraceId))
	require.Equal(t, callerSpan, hexID(req.ParentSpanId), "the request span continues the caller's")

	// A route with a parameter is named by its template, without the router's regular expression.
	e.expect(t, http.StatusOK, http.MethodGet, base+"/invocations/"+invID(rec), adm, nil)
	const getRoute = "/api/serverless-runtime/v1/invocations/{id}"
	rc.await(t, tr, "the GET's span", func() bool { return len(rc.named("GET "+getRoute)) == 1 })
	require.Equal(t, getRoute, attr(rc.named("GET " + getRoute)[0], "http.route"))
	require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, req.Kind)
	require.Equal(t, hexID(req.SpanId), rec["observability"].(obj)["span_id"], "the record names the request's span")

	att := rc.named("invocation.attempt")[0]
	require.Equal(t, traceID, hexID(att.TraceId))
	require.Equal(t, hexID(req.SpanId), hexID(att.ParentSpanId), "attempt ⊂ request")
	require.Equal(t, "acme", attr(att, "lark.tenant_id"))
	require.Equal(t, invID(rec), attr(att, "lark.invocation_id"))
	require.Equal(t, wfPrefix+"vendor.app.orders.traced.v1~", attr(att, "lark.entrypoint_id"))
	require.Equal(t, "1", attr(att, "lark.attempt"))
	require.Equal(t, "succeeded", attr(att, "lark.status"))

	steps := map[string]*tracepb.Span{}
	for _, s := range rc.named("workflow.step") {
		require.Equal(t, hexID(att.SpanId), hexID(s.ParentSpanId), "step ⊂ attempt")
		steps[hexID(s.SpanId)] = s
	}
	var names []string
	httpSpans := map[string]bool{}
	for _, h := range rc.named("r_http") {
		require.Equal(t, "r_http GET", h.Name)
		st, ok := steps[hexID(h.ParentSpanId)]
		require.True(t, ok, "r_http ⊂ step")
		names = append(names, attr(st, "lark.step"))
		require.Equal(t, "127.0.0.1", attr(h, "server.address"))
		require.Equal(t, "GET", attr(h, "http.request.method"))
		require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, h.Kind)
		httpSpans[hexID(h.SpanId)] = true
	}
	require.ElementsMatch(t, []string{"first", "second"}, names)

	seen := up.seen()
	require.Len(t, seen, 2)
	for _, tp := range seen {
		parts := strings.Split(tp, "-")
		require.Len(t, parts, 4, tp)
		require.Equal(t, traceID, parts[1], "the upstream continues the caller's trace")
		require.True(t, httpSpans[parts[2]], "the upstream's parent is the r_http span %s", tp)
	}

	// No params, results, URLs with queries or payloads in any span.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, s := range rc.spans {
		for _, kv := range s.Attributes {
			v := kv.Value.String()
			require.NotContains(t, v, "4111-secret", "span %s attribute %s", s.Name, kv.Key)
			require.NotContains(t, v, "shh", "span %s attribute %s", s.Name, kv.Key)
			require.NotContains(t, v, "/thing", "span %s attribute %s", s.Name, kv.Key)
		}
	}
}

// TestTraceOfAnAsyncInvocationAndItsChild: the trace context survives the queue: the attempt of an
// async invocation, run by the dispatcher, is a child of the request that queued it (with the queue
// wait as an attribute); an r_invoke_v1 child's attempt is a child of the call's span, and its
// r_http call carries the same trace to the upstream.
func TestTraceOfAnAsyncInvocationAndItsChild(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	up := newUpstream(t)
	e, tr := tracedEnv(t, rc)
	adm := invTenant(t, e, "acme")
	e.registerActive(t, adm, invFn(t, "billing.leaf.v1~", `
def main(ctx, input):
    r_await(r_http_get_v1(input.url, timeout_ms=5000))
    return {}
`))
	e.registerActive(t, adm, invFn(t, "billing.parent.v1~", `
def main(ctx, input):
    r = r_await(r_invoke_v1("`+fnPrefix+`vendor.app.billing.leaf.v1~", {"url": input.url}, timeout_ms=5000))
    return {"ok": r.ok}
`))
	invDispatcher(t, e)
	rec := invAsync(t, e, adm, fnPrefix+"vendor.app.billing.parent.v1~", obj{"url": up.URL}, nil)
	done := invWait(t, e, adm, invID(rec), "succeeded")
	traceID := done["observability"].(obj)["trace_id"].(string)

	rc.await(t, tr, "request, 2 attempts, r_invoke_v1, r_http", func() bool {
		return len(rc.named("POST /api/serverless-runtime/v1/invocations")) == 1 && len(rc.named("invocation.attempt")) == 2 &&
			len(rc.named("r_invoke_v1")) == 1 && len(rc.named("r_http")) == 1
	})
	req := rc.named("POST /api/serverless-runtime/v1/invocations")[0]
	require.Equal(t, traceID, hexID(req.TraceId), "the record's trace is the request's")
	var parent, child *tracepb.Span
	for _, a := range rc.named("invocation.attempt") {
		require.Equal(t, traceID, hexID(a.TraceId))
		if attr(a, "lark.invocation_id") == invID(rec) {
			parent = a
		} else {
			child = a
		}
	}
	require.NotNil(t, parent)
	require.NotNil(t, child)
	require.Equal(t, hexID(req.SpanId), hexID(parent.ParentSpanId), "the queued attempt continues the request's trace")
	require.NotEmpty(t, attr(parent, "lark.queue_wait_ms"), "the queue wait is on the attempt")
	call := rc.named("r_invoke_v1")[0]
	require.Equal(t, hexID(parent.SpanId), hexID(call.ParentSpanId), "r_invoke_v1 ⊂ parent attempt")
	require.Equal(t, hexID(call.SpanId), hexID(child.ParentSpanId), "child attempt ⊂ r_invoke_v1")
	require.Equal(t, attr(call, "lark.child_invocation_id"), attr(child, "lark.invocation_id"))
	require.Equal(t, "succeeded", attr(child, "lark.status"))
	require.Equal(t, "succeeded", attr(call, "lark.status"))
	h := rc.named("r_http")[0]
	require.Equal(t, hexID(child.SpanId), hexID(h.ParentSpanId), "r_http ⊂ child attempt")
	seen := up.seen()
	require.Len(t, seen, 1)
	require.Equal(t, "00-"+traceID+"-"+hexID(h.SpanId)+"-01", seen[0])
}

// TestTraceOfARemoteAttempt: an attempt run by a remote worker is traced across the two
// processes (004 §9.2). The task carries the server's trace context; the worker exports a
// worker.execute span, child of the server's invocation.attempt span, and an r_http span under it;
// the upstream receives a traceparent naming the worker's r_http span. Attributes carry ids only.
func TestTraceOfARemoteAttempt(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	up := newUpstream(t)
	tr, err := tracing.New(context.Background(), tracing.Config{Endpoint: rc.URL, Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	e, ks := workerEnv(t, func(c *server.Config) { c.Telemetry.Tracing = tr })
	wtr, err := tracing.New(context.Background(), tracing.Config{Endpoint: rc.URL, Node: "w-traced", Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	adm := invTenant(t, e, "t-traced-worker", "127.0.0.1")
	id := idOf(e.registerActive(t, adm, invFn(t, "remote.traced.v1~", `
def main(ctx, input):
    r = r_await(r_http_get_v1(input["url"], timeout_ms=5000))
    return {"status": r.response.status_code}
`)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workerclient.New(workerclient.Config{Server: e.ts.URL, Keys: ks, WorkerID: "w-traced", PollWait: 200 * time.Millisecond, TracerProvider: wtr.Provider(),
			Starlark: workerexec.New(workerexec.Config{Egress: egress.New(egress.Options{AllowLoopback: true}), TracerProvider: wtr.Provider()})}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	const traceID, callerSpan = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
	inv := invID(invAsync(t, e, adm, id, obj{"url": up.URL + "/x?secret=shh"},
		map[string]string{"Traceparent": "00-" + traceID + "-" + callerSpan + "-01"}))
	rec := invWait(t, e, adm, inv, "succeeded", "failed", "dead_lettered")
	require.Equal(t, "succeeded", rec["status"], "%v", rec)

	rc.await(t, tr, "the server's attempt span", func() bool { return len(rc.named("invocation.attempt")) == 1 })
	rc.await(t, wtr, "the worker's task and r_http spans", func() bool {
		return len(rc.named(workerclient.SpanExecute)) == 1 && len(rc.named("r_http")) == 1
	})
	att, exe, call := rc.named("invocation.attempt")[0], rc.named(workerclient.SpanExecute)[0], rc.named("r_http")[0]
	for _, s := range []*tracepb.Span{att, exe, call} {
		require.Equal(t, traceID, hexID(s.TraceId), "%s is in the caller's trace", s.Name)
		require.Equal(t, "t-traced-worker", attr(s, "lark.tenant_id"))
		require.Equal(t, inv, attr(s, "lark.invocation_id"))
		require.Equal(t, "1", attr(s, "lark.attempt"))
	}
	require.Equal(t, hexID(att.SpanId), hexID(exe.ParentSpanId), "worker.execute ⊂ invocation.attempt")
	require.Equal(t, tracepb.Span_SPAN_KIND_CONSUMER, exe.Kind)
	require.Equal(t, "w-traced", attr(exe, "lark.worker_id"))
	require.Equal(t, "succeeded", attr(exe, "lark.status"))
	require.Equal(t, hexID(exe.SpanId), hexID(call.ParentSpanId), "r_http ⊂ worker.execute")
	require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, call.Kind)
	require.Equal(t, "127.0.0.1", attr(call, "server.address"))
	require.Equal(t, "200", attr(call, "http.response.status_code"))
	require.Equal(t, []string{"00-" + traceID + "-" + hexID(call.SpanId) + "-01"}, up.seen(), "the upstream continues the worker's r_http span")
	for _, s := range []*tracepb.Span{exe, call} {
		for _, kv := range s.Attributes {
			require.NotContains(t, kv.Value.String(), "secret=shh", "no URL, query or params on a span")
		}
	}
}

// TestTraceOfAScheduleRun: each run the firing loop starts is a schedule.fire span (ids only), and
// its invocation is created in that span's trace: the record names the span, and the run's
// attempt is its child.
func TestTraceOfAScheduleRun(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	tr := exportingTo(t, rc)
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 59, 30, 0, time.UTC), func(c *server.Config) { c.Telemetry.Tracing = tr })
	s.create(t, obj{"schedule_id": "traced", "expression": obj{"kind": "cron", "value": "0 10 * * *"}, "input_overrides": obj{"invoice_id": "t"}})
	s.advanceTo(t, "2026-11-24T10:00:00Z")
	require.Equal(t, 1, s.fire(t))
	items, _ := s.history(t, "traced", nil)
	inv := items[0]["invocation_id"].(string)
	rec := invGet(t, s.env, s.adm, inv)

	rc.await(t, tr, "the run's span", func() bool { return len(rc.named("schedule.fire")) == 1 })
	fire := rc.named("schedule.fire")[0]
	require.Equal(t, hexID(fire.TraceId), rec["observability"].(obj)["trace_id"], "the invocation is in the run's trace")
	require.Equal(t, hexID(fire.SpanId), rec["observability"].(obj)["span_id"])
	require.Empty(t, fire.ParentSpanId, "a root span")
	require.Equal(t, "acme", attr(fire, "lark.tenant_id"))
	require.Equal(t, "traced", attr(fire, "lark.schedule_id"))
	require.Equal(t, "2026-11-24T10:00:00Z", attr(fire, "lark.scheduled_at"))
	require.Equal(t, inv, attr(fire, "lark.invocation_id"))

	// A manual run continues the request's trace.
	const manualTrace = "8bf92f3577b34da6a3ce929d0e0e473a"
	mr := s.send(t, request{method: http.MethodPost, path: schPath + "/traced:trigger", token: s.adm, body: obj{},
		header: map[string]string{"Traceparent": "00-" + manualTrace + "-40f067aa0ba902bb-01"}})
	require.Equal(t, http.StatusAccepted, mr.Status, "%s", mr.Raw)
	manual := invGet(t, s.env, s.adm, mr.Body["invocation"].(obj)["invocation_id"].(string))
	require.Equal(t, manualTrace, manual["observability"].(obj)["trace_id"])

	invDispatcher(t, s.env)
	s.srv.Wake()
	invWait(t, s.env, s.adm, inv, "succeeded", "failed")
	rc.await(t, tr, "the run's attempt", func() bool {
		for _, a := range rc.named("invocation.attempt") {
			if attr(a, "lark.invocation_id") == inv {
				return true
			}
		}
		return false
	})
	for _, a := range rc.named("invocation.attempt") {
		if attr(a, "lark.invocation_id") == inv {
			require.Equal(t, hexID(fire.SpanId), hexID(a.ParentSpanId), "attempt ⊂ schedule.fire")
		}
	}
}

// TestTraceOfABackfillPartition: each partition the backfill driver starts is a backfill.partition
// root span, and its invocation is created in that span's trace.
func TestTraceOfABackfillPartition(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	tr := exportingTo(t, rc)
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC), func(c *server.Config) { c.Telemetry.Tracing = tr })
	s.create(t, obj{"schedule_id": "nightly", "expression": obj{"kind": "cron", "value": "0 2 * * *"}, "input_overrides": obj{"invoice_id": "n"}})
	b := s.expect(t, http.StatusCreated, http.MethodPost, bfPath, s.adm, obj{"schedule_id": "nightly",
		"start": "2026-03-27T00:00:00Z", "end": "2026-03-29T00:00:00Z", "params": obj{"amount": 5}}).Body
	id := b["backfill_id"].(string)
	_, err := s.srv.Schedules.DriveBackfills(context.Background())
	require.NoError(t, err)
	parts := s.partitions(t, id, nil)
	require.Len(t, parts, 2)

	rc.await(t, tr, "the partitions' spans", func() bool { return len(rc.named("backfill.partition")) == 2 })
	spans := map[string]*tracepb.Span{}
	for _, sp := range rc.named("backfill.partition") {
		require.Empty(t, sp.ParentSpanId, "a root span")
		require.Equal(t, "acme", attr(sp, "lark.tenant_id"))
		require.Equal(t, id, attr(sp, "lark.backfill_id"))
		spans[attr(sp, "lark.invocation_id")] = sp
	}
	for _, p := range parts {
		inv := p["invocation_id"].(string)
		sp := spans[inv]
		require.NotNil(t, sp, "a span names partition %v", p)
		require.Equal(t, p["scheduled_at"], attr(sp, "lark.scheduled_at"))
		o := invGet(t, s.env, s.adm, inv)["observability"].(obj)
		require.Equal(t, hexID(sp.TraceId), o["trace_id"], "the partition's invocation is in its span's trace")
		require.Equal(t, hexID(sp.SpanId), o["span_id"])
	}
}

// TestTraceOfABatchFlush: a batch the flusher starts when it falls due is created in the trace of a
// trigger.flush root span; a batch filled by a publish continues that request's trace.
func TestTraceOfABatchFlush(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	tr := exportingTo(t, rc)
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.Clock = clk; c.Telemetry.Tracing = tr })
	adm := invTenant(t, e, "acme")
	ep := e.registerActive(t, adm, echoFn(t, "orders.on_batch.v1~"))["entrypoint_id"].(string)
	e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm, obj{"trigger_id": "batch", "event_type_id": orderType,
		"entrypoint_id": ep, "batch": obj{"enabled": true, "max_size": 2, "max_wait_ms": 1000}})
	const caller = "8bf92f3577b34da6a3ce929d0e0e473a"
	for i, tp := range []string{"", "00-" + caller + "-40f067aa0ba902bb-01", ""} {
		r := e.send(t, request{method: http.MethodPost, path: eventsPath, token: adm, header: map[string]string{"Traceparent": tp},
			body: obj{"event_id": fmt.Sprintf("e%d", i), "event_type_id": orderType, "payload": obj{"order_id": "o"}}})
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
	}
	clk.Advance(2 * time.Second)
	n, err := e.srv.Triggers.FlushDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)

	started := invocationsOf(t, e, adm, ep)
	require.Len(t, started, 2)
	filled := invGet(t, e, adm, invID(started[0]))["observability"].(obj)
	require.Equal(t, caller, filled["trace_id"], "the full batch started in the publish that filled it, in its trace")
	rc.await(t, tr, "the flush's span", func() bool { return len(rc.named("trigger.flush")) == 1 })
	flush := rc.named("trigger.flush")[0]
	require.Empty(t, flush.ParentSpanId, "a root span")
	require.Equal(t, "acme", attr(flush, "lark.tenant_id"))
	require.Equal(t, "batch", attr(flush, "lark.trigger_id"))
	require.Equal(t, "1", attr(flush, "lark.invocations_started"))
	due := invGet(t, e, adm, invID(started[1]))["observability"].(obj)
	require.Equal(t, hexID(flush.TraceId), due["trace_id"], "the due batch is in the flush's trace")
	require.Equal(t, hexID(flush.SpanId), due["span_id"])
}

// TestTraceOfAnOnCancelHandler: a workflow's on_cancel handler, started by a cancel request of
// another trace, is in the workflow's trace, under the span that created the workflow.
func TestTraceOfAnOnCancelHandler(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	e, _ := tracedEnv(t, rc)
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	rb := e.registerActive(t, adm, invFn(t, "orders.release.v1~", "def main(ctx, input):\n    return {\"trigger\": input.trigger}\n",
		set("schema.params", obj{"$ref": compensationRef}), set("traits.invocation", obj{"supported": []any{"sync", "async"}, "default": "async"})))
	wf := e.registerActive(t, adm, wfBody(t, "parked.v1~", "def main(ctx, input):\n    r_sleep(3600000)\n    return {}\n",
		set("traits.workflow.compensation", obj{"on_failure": nil, "on_cancel": rb["entrypoint_id"]})))
	const started, canceler = "4bf92f3577b34da6a3ce929d0e0e4736", "8bf92f3577b34da6a3ce929d0e0e473a"
	id := invID(invAsync(t, e, adm, wf["entrypoint_id"].(string), obj{}, map[string]string{"Traceparent": "00-" + started + "-00f067aa0ba902b7-01"}))
	invWait(t, e, adm, id, "suspended")
	r := e.send(t, request{method: http.MethodPost, path: invPath + "/" + id + ":control", token: adm, body: obj{"action": "cancel"},
		header: map[string]string{"Traceparent": "00-" + canceler + "-40f067aa0ba902bb-01"}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	var handler obj
	require.Eventually(t, func() bool {
		items := invocationsOf(t, e, adm, rb["entrypoint_id"].(string))
		if len(items) == 1 {
			handler = items[0]
		}
		return handler != nil
	}, 30*time.Second, 10*time.Millisecond, "the on_cancel handler starts")
	wfObs := invGet(t, e, adm, id)["observability"].(obj)
	hObs := invGet(t, e, adm, invID(handler))["observability"].(obj)
	require.Equal(t, started, hObs["trace_id"], "the handler is in the workflow's trace, not the cancel request's")
	require.Equal(t, wfObs["span_id"], hObs["span_id"], "under the span that created the workflow")
}

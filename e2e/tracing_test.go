package e2e

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestTracingFlag: `lark dev --otlp-endpoint URL` exports its spans over OTLP/HTTP; a sync call
// sent with a W3C traceparent shows as the request span and the attempt span in the caller's
// trace, flushed at shutdown; the access log line names the tenant.
func TestTracingFlag(t *testing.T) {
	var mu sync.Mutex
	var spans []*tracepb.Span
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()

	p := startLark(t, t.TempDir(), "--otlp-endpoint", collector.URL, "--access-log")
	id := p.register(t, p.Token, fnSpec{id: "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.e2e.traced.v1~",
		src: "def main(ctx, input):\n  return {\"ok\": True}\n"})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequest(http.MethodPost, p.URL+apiBase+"/invocations",
		bytes.NewReader(mustJSON(t, map[string]any{"entrypoint_id": id, "mode": "sync", "params": map[string]any{}})))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+p.Token)
	req.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	res, err := httpClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", body)
	require.Contains(t, string(body), `"trace_id":"`+traceID+`"`)

	p.Stop() // shutdown flushes the spans not yet exported
	mu.Lock()
	defer mu.Unlock()
	names := map[string]string{} // span name → parent span id, for the caller's trace
	ids := map[string]string{}
	for _, s := range spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			names[s.Name] = hex.EncodeToString(s.ParentSpanId)
			ids[s.Name] = hex.EncodeToString(s.SpanId)
		}
	}
	require.Equal(t, "00f067aa0ba902b7", names["POST /api/serverless-runtime/v1/invocations"], "spans: %v", names)
	require.Equal(t, ids["POST /api/serverless-runtime/v1/invocations"], names["invocation.attempt"], "spans: %v", names)
	require.True(t, strings.Contains(p.stderr.String(), `msg="http request"`) && strings.Contains(p.stderr.String(), "tenant_id=dev"),
		"the access log names the tenant:\n%s", p.stderr.String())
}

package tracing

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestOffByDefault: without --otlp-endpoint or the OTEL_EXPORTER_OTLP_* variables there is no
// exporter, and spans are not recorded.
func TestOffByDefault(t *testing.T) {
	tr, err := New(context.Background(), Config{Getenv: env(nil)})
	require.NoError(t, err)
	require.False(t, tr.Enabled())
	_, span := tr.Tracer().Start(context.Background(), "x")
	require.False(t, span.IsRecording())
	require.NoError(t, tr.Shutdown(context.Background()))
	require.NoError(t, tr.ForceFlush(context.Background()))
}

// TestOnWithEndpointOrEnv: the flag or either standard variable turns export on.
func TestOnWithEndpointOrEnv(t *testing.T) {
	for name, cfg := range map[string]Config{
		"flag":            {Endpoint: "http://127.0.0.1:1", Getenv: env(nil)},
		"env":             {Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"})},
		"env traces only": {Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"})},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := New(context.Background(), cfg)
			require.NoError(t, err)
			require.True(t, tr.Enabled())
			_, span := tr.Tracer().Start(context.Background(), "x")
			require.True(t, span.IsRecording())
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // nothing listens: do not wait for the export
			_ = tr.Shutdown(ctx)
		})
	}
	for _, bad := range []string{"collector:4318", "ftp://x", "http://"} {
		_, err := New(context.Background(), Config{Endpoint: bad, Getenv: env(nil)})
		require.Error(t, err, bad)
		require.Error(t, ParseEndpoint(bad), bad)
	}
	require.NoError(t, ParseEndpoint(""))
	require.NoError(t, ParseEndpoint("https://otel.example.com:4318"))
}

// TestTraceContext: a traceparent is extracted, continued with a new span id when tracing is off
// (WithIDs), and injected on outbound requests; a malformed one starts a new trace.
func TestTraceContext(t *testing.T) {
	h := http.Header{}
	h.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx := WithIDs(Extract(context.Background(), h))
	tid, sid := IDs(ctx)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", tid)
	require.Len(t, sid, 16)
	require.NotEqual(t, "00f067aa0ba902b7", sid)
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-"+sid+"-01", TraceParent(ctx))
	out := http.Header{}
	Inject(ctx, out)
	require.Equal(t, TraceParent(ctx), out.Get("Traceparent"))

	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"} {
		h := http.Header{}
		if bad != "" {
			h.Set("Traceparent", bad)
		}
		ctx := WithIDs(Extract(context.Background(), h))
		tid, _ := IDs(ctx)
		require.Regexp(t, "^[0-9a-f]{32}$", tid, bad)
		require.NotEqual(t, "4bf92f3577b34da6a3ce929d0e0e4736", tid)
		require.False(t, trace.SpanContextFromContext(ctx).IsSampled(), "a trace of our own is not sampled downstream")
	}
	empty := http.Header{}
	Inject(context.Background(), empty)
	require.Empty(t, empty, "no span context: no header")

	// A record's ids become the parent of work claimed from the queue.
	p := Parent(context.Background(), "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceParent(p))
	require.Equal(t, ctx, Parent(ctx, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"), "a span in ctx wins")
	require.Equal(t, context.Background(), Parent(context.Background(), "nothex", "00f067aa0ba902b7"))
}

// TestOffAllocatesNothing: with tracing off, starting and ending a span under a request's span
// context allocates nothing.
func TestOffAllocatesNothing(t *testing.T) {
	tracer := Off().Tracer()
	ctx := WithIDs(context.Background())
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := tracer.Start(ctx, "invocation.attempt")
		if span.IsRecording() {
			span.SetAttributes(AttrTenant.String("t"))
		}
		span.End()
		_ = c
	})
	require.Zero(t, allocs)
}

// BenchmarkSpanOff is the cost of a span when tracing is off.
func BenchmarkSpanOff(b *testing.B) {
	tracer := Off().Tracer()
	ctx := WithIDs(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		_, span := tracer.Start(ctx, "invocation.attempt")
		span.End()
	}
}

// TestCarryContinue: the trace context a remote worker's task carries comes back as the same
// remote parent on the other side; nothing, or garbage, continues nothing.
func TestCarryContinue(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, err := trace.ParseTraceState("vendor=x")
	require.NoError(t, err)
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts}))
	tp, state := Carry(ctx)
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tp)
	require.Equal(t, "vendor=x", state)

	sc := trace.SpanContextFromContext(Continue(context.Background(), tp, state))
	require.True(t, sc.IsRemote())
	require.Equal(t, tid, sc.TraceID())
	require.Equal(t, sid, sc.SpanID())
	require.True(t, sc.IsSampled())
	require.Equal(t, "vendor=x", sc.TraceState().String())

	tp, state = Carry(context.Background())
	require.Empty(t, tp)
	require.Empty(t, state)
	require.False(t, trace.SpanContextFromContext(Continue(context.Background(), "", "")).IsValid())
	require.False(t, trace.SpanContextFromContext(Continue(context.Background(), "00-zz-yy-01", "")).IsValid())
}

// Package tracing is Lark's OpenTelemetry tracing: the tracer provider (OTLP/HTTP export when an
// endpoint is configured, nothing otherwise), W3C trace context in and out (traceparent), and the
// ids the invocation record and problem documents carry.
//
// Tracing is off by default. Off, the tracer is OpenTelemetry's no-op one: starting a span costs a
// context lookup and allocates nothing, and no exporter, batcher or goroutine exists. Trace ids
// still flow (a request's span context is made from its traceparent, or from fresh random ids), so
// the record's observability.trace_id, the problem document's trace_id and the traceparent sent on
// outbound requests agree whether or not spans are exported.
package tracing

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/larkrun/lark/internal/tracing/tracekey"
)

// Name is the instrumentation scope of Lark's spans.
const Name = tracekey.Name

// Span attribute keys. Values are ids and small enums only: never params, results, payloads,
// headers, URLs or secrets.
const (
	AttrTenant      = tracekey.AttrTenant
	AttrEntrypoint  = tracekey.AttrEntrypoint
	AttrInvocation  = tracekey.AttrInvocation
	AttrAttempt     = tracekey.AttrAttempt
	AttrQueueWaitMS = attribute.Key("lark.queue_wait_ms")
	AttrStep        = attribute.Key("lark.step")
	AttrStepAttempt = attribute.Key("lark.step_attempt")
	AttrChild       = attribute.Key("lark.child_invocation_id")
	AttrStatus      = tracekey.AttrStatus
	AttrCorrelation = attribute.Key("lark.correlation_id")
	AttrHTTPMethod  = attribute.Key("http.request.method")
	AttrHTTPRoute   = attribute.Key("http.route")
	AttrHTTPStatus  = attribute.Key("http.response.status_code")
	AttrServerAddr  = attribute.Key("server.address")
	AttrWorker      = tracekey.AttrWorker
	AttrSchedule    = attribute.Key("lark.schedule_id")
	AttrScheduledAt = attribute.Key("lark.scheduled_at")
	AttrTask        = tracekey.AttrTask
	AttrBackfill    = attribute.Key("lark.backfill_id")
	AttrTrigger     = attribute.Key("lark.trigger_id")
	AttrDelivery    = attribute.Key("lark.delivery_id")
	AttrStarted     = attribute.Key("lark.invocations_started")
	// AttrMessagingDestination is the NATS subject a message arrived on (OpenTelemetry's messaging
	// conventions).
	AttrMessagingDestination = attribute.Key("messaging.destination.name")
	// AttrMessagingSystem is "nats" on a span of a NATS message.
	AttrMessagingSystem = attribute.Key("messaging.system")
)

const (
	serviceName      = "lark"
	envEndpoint      = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTraceEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// Config configures New.
type Config struct {
	// Endpoint is the OTLP/HTTP collector URL (--otlp-endpoint), e.g. http://collector:4318; the
	// traces path /v1/traces is added when the URL has no path. Empty: the standard variables
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT decide, and when neither
	// is set tracing is off. OTEL_EXPORTER_OTLP_HEADERS (and _TRACES_HEADERS) add headers.
	Endpoint string
	// Version and Node describe this process in the spans' resource (service.version,
	// service.instance.id); an empty Version is the binary's module version.
	Version, Node string
	// Getenv reads the environment (default os.Getenv; tests inject one).
	Getenv func(string) string
}

// Tracing is the process's tracer provider.
type Tracing struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when off
	tracer   trace.Tracer
}

// Off returns a Tracing that exports nothing (the default).
func Off() *Tracing {
	p := noop.NewTracerProvider()
	return &Tracing{provider: p, tracer: p.Tracer(Name)}
}

// New builds the tracer provider cfg describes: Off when no endpoint is configured, else an SDK
// provider batching spans to an OTLP/HTTP exporter. Sampling follows the caller's traceparent
// (parent-based) and OTEL_TRACES_SAMPLER when set.
func New(ctx context.Context, cfg Config) (*Tracing, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	endpoint := cfg.Endpoint
	if endpoint == "" && getenv(envTraceEndpoint) == "" && getenv(envEndpoint) == "" {
		return Off(), nil
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--otlp-endpoint: want an http:// or https:// URL, got %q", endpoint)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", serviceName)}
	if bi, ok := debug.ReadBuildInfo(); ok && cfg.Version == "" {
		cfg.Version = bi.Main.Version
	}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	if cfg.Node != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.Node))
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Tracing{provider: sdk, sdk: sdk, tracer: sdk.Tracer(Name)}, nil
}

// NewWithProvider wraps a tracer provider built by the caller (tests: an SDK provider with a
// synchronous exporter).
func NewWithProvider(p trace.TracerProvider) *Tracing {
	t := &Tracing{provider: p, tracer: p.Tracer(Name)}
	if sdk, ok := p.(*sdktrace.TracerProvider); ok {
		t.sdk = sdk
	}
	return t
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// Tracer is the tracer of Lark's spans (the no-op one when off).
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return Off().tracer
	}
	return t.tracer
}

// Provider is the tracer provider (the no-op one when off), for a component that takes one.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return Off().provider
	}
	return t.provider
}

// Shutdown flushes the spans not yet exported and stops the exporter (a no-op when off).
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// ForceFlush exports the spans ended so far (a no-op when off).
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.sdk.ForceFlush(ctx)
}

var w3c = propagation.TraceContext{}

// Extract returns ctx carrying the remote span context of a W3C traceparent (and tracestate)
// header, or ctx unchanged when there is none or it is malformed.
func Extract(ctx context.Context, h http.Header) context.Context {
	if h.Get("Traceparent") == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject writes the span context of ctx into h as traceparent (and tracestate); nothing when ctx
// has none.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}

// Carry returns ctx's span context as W3C traceparent and tracestate values, for a message that
// crosses processes without HTTP headers (a remote worker's task); "" "" when ctx has none.
func Carry(ctx context.Context) (traceparent, tracestate string) {
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// Continue returns ctx carrying the remote span context of traceparent and tracestate values (as
// Carry made them), or ctx unchanged when traceparent is empty or malformed.
func Continue(ctx context.Context, traceparent, tracestate string) context.Context {
	return tracekey.Continue(ctx, traceparent, tracestate)
}

// TraceParent is the W3C traceparent of ctx's span context, or "" when it has none.
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// IDs returns the trace and span id of ctx's span context in hex, or "" "" when it has none.
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

// TraceID is the trace id of ctx's span context in hex, or "".
func TraceID(ctx context.Context) string {
	id, _ := IDs(ctx)
	return id
}

// WithIDs returns ctx with ctx's span context when it has one; otherwise with a non-recording
// span context of a new span: the trace id of a remote parent in ctx (an extracted traceparent) or
// a new one, and a new span id. It is what a request runs under when tracing is off, so that its
// ids exist and match everywhere they are shown.
func WithIDs(ctx context.Context) context.Context {
	sc := trace.SpanContextFromContext(ctx)
	if sc.IsValid() && !sc.IsRemote() {
		return ctx
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return ctx // crypto/rand does not fail on supported platforms; no ids rather than a panic
	}
	tid := sc.TraceID()
	flags := sc.TraceFlags()
	if !sc.IsValid() {
		// A trace of our own, not recorded: downstream services are not told to sample it.
		copy(tid[:], b[:16])
		flags = 0
	}
	var sid trace.SpanID
	copy(sid[:], b[16:])
	if binary.BigEndian.Uint64(sid[:]) == 0 {
		sid[7] = 1
	}
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: flags, TraceState: sc.TraceState()}))
}

// Parent returns ctx carrying the span context stored on a record (trace and span id in hex) as a
// remote parent, unless ctx already has a span context: how an attempt claimed from the queue, or
// after a restart, continues the trace of the request that created its invocation.
func Parent(ctx context.Context, traceID, spanID string) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return ctx
	}
	sid, err := trace.SpanIDFromHex(spanID)
	if err != nil {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.FlagsSampled, Remote: true}))
}

// ParseEndpoint checks an --otlp-endpoint value ("" is valid: off).
func ParseEndpoint(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("the scheme must be http or https")
	}
	if u.Host == "" || strings.ContainsAny(u.Host, " \t") {
		return errors.New("no host")
	}
	return nil
}

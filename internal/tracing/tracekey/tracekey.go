// Package tracekey holds what a traced component needs without the OpenTelemetry SDK or an
// exporter: Lark's instrumentation scope, the attribute keys of a remote worker's spans and the
// W3C trace context of a task (Continue). Package tracing builds the provider and re-exports these;
// the Go worker SDK (pkg/larkworker) uses this package so that it links no exporter.
package tracekey

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
)

// Name is the instrumentation scope of Lark's spans.
const Name = "github.com/larkrun/lark"

// Span attribute keys of a worker's spans (ids and small enums only).
const (
	AttrTenant     = attribute.Key("lark.tenant_id")
	AttrEntrypoint = attribute.Key("lark.entrypoint_id")
	AttrInvocation = attribute.Key("lark.invocation_id")
	AttrAttempt    = attribute.Key("lark.attempt")
	AttrStatus     = attribute.Key("lark.status")
	AttrWorker     = attribute.Key("lark.worker_id")
	AttrTask       = attribute.Key("lark.task_id")
)

// Continue returns ctx carrying the remote span context of traceparent and tracestate values (as
// tracing.Carry made them), or ctx unchanged when traceparent is empty or malformed.
func Continue(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
}

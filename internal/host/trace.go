package host

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/tracing"
)

// Span names (docs/observability.md, "Traces").
const (
	spanAttempt = "invocation.attempt"
	spanStep    = "workflow.step"
	spanChild   = "r_invoke_v1"
)

// RecordAttrs are the attributes every span of rec's work carries: ids only, never params,
// results or payloads.
func RecordAttrs(rec invocation.Record) []attribute.KeyValue {
	return []attribute.KeyValue{tracing.AttrTenant.String(rec.TenantID), tracing.AttrEntrypoint.String(rec.EntrypointID),
		tracing.AttrInvocation.String(rec.ID), tracing.AttrAttempt.Int(rec.Attempt)}
}

// StartAttempt starts the span of one attempt (a function attempt, a workflow activation) of rec.
// Its parent is ctx's span (the sync request, the parent's r_invoke_v1 call) or, for work claimed
// from the queue, the span context stored on the record: the trace survives the queue and restarts
// as a new span in the same trace.
func (e *Env) StartAttempt(ctx context.Context, rec invocation.Record) (context.Context, trace.Span) {
	ctx = tracing.Parent(ctx, rec.TraceID, rec.SpanID)
	if !e.traced {
		return ctx, trace.SpanFromContext(ctx)
	}
	attrs := RecordAttrs(rec)
	if rec.StartedAt != nil && rec.Mode == invocation.ModeAsync && rec.Attempt == 1 && rec.EngineAttempt == 1 {
		attrs = append(attrs, tracing.AttrQueueWaitMS.Int64(max(rec.StartedAt.Sub(rec.CreatedAt), 0).Milliseconds()))
	}
	return e.tracer.Start(ctx, spanAttempt, trace.WithAttributes(attrs...))
}

// EndSpan ends span with the outcome of what it covered (err: a sandbox error, or nil).
func EndSpan(span trace.Span, err *sandbox.Error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.TypeID)
	}
	span.End()
}

// EndAttempt ends an attempt's span with the status the attempt left.
func EndAttempt(span trace.Span, status invocation.Status, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(tracing.AttrStatus.String(string(status)))
	if err != nil || status == invocation.StatusFailed || status == invocation.StatusDeadLettered {
		span.SetStatus(codes.Error, string(status))
	}
	span.End()
}

// stepSpan is the open span of a workflow step attempt (steps run one at a time on the
// workflow's thread; the r_http_* calls a step makes are its children).
type stepSpan struct {
	name string
	ctx  context.Context
	span trace.Span
}

// startStep opens the span of a step attempt, a child of the activation's span.
func (h *Host) startStep(step string, attempt int) {
	if !h.env.traced {
		return
	}
	h.EndStep(nil)
	h.mu.Lock()
	parent, rec := h.spanCtx, h.rec
	h.mu.Unlock()
	if parent == nil {
		return
	}
	attrs := append(RecordAttrs(rec), tracing.AttrStep.String(step), tracing.AttrStepAttempt.Int(attempt))
	ctx, span := h.env.tracer.Start(parent, spanStep, trace.WithAttributes(attrs...))
	h.mu.Lock()
	h.step = &stepSpan{name: step, ctx: ctx, span: span}
	h.mu.Unlock()
}

// SetSpanContext sets the span context of the activation a live execution was handed over.
func (h *Host) SetSpanContext(ctx context.Context) {
	h.mu.Lock()
	h.spanCtx = ctx
	h.mu.Unlock()
}

// EndStep closes the open step span, if any.
func (h *Host) EndStep(err *sandbox.Error) {
	h.mu.Lock()
	st := h.step
	h.step = nil
	h.mu.Unlock()
	if st != nil {
		EndSpan(st.span, err)
	}
}

// StepRecorded closes the open step span when j records that step's outcome or retry.
func (h *Host) StepRecorded(j sandbox.JournalEntry) {
	h.mu.Lock()
	st := h.step
	h.mu.Unlock()
	if st == nil || j.Key != st.name {
		return
	}
	switch j.Helper {
	case "r_run_step_v1", "r_step_v1", sandbox.StepRetryHelper:
	default:
		return
	}
	var serr *sandbox.Error
	if j.Helper == sandbox.StepRetryHelper {
		serr = &sandbox.Error{TypeID: "step_retry"}
	} else if r, ok := j.Result.(map[string]any); ok && r["ok"] == false {
		serr = &sandbox.Error{TypeID: "step_failed"}
	}
	h.EndStep(serr)
}

// spanParent is the context a helper call's span starts under: the open step's, else ctx.
func (h *Host) spanParent(ctx context.Context) context.Context {
	h.mu.Lock()
	st, parent := h.step, h.spanCtx
	h.mu.Unlock()
	if st != nil {
		return trace.ContextWithSpan(ctx, st.span)
	}
	if parent != nil {
		return trace.ContextWithSpan(ctx, trace.SpanFromContext(parent))
	}
	return ctx
}

// startHTTP starts the span of an r_http_* call made by this attempt (run.HTTPSpan), under the
// open step's span or the attempt's.
func (h *Host) startHTTP(ctx context.Context, req sandbox.HTTPRequest) (context.Context, trace.Span) {
	if !h.env.traced {
		return ctx, trace.SpanFromContext(ctx)
	}
	h.mu.Lock()
	rec := h.rec
	h.mu.Unlock()
	return run.HTTPSpan(h.spanParent(ctx), h.env.tracer, req, RecordAttrs(rec)...)
}

// startCall starts the span of an r_invoke_v1 call made by this attempt; the
// returned context keeps ctx's deadline and cancellation and carries the span (whose traceparent
// the egress layer sends, and which a child invocation continues).
func (h *Host) startCall(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !h.env.traced {
		return ctx, trace.SpanFromContext(ctx)
	}
	h.mu.Lock()
	rec := h.rec
	h.mu.Unlock()
	return h.env.tracer.Start(h.spanParent(ctx), name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(RecordAttrs(rec), attrs...)...))
}

package run

import (
	"context"
	"errors"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/tracing"
)

// HTTPCall is one r_http_* request as the run stage performs it, on a server or on a remote
// worker: through the egress layer, held to the tenant's allowed_outbound_domains, with the
// {{secret:NAME}} references of its headers resolved by sec (nil refuses them).
type HTTPCall struct {
	// Response is the answer (any status); zero when Err is set.
	Response sandbox.HTTPResponse
	// Data is the call's timeline entry, the Data of its http_call event: method, host, status or
	// error kind and duration — never a URL's path or query, a header or a body.
	Data invocation.HTTPCall
	// EgressBytes are the request and response body sizes of a call that got a response, for the
	// execution's egress metric; a call that failed counts nothing (whether its body left is
	// unknown).
	EgressBytes int
	// Err is the failure, in the runtime's error family.
	Err *sandbox.Error
}

// DoHTTP performs req with c.
func DoHTTP(ctx context.Context, c *egress.Client, req sandbox.HTTPRequest, allowed []string, sec egress.SecretResolver) HTTPCall {
	start := time.Now()
	resp, err := c.Do(ctx, egress.Request{Method: req.Method, URL: req.URL, Headers: req.Headers, Body: req.Body, Timeout: req.Timeout,
		AllowedDomains: allowed, Secrets: sec})
	entry := invocation.HTTPCall{DurationMS: time.Since(start).Milliseconds(), Host: hostOf(req.URL), Method: req.Method}
	if err != nil {
		var ee *egress.Error
		if errors.As(err, &ee) {
			entry.Error = string(ee.Kind)
		}
		return HTTPCall{Data: entry, Err: TransportError(err)}
	}
	entry.Status = resp.StatusCode
	return HTTPCall{Response: sandbox.HTTPResponse{StatusCode: resp.StatusCode, Headers: resp.Headers, Body: resp.Body}, Data: entry,
		EgressBytes: len(req.Body) + len(resp.Body)}
}

// HTTPSpan starts the client span of an r_http_* call (docs/observability.md, "Traces") with
// tracer, under ctx's span; attrs are the ids of the work making the call. End it with
// HTTPCall.EndSpan.
func HTTPSpan(ctx context.Context, tracer trace.Tracer, req sandbox.HTTPRequest, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer.Start(ctx, "r_http "+req.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs, tracing.AttrHTTPMethod.String(req.Method), tracing.AttrServerAddr.String(hostOf(req.URL)))...))
}

// EndSpan ends the r_http span of the call: its response status, and an error status when the
// call failed (transport, forbidden domain, timeout).
func (c HTTPCall) EndSpan(span trace.Span) {
	if !span.IsRecording() {
		return
	}
	if c.Data.Status != 0 {
		span.SetAttributes(tracing.AttrHTTPStatus.Int(c.Data.Status))
	}
	if c.Err != nil {
		span.SetStatus(codes.Error, c.Err.TypeID)
	}
	span.End()
}

// hostOf is what the timeline and traces record of a URL: its host, nothing else.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// TransportError maps an egress failure onto the runtime's error family.
func TransportError(err error) *sandbox.Error {
	var ee *egress.Error
	if !errors.As(err, &ee) {
		return &sandbox.Error{TypeID: sandbox.ErrHTTPTransport, Category: "retryable", Message: "outbound request failed"}
	}
	e := &sandbox.Error{TypeID: sandbox.ErrHTTPTransport, Category: "retryable", Message: ee.Error(),
		Details: map[string]any{"kind": string(ee.Kind), "host": ee.Host}}
	if ee.Secret != "" {
		e.Details["secret"] = ee.Secret
	}
	switch ee.Kind {
	case egress.KindForbiddenDomain, egress.KindForbiddenAddress, egress.KindBadRequest, egress.KindTooLarge, egress.KindSecret:
		e.Category = "non_retryable"
	case egress.KindCanceled:
		e.TypeID, e.Category = sandbox.ErrCanceled, "canceled"
	}
	return e
}

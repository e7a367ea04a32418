package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/tracing"
)

// HTTPObserver hears of every finished request (metrics.Metrics implements it): the route
// template (never the raw path, so that ids do not become labels; "unmatched" for a request no
// route took), the method, the status and the time to answer.
type HTTPObserver interface {
	ObserveRequest(route, method string, status int, d time.Duration)
}

// unmatchedRoute is the route of requests no route took (404 before routing, 405).
const unmatchedRoute = "unmatched"

// access is what the access log line of a request says about its caller: filled by authenticate,
// written by telemetry once the request is answered.
type access struct {
	tenant, subject string
	authenticated   bool
	traceID         string // the request's trace id in hex, made once (traceID)
}

type accessKey struct{}

// traceID is the trace id of the request ctx belongs to ("" when it has none).
func traceID(ctx context.Context) string {
	if a, ok := ctx.Value(accessKey{}).(*access); ok {
		return a.traceID
	}
	return tracing.TraceID(ctx)
}

// noteCaller records the authenticated caller of the request in ctx for its access log line.
func noteCaller(ctx context.Context, tenant, subject string) {
	if a, ok := ctx.Value(accessKey{}).(*access); ok {
		a.tenant, a.subject, a.authenticated = tenant, subject, true
	}
}

// telemetry is the outermost middleware: it continues the caller's W3C traceparent (or starts a
// trace), runs the request in a span named after its route template, and once the request is
// answered writes its access log line (with the tenant and subject authentication found) and its
// metrics. With tracing off the span is no-op, but the request still gets trace and span ids
// (tracing.WithIDs): they are the problem document's trace_id and the invocation record's.
func (s *Server) telemetry(next http.Handler) http.Handler {
	tracer := s.cfg.Tracing.Tracer()
	traced := s.cfg.Tracing.Enabled()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := tracing.Extract(r.Context(), r.Header)
		var span trace.Span
		if traced {
			ctx, span = tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(tracing.AttrHTTPMethod.String(r.Method)))
		} else {
			ctx = tracing.WithIDs(ctx)
		}
		a := &access{traceID: tracing.TraceID(ctx)}
		ctx = context.WithValue(ctx, accessKey{}, a)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			route := unmatchedRoute
			if rc := chi.RouteContext(ctx); rc != nil {
				if p := rc.RoutePattern(); p != "" && p != "/*" {
					route = routeTemplate(p)
				}
			}
			d := time.Since(start)
			if span != nil {
				span.SetName(r.Method + " " + route)
				span.SetAttributes(tracing.AttrHTTPRoute.String(route), tracing.AttrHTTPStatus.Int(rec.status))
				if a.authenticated && a.tenant != "" {
					span.SetAttributes(tracing.AttrTenant.String(a.tenant))
				}
				if rec.status >= 500 {
					span.SetStatus(codes.Error, http.StatusText(rec.status))
				}
				span.End()
			}
			if s.cfg.HTTPMetrics != nil {
				s.cfg.HTTPMetrics.ObserveRequest(route, r.Method, rec.status, d)
			}
			s.logAccess(ctx, r, rec, a, route, d)
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}

// routeTemplate is chi route pattern p without its parameters' regular expressions:
// "/invocations/{id:[^:/]+}/timeline" is "/invocations/{id}/timeline". A regular expression may
// hold braces of its own ("{n:[0-9]{3}}"): they are skipped by depth.
func routeTemplate(p string) string {
	if !strings.Contains(p, ":") {
		return p
	}
	var b strings.Builder
	b.Grow(len(p))
	depth, skipping := 0, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '{':
			depth++
		case c == '}' && depth > 0:
			depth--
			if depth == 0 {
				skipping = false
			}
		case c == ':' && depth == 1 && !skipping:
			skipping = true
			continue
		}
		if !skipping || (c == '}' && depth == 0) {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// logAccess writes a request's access log line: info (warn for a 5xx), or debug with
// Config.AccessLogOff. It carries the tenant and subject of an authenticated caller, the
// correlation and trace ids; never the query string, headers or body.
func (s *Server) logAccess(ctx context.Context, r *http.Request, rec *statusRecorder, a *access, route string, d time.Duration) {
	level := slog.LevelInfo
	if s.cfg.AccessLogOff {
		level = slog.LevelDebug
	}
	if rec.status >= 500 {
		level = slog.LevelWarn
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
		slog.Int("status", rec.status), slog.Int64("duration_ms", d.Milliseconds()))
	if a.authenticated {
		if a.tenant != "" { // the platform operator has none
			attrs = append(attrs, slog.String("tenant_id", a.tenant))
		}
		attrs = append(attrs, slog.String("subject_id", a.subject))
	}
	if id := rec.Header().Get("X-Correlation-Id"); id != "" {
		attrs = append(attrs, slog.String("correlation_id", id))
	}
	if a.traceID != "" {
		attrs = append(attrs, slog.String("trace_id", a.traceID))
	}
	s.log.LogAttrs(ctx, level, "http request", attrs...)
}

// Package workerexec runs a remote worker's Starlark tasks: lark worker injects its Executor into
// workerclient, which stays free of the interpreter so that the Go worker SDK (pkg/larkworker),
// built on workerclient, does not link it. A task runs through the run stage (package run: the same
// sandbox, limits, result checks and metrics as on the server); its outbound requests go through
// the egress layer with the task's tenant allowlist, and its secret references are resolved by the
// server that handed it out.
package workerexec

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/workerclient"
	"github.com/larkrun/lark/internal/workerproto"
)

// Config configures New.
type Config struct {
	// Egress performs the outbound requests (r_http_*) under the same rules as the server's, with
	// the tenant allowlist each task carries (default: egress.New with its defaults, which refuse
	// private and loopback addresses).
	Egress *egress.Client
	// TracerProvider records an r_http span per outbound request, under the task's
	// worker.execute span (default: OpenTelemetry's global provider).
	TracerProvider trace.TracerProvider
}

// Executor is a workerclient.Executor that runs Starlark tasks.
type Executor struct {
	runner *run.Runner
	egress *egress.Client
	tracer trace.Tracer
}

// New returns an Executor.
func New(cfg Config) *Executor {
	if cfg.Egress == nil {
		cfg.Egress = egress.New(egress.Options{})
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	return &Executor{runner: &run.Runner{Programs: sandbox.NewCache(256), Clock: clock.Real{}}, egress: cfg.Egress,
		tracer: cfg.TracerProvider.Tracer(tracing.Name)}
}

// Execute runs a Starlark task through the run stage within its timeout.
func (x *Executor) Execute(ctx context.Context, t workerproto.Task, s workerclient.Session) workerclient.Outcome {
	var rec invocation.Record
	if err := json.Unmarshal(t.Record, &rec); err != nil {
		return failed("record: " + err.Error())
	}
	var retry outcome.RetryPolicy
	if len(t.Retry) > 0 {
		if err := json.Unmarshal(t.Retry, &retry); err != nil {
			return failed("retry: " + err.Error())
		}
	}
	lim := sandbox.Limits{Timeout: time.Duration(t.Limits.TimeoutMS) * time.Millisecond, CPU: t.Limits.CPU, MemoryMB: t.Limits.MemoryMB,
		MaxPayloadBytes: t.Limits.MaxPayloadBytes}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	h := &host{x: x, task: t, session: s}
	if trace.SpanFromContext(ctx).IsRecording() {
		h.attrs = workerclient.TaskAttrs(t)
	}
	// The server checks the returns schema again when it decides the outcome; here only the bound.
	r := x.runner.Function(ctx, run.Job{Record: rec, ProgramKey: t.EntrypointID, Source: t.Source, Limits: lim, Retry: retry}, h)
	m, err := json.Marshal(r.Outcome.Metrics)
	if err != nil {
		return failed(err.Error())
	}
	tl, err := json.Marshal(r.Timeline)
	if err != nil {
		return failed(err.Error())
	}
	o := workerclient.Outcome{Output: r.Outcome.Output, Metrics: m, Timeline: tl}
	if e := r.Outcome.Err; e != nil {
		o.Output, o.Error = nil, &workerproto.Error{TypeID: e.TypeID, Category: e.Category, Message: e.Message, Details: e.Details}
	}
	return o
}

// failed is the outcome of a task the worker could not run: a non-retryable runtime error.
func failed(msg string) workerclient.Outcome {
	return workerclient.Outcome{Error: &workerproto.Error{TypeID: sandbox.ErrRuntime, Category: sandbox.CategoryNonRetryable, Message: "worker: " + msg}}
}

// host is a worker's sandbox host: logs and outbound calls are collected for the result's
// timeline; outbound HTTP goes through the egress layer with the task's tenant allowlist, and its
// secret references are resolved by the server that handed the task out; child invocations are not
// available on a remote worker (docs/workers.md).
type host struct {
	x        *Executor
	task     workerproto.Task
	session  workerclient.Session
	mu       sync.Mutex
	timeline []invocation.Event
	egress   int64
	attrs    []attribute.KeyValue // of the task's r_http spans
}

var errNotOnWorker = errors.New("not available on a remote worker")

func (h *host) HTTP(ctx context.Context, req sandbox.HTTPRequest) (sandbox.HTTPResponse, error) {
	ctx, span := run.HTTPSpan(ctx, h.x.tracer, req, h.attrs...)
	call := run.DoHTTP(ctx, h.x.egress, req, h.task.AllowedOutboundDomains, secretResolver{h})
	call.EndSpan(span)
	h.add(invocation.EventHTTPCall, call.Data)
	if call.Err != nil {
		return sandbox.HTTPResponse{}, call.Err
	}
	h.mu.Lock()
	h.egress += int64(call.EgressBytes)
	h.mu.Unlock()
	return call.Response, nil
}

// secretResolver resolves a task's secret references through the server that handed it out
// (workerproto.PathSecret). Values stay in memory for the one request; errors never hold one.
type secretResolver struct{ h *host }

func (r secretResolver) ResolveSecret(ctx context.Context, name string) (egress.Secret, error) {
	reply, err := r.h.session.Secret(ctx, name)
	var se *workerclient.StatusError
	switch {
	case errors.As(err, &se) && se.Status == http.StatusNotFound:
		return egress.Secret{}, egress.ErrUnknownSecret
	case err != nil: // ErrNoSecretPath included
		return egress.Secret{}, egress.ErrSecretsUnavailable
	}
	return egress.Secret{Value: reply.Value, AllowedHosts: reply.AllowedHosts}, nil
}

func (h *host) Invoke(context.Context, sandbox.InvokeRequest) (sandbox.InvokeResult, error) {
	return sandbox.InvokeResult{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "r_invoke_v1: " + errNotOnWorker.Error()}
}

// add appends a timeline entry (at most 1000 of them) of type typ, with data as its Data.
func (h *host) add(typ invocation.EventType, data invocation.Payload) {
	e, err := invocation.Event{Type: typ, At: time.Now().UTC()}.WithData(data)
	if err != nil {
		return // the entries are strings and numbers; nothing to record otherwise
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.timeline) < 1000 {
		h.timeline = append(h.timeline, e)
	}
}

func (h *host) Log(_ context.Context, msg string, fields map[string]any) {
	h.add(invocation.EventLog, invocation.Log{Message: outcome.Cut(msg, sandbox.MaxLogEntryBytes), Fields: fields})
}

func (h *host) Now() time.Time { return time.Now() }

func (h *host) Drain() []invocation.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.timeline
	h.timeline = nil
	return t
}

func (h *host) TakeEgress() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.egress
	h.egress = 0
	return n
}

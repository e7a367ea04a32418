package workerclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/tracing/tracekey"
	"github.com/larkrun/lark/internal/workerproto"
)

// runTask runs t and posts its result.
func (c *Client) runTask(ctx context.Context, t workerproto.Task, r *running) {
	defer func() {
		c.mu.Lock()
		delete(c.running, t.ID)
		c.mu.Unlock()
	}()
	log := c.cfg.Logger.With("tenant_id", t.TenantID, "invocation_id", t.InvocationID, "task_id", t.ID)
	log.Info("worker: task started", "kind", t.Kind)
	ctx, span := c.startTask(ctx, t)
	res := workerproto.Result{TaskID: t.ID, WorkerID: c.cfg.WorkerID, LeaseOwner: t.LeaseOwner}
	var interrupted, dropped bool
	defer func() { endTask(span, res, dropped) }()
	o := c.execute(ctx, r.server, t)
	res.Output, res.Error, res.Metrics, res.Timeline = o.Output, o.Error, o.Metrics, o.Timeline
	if res.Error != nil {
		res.Output = nil
	}
	c.mu.Lock()
	interrupted, dropped = r.interrupted, r.dropped
	c.mu.Unlock()
	if dropped {
		log.Info("worker: task dropped (the server no longer holds it)")
		return
	}
	if interrupted {
		res.Interrupted, res.Output, res.Error = true, nil, nil
	}
	c.report(t, r.server, res, log)
}

// TaskAttrs are the attributes of a task's spans: ids only, never params, results or payloads.
// An executor gives them to the spans it records under the task's (workerexec's r_http spans).
func TaskAttrs(t workerproto.Task) []attribute.KeyValue {
	var rec struct {
		Attempt int `json:"attempt"`
	}
	attrs := []attribute.KeyValue{tracekey.AttrTenant.String(t.TenantID), tracekey.AttrEntrypoint.String(t.EntrypointID),
		tracekey.AttrInvocation.String(t.InvocationID)}
	if json.Unmarshal(t.Record, &rec) == nil && rec.Attempt > 0 {
		attrs = append(attrs, tracekey.AttrAttempt.Int(rec.Attempt))
	}
	return attrs
}

// startTask starts a task's worker.execute span, a child of the server's attempt span (the
// task's trace context): an executor's spans are its children, and its outbound requests carry
// its traceparent.
func (c *Client) startTask(ctx context.Context, t workerproto.Task) (context.Context, trace.Span) {
	ctx = tracekey.Continue(ctx, t.TraceParent, t.TraceState)
	ctx, span := c.tracer.Start(ctx, SpanExecute, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(append(TaskAttrs(t), tracekey.AttrTask.String(t.ID), tracekey.AttrWorker.String(c.cfg.WorkerID))...)
	}
	return ctx, span
}

// endTask ends a task's span with the outcome the worker reports (lark.status: succeeded,
// failed, interrupted) or dropped, when the server no longer held the task and no result was
// posted.
func endTask(span trace.Span, res workerproto.Result, dropped bool) {
	if !span.IsRecording() {
		return
	}
	switch {
	case dropped:
		span.SetAttributes(tracekey.AttrStatus.String("dropped"))
	case res.Interrupted:
		span.SetAttributes(tracekey.AttrStatus.String("interrupted"))
		span.SetStatus(codes.Error, "interrupted")
	case res.Error != nil:
		span.SetAttributes(tracekey.AttrStatus.String("failed"))
		span.SetStatus(codes.Error, res.Error.TypeID)
	case res.Output != nil:
		span.SetAttributes(tracekey.AttrStatus.String("succeeded"))
	}
	span.End()
}

// report posts a task's result to the server that handed it out. A failure to reach it (or its
// 503) is tried again a few times over about 3 s; after that, or on a refusal, the result is
// given up: the server's lease on the attempt runs out and the attempt is reclaimed and run again,
// so a lost result costs a re-run, never a lost invocation.
func (c *Client) report(t workerproto.Task, server string, res workerproto.Result, log *slog.Logger) {
	wait := 250 * time.Millisecond
	for try := 1; ; try++ {
		var ack map[string]any
		err := c.call(context.Background(), server, t.ResultPath, res, &ack, 30*time.Second)
		if err == nil {
			return
		}
		var se *StatusError
		if (errors.As(err, &se) && se.Status != http.StatusServiceUnavailable) || try == 4 {
			log.Warn("worker: result not accepted", "server", server, "err", err)
			return
		}
		time.Sleep(wait)
		wait *= 2
	}
}

func (c *Client) definitions() []string {
	out := make([]string, 0, len(c.cfg.Handlers))
	for id := range c.cfg.Handlers {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// execute runs a task of server: a Starlark one with the Starlark executor, a worker-provided one
// with its handler.
func (c *Client) execute(ctx context.Context, server string, t workerproto.Task) Outcome {
	switch {
	case t.Kind == workerproto.KindAdapterRef:
		return c.handle(ctx, t)
	case t.Kind == workerproto.KindStarlark && c.cfg.Starlark != nil:
		return c.cfg.Starlark.Execute(ctx, t, session{c: c, server: server, task: t})
	}
	return Outcome{Error: internalError(fmt.Errorf("task kind %q is not served here", t.Kind))}
}

// internalError is the error reported for a task the worker could not run: non-retryable.
func internalError(err error) *workerproto.Error {
	return &workerproto.Error{TypeID: workerproto.ErrRuntime, Category: workerproto.CategoryNonRetryable, Message: "worker: " + err.Error()}
}

// handle runs a task of a worker-provided implementation with its handler, within its timeout.
func (c *Client) handle(ctx context.Context, t workerproto.Task) Outcome {
	h, ok := c.cfg.Handlers[t.DefinitionID]
	if !ok {
		return Outcome{Error: internalError(fmt.Errorf("definition %q is not served here", t.DefinitionID))}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(t.Limits.TimeoutMS)*time.Millisecond)
	defer cancel()
	start := time.Now()
	v, herr := h(ctx, t)
	m, err := json.Marshal(handlerMetrics(time.Since(start), t.Limits.MemoryMB))
	if err != nil {
		return Outcome{Error: internalError(err)}
	}
	o := Outcome{Metrics: m}
	switch {
	case herr != nil:
		if !errors.As(herr, &o.Error) {
			o.Error = &workerproto.Error{TypeID: workerproto.ErrRuntime, Category: workerproto.CategoryNonRetryable, Message: herr.Error()}
		}
	case ctx.Err() != nil:
		o.Error = &workerproto.Error{TypeID: workerproto.ErrTimeout, Category: workerproto.CategoryTimeout, Message: "the handler ran past the timeout"}
	default:
		if o.Output, err = json.Marshal(v); err != nil {
			o.Error = &workerproto.Error{TypeID: workerproto.ErrRuntime, Category: workerproto.CategoryNonRetryable, Message: "result is not JSON: " + err.Error()}
		}
	}
	return o
}

// handlerMetrics are the metrics of a handler's execution: its wall time, billed in whole
// milliseconds (at least 1), and the entrypoint's memory limit (the worker is trusted to keep it);
// CPU time, memory used and steps are not measured (0), as the run stage reports them for an
// execution without a sandbox.
func handlerMetrics(elapsed time.Duration, memoryMB int) invocation.Metrics {
	i64 := func(v int64) *int64 { return &v }
	return invocation.Metrics{DurationMS: i64(elapsed.Milliseconds()),
		BilledDurationMS: i64(max(1, int64(math.Ceil(float64(elapsed)/float64(time.Millisecond))))),
		CPUTimeMS:        i64(0), MemoryLimitMB: i64(int64(memoryMB)), MaxMemoryUsedMB: i64(0), StepCount: i64(0), EgressBytes: i64(0)}
}

// ErrNoSecretPath is Session.Secret's error for a task without a secret path (a server that
// does not resolve secrets for workers).
var ErrNoSecretPath = errors.New("workerclient: the task has no secret path")

// session is a task's Session: its requests go to the server that handed it out.
type session struct {
	c      *Client
	server string
	task   workerproto.Task
}

func (s session) Secret(ctx context.Context, name string) (workerproto.SecretReply, error) {
	var reply workerproto.SecretReply
	if s.task.SecretPath == "" {
		return reply, ErrNoSecretPath
	}
	err := s.c.call(ctx, s.server, s.task.SecretPath, workerproto.SecretRequest{TaskID: s.task.ID, WorkerID: s.c.cfg.WorkerID,
		LeaseOwner: s.task.LeaseOwner, Name: name}, &reply, 30*time.Second)
	return reply, err
}

package workerclient

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/larkrun/lark/internal/workerproto"
)

// TestTaskSpanOutcome: a task's worker.execute span continues the task's trace context and ends
// with the outcome the worker reports; a dropped task (the server no longer held it) is dropped
// whatever its result was.
func TestTaskSpanOutcome(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	c := New(Config{Server: "http://127.0.0.1:1", WorkerID: "w1", TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	task := workerproto.Task{ID: "wt_1", TenantID: "acme", InvocationID: "inv_1", EntrypointID: "ep",
		Record: json.RawMessage(`{"attempt":2}`), TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	cases := []struct {
		res     workerproto.Result
		dropped bool
		status  string
		code    codes.Code
	}{
		{workerproto.Result{Output: json.RawMessage(`{}`)}, false, "succeeded", codes.Unset},
		{workerproto.Result{Error: &workerproto.Error{TypeID: "gts.x.err~"}}, false, "failed", codes.Error},
		{workerproto.Result{Interrupted: true}, false, "interrupted", codes.Error},
		{workerproto.Result{Output: json.RawMessage(`{}`)}, true, "dropped", codes.Unset},
	}
	for _, tc := range cases {
		_, span := c.startTask(context.Background(), task)
		endTask(span, tc.res, tc.dropped)
	}
	ended := rec.Ended()
	require.Len(t, ended, len(cases))
	for i, s := range ended {
		require.Equal(t, SpanExecute, s.Name())
		require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", s.SpanContext().TraceID().String())
		require.Equal(t, "00f067aa0ba902b7", s.Parent().SpanID().String(), "a child of the server's attempt span")
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		require.Equal(t, cases[i].status, attrs["lark.status"].AsString())
		require.EqualValues(t, 2, attrs["lark.attempt"].AsInt64())
		require.Equal(t, "w1", attrs["lark.worker_id"].AsString())
		require.Equal(t, cases[i].code, s.Status().Code)
	}
}

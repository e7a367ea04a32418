package natsfeed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/eventbus"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/natsbridge"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/tracing"
)

// recordingPublisher keeps the trace context each publish ran in and answers err.
type recordingPublisher struct {
	ctxs []context.Context
	err  error
}

func (p *recordingPublisher) PublishExternal(ctx context.Context, _ events.Event) (eventbus.Published, error) {
	p.ctxs = append(p.ctxs, ctx)
	return eventbus.Published{}, p.err
}

// TestMessageSpan: each message is published inside a nats.receive consumer span, which continues
// the trace of the message's traceparent header (whatever the header name's case) or starts one;
// a refused message and a failed publish end it with an error status.
func TestMessageSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer(tracing.Name)
	pub := &recordingPublisher{}
	f := New(nil, pub, nil, tracer)
	handle := f.handler("acme", "from-nats", "gts.x.core.events.event.v1~vendor.app.orders.placed.v1~")
	msg := func(h map[string][]string) natsbridge.Message {
		return natsbridge.Message{Subject: "ext.orders", Data: []byte(`{"n":1}`), Header: h, Stream: "EXT", StreamSeq: 7,
			NumDelivered: 1, StoredAt: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	}
	const caller = "4bf92f3577b34da6a3ce929d0e0e4736"
	require.NoError(t, handle(context.Background(), msg(map[string][]string{"Traceparent": {"00-" + caller + "-00f067aa0ba902b7-01"}})))
	require.NoError(t, handle(context.Background(), msg(nil)))
	pub.err = problem.BadRequest("not an order")
	require.NoError(t, handle(context.Background(), msg(nil)), "a refused message is acknowledged")
	pub.err = errors.New("store down")
	require.Error(t, handle(context.Background(), msg(nil)), "a failed publish is redelivered")

	ended := rec.Ended()
	require.Len(t, ended, 4)
	for i, s := range ended {
		require.Equal(t, SpanReceive, s.Name())
		require.Equal(t, trace.SpanKindConsumer, s.SpanKind())
		attrs := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value.String()
		}
		require.Equal(t, map[attribute.Key]string{"lark.tenant_id": "acme", "lark.trigger_id": "from-nats", "messaging.system": "nats",
			"messaging.destination.name": "ext.orders", "lark.delivery_id": "EXT:7"}, attrs)
		require.Equal(t, s.SpanContext().SpanID(), trace.SpanContextFromContext(pub.ctxs[i]).SpanID(), "the event is published in the span")
	}
	require.Equal(t, caller, ended[0].SpanContext().TraceID().String(), "the message's trace continues")
	require.Equal(t, "00f067aa0ba902b7", ended[0].Parent().SpanID().String())
	require.False(t, ended[1].Parent().IsValid(), "without a traceparent the message starts a trace")
	require.NotEqual(t, caller, ended[1].SpanContext().TraceID().String())
	require.Equal(t, codes.Unset, ended[1].Status().Code)
	require.Equal(t, codes.Error, ended[2].Status().Code)
	require.Equal(t, "refused", ended[2].Status().Description)
	require.Equal(t, codes.Error, ended[3].Status().Code)
}

// countingObserver counts the outcomes it hears of.
type countingObserver map[string]int

func (c countingObserver) NATSMessage(outcome string) { c[outcome]++ }

// TestMessageOutcomes: the Observer hears of each message's outcome: published, refused (a 4xx:
// dropped) or failed (redelivered).
func TestMessageOutcomes(t *testing.T) {
	t.Parallel()
	pub := &recordingPublisher{}
	f := New(nil, pub, nil, nil)
	seen := countingObserver{}
	f.SetObserver(seen)
	handle := f.handler("acme", "from-nats", "gts.x.core.events.event.v1~vendor.app.orders.placed.v1~")
	msg := natsbridge.Message{Subject: "ext.orders", Data: []byte(`{"n":1}`), Stream: "EXT", StreamSeq: 1, NumDelivered: 1}
	require.NoError(t, handle(context.Background(), msg))
	require.NoError(t, handle(context.Background(), msg))
	pub.err = problem.BadRequest("not an order")
	require.NoError(t, handle(context.Background(), msg))
	pub.err = errors.New("store down")
	require.Error(t, handle(context.Background(), msg))
	require.Equal(t, countingObserver{MessagePublished: 2, MessageRefused: 1, MessageFailed: 1}, seen)
}

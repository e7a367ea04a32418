package natsbridge

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/events"
)

func TestOpenValidatesConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, cfg := range []Config{
		{},
		{URL: "nats://127.0.0.1:1", StreamName: "has.dot"},
		{URL: "nats://127.0.0.1:1", StreamName: strings.Repeat("S", MaxNameLen+1)},
		{URL: "nats://127.0.0.1:1", SubjectPrefix: "lark.*"},
		{URL: "nats://127.0.0.1:1", SubjectPrefix: "lark..events"},
	} {
		_, err := Open(ctx, cfg)
		require.Error(t, err, "%+v", cfg)
	}
}

func TestOpenFailsWithoutServer(t *testing.T) {
	t.Parallel()
	ln := newClosedPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Open(ctx, Config{URL: "nats://" + ln, Logger: discard})
	require.Error(t, err, "the first connection must succeed")
}

func TestMirrorPublishesToTheDocumentedSubjectAndDedups(t *testing.T) {
	t.Parallel()
	b, js := testBridge(t, serverURL(t), nil)
	ev := event("evt_1")
	b.Mirror(context.Background(), ev)
	require.Eventually(t, func() bool { return b.Mirrored() == 1 }, waitFor, 5*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, b.StreamName())
	require.NoError(t, err)
	raw, err := s.GetMsg(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, b.Prefix()+".acme.gts.x.shop.orders.placed.v1.__", raw.Subject)
	require.Equal(t, "acme:evt_1", raw.Header.Get(nats.MsgIdHdr))
	require.Equal(t, "acme", raw.Header.Get(HeaderTenantID))
	require.Equal(t, "evt_1", raw.Header.Get(HeaderEventID))
	require.Equal(t, ev.TypeID, raw.Header.Get(HeaderEventType))
	var got events.Event
	require.NoError(t, json.Unmarshal(raw.Data, &got))
	require.Equal(t, ev.ID, got.ID)
	require.Equal(t, ev.TenantID, got.TenantID)
	require.JSONEq(t, string(ev.Payload), string(got.Payload))
	require.True(t, ev.ReceivedAt.Equal(got.ReceivedAt))

	// A re-mirror (say after a restart) is recognised by the stream and not stored twice; the same
	// event id of another tenant is another event.
	b.Mirror(context.Background(), ev)
	other := ev
	other.TenantID = "globex"
	b.Mirror(context.Background(), other)
	require.Eventually(t, func() bool { return b.Mirrored() == 3 }, waitFor, 5*time.Millisecond)
	require.EqualValues(t, 1, b.Duplicates())
	require.EqualValues(t, 2, streamMsgs(t, js, b.StreamName()))
	require.Zero(t, b.Dropped())
}

func TestMirrorDropsWhatItCannotPublish(t *testing.T) {
	t.Parallel()
	b, js := testBridge(t, serverURL(t), nil)
	big := event("evt_big")
	// The body alone fits; with the headers the message is over the server's max_payload.
	big.Payload = json.RawMessage(`""`)
	plain, err := json.Marshal(big)
	require.NoError(t, err)
	big.Payload = json.RawMessage(`"` + strings.Repeat("x", int(b.nc.MaxPayload())-len(plain)-10) + `"`)
	body, err := json.Marshal(big)
	require.NoError(t, err)
	require.Less(t, int64(len(body)), b.nc.MaxPayload())
	bad := event("evt_bad")
	bad.TypeID = "gts.x.shop.orders.>"
	b.Mirror(context.Background(), big)
	b.Mirror(context.Background(), bad)
	b.Mirror(context.Background(), event("evt_ok"))
	require.Eventually(t, func() bool { return b.Mirrored() == 1 }, waitFor, 5*time.Millisecond)
	require.EqualValues(t, 2, b.Dropped(), "over max_payload and an invalid type are dropped, not retried")
	require.EqualValues(t, 1, streamMsgs(t, js, b.StreamName()))
}

func TestMirrorAfterCloseIsDropped(t *testing.T) {
	t.Parallel()
	b, _ := testBridge(t, serverURL(t), nil)
	require.NoError(t, b.Close())
	b.Mirror(context.Background(), event("evt_late"))
	require.EqualValues(t, 1, b.Dropped())
	require.NoError(t, b.Close(), "Close is idempotent")
}

func TestCloseDrainsTheQueue(t *testing.T) {
	t.Parallel()
	b, js := testBridge(t, serverURL(t), nil)
	for i := range 200 {
		b.Mirror(context.Background(), event("evt_"+strconv.Itoa(i)))
	}
	require.NoError(t, b.Close())
	require.EqualValues(t, 200, b.Mirrored()+b.Dropped())
	require.Zero(t, b.Dropped(), "a connected bridge publishes its queue before closing")
	require.EqualValues(t, 200, streamMsgs(t, js, b.StreamName()))
}

func TestMirrorQueuesThroughAnOutageAndDropsPastTheBound(t *testing.T) {
	t.Parallel()
	p := newProxy(t, serverURL(t))
	b, js := testBridge(t, proxyURL(p), func(c *Config) { c.QueueSize = 2 })
	p.Cut()
	require.Eventually(t, func() bool { return !b.Connection().Connected }, waitFor, 5*time.Millisecond)
	for i := range 6 {
		b.Mirror(context.Background(), event("evt_"+strconv.Itoa(i)))
	}
	// One event is with the publisher, two wait in the queue: at least three are dropped, at once.
	require.GreaterOrEqual(t, b.Dropped(), int64(3))
	require.Zero(t, b.Mirrored())
	p.Restore()
	require.Eventually(t, func() bool { return b.Mirrored()+b.Dropped() == 6 }, waitFor, 5*time.Millisecond)
	require.EqualValues(t, b.Mirrored()-b.Duplicates(), streamMsgs(t, js, b.StreamName()))
	require.GreaterOrEqual(t, b.Mirrored(), int64(2))
}

func TestOpenKeepsAnExistingStreamAndAddsTheSubjects(t *testing.T) {
	t.Parallel()
	js := direct(t)
	id := unique(t)
	stream := "LARKTEST_" + id
	deleteStreamAtEnd(t, js, stream)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"other." + id + ".>"},
		Storage: jetstream.MemoryStorage, MaxMsgs: 1000})
	require.NoError(t, err)
	b, err := Open(ctx, Config{URL: serverURL(t), StreamName: stream, SubjectPrefix: "larktest." + id, Logger: discard})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	sc := s.CachedInfo().Config
	require.ElementsMatch(t, []string{"other." + id + ".>", "larktest." + id + ".>"}, sc.Subjects)
	require.EqualValues(t, 1000, sc.MaxMsgs, "the operator's settings stay")
	require.Equal(t, jetstream.MemoryStorage, sc.Storage)
}

// recorder is a handler that records its messages and answers with the errors of fail.
type recorder struct {
	mu   sync.Mutex
	msgs []Message
	fail func(Message) error
}

func (r *recorder) handle(_ context.Context, m Message) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		return fail(m)
	}
	return nil
}

func (r *recorder) got() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Message(nil), r.msgs...)
}

func (r *recorder) count() int { return len(r.got()) }

func TestSubscribeReceivesMirroredEventsAndAcks(t *testing.T) {
	t.Parallel()
	b, js := testBridge(t, serverURL(t), nil)
	var r recorder
	sub, err := b.Subscribe(context.Background(), SubscriptionSpec{Name: "orders", Subject: b.Prefix() + ".acme.>",
		Handler: r.handle, FetchWait: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, StatusActive, sub.Status())
	b.Mirror(context.Background(), event("evt_1"))
	other := event("evt_2")
	other.TenantID = "globex"
	b.Mirror(context.Background(), other) // outside the filter
	b.Mirror(context.Background(), event("evt_3"))
	require.Eventually(t, func() bool { return sub.Stats().Acked == 2 }, waitFor, 5*time.Millisecond)
	msgs := r.got()
	require.Len(t, msgs, 2)
	var ev events.Event
	require.NoError(t, json.Unmarshal(msgs[0].Data, &ev))
	require.Equal(t, "evt_1", ev.ID)
	require.Equal(t, b.Prefix()+".acme.gts.x.shop.orders.placed.v1.__", msgs[0].Subject)
	require.Equal(t, []string{"acme:evt_1"}, msgs[0].Header[nats.MsgIdHdr])
	require.Equal(t, b.StreamName()+":1", msgs[0].DeliveryID())
	require.Equal(t, b.StreamName()+":3", msgs[1].DeliveryID())
	require.EqualValues(t, 1, msgs[0].NumDelivered)
	ci := consumerInfo(t, js, b.StreamName(), "orders")
	require.Zero(t, ci.NumAckPending)
	require.Zero(t, ci.NumPending)
	require.Equal(t, StatusActive, sub.Status())
}

func TestSubscribeRedeliversOnErrorThenSucceeds(t *testing.T) {
	t.Parallel()
	b, _ := testBridge(t, serverURL(t), nil)
	r := recorder{fail: func(m Message) error {
		if m.NumDelivered == 1 {
			return context.DeadlineExceeded
		}
		return nil
	}}
	sub, err := b.Subscribe(context.Background(), SubscriptionSpec{Name: "retry", Subject: b.Prefix() + ".>",
		Handler: r.handle, FetchWait: 200 * time.Millisecond})
	require.NoError(t, err)
	b.Mirror(context.Background(), event("evt_1"))
	require.Eventually(t, func() bool { return sub.Stats().Acked == 1 }, waitFor, 5*time.Millisecond)
	msgs := r.got()
	require.Len(t, msgs, 2)
	require.Equal(t, msgs[0].DeliveryID(), msgs[1].DeliveryID(), "a redelivery keeps its delivery id")
	require.EqualValues(t, 2, msgs[1].NumDelivered)
	require.Equal(t, SubscriptionStats{Delivered: 2, Acked: 1, Failed: 1, Redelivered: 1}, sub.Stats())
}

func TestSubscribeTerminatesAfterMaxDeliverAndDegrades(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	b, js := testBridge(t, serverURL(t), func(c *Config) { c.Clock = fake })
	r := recorder{fail: func(Message) error { panic("boom") }}
	sub, err := b.Subscribe(context.Background(), SubscriptionSpec{Name: "poison", Subject: b.Prefix() + ".>",
		Handler: r.handle, MaxDeliver: 3, DegradedThreshold: 3, DegradedWindow: time.Minute, FetchWait: 200 * time.Millisecond})
	require.NoError(t, err)
	b.Mirror(context.Background(), event("evt_poison"))
	require.Eventually(t, func() bool { return sub.Stats().Terminated == 1 }, waitFor, 5*time.Millisecond)
	require.Equal(t, SubscriptionStats{Delivered: 3, Failed: 2, Terminated: 1, Redelivered: 2}, sub.Stats())
	require.Equal(t, StatusDegraded, sub.Status(), "failures within the window")

	// Terminated means never again: the next message is the next one delivered.
	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	b.Mirror(context.Background(), event("evt_fine"))
	require.Eventually(t, func() bool { return sub.Stats().Acked == 1 }, waitFor, 5*time.Millisecond)
	msgs := r.got()
	require.Len(t, msgs, 4)
	require.Equal(t, b.StreamName()+":2", msgs[3].DeliveryID())
	ci := consumerInfo(t, js, b.StreamName(), "poison")
	require.Zero(t, ci.NumAckPending, "the poison message was terminated, not left pending")

	fake.Advance(time.Minute + time.Second)
	require.Equal(t, StatusActive, sub.Status(), "the failures left the window")
}

func TestSubscribeToAnExternalSubject(t *testing.T) {
	t.Parallel()
	b, js := testBridge(t, serverURL(t), nil)
	id := unique(t)
	stream := "LARKTEST_EXT_" + id
	deleteStreamAtEnd(t, js, stream)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"ext" + id + ".>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)

	var r recorder
	sub, err := b.Subscribe(ctx, SubscriptionSpec{Name: "ext", Subject: "ext" + id + ".orders.*", Handler: r.handle,
		FetchWait: 200 * time.Millisecond})
	require.NoError(t, err)
	_, err = js.Publish(ctx, "ext"+id+".orders.placed", []byte(`{"n":1}`))
	require.NoError(t, err)
	_, err = js.Publish(ctx, "ext"+id+".invoices.paid", []byte(`{"n":2}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return sub.Stats().Acked == 1 }, waitFor, 5*time.Millisecond)
	require.Equal(t, stream+":1", r.got()[0].DeliveryID())
	require.JSONEq(t, `{"n":1}`, string(r.got()[0].Data))

	// Durable: a new subscription of the same name resumes after what was acknowledged.
	sub.Stop()
	_, err = js.Publish(ctx, "ext"+id+".orders.shipped", []byte(`{"n":3}`))
	require.NoError(t, err)
	var r2 recorder
	sub2, err := b.Subscribe(ctx, SubscriptionSpec{Name: "ext", Subject: "ext" + id + ".orders.*", Handler: r2.handle,
		FetchWait: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return sub2.Stats().Acked == 1 }, waitFor, 5*time.Millisecond)
	require.Equal(t, stream+":3", r2.got()[0].DeliveryID())
	require.NoError(t, sub2.Delete(ctx))
	_, err = js.Consumer(ctx, stream, "ext")
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
}

func TestSubscribeRefusesBadSpecs(t *testing.T) {
	t.Parallel()
	b, _ := testBridge(t, serverURL(t), nil)
	ctx := context.Background()
	h := func(context.Context, Message) error { return nil }
	for _, spec := range []SubscriptionSpec{
		{Name: "", Subject: "a", Handler: h},
		{Name: "a.b", Subject: "a", Handler: h},
		{Name: strings.Repeat("n", MaxNameLen+1), Subject: "a", Handler: h},
		{Name: "n", Subject: "", Handler: h},
		{Name: "n", Subject: "a..b", Handler: h},
		{Name: "n", Subject: strings.Repeat("a", MaxSubjectLen+1), Handler: h},
		{Name: "n", Subject: "a", Stream: "x.y", Handler: h},
		{Name: "n", Subject: b.Prefix() + ".>"},
		{Name: "n", Subject: "nostream" + unique(t) + ".x", Handler: h},
	} {
		_, err := b.Subscribe(ctx, spec)
		require.Error(t, err, "%+v", spec)
	}
	sub, err := b.Subscribe(ctx, SubscriptionSpec{Name: "once", Subject: b.Prefix() + ".>", Handler: h, FetchWait: 200 * time.Millisecond})
	require.NoError(t, err)
	_, err = b.Subscribe(ctx, SubscriptionSpec{Name: "once", Subject: b.Prefix() + ".>", Handler: h})
	require.ErrorIs(t, err, ErrSubscribed)
	sub.Stop()
	sub.Stop() // idempotent

	// The end of the subscription's context ends it too, and frees its name.
	subCtx, cancel := context.WithCancel(ctx)
	_, err = b.Subscribe(subCtx, SubscriptionSpec{Name: "ctx", Subject: b.Prefix() + ".>", Handler: h, FetchWait: 100 * time.Millisecond})
	require.NoError(t, err)
	cancel()
	require.Eventually(t, func() bool {
		again, err := b.Subscribe(ctx, SubscriptionSpec{Name: "ctx", Subject: b.Prefix() + ".>", Handler: h, FetchWait: 100 * time.Millisecond})
		if err != nil {
			require.ErrorIs(t, err, ErrSubscribed)
			return false
		}
		again.Stop()
		return true
	}, waitFor, 5*time.Millisecond)
}

func TestPauseTakesNoNewDeliveriesAndResumeDoes(t *testing.T) {
	t.Parallel()
	b, _ := testBridge(t, serverURL(t), nil)
	var r recorder
	sub, err := b.Subscribe(context.Background(), SubscriptionSpec{Name: "pausable", Subject: b.Prefix() + ".>", Handler: r.handle,
		FetchWait: 100 * time.Millisecond})
	require.NoError(t, err)
	sub.Pause()
	require.Equal(t, StatusPaused, sub.Status())
	b.Mirror(context.Background(), event("evt_1"))
	require.Eventually(t, func() bool { return b.Mirrored() == 1 }, waitFor, 5*time.Millisecond)
	require.Never(t, func() bool { return r.count() > 0 }, 500*time.Millisecond, 10*time.Millisecond,
		"a paused subscription takes nothing (five pull periods)")
	sub.Resume()
	require.Eventually(t, func() bool { return sub.Stats().Acked == 1 }, waitFor, 5*time.Millisecond)
	require.Equal(t, StatusActive, sub.Status())
}

func TestStopWaitsForTheRunningHandler(t *testing.T) {
	t.Parallel()
	b, js := testBridge(t, serverURL(t), nil)
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	sub, err := b.Subscribe(context.Background(), SubscriptionSpec{Name: "slow", Subject: b.Prefix() + ".>", FetchWait: 100 * time.Millisecond,
		Handler: func(context.Context, Message) error {
			close(started)
			<-release
			finished.Store(true)
			return nil
		}})
	require.NoError(t, err)
	b.Mirror(context.Background(), event("evt_1"))
	<-started
	stopped := make(chan struct{})
	go func() { sub.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while the handler ran")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-stopped
	require.True(t, finished.Load())
	require.EqualValues(t, 1, sub.Stats().Acked, "the in-flight delivery was acknowledged before Stop returned")
	require.Zero(t, consumerInfo(t, js, b.StreamName(), "slow").NumAckPending)
}

func TestDisconnectionRefusesNewDeliveriesAndInFlightFinishes(t *testing.T) {
	t.Parallel()
	p := newProxy(t, serverURL(t))
	b, js := testBridge(t, proxyURL(p), nil)
	var (
		mu      sync.Mutex
		handled []string
		first   = make(chan struct{})
		release = make(chan struct{})
	)
	sub, err := b.Subscribe(context.Background(), SubscriptionSpec{Name: "flaky", Subject: b.Prefix() + ".>", FetchWait: 100 * time.Millisecond,
		AckWait: 30 * time.Second,
		Handler: func(_ context.Context, m Message) error {
			mu.Lock()
			handled = append(handled, m.DeliveryID())
			n := len(handled)
			mu.Unlock()
			if n == 1 {
				close(first)
				<-release
			}
			return nil
		}})
	require.NoError(t, err)
	handledCount := func() int { mu.Lock(); defer mu.Unlock(); return len(handled) }
	b.Mirror(context.Background(), event("evt_1"))
	<-first // the first delivery is in flight

	p.Cut()
	require.Eventually(t, func() bool { return sub.Status() == StatusDisconnected }, waitFor, 5*time.Millisecond)
	require.Eventually(t, func() bool { return sub.Connection().ReconnectAttempts > 0 }, waitFor, 5*time.Millisecond)
	require.False(t, sub.Connection().NextReconnectAt.IsZero())
	close(release) // the in-flight handler finishes while disconnected; its ack waits for the connection

	// Events reach the stream from elsewhere meanwhile; the subscription takes none of them.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range []string{"evt_2", "evt_3"} {
		body, err := json.Marshal(event(id))
		require.NoError(t, err)
		_, err = js.Publish(ctx, b.Prefix()+".acme.gts.x.shop.orders.placed.v1.__", body)
		require.NoError(t, err)
	}
	require.Never(t, func() bool { return handledCount() > 1 }, 500*time.Millisecond, 10*time.Millisecond,
		"no new deliveries while disconnected")
	require.Equal(t, StatusDisconnected, sub.Status())

	p.Restore()
	require.Eventually(t, func() bool { return sub.Status() == StatusActive }, waitFor, 5*time.Millisecond)
	require.True(t, sub.Connection().Connected)
	require.Zero(t, sub.Connection().ReconnectAttempts)
	require.Eventually(t, func() bool {
		ci := consumerInfo(t, js, b.StreamName(), "flaky")
		return ci.NumPending == 0 && ci.NumAckPending == 0
	}, waitFor, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{b.StreamName() + ":1", b.StreamName() + ":2", b.StreamName() + ":3"}, handled,
		"the in-flight ack went through after the reconnection: nothing delivered twice")
}

// newClosedPort returns an address nothing listens on.
func newClosedPort(t *testing.T) string {
	t.Helper()
	p := newProxy(t, "nats://127.0.0.1:1")
	p.Cut()
	return p.Addr()
}

func TestADeletedConsumerDegradesAndIsRecreated(t *testing.T) {
	t.Parallel()
	b, js := testBridge(t, serverURL(t), nil)
	var r recorder
	sub, err := b.Subscribe(context.Background(), SubscriptionSpec{Name: "gone", Subject: b.Prefix() + ".>", Handler: r.handle,
		FetchWait: 100 * time.Millisecond, DegradedThreshold: 1})
	require.NoError(t, err)
	require.Equal(t, StatusActive, sub.Status())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, js.DeleteConsumer(ctx, b.StreamName(), "gone"), "an operator deletes the consumer")
	require.Eventually(t, func() bool { return sub.Status() == StatusDegraded }, waitFor, 5*time.Millisecond)
	require.True(t, sub.Connection().Connected, "degraded, not disconnected: the connection is fine")
	require.Eventually(t, func() bool {
		_, err := js.Consumer(ctx, b.StreamName(), "gone")
		return err == nil
	}, waitFor, 10*time.Millisecond, "the subscription re-created its consumer")
	b.Mirror(context.Background(), event("evt_after"))
	require.Eventually(t, func() bool { return sub.Stats().Acked == 1 }, waitFor, 5*time.Millisecond)
}

func TestCloseWhileDisconnectedGivesUpAfterTheDrainTimeout(t *testing.T) {
	t.Parallel()
	p := newProxy(t, serverURL(t))
	b, _ := testBridge(t, proxyURL(p), func(c *Config) { c.DrainTimeout = 200 * time.Millisecond; c.PublishTimeout = 100 * time.Millisecond })
	var r recorder
	_, err := b.Subscribe(context.Background(), SubscriptionSpec{Name: "s", Subject: b.Prefix() + ".>", Handler: r.handle,
		FetchWait: 100 * time.Millisecond})
	require.NoError(t, err)
	p.Cut()
	require.Eventually(t, func() bool { return !b.Connection().Connected }, waitFor, 5*time.Millisecond)
	for i := range 3 {
		b.Mirror(context.Background(), event("evt_"+strconv.Itoa(i)))
	}
	start := time.Now()
	require.NoError(t, b.Close())
	require.Less(t, time.Since(start), 5*time.Second, "Close is bounded by the drain timeout, not the outage")
	require.EqualValues(t, 3, b.Dropped(), "what could not be published is counted")
	require.Zero(t, b.Mirrored())
}

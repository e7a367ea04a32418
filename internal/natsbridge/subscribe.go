package natsbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Status is a subscription's connection status (002, "Disconnection Handling").
type Status string

// The statuses, in the order Status decides them: a paused subscription reports paused whatever the
// connection does; a connected one is degraded while its handler keeps failing.
const (
	// StatusPaused: Pause was called; no new deliveries are taken until Resume.
	StatusPaused Status = "paused"
	// StatusDisconnected: the connection to NATS is down; no new deliveries are taken, in-flight
	// handler calls finish and their acknowledgements are retried after the reconnection (or the
	// server redelivers the message after AckWait).
	StatusDisconnected Status = "disconnected"
	// StatusDegraded: connected, but DegradedThreshold handler failures, redeliveries or pull errors
	// happened within DegradedWindow.
	StatusDegraded Status = "degraded"
	// StatusActive: fully operational.
	StatusActive Status = "active"
)

// Defaults of SubscriptionSpec.
const (
	DefaultMaxDeliver        = 5
	DefaultAckWait           = 30 * time.Second
	DefaultFetchWait         = 2 * time.Second
	DefaultDegradedThreshold = 5
	DefaultDegradedWindow    = time.Minute
)

// ErrSubscribed is returned by Subscribe for a name this bridge already consumes with.
var ErrSubscribed = errors.New("natsbridge: a subscription of that name is running")

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("natsbridge: bridge closed")

// Message is one delivery of a stream message to a handler.
type Message struct {
	// Subject is the message's subject.
	Subject string
	// Data is the message body (for a mirrored event, the event as JSON).
	Data []byte
	// Header holds the message headers (for a mirrored event, Nats-Msg-Id and the Lark-* headers).
	Header map[string][]string
	// Stream and StreamSeq locate the message in its stream; they stay the same across
	// redeliveries.
	Stream    string
	StreamSeq uint64
	// NumDelivered is 1 on the first delivery and counts redeliveries.
	NumDelivered uint64
	// StoredAt is when the stream stored the message.
	StoredAt time.Time
}

// DeliveryID is "<stream>:<stream sequence>", the same on every redelivery of the message: the
// caller uses it (for example as the id of the event it records) to make a delivery's effect happen
// once although the subscription delivers at least once.
func (m Message) DeliveryID() string {
	return m.Stream + ":" + strconv.FormatUint(m.StreamSeq, 10)
}

// SubscriptionSpec describes a durable subscription.
type SubscriptionSpec struct {
	// Name is the durable consumer's name ([A-Za-z0-9_-], at most 64 bytes); subscribing again with
	// the same name, also after a restart, resumes where the consumer stands.
	Name string
	// Subject is the filter subject (wildcards allowed, at most MaxSubjectLen bytes); it may be any
	// subject a stream captures, not only Lark's.
	Subject string
	// Stream is the stream to consume from; empty means the stream whose subjects capture Subject
	// (Subscribe fails when there is none: a subject no stream stores cannot be consumed durably).
	Stream string
	// Handler handles one message. A nil error acknowledges it; an error has it redelivered after a
	// backoff, at most MaxDeliver deliveries in all, after which it is terminated and logged. A panic
	// counts as an error. Handler calls of one subscription are sequential.
	Handler func(ctx context.Context, m Message) error
	// MaxDeliver bounds the deliveries of one message (default 5).
	MaxDeliver int
	// AckWait is how long the server waits for an acknowledgement before it redelivers (default
	// 30 s); a handler still running tells the server it is in progress every AckWait/3.
	AckWait time.Duration
	// FetchWait is how long one pull waits for a message (default 2 s); Stop, Pause and a
	// disconnection take effect within it.
	FetchWait time.Duration
	// DegradedThreshold and DegradedWindow: that many handler failures, redeliveries or pull errors
	// within the window make the status degraded (defaults 5 and 1 min, measured with the bridge's
	// clock).
	DegradedThreshold int
	DegradedWindow    time.Duration
	// FromStart delivers what the stream already holds when the consumer is created; by default a
	// new consumer starts with the next message.
	FromStart bool
}

// SubscriptionStats counts a subscription's deliveries since Subscribe (metrics-friendly).
type SubscriptionStats struct {
	// Delivered counts handler calls; Acked, Failed (handler errors, redelivered later) and
	// Terminated (failed on the last allowed delivery) split them, Redelivered counts the calls
	// for messages delivered before.
	Delivered, Acked, Failed, Terminated, Redelivered int64
}

// Subscription is a running durable subscription.
type Subscription struct {
	b    *Bridge
	spec SubscriptionSpec
	log  *slog.Logger
	// cons, stream and config: the consumer is re-created from them if it disappears; cons is
	// used by the run goroutine only (and by Delete after Stop).
	cons   jetstream.Consumer
	stream string
	config jetstream.ConsumerConfig
	ctx    context.Context

	mu       sync.Mutex
	paused   bool
	stopping bool
	troubles []time.Time // the last DegradedThreshold trouble times, oldest first
	wake     chan struct{}

	stop chan struct{}
	done chan struct{}

	delivered, acked, failed, terminated, redelivered atomic.Int64
}

// Subscribe creates or resumes the durable pull consumer spec.Name on spec.Subject and hands each
// message to spec.Handler until Stop, Close or the end of ctx (which also cancels running handlers).
func (b *Bridge) Subscribe(ctx context.Context, spec SubscriptionSpec) (*Subscription, error) {
	if err := validName("subscription", spec.Name); err != nil {
		return nil, err
	}
	if err := validSubject(spec.Subject, true); err != nil {
		return nil, err
	}
	if spec.Stream != "" {
		if err := validName("stream", spec.Stream); err != nil {
			return nil, err
		}
	}
	if spec.Handler == nil {
		return nil, errors.New("natsbridge: subscription without a handler")
	}
	spec = spec.withDefaults()
	stream := spec.Stream
	if stream == "" {
		name, err := b.js.StreamNameBySubject(ctx, spec.Subject)
		if err != nil {
			return nil, fmt.Errorf("natsbridge: no stream captures %s: %w", spec.Subject, err)
		}
		stream = name
	}
	cc := jetstream.ConsumerConfig{
		Durable:       spec.Name,
		Description:   "Lark subscription",
		FilterSubject: spec.Subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       spec.AckWait,
		MaxDeliver:    spec.MaxDeliver,
		DeliverPolicy: jetstream.DeliverNewPolicy,
	}
	if spec.FromStart {
		cc.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	s := &Subscription{b: b, spec: spec, ctx: ctx, wake: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		log: b.log.With("subscription", spec.Name, "subject", spec.Subject, "stream", stream)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := b.subs[spec.Name]; ok {
		b.mu.Unlock()
		return nil, ErrSubscribed
	}
	b.subs[spec.Name] = s
	b.mu.Unlock()
	cons, err := b.js.CreateOrUpdateConsumer(ctx, stream, cc)
	if err != nil {
		close(s.done) // a Close meanwhile may be waiting in Stop
		b.forget(s)
		return nil, fmt.Errorf("natsbridge: consumer %s on %s: %w", spec.Name, stream, err)
	}
	s.cons, s.stream, s.config = cons, stream, cc
	go s.run()
	return s, nil
}

func (spec SubscriptionSpec) withDefaults() SubscriptionSpec {
	if spec.MaxDeliver <= 0 {
		spec.MaxDeliver = DefaultMaxDeliver
	}
	if spec.AckWait <= 0 {
		spec.AckWait = DefaultAckWait
	}
	if spec.FetchWait <= 0 {
		spec.FetchWait = DefaultFetchWait
	}
	if spec.DegradedThreshold <= 0 {
		spec.DegradedThreshold = DefaultDegradedThreshold
	}
	if spec.DegradedWindow <= 0 {
		spec.DegradedWindow = DefaultDegradedWindow
	}
	return spec
}

// forget removes s from the bridge's running subscriptions.
func (b *Bridge) forget(s *Subscription) {
	b.mu.Lock()
	if b.subs[s.spec.Name] == s {
		delete(b.subs, s.spec.Name)
	}
	b.mu.Unlock()
}

// Name returns the durable consumer's name.
func (s *Subscription) Name() string { return s.spec.Name }

// Status returns the subscription's connection status now.
func (s *Subscription) Status() Status {
	connected, _ := s.b.connState()
	now := s.b.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.paused:
		return StatusPaused
	case !connected:
		return StatusDisconnected
	case len(s.troubles) >= s.spec.DegradedThreshold && now.Sub(s.troubles[0]) <= s.spec.DegradedWindow:
		return StatusDegraded
	}
	return StatusActive
}

// Connection returns the bridge's connection details, 002's "connection_details".
func (s *Subscription) Connection() ConnectionDetails { return s.b.Connection() }

// Stats returns the delivery counters.
func (s *Subscription) Stats() SubscriptionStats {
	return SubscriptionStats{Delivered: s.delivered.Load(), Acked: s.acked.Load(), Failed: s.failed.Load(),
		Terminated: s.terminated.Load(), Redelivered: s.redelivered.Load()}
}

// Pause stops taking new deliveries (a running handler call finishes); the status is paused until
// Resume. The consumer keeps its position, so nothing is lost.
func (s *Subscription) Pause() { s.setPaused(true) }

// Resume takes deliveries again after Pause.
func (s *Subscription) Resume() { s.setPaused(false) }

func (s *Subscription) setPaused(p bool) {
	s.mu.Lock()
	s.paused = p
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// Stop stops taking deliveries and waits for the running handler call and its acknowledgement (and
// for an outstanding pull, at most FetchWait). The durable consumer stays on the server: a later
// Subscribe with the same name resumes it. Stop is idempotent.
func (s *Subscription) Stop() {
	s.signalStop()
	<-s.done
	s.b.forget(s)
}

// signalStop tells the run goroutine to stop, without waiting.
func (s *Subscription) signalStop() {
	s.mu.Lock()
	if !s.stopping {
		s.stopping = true
		close(s.stop)
	}
	s.mu.Unlock()
}

// Delete stops the subscription and deletes its durable consumer (for a deleted trigger).
func (s *Subscription) Delete(ctx context.Context) error {
	s.Stop()
	if err := s.b.js.DeleteConsumer(ctx, s.stream, s.spec.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("natsbridge: delete consumer %s: %w", s.spec.Name, err)
	}
	return nil
}

// trouble records a handler failure, a redelivery or a pull error for the degraded status.
func (s *Subscription) trouble() {
	now := s.b.cfg.Clock.Now()
	s.mu.Lock()
	s.troubles = append(s.troubles, now)
	if n := len(s.troubles) - s.spec.DegradedThreshold; n > 0 {
		s.troubles = append(s.troubles[:0], s.troubles[n:]...)
	}
	s.mu.Unlock()
}

// gate waits until the subscription may take a delivery; false means stop.
func (s *Subscription) gate() bool {
	for {
		connected, connChanged := s.b.connState()
		s.mu.Lock()
		paused, wake := s.paused, s.wake
		s.mu.Unlock()
		if s.ctx.Err() != nil {
			return false
		}
		select {
		case <-s.stop:
			return false
		default:
		}
		if connected && !paused {
			return true
		}
		select {
		case <-s.stop:
			return false
		case <-s.ctx.Done():
			return false
		case <-connChanged:
		case <-wake:
		}
	}
}

// mayDeliver reports whether a fetched message may go to the handler now.
func (s *Subscription) mayDeliver() bool {
	connected, _ := s.b.connState()
	s.mu.Lock()
	defer s.mu.Unlock()
	return connected && !s.paused && !s.stopping && s.ctx.Err() == nil
}

func (s *Subscription) run() {
	defer s.b.forget(s) // also when ctx ended: the name may be subscribed again
	defer close(s.done)
	pullErrors := 0
	for s.gate() {
		err := s.fetch()
		if err == nil {
			pullErrors = 0
			continue
		}
		if connected, _ := s.b.connState(); !connected {
			continue // the gate waits for the connection
		}
		pullErrors++
		s.trouble()
		s.log.Warn("pull failed; retrying", "err", err, "attempt", pullErrors)
		t := time.NewTimer(backoff(s.b.cfg.MinBackoff, s.b.cfg.MaxBackoff, pullErrors))
		select {
		case <-t.C:
		case <-s.stop:
			t.Stop()
		case <-s.ctx.Done():
			t.Stop()
		}
	}
}

// fetch pulls one message and handles it. The pull ends after FetchWait, or at once at the end of the
// subscription's context or when the connection drops. An empty pull is no error.
func (s *Subscription) fetch() error {
	_, connChanged := s.b.connState()
	ctx, cancel := context.WithTimeout(s.ctx, s.spec.FetchWait)
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		// Not on Stop: the server keeps a pull it was sent until it expires, and a message it
		// hands to a pull the client gave up waits AckWait for its redelivery. Stop waits for the
		// pull instead and gives such a message back at once (mayDeliver).
		select {
		case <-connChanged:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() { cancel(); <-watched }()
	batch, err := s.cons.Fetch(1, jetstream.FetchContext(ctx))
	if err != nil {
		return err
	}
	for msg := range batch.Messages() {
		if !s.mayDeliver() {
			// Not handed out: paused or stopping gives it back now; while disconnected the nak
			// cannot reach the server, which redelivers it after AckWait.
			if err := msg.Nak(); err != nil {
				s.log.Debug("nak of an undelivered message failed; the server redelivers it after ack_wait", "err", err)
			}
			continue
		}
		s.handle(msg)
	}
	err = batch.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded) && s.ctx.Err() == nil:
		// The server ends an empty pull itself just before the deadline; no answer at all means
		// the consumer is gone (or the server does not answer).
		return s.checkConsumer()
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return nil
	}
	return err
}

// checkConsumer re-creates the durable consumer when it was deleted behind the subscription's
// back (a trigger's consumer exists as long as the trigger); the error makes it a trouble.
func (s *Subscription) checkConsumer() error {
	ctx, cancel := context.WithTimeout(s.ctx, s.b.cfg.PublishTimeout)
	defer cancel()
	_, err := s.cons.Info(ctx)
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil // there, or the server is slow: the next pull tells
	}
	cons, cerr := s.b.js.CreateOrUpdateConsumer(ctx, s.stream, s.config)
	if cerr != nil {
		return fmt.Errorf("consumer deleted; re-creating it: %w", cerr)
	}
	s.cons = cons
	return errors.New("consumer was deleted; re-created it (messages stored meanwhile are skipped unless FromStart)")
}

// handle hands one message to the handler and settles it: ack on success, nak with backoff on
// failure, term on the last allowed delivery.
func (s *Subscription) handle(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		s.log.Error("message without JetStream metadata; terminated", "err", err)
		if err := msg.Term(); err != nil {
			s.log.Warn("terminate failed", "err", err)
		}
		return
	}
	m := Message{Subject: msg.Subject(), Data: msg.Data(), Header: msg.Headers(), Stream: meta.Stream,
		StreamSeq: meta.Sequence.Stream, NumDelivered: meta.NumDelivered, StoredAt: meta.Timestamp}
	s.delivered.Add(1)
	if m.NumDelivered > 1 {
		s.redelivered.Add(1)
		s.trouble()
	}
	err = s.call(msg, m)
	if err == nil {
		s.ack(msg, m)
		return
	}
	s.trouble()
	log := s.log.With("delivery_id", m.DeliveryID(), "delivery", m.NumDelivered)
	if tenant := firstHeader(m.Header, HeaderTenantID); tenant != "" {
		log = log.With("tenant_id", tenant)
	}
	if m.NumDelivered >= uint64(s.spec.MaxDeliver) {
		s.terminated.Add(1)
		log.Error("handler failed on the last allowed delivery; message terminated", "err", err, "max_deliver", s.spec.MaxDeliver)
		// Term, not TermWithReason: a reason needs nats-server 2.10.4; an older server takes the
		// reasoned form for nothing and leaves the message pending.
		if terr := msg.Term(); terr != nil {
			log.Warn("terminate failed; the server gives up after max_deliver anyway", "err", terr)
		}
		return
	}
	s.failed.Add(1)
	delay := backoff(s.b.cfg.MinBackoff, s.b.cfg.MaxBackoff, int(m.NumDelivered))
	log.Warn("handler failed; redelivering", "err", err, "delay", delay)
	if nerr := msg.NakWithDelay(delay); nerr != nil {
		log.Warn("nak failed; the server redelivers after ack_wait", "err", nerr)
	}
}

// call runs the handler, telling the server the message is in progress every AckWait/3 while it
// runs; a panic becomes an error.
func (s *Subscription) call(msg jetstream.Msg, m Message) (err error) {
	stop := make(chan struct{})
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		t := time.NewTicker(s.spec.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil { // a lost one only risks an early redelivery
					s.log.Debug("in-progress notice failed", "err", err, "delivery_id", m.DeliveryID())
				}
			}
		}
	}()
	defer func() {
		close(stop)
		<-kept
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return s.spec.Handler(s.ctx, m)
}

// ack acknowledges msg with the server's confirmation, retrying across a disconnection until the
// server would redeliver anyway (AckWait after the delivery).
func (s *Subscription) ack(msg jetstream.Msg, m Message) {
	deadline := time.Now().Add(s.spec.AckWait)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), min(s.b.cfg.PublishTimeout, time.Until(deadline)))
		err := msg.DoubleAck(ctx)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			s.acked.Add(1)
			return
		}
		if time.Now().After(deadline) {
			s.log.Warn("acknowledgement lost; the server will redeliver (the delivery id stays the same)",
				"delivery_id", m.DeliveryID(), "err", err)
			return
		}
		connected, changed := s.b.connState()
		wait := time.Until(deadline)
		if connected {
			wait = min(wait, backoff(s.b.cfg.MinBackoff, s.b.cfg.MaxBackoff, attempt))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-changed:
		}
		t.Stop()
	}
}

func firstHeader(h map[string][]string, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

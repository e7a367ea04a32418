// Package natsfeed feeds event triggers from NATS JetStream subjects: for every active trigger that
// names a nats_subject it keeps one durable subscription (natsbridge) whose messages become events
// of the trigger's tenant and event type, published through the events service (eventbus) like
// POST /events — so they reach that trigger, the tenant's other triggers of the type and waiting
// workflows alike, exactly once per message (the event id is the message's stream position).
//
// Subscriptions follow the triggers: created when a trigger with a subject is created or enabled,
// paused while it is disabled (its durable consumer keeps the backlog, delivered on enable),
// replaced when its subject or type changes, and deleted with the trigger. A trigger's connection
// status (002) is its subscription's: active, degraded, disconnected or paused.
package natsfeed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/eventbus"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/natsbridge"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/trigger"
)

// Publisher publishes an event that came from the external bus (eventbus.Bus.PublishExternal).
type Publisher interface {
	PublishExternal(ctx context.Context, ev events.Event) (eventbus.Published, error)
}

// Lister finds the triggers to subscribe for at start (store.Reader has both).
type Lister interface {
	AllTenants(ctx context.Context) ([]tenant.Policy, error)
	ListTriggers(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[trigger.Trigger], error)
}

// Bridge is what the feed needs of natsbridge.Bridge.
type Bridge interface {
	Subscribe(ctx context.Context, spec natsbridge.SubscriptionSpec) (*natsbridge.Subscription, error)
}

// SpanReceive is the span of one NATS message the feed publishes as an event (docs/observability.md).
const SpanReceive = "nats.receive"

// Feed keeps the subscriptions of NATS-fed triggers. Its methods are safe for concurrent use.
type Feed struct {
	bridge   Bridge
	pub      Publisher
	log      *slog.Logger
	tracer   trace.Tracer
	observer Observer // SetObserver; nil: none

	ctx     context.Context
	cancel  context.CancelFunc
	changes chan change
	done    chan struct{}

	mu      sync.Mutex
	subs    map[key]*feed
	failed  map[key]string // the subject a trigger's last subscription attempt failed for
	applied chan struct{}  // closed and replaced after every change applied (Await)
}

type key struct{ tenantID, triggerID string }

// feed is one trigger's subscription.
type feed struct {
	subject, typeID string
	sub             *natsbridge.Subscription
}

type change struct {
	t       trigger.Trigger
	deleted bool
}

// New returns a Feed publishing through pub; Start runs it. Each message
// is published in a nats.receive span of tracer (nil: no spans), which continues the W3C trace
// context of the message's traceparent and tracestate headers when it has them: the invocations
// its event starts are created in that trace.
func New(bridge Bridge, pub Publisher, log *slog.Logger, tracer trace.Tracer) *Feed {
	if log == nil {
		log = slog.Default()
	}
	if tracer == nil {
		tracer = tracing.Off().Tracer()
	}
	return &Feed{bridge: bridge, pub: pub, log: log, tracer: tracer, changes: make(chan change, 1024), subs: map[key]*feed{},
		failed: map[key]string{}, applied: make(chan struct{})}
}

// Start subscribes for every trigger with a subject that the lister finds, then follows the
// changes Changed reports, until Close. An error listing the triggers is returned, but the feed
// still follows changes (and Close still stops it).
func (f *Feed) Start(ctx context.Context, l Lister) error {
	f.ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	f.done = make(chan struct{})
	err := f.subscribeAll(ctx, l)
	go f.run()
	return err
}

// subscribeAll subscribes for every trigger with a subject, tenant by tenant.
func (f *Feed) subscribeAll(ctx context.Context, l Lister) error {
	tenants, err := l.AllTenants(ctx)
	if err != nil {
		return err
	}
	for _, tp := range tenants {
		q := store.ListQuery{Limit: 200}
		for {
			page, err := l.ListTriggers(ctx, tp.TenantID, q)
			if err != nil {
				return err
			}
			for _, t := range page.Items {
				if t.NATSSubject != "" {
					f.apply(change{t: t})
				}
			}
			if !page.HasMore || page.NextCursor == "" {
				break
			}
			q.Cursor = page.NextCursor
		}
	}
	return nil
}

// run applies the reported changes one at a time, off the writer that reported them.
func (f *Feed) run() {
	defer close(f.done)
	for {
		select {
		case <-f.ctx.Done():
			return
		case c := <-f.changes:
			f.apply(c)
		}
	}
}

// Changed implements eventtrigger.Feeds: called after a trigger write commits. It never blocks the
// caller (the store's writer): the change is applied by the feed's goroutine.
func (f *Feed) Changed(t trigger.Trigger, deleted bool) {
	select {
	case f.changes <- change{t: t, deleted: deleted}:
	default:
		f.log.Error("natsfeed: too many trigger changes queued; this one is applied at the next start",
			"tenant_id", t.TenantID, "trigger_id", t.ID)
	}
}

// Connection implements eventtrigger.Feeds: the status of a trigger's subscription and the
// details of the bridge's connection to NATS (ok false: no subscription).
func (f *Feed) Connection(tenantID, triggerID string) (string, trigger.ConnectionDetails, bool) {
	f.mu.Lock()
	fd, ok := f.subs[key{tenantID, triggerID}]
	f.mu.Unlock()
	if !ok {
		return "", trigger.ConnectionDetails{}, false
	}
	return string(fd.sub.Status()), details(fd.sub.Connection()), true
}

// details is 002's connection_details of a bridge connection.
func details(c natsbridge.ConnectionDetails) trigger.ConnectionDetails {
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	d := trigger.ConnectionDetails{EventBroker: "disconnected", LastConnectedAt: at(c.LastConnectedAt),
		ReconnectAttempts: c.ReconnectAttempts, NextReconnectAt: at(c.NextReconnectAt)}
	if c.Connected {
		d.EventBroker = "connected"
	}
	return d
}

// Await implements eventtrigger.Feeds: it returns once the feed has applied trigger t as written
// (its subscription made, replaced, paused or resumed to match; or its subscription attempt
// failed), or when ctx ends, whichever is first.
func (f *Feed) Await(ctx context.Context, t trigger.Trigger) {
	k := key{t.TenantID, t.ID}
	for {
		f.mu.Lock()
		fd, failed, ch := f.subs[k], f.failed[k], f.applied
		f.mu.Unlock()
		if settled(fd, failed, t) {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// settled reports whether fd (nil: none), after a failed attempt for subject failed (""
// none), is what the feed makes of t.
func settled(fd *feed, failed string, t trigger.Trigger) bool {
	switch {
	case t.NATSSubject == "":
		return fd == nil
	case fd == nil || fd.subject != t.NATSSubject || fd.typeID != t.EventTypeID:
		return fd == nil && failed == t.NATSSubject
	}
	return (fd.sub.Status() == natsbridge.StatusPaused) == (t.Status != trigger.StatusActive)
}

// ConsumerName is the durable consumer of a trigger's subscription: stable across restarts and
// nodes, so that they share one consumer (and each message is delivered to one of them).
func ConsumerName(tenantID, triggerID string) string {
	h := sha256.Sum256([]byte(tenantID + "\x00" + triggerID))
	return "lark_trigger_" + hex.EncodeToString(h[:12])
}

// apply brings one trigger's subscription in line with t, then wakes Await.
func (f *Feed) apply(c change) {
	defer f.signal()
	t := c.t
	k := key{t.TenantID, t.ID}
	f.mu.Lock()
	delete(f.failed, k)
	cur := f.subs[k]
	f.mu.Unlock()
	want := !c.deleted && t.NATSSubject != ""
	if cur != nil && (!want || cur.subject != t.NATSSubject || cur.typeID != t.EventTypeID) {
		cur.sub.Stop()
		if err := cur.sub.Delete(f.ctx); err != nil {
			f.log.Warn("natsfeed: deleting a trigger's consumer", "tenant_id", t.TenantID, "trigger_id", t.ID, "err", err)
		}
		f.mu.Lock()
		delete(f.subs, k)
		f.mu.Unlock()
		cur = nil
	}
	if !want {
		return
	}
	if cur == nil {
		fd := &feed{subject: t.NATSSubject, typeID: t.EventTypeID}
		sub, err := f.bridge.Subscribe(f.ctx, natsbridge.SubscriptionSpec{Name: ConsumerName(t.TenantID, t.ID),
			Subject: t.NATSSubject, Handler: f.handler(t.TenantID, t.ID, t.EventTypeID)})
		if err != nil {
			f.log.Error("natsfeed: subscribing a trigger", "tenant_id", t.TenantID, "trigger_id", t.ID,
				"subject", t.NATSSubject, "err", err)
			f.mu.Lock()
			f.failed[k] = t.NATSSubject
			f.mu.Unlock()
			return
		}
		fd.sub = sub
		f.mu.Lock()
		f.subs[k] = fd
		f.mu.Unlock()
		cur = fd
	}
	if t.Status == trigger.StatusActive {
		cur.sub.Resume()
	} else {
		cur.sub.Pause()
	}
}

// signal wakes every Await: a change was applied.
func (f *Feed) signal() {
	f.mu.Lock()
	close(f.applied)
	f.applied = make(chan struct{})
	f.mu.Unlock()
}

// handler turns a message into an event of the trigger's tenant and type. A message the events
// service refuses for good (not JSON, too large, failing the type's schema) is logged and
// acknowledged: redelivering it would not change the answer. Other failures are redelivered.
func (f *Feed) handler(tenantID, triggerID, typeID string) func(ctx context.Context, m natsbridge.Message) error {
	return func(ctx context.Context, m natsbridge.Message) error {
		ctx = tracing.Continue(ctx, header(m.Header, natsbridge.HeaderTraceParent), header(m.Header, natsbridge.HeaderTraceState))
		ctx, span := f.tracer.Start(ctx, SpanReceive, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			tracing.AttrTenant.String(tenantID), tracing.AttrTrigger.String(triggerID), tracing.AttrMessagingSystem.String("nats"),
			tracing.AttrMessagingDestination.String(m.Subject), tracing.AttrDelivery.String(m.DeliveryID())))
		defer span.End()
		payload := json.RawMessage(m.Data)
		if !json.Valid(payload) {
			b, err := json.Marshal(string(m.Data))
			if err != nil {
				return err
			}
			payload = b
		}
		at := m.StoredAt
		ev := events.Event{ID: "nats:" + m.DeliveryID(), TenantID: tenantID, TypeID: typeID, Payload: payload,
			Source: eventbus.ExternalSourcePrefix + m.Subject, Subject: m.Subject, Time: &at, PublishedBy: "trigger:" + triggerID}
		_, err := f.pub.PublishExternal(ctx, ev)
		f.observe(err)
		var pe *problem.Error
		if errors.As(err, &pe) && pe.Status < 500 {
			span.SetStatus(codes.Error, "refused")
			f.log.Warn("natsfeed: a message was refused and is dropped", "tenant_id", tenantID, "trigger_id", triggerID,
				"subject", m.Subject, "delivery_id", m.DeliveryID(), "reason", pe.Detail)
			return nil
		}
		if err != nil {
			span.SetStatus(codes.Error, "not published")
		}
		return err
	}
}

// Observer hears of every message a trigger's subscription receives (package metrics implements
// it), once the events service has answered: outcome is MessagePublished (stored as an event, or
// already stored: a redelivery), MessageRefused (refused for good and dropped) or MessageFailed
// (not published now: it is redelivered).
type Observer interface {
	NATSMessage(outcome string)
}

// Observer outcomes.
const (
	MessagePublished = "published"
	MessageRefused   = "refused"
	MessageFailed    = "failed"
)

// SetObserver sets the Observer (call it before Start).
func (f *Feed) SetObserver(o Observer) { f.observer = o }

// observe reports the outcome of publishing one message (err: PublishExternal's).
func (f *Feed) observe(err error) {
	if f.observer == nil {
		return
	}
	var pe *problem.Error
	switch {
	case err == nil:
		f.observer.NATSMessage(MessagePublished)
	case errors.As(err, &pe) && pe.Status < 500:
		f.observer.NATSMessage(MessageRefused)
	default:
		f.observer.NATSMessage(MessageFailed)
	}
}

// header is the first value of a message header, its name matched without regard to case (NATS
// headers are case-sensitive; publishers write traceparent or Traceparent).
func header(h map[string][]string, name string) string {
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, name) {
			return v[0]
		}
	}
	return ""
}

// Close stops every subscription (their durable consumers stay for the next start).
func (f *Feed) Close() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, fd := range f.subs {
		fd.sub.Stop()
		delete(f.subs, k)
	}
}

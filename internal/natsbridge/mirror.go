package natsbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/tracing"
)

// Header names of a mirrored event (besides nats.MsgIdHdr, "Nats-Msg-Id" = "<tenant>:<event id>").
const (
	HeaderTenantID  = "Lark-Tenant-Id"
	HeaderEventID   = "Lark-Event-Id"
	HeaderEventType = "Lark-Event-Type"
	// HeaderTraceParent and HeaderTraceState carry the W3C trace context of the request or attempt
	// that published the event, when it had one.
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// dropWarnEvery spaces the warnings about dropped events; drops in between are logged at debug.
const dropWarnEvery = 10 * time.Second

// queued is an event waiting to be mirrored, with the W3C trace context of the transaction that
// stored it.
type queued struct {
	ev                      events.Event
	traceparent, tracestate string
}

// mirror is the bounded queue of events to publish and its publisher goroutine.
type mirror struct {
	b *Bridge

	// mu orders Mirror's enqueue against stop, so that no event is queued after the final count.
	mu      sync.RWMutex
	stopped bool
	q       chan queued

	quit   chan struct{}      // closed by stop: drain what is queued
	done   chan struct{}      // closed when the publisher has returned
	ctx    context.Context    // the publisher's; cancelled at the drain deadline
	cancel context.CancelFunc //

	mirrored, duplicates, dropped atomic.Int64

	warnMu   sync.Mutex
	lastWarn time.Time
}

func (m *mirror) start(b *Bridge) {
	m.b = b
	m.q = make(chan queued, b.cfg.QueueSize)
	m.quit = make(chan struct{})
	m.done = make(chan struct{})
	m.ctx, m.cancel = context.WithCancel(context.Background())
	go m.run()
}

// Mirror queues ev, whose transaction has committed, for publishing to its subject (EventSubject
// under the bridge's prefix). The message carries the W3C trace context of ctx's span (its
// traceparent and tracestate headers), so that a consumer continues the trace of the request or
// attempt that published the event; ctx is read for nothing else. It never blocks: when the queue
// is full or the bridge is closed the event is dropped, counted and logged. The database stays the
// source of truth; mirroring is at least once within the stream's duplicate window and best effort
// beyond it.
func (b *Bridge) Mirror(ctx context.Context, ev events.Event) {
	m := &b.mirror
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.stopped {
		m.drop(ev, "bridge closed")
		return
	}
	q := queued{ev: ev}
	q.traceparent, q.tracestate = tracing.Carry(ctx)
	select {
	case m.q <- q:
	default:
		m.drop(ev, "queue full")
	}
}

// Mirrored counts the events the stream acknowledged (duplicates included).
func (b *Bridge) Mirrored() int64 { return b.mirror.mirrored.Load() }

// Duplicates counts the acknowledged events the stream recognised as re-mirrors (Nats-Msg-Id seen
// within its duplicate window) and did not store again.
func (b *Bridge) Duplicates() int64 { return b.mirror.duplicates.Load() }

// Dropped counts the events that were not mirrored: queue full, bridge closed, too large for the
// server, or refused PublishAttempts times while connected.
func (b *Bridge) Dropped() int64 { return b.mirror.dropped.Load() }

// Queued returns how many events wait to be published.
func (b *Bridge) Queued() int { return len(b.mirror.q) }

func (m *mirror) drop(ev events.Event, reason string) {
	total := m.dropped.Add(1)
	now := m.b.cfg.Clock.Now()
	m.warnMu.Lock()
	warn := m.lastWarn.IsZero() || now.Sub(m.lastWarn) >= dropWarnEvery
	if warn {
		m.lastWarn = now
	}
	m.warnMu.Unlock()
	args := []any{"tenant_id", ev.TenantID, "event_id", ev.ID, "event_type_id", ev.TypeID, "reason", reason, "dropped_total", total}
	if warn {
		m.b.log.Warn("event not mirrored to NATS (the database keeps it)", args...)
		return
	}
	m.b.log.Debug("event not mirrored to NATS (the database keeps it)", args...)
}

// stop stops taking events, publishes what is queued for up to timeout and counts the rest as
// dropped.
func (m *mirror) stop(timeout time.Duration) {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	m.mu.Unlock()
	close(m.quit)
	t := time.AfterFunc(timeout, m.cancel)
	<-m.done
	t.Stop()
	m.cancel()
}

func (m *mirror) run() {
	defer close(m.done)
	for {
		select {
		case q := <-m.q:
			m.publish(q)
		case <-m.quit:
			m.drain()
			return
		}
	}
}

// drain publishes the queue until it is empty or the drain deadline passes.
func (m *mirror) drain() {
	for {
		select {
		case q := <-m.q:
			if m.ctx.Err() != nil {
				m.drop(q.ev, "close: drain timeout")
				continue
			}
			m.publish(q)
		default:
			return
		}
	}
}

// message builds the NATS message of q.
func (m *mirror) message(q queued) (*nats.Msg, error) {
	ev := q.ev
	subject, err := EventSubject(m.b.cfg.SubjectPrefix, ev.TenantID, ev.TypeID)
	if err != nil {
		return nil, err
	}
	if ev.ID == "" {
		return nil, errors.New("event has no id")
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	msg.Header.Set(nats.MsgIdHdr, ev.TenantID+":"+ev.ID)
	msg.Header.Set(HeaderTenantID, ev.TenantID)
	msg.Header.Set(HeaderEventID, ev.ID)
	msg.Header.Set(HeaderEventType, ev.TypeID)
	if q.traceparent != "" {
		msg.Header.Set(HeaderTraceParent, q.traceparent)
		if q.tracestate != "" {
			msg.Header.Set(HeaderTraceState, q.tracestate)
		}
	}
	// The server's max_payload counts the header block too: "NATS/1.0\r\n", "Key: value\r\n"
	// lines and a closing "\r\n".
	size := len(body) + len("NATS/1.0\r\n\r\n")
	for k, vs := range msg.Header {
		for _, v := range vs {
			size += len(k) + len(": \r\n") + len(v)
		}
	}
	if limit := m.b.nc.MaxPayload(); limit > 0 && int64(size) > limit {
		return nil, fmt.Errorf("%d bytes with headers, over the server's max_payload of %d", size, limit)
	}
	return msg, nil
}

// publish publishes q's event until the stream acknowledges it: while disconnected it waits for the
// connection; while connected it tries PublishAttempts times with backoff, then drops it.
func (m *mirror) publish(q queued) {
	ev := q.ev
	msg, err := m.message(q)
	if err != nil {
		m.drop(ev, err.Error())
		return
	}
	failures := 0
	for {
		ctx, cancel := context.WithTimeout(m.ctx, m.b.cfg.PublishTimeout)
		ack, err := m.b.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(m.b.cfg.StreamName))
		cancel()
		if err == nil {
			m.mirrored.Add(1)
			if ack.Duplicate {
				m.duplicates.Add(1)
			}
			return
		}
		if m.ctx.Err() != nil {
			m.drop(ev, "close: drain timeout")
			return
		}
		if _, changed := m.b.connState(); !m.b.nc.IsConnected() {
			select {
			case <-changed:
			case <-m.ctx.Done():
			}
			continue
		}
		failures++
		if failures >= m.b.cfg.PublishAttempts {
			m.drop(ev, fmt.Sprintf("publish failed %d times: %v", failures, err))
			return
		}
		t := time.NewTimer(backoff(m.b.cfg.MinBackoff, m.b.cfg.MaxBackoff, failures))
		select {
		case <-t.C:
		case <-m.ctx.Done():
			t.Stop()
		}
	}
}

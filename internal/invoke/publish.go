package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
)

// EventPublisher publishes platform events inside the caller's transaction: it stores the event
// (idempotent on the tenant's event id: a repeated id returns the stored event and inserted false,
// and delivers nothing) and delivers it to whatever reacts to events (waiting workflows, triggers).
// The events code emits (r_emit_v1) are published through it. The default (Config.Publisher nil)
// stores the event and resolves the waits of suspended workflows (waitPublisher), as Publish does.
type EventPublisher interface {
	PublishTx(tx store.Tx, ev events.Event, now time.Time) (stored events.Event, inserted bool, err error)
}

// waitPublisher is the default EventPublisher: insert, then deliver to the workflows waiting for
// the event (Service.DeliverToWaits).
type waitPublisher struct{ s *Service }

// PublishTx implements EventPublisher.
func (p waitPublisher) PublishTx(tx store.Tx, ev events.Event, now time.Time) (events.Event, bool, error) {
	stored, inserted, err := tx.InsertEvent(ev)
	if err != nil || !inserted {
		return stored, inserted, err
	}
	if _, err := p.s.DeliverToWaits(tx, stored, now); err != nil {
		return stored, inserted, err
	}
	return stored, true, nil
}

// publishEmitted publishes the events of the event_emitted entries among events, appended to rec's
// log by this transaction (the outbox: an event becomes visible exactly when what emitted it
// commits). The event's source names the invocation, its publisher is the invocation's starter,
// and it carries the invocation's correlation id.
func (n *notingTx) publishEmitted(rec invocation.Record, evs []invocation.Event) error {
	for _, e := range evs {
		if e.Type != invocation.EventEmitted {
			continue
		}
		var em invocation.Emitted
		if err := json.Unmarshal(e.Data, &em); err != nil {
			return fmt.Errorf("event_emitted %d of %s: %w", e.Seq, rec.ID, err)
		}
		at := e.At
		ev := events.Event{ID: em.EventID, TenantID: rec.TenantID, TypeID: em.EventTypeID, Payload: em.Payload,
			Source: invocation.EmitSource(rec.ID), Time: &at, PublishedBy: rec.SubjectID, CorrelationID: rec.CorrelationID}
		now := n.s.cfg.Clock.Now()
		ev.ReceivedAt = now
		stored, inserted, err := n.s.publisher.PublishTx(n, ev, now)
		if err != nil {
			return fmt.Errorf("publishing emitted event %s: %w", em.EventID, err)
		}
		if inserted {
			n.emitted = append(n.emitted, stored)
			n.hook()
		}
	}
	return nil
}

// withoutEmits is evs without its event_emitted entries: what stays of a journal entry's events when
// the entry itself is not recorded.
func withoutEmits(evs []invocation.Event) []invocation.Event {
	var out []invocation.Event
	for _, e := range evs {
		if e.Type != invocation.EventEmitted {
			out = append(out, e)
		}
	}
	return out
}

// eventChecker is what an EventPublisher may offer r_emit_v1 at the call: whether the tenant would
// refuse the event (eventbus.Bus.CheckEvent).
type eventChecker interface {
	CheckEvent(ctx context.Context, ev events.Event) error
}

// CheckEvent implements sandbox.EventChecker through the publisher, when it can check. A refusal
// is described with its first issue's path and message (the payload itself is never repeated).
func (h *host) CheckEvent(ctx context.Context, typeID string, payload json.RawMessage) error {
	c, ok := h.s.publisher.(eventChecker)
	if !ok {
		return nil
	}
	err := c.CheckEvent(ctx, events.Event{TenantID: h.rec.TenantID, TypeID: typeID, Payload: payload})
	var pe *problem.Error
	if errors.As(err, &pe) {
		msg := pe.Detail
		if len(pe.Issues) > 0 {
			msg += fmt.Sprintf(" (%s: %s)", pe.Issues[0].Path, pe.Issues[0].Message)
		}
		return errors.New(msg)
	}
	return err
}

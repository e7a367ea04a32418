// Package waits keeps workflows' waits for events (r_wait_event_v1): a wait is registered as its
// workflow suspends, an event published later resolves the waits it matches (and queues their
// workflows to resume), and a wait registered after its event was stored is resolved at once by it.
// Everything happens inside the caller's transaction, through the store only.
package waits

import (
	"errors"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/eventfilter"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/journal"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
)

// maxEventScan bounds how many stored events one wait examines when it is registered.
const maxEventScan = 1000

// Deliver resolves, inside tx, the suspended workflows waiting for ev whose filter matches
// (r_wait_event_v1), and returns how many it resolved: each waiting journal entry is resolved with
// the event and the workflow is queued to resume. The events service (internal/eventbus) calls it
// in the transaction that stores the event. Waits of ended
// workflows are removed; a waiting workflow that is not suspended at this moment (it is replaying)
// finds the event itself when it parks again (see Register). An invocation's waits are taken
// in the order they were registered, and the event resolves at most one of them.
func Deliver(tx store.Tx, ev events.Event, now time.Time) (int, error) {
	waits, err := tx.EventWaits(ev.TenantID, ev.TypeID)
	if err != nil {
		return 0, err
	}
	n := 0
	m := newMatcher(ev)
	done := map[string]bool{} // invocations this event resolved a wait of, or that are not waiting
	for _, w := range waits {
		if done[w.InvocationID] || ev.ReceivedAt.Before(w.Since) || !m.Matches(w.Filter) {
			continue
		}
		done[w.InvocationID] = true
		rec, err := tx.Invocation(w.TenantID, w.InvocationID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && rec.Status.Terminal()) {
			if err := tx.DeleteEventWaits(w.TenantID, w.InvocationID); err != nil {
				return n, err
			}
			continue
		}
		if err != nil {
			return n, err
		}
		if rec.Status != invocation.StatusSuspended {
			continue
		}
		resolved, err := resolve(tx, rec, w.Seq, ev, now)
		if err != nil {
			return n, err
		}
		if resolved {
			n++
		}
	}
	return n, nil
}

// Register records a workflow's wait as it suspends, in the completion transaction, in place
// of any wait the workflow registered before. The wait is satisfied at once by the earliest stored
// event of its type that matches its filter, was received since the invocation was created
// (w.Since) and has not satisfied an earlier wait of the invocation: events published before the
// workflow reached the wait are not lost.
func Register(tx store.Tx, rec invocation.Record, w events.Wait, now time.Time) error {
	if err := tx.DeleteEventWaits(w.TenantID, w.InvocationID); err != nil {
		return err
	}
	if err := tx.PutEventWait(w); err != nil {
		return err
	}
	var after int64
	for {
		evs, err := tx.EventsSince(store.EventsSinceQuery{TenantID: w.TenantID, TypeID: w.TypeID, Since: w.Since, AfterSeq: after, UnconsumedBy: w.InvocationID, Limit: maxEventScan})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if newMatcher(ev).Matches(w.Filter) {
				_, err := resolve(tx, rec, w.Seq, ev, now)
				return err
			}
		}
		if len(evs) < maxEventScan {
			return nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// resolve completes the pending journal entry seq of a suspended workflow with ev, records that
// the invocation consumed ev, queues the workflow to resume now and removes its waits. The
// resolution carries the event's id and arrival seq (event_seq). It reports false, and changes
// nothing, when the invocation has consumed ev already. The timeline shows it as signal_received.
func resolve(tx store.Tx, rec invocation.Record, seq int, ev events.Event, now time.Time) (bool, error) {
	fresh, err := tx.ConsumeEvent(rec.TenantID, rec.ID, ev.Seq)
	if err != nil || !fresh {
		return false, err
	}
	data, err := invocation.EncodeData(invocation.JournalResolved{Seq: seq, Result: sandbox.OKResult(EventValue(ev)),
		EventID: ev.ID, EventSeq: ev.Seq, EventTypeID: ev.TypeID})
	if err != nil {
		return false, err
	}
	e := invocation.Event{Type: invocation.EventJournalResolved, Data: data, At: now, LogicalAttempt: rec.Attempt,
		IdempotencyKey: invocation.IdempotencyKey(rec.ID, "wait-"+strings.TrimPrefix(journal.Key(rec.Generation, seq), "journal-"), rec.Attempt, invocation.EventJournalResolved, "")}
	if _, _, err := store.AppendWaking(tx, store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: []invocation.Event{e}}, now); err != nil {
		return false, err
	}
	return true, tx.DeleteEventWaits(rec.TenantID, rec.ID)
}

// EventValue is what r_wait_event_v1 returns as struct(ok=True, value=...): the event, as a JSON
// object (event_id, event_type_id, payload, received_at, and source, subject and time when set).
// A trigger's invocation receives events in the same shape.
func EventValue(ev events.Event) map[string]any {
	var payload any
	_ = invocation.DecodeJSON(ev.Payload, &payload)
	v := map[string]any{"event_id": ev.ID, "event_type_id": ev.TypeID, "payload": payload,
		"received_at": ev.ReceivedAt.UTC().Format(time.RFC3339Nano)}
	if ev.Source != "" {
		v["source"] = ev.Source
	}
	if ev.Subject != "" {
		v["subject"] = ev.Subject
	}
	if ev.Time != nil {
		v["time"] = ev.Time.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// newMatcher evaluates waits' CEL filters against one event, decoding its payload once.
func newMatcher(ev events.Event) *eventfilter.Matcher {
	return eventfilter.NewMatcher(eventfilter.Event{ID: ev.ID, TypeID: ev.TypeID, Source: ev.Source, Subject: ev.Subject}, ev.Payload)
}

// CheckFilter is the sandbox's compile check of an r_wait_event_v1 filter.
func CheckFilter(expr string) error {
	_, err := eventfilter.Cached(expr)
	return err
}

// Publisher is the plain publication of an event inside the caller's transaction: store it, then
// deliver it to the workflows waiting for it (Deliver). It is the writer's default publisher of the
// events code emits, when no event bus is configured.
type Publisher struct{}

// PublishTx stores ev (a repeated id returns the stored event and inserted false, and delivers
// nothing) and delivers it.
func (Publisher) PublishTx(tx store.Tx, ev events.Event, now time.Time) (events.Event, bool, error) {
	stored, inserted, err := tx.InsertEvent(ev)
	if err != nil || !inserted {
		return stored, inserted, err
	}
	if _, err := Deliver(tx, stored, now); err != nil {
		return stored, inserted, err
	}
	return stored, true, nil
}

// Delivery delivers events to waits for a service that publishes in its own transactions (the
// event bus): Wake, when set, is called once such a transaction commits having resumed a workflow
// (the dispatcher's wake-up, and the other nodes').
type Delivery struct{ Wake func() }

// DeliverToWaits is Deliver, with the wake-up.
func (d Delivery) DeliverToWaits(tx store.Tx, ev events.Event, now time.Time) (int, error) {
	n, err := Deliver(tx, ev, now)
	if n > 0 && err == nil && d.Wake != nil {
		tx.AfterCommit(d.Wake)
	}
	return n, err
}

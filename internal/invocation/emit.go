package invocation

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Emitted is the Data of an event_emitted event: an event the invocation's code emitted with
// r_emit_v1. The log event is the event's outbox record: the transaction that appends it publishes
// the event (an append whose idempotency key is logged already appends, and publishes, nothing).
type Emitted struct {
	// EventID is the published event's id, derived from the invocation, its logical attempt, the
	// position that emitted it and the emit's index there (EmitID): the same emit always has the
	// same id, and the events table is unique per tenant and id.
	EventID     string          `json:"event_id"`
	EventTypeID string          `json:"event_type_id"`
	Payload     json.RawMessage `json:"payload"`
	// Seq is the journal position the event was recorded with (workflows), Step the step that
	// emitted it ("" outside steps and in functions).
	Seq  *int   `json:"seq,omitempty"`
	Step string `json:"step,omitempty"`
}

// EmitSource is the source of the events an invocation emits.
func EmitSource(invocationID string) string { return "lark://invocations/" + invocationID }

// EmitID is the id of the index-th event emitted at position (a workflow's journal key, "" for a
// function's attempt) by logical attempt attempt of an invocation.
func EmitID(invocationID string, attempt int, position string, index int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s.a%d.", invocationID, attempt)
	if position != "" {
		b.WriteString(position)
		b.WriteByte('.')
	}
	fmt.Fprintf(&b, "e%d", index)
	return b.String()
}

// EmittedEvents are the event_emitted log events of rec's emits at position (see EmitID), with
// their ids filled in, at time at.
func EmittedEvents(rec Record, position string, at time.Time, emits []Emitted) ([]Event, error) {
	out := make([]Event, 0, len(emits))
	for i, em := range emits {
		em.EventID = EmitID(rec.ID, rec.Attempt, position, i)
		e, err := Event{Type: EventEmitted, At: at, EngineAttempt: rec.EngineAttempt, LogicalAttempt: rec.Attempt,
			IdempotencyKey: IdempotencyKey(rec.ID, fmt.Sprintf("emit/%s/%d", position, i), rec.Attempt, EventEmitted, "")}.WithData(em)
		if err != nil {
			return nil, fmt.Errorf("emitted event %d: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Package events holds the platform events tenants publish (POST /events) and workflows wait for
// (r_wait_event_v1): the stored event and a workflow's registered wait.
package events

import (
	"encoding/json"
	"time"
)

// Event is one published event. Events are immutable once stored; (TenantID, ID) is unique, so a
// publisher that repeats an event id gets the stored event back instead of a second delivery.
type Event struct {
	// ID is the client's event id or one the server assigned (evt_...).
	ID       string `json:"event_id"`
	TenantID string `json:"tenant_id"`
	// TypeID is the GTS type id of the event (it ends with "~").
	TypeID string `json:"event_type_id"`
	// Payload is the event's JSON body.
	Payload json.RawMessage `json:"payload"`
	// Source and Subject are optional CloudEvents-style attributes.
	Source  string `json:"source,omitempty"`
	Subject string `json:"subject,omitempty"`
	// Time is when the event happened, as the publisher says (optional).
	Time *time.Time `json:"time,omitempty"`
	// ReceivedAt is when Lark stored it; a wait matches events received at or after its
	// invocation was created.
	ReceivedAt time.Time `json:"received_at"`
	// PublishedBy is the subject of the token that published it.
	PublishedBy   string `json:"published_by,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Seq is the store's arrival order (not shown by the API).
	Seq int64 `json:"-"`
}

// Wait is a suspended workflow's registered interest in an event: the pending journal entry Seq of
// invocation InvocationID is satisfied by the earliest event of TypeID received at or after Since
// (the invocation's creation) whose payload matches Filter (a CEL expression; "" matches every
// event) and that has not satisfied an earlier wait of the same invocation.
type Wait struct {
	TenantID     string
	InvocationID string
	Seq          int
	TypeID       string
	Filter       string
	Since        time.Time
	// TimeoutAt is when the wait gives up (nil: never, within max_suspension_days).
	TimeoutAt *time.Time
}

// Package trigger holds the event trigger resource (000's Trigger with 002's event trigger fields
// folded in), the event types tenants register, and what package eventtrigger records about the
// invocations a trigger starts: its dead letters and its metrics (types only).
package trigger

import (
	"encoding/json"
	"time"
)

// Status is a trigger's 000 status: active triggers start invocations; paused and disabled ones
// match nothing (events published meanwhile are not started later).
type Status string

// Trigger statuses.
const (
	StatusActive   Status = "active"
	StatusPaused   Status = "paused"
	StatusDisabled Status = "disabled"
)

// Execution contexts: who an invocation a trigger starts runs as.
const (
	// ContextSystem runs it as the trigger itself (subject "trigger:<id>" of the tenant).
	ContextSystem = "system"
	// ContextEventSource runs it as the subject that published the event.
	ContextEventSource = "event_source"
)

// Connection statuses (002 disconnection handling).
const (
	ConnectionActive       = "active"
	ConnectionDegraded     = "degraded"
	ConnectionDisconnected = "disconnected"
	ConnectionPaused       = "paused"
)

// Bounds of a trigger's fields.
const (
	MaxBatchSize       = 1000
	DefaultBatchSize   = 100
	MinBatchWaitMS     = 100
	MaxBatchWaitMS     = 60000
	DefaultBatchWaitMS = 5000
	MaxFilterBytes     = 4096
	MaxRetryAttempts   = 10
	MaxSubjectBytes    = 255
)

// Batch groups matching events into one invocation (002 Event Batching).
type Batch struct {
	Enabled   bool `json:"enabled"`
	MaxSize   int  `json:"max_size"`
	MaxWaitMS int  `json:"max_wait_ms"`
}

// RetryPolicy is 000's retry_policy (inside dead_letter_queue) with 002's top-level shape
// (max_attempts, backoff_ms) accepted as its first two fields.
type RetryPolicy struct {
	MaxAttempts       int     `json:"max_attempts"`
	InitialDelayMS    int64   `json:"initial_delay_ms,omitempty"`
	MaxDelayMS        int64   `json:"max_delay_ms,omitempty"`
	BackoffMultiplier float64 `json:"backoff_multiplier,omitempty"`
	BackoffMS         int64   `json:"backoff_ms,omitempty"`
}

// DeadLetterQueue is 000's dead_letter_queue.
type DeadLetterQueue struct {
	Enabled     bool         `json:"enabled"`
	RetryPolicy *RetryPolicy `json:"retry_policy,omitempty"`
	DLQTopic    *string      `json:"dlq_topic"`
}

// Trigger binds an event type to an entrypoint: every matching event the tenant publishes starts
// the entrypoint (or joins a batch that does).
type Trigger struct {
	ID               string          `json:"trigger_id"`
	TenantID         string          `json:"tenant_id"`
	EventTypeID      string          `json:"event_type_id"`
	EventFilterQuery string          `json:"event_filter_query,omitempty"`
	EntrypointID     string          `json:"entrypoint_id"`
	Status           Status          `json:"status"`
	ExecutionContext string          `json:"execution_context"`
	Batch            Batch           `json:"batch"`
	RetryPolicy      *RetryPolicy    `json:"retry_policy,omitempty"`
	DeadLetterQueue  DeadLetterQueue `json:"dead_letter_queue"`
	// NATSSubject, when set, feeds the trigger's event type from a NATS JetStream subject (the
	// server's --nats bridge): each message becomes an event of the tenant.
	NATSSubject string `json:"nats_subject,omitempty"`
	// ConnectionStatus is 002's connection status: paused while the trigger is not active, else
	// active for triggers fed by POST /events (an external bus bridge may store another).
	ConnectionStatus string `json:"connection_status"`
	// ConnectionDetails is 002's connection_details of a trigger fed by nats_subject: the state of
	// the server's connection to the broker (absent for triggers fed by POST /events). Computed,
	// never stored.
	ConnectionDetails *ConnectionDetails `json:"connection_details,omitempty"`
	CreatedBy         string             `json:"created_by,omitempty"`
	CreatedAt         time.Time          `json:"created_at"`
	UpdatedAt         time.Time          `json:"updated_at"`
	// Revision is the optimistic concurrency counter (not shown).
	Revision int64 `json:"-"`
	// BatchDueAt is when the oldest pending event of a batching trigger has waited max_wait_ms
	// (nil: nothing pending). Not shown.
	BatchDueAt *time.Time `json:"-"`
}

// ConnectionDetails is 002's connection_details: the broker connection that feeds a trigger. It
// names no server address, credential or other secret.
type ConnectionDetails struct {
	// EventBroker is "connected" or "disconnected".
	EventBroker string `json:"event_broker"`
	// LastConnectedAt is when the connection was last established (absent before the first).
	LastConnectedAt *time.Time `json:"last_connected_at,omitempty"`
	// ReconnectAttempts counts the failed attempts of the current outage (0 while connected).
	ReconnectAttempts int `json:"reconnect_attempts"`
	// NextReconnectAt is when the next attempt is due (absent while connected).
	NextReconnectAt *time.Time `json:"next_reconnect_at,omitempty"`
}

// Start is what package eventtrigger records about an invocation a trigger started: which
// trigger, which events (in arrival order) and when the first of them was received.
type Start struct {
	TenantID     string
	InvocationID string
	TriggerID    string
	// EventSeqs and EventIDs are the events the invocation carries, in arrival order.
	EventSeqs  []int64
	EventIDs   []string
	ReceivedAt time.Time
	StartedAt  time.Time
	// Params are the invocation's params (a redrive starts a new invocation with them).
	Params json.RawMessage
	// Redrive marks the start of a dead letter's redrive (not unique per event).
	Redrive bool
}

// DeadLetter is an event (or a batch) whose invocation failed after its retries.
type DeadLetter struct {
	ID           string          `json:"dead_letter_id"`
	TenantID     string          `json:"tenant_id"`
	TriggerID    string          `json:"trigger_id"`
	EventIDs     []string        `json:"event_ids"`
	InvocationID string          `json:"invocation_id"`
	Error        json.RawMessage `json:"error,omitempty"`
	Params       json.RawMessage `json:"params"`
	CreatedAt    time.Time       `json:"created_at"`
	// RedrivenAs is the invocation a redrive started (the row is deleted then; shown in the
	// redrive's answer).
	RedrivenAs string `json:"redriven_as,omitempty"`
}

// Counters are a trigger's metrics over a window (002 Get Event Trigger Metrics).
type Counters struct {
	Received     int64 `json:"events_received"`
	FilteredOut  int64 `json:"events_filtered_out"`
	Triggered    int64 `json:"executions_triggered"`
	Succeeded    int64 `json:"executions_succeeded"`
	Failed       int64 `json:"executions_failed"`
	DeadLettered int64 `json:"events_dead_lettered"`
}

// Add adds o to c.
func (c *Counters) Add(o Counters) {
	c.Received += o.Received
	c.FilteredOut += o.FilteredOut
	c.Triggered += o.Triggered
	c.Succeeded += o.Succeeded
	c.Failed += o.Failed
	c.DeadLettered += o.DeadLettered
}

// LatencyBounds are the upper bounds (ms) of the latency histogram buckets a trigger's hourly
// metrics keep; the last bucket is unbounded.
var LatencyBounds = []int64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000, 300000, 3600000}

// MetricsDelta is a change to a trigger's hourly metrics row (Tx.AddTriggerMetrics).
type MetricsDelta struct {
	TenantID  string
	TriggerID string
	// Hour is the hour the change belongs to (truncated by the store).
	Hour time.Time
	Counters
	// LatencyMS, when >= 0, is one end-to-end latency observation (event received → invocation
	// ended).
	LatencyMS int64
}

// Hourly is one stored hour of a trigger's metrics.
type Hourly struct {
	Hour time.Time
	Counters
	// Latency counts observations per LatencyBounds bucket (len(LatencyBounds)+1).
	Latency []int64
}

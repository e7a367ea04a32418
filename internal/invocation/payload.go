package invocation

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Payload is the Data of a log event: each payload type is the Data of the event types it names.
// Its JSON is the stored form and the timeline's details (GET .../timeline): it never changes.
// Most payloads were written as JSON objects with their members in name order, so their fields
// are declared in that order; members a producer did not always write are omitempty.
//
// Write an event's Data with Event.WithData (or EncodeData), read it with DecodeData.
type Payload interface {
	// EventTypes are the types of the events whose Data the payload is.
	EventTypes() []EventType
}

// EncodeData is p's JSON, an event's Data. A Record is encoded with EncodeRecord and an Outcome
// with EncodeOutcome (their large members copied, not re-scanned).
func EncodeData(p Payload) (json.RawMessage, error) {
	switch x := p.(type) {
	case Record:
		return EncodeRecord(x)
	case Outcome:
		return EncodeOutcome(x)
	}
	return json.Marshal(p)
}

// WithData is e with Data encoding p, refused when p is not the Data of e's type. A Record is
// kept at hand as e.Initial and an Outcome as e.Outcome, so that Apply does not decode them again.
func (e Event) WithData(p Payload) (Event, error) {
	if !slices.Contains(p.EventTypes(), e.Type) {
		return e, fmt.Errorf("%T is not the data of a %s event (it is that of %v)", p, e.Type, p.EventTypes())
	}
	b, err := EncodeData(p)
	if err != nil {
		return e, fmt.Errorf("%s event data: %w", e.Type, err)
	}
	e.Data = b
	switch x := p.(type) {
	case Record:
		e.Initial = &x
	case Outcome:
		e.Outcome = &x
	}
	return e, nil
}

// DecodeData decodes e's Data as a T, refusing an event whose type T is not the Data of, and an
// event without Data (as json.Unmarshal refuses empty input). Numbers in members of type any are kept exact (json.Number, as
// DecodeJSON). A created event's Initial and a terminal event's Outcome are returned as they are
// when set.
func DecodeData[T Payload](e Event) (T, error) {
	var p T
	if !slices.Contains(p.EventTypes(), e.Type) {
		return p, fmt.Errorf("a %s event's data is not a %T (that is the data of %v)", e.Type, p, p.EventTypes())
	}
	switch x := any(&p).(type) {
	case *Record:
		if e.Initial != nil {
			*x = *e.Initial
			return p, nil
		}
	case *Outcome:
		if e.Outcome != nil {
			*x = *e.Outcome
			return p, nil
		}
	}
	if len(e.Data) == 0 {
		return p, fmt.Errorf("%s event data: none", e.Type)
	}
	var err error
	switch any(p).(type) {
	case Record, Outcome:
		err = json.Unmarshal(e.Data, &p) // no member of type any; a plain decode copies nothing more
	default:
		err = DecodeJSON(e.Data, &p)
	}
	if err != nil {
		return p, fmt.Errorf("%s event data: %w", e.Type, err)
	}
	return p, nil
}

// EventTypes implements Payload: a Record is the Data of the created event.
func (Record) EventTypes() []EventType { return []EventType{EventCreated} }

// EventTypes implements Payload: an Outcome is the Data of a terminal event (a canceled event
// written by the cancel action carries a Control, which reads as an empty Outcome).
func (Outcome) EventTypes() []EventType {
	return []EventType{EventSucceeded, EventFailed, EventCanceled}
}

// EventTypes implements Payload.
func (Emitted) EventTypes() []EventType { return []EventType{EventEmitted} }

// Control is the Data of the event a control action appends (canceled, requeued, suspended) and
// of the signal_received of a resume request: the action (cancel, retry, suspend, resume).
type Control struct {
	Action string `json:"action"`
}

// EventTypes implements Payload.
func (Control) EventTypes() []EventType {
	return []EventType{EventCanceled, EventRequeued, EventSuspended, EventSignalReceived}
}

// Suspended is the Data of the suspended event that closes a workflow activation that parked: the
// execution's metrics and cost, why it waits (see WakeOf) and until when at the latest (nil: until
// what it waits for arrives). A suspend control action writes a Control instead, which reads as a
// Suspended without a reason.
type Suspended struct {
	Cost    float64    `json:"cost"`
	Metrics *Metrics   `json:"metrics"`
	Reason  string     `json:"reason"`
	Until   *time.Time `json:"until"`
}

// EventTypes implements Payload.
func (Suspended) EventTypes() []EventType { return []EventType{EventSuspended} }

// Resumed is the Data of a resumed event: why the suspended workflow runs again (one of the
// Resume* constants), and the node that took the attempt.
type Resumed struct {
	Reason string `json:"reason"`
	Node   string `json:"node,omitempty"`
}

// Started is the Data of a started event: the node that took the attempt (ran it, or handed it to
// a remote worker).
type Started struct {
	Node string `json:"node,omitempty"`
}

// EventTypes implements Payload.
func (Started) EventTypes() []EventType { return []EventType{EventStarted} }

// EventTypes implements Payload.
func (Resumed) EventTypes() []EventType { return []EventType{EventResumed} }

// RetryScheduled is the Data of a retry_scheduled event, which closes an attempt that failed and
// will be retried: the execution's metrics and cost, the error, the backoff and when the next
// logical attempt runs.
type RetryScheduled struct {
	AvailableAt time.Time `json:"available_at"`
	Cost        float64   `json:"cost"`
	DelayMS     int64     `json:"delay_ms"`
	Error       *Error    `json:"error"`
	Metrics     *Metrics  `json:"metrics"`
	NextAttempt int       `json:"next_attempt"`
}

// EventTypes implements Payload.
func (RetryScheduled) EventTypes() []EventType { return []EventType{EventRetryScheduled} }

// DeadLettered is the Data of a dead_lettered event: why the invocation was dead-lettered.
type DeadLettered struct {
	Reason string `json:"reason"`
}

// EventTypes implements Payload.
func (DeadLettered) EventTypes() []EventType { return []EventType{EventDeadLettered} }

// CompensationStarted is the Data of a compensation_started event: what started the compensation
// ("failure": the workflow failed, "cancellation": it was canceled) and the handler invocation
// started for it, with the handler's entrypoint.
type CompensationStarted struct {
	Handler             string `json:"handler"`
	HandlerInvocationID string `json:"handler_invocation_id"`
	Trigger             string `json:"trigger"`
}

// EventTypes implements Payload.
func (CompensationStarted) EventTypes() []EventType { return []EventType{EventCompensationStarted} }

// CompensationEnded is the Data of a compensation_completed or compensation_failed event: the
// handler invocation and the status it ended in.
type CompensationEnded struct {
	HandlerInvocationID string `json:"handler_invocation_id"`
	HandlerStatus       Status `json:"handler_status"`
}

// EventTypes implements Payload.
func (CompensationEnded) EventTypes() []EventType {
	return []EventType{EventCompensationCompleted, EventCompensationFailed}
}

// StepStarted is the Data of a step_started event: a workflow step's attempt (1-based) began.
type StepStarted struct {
	Attempt int    `json:"attempt"`
	Step    string `json:"step"`
}

// EventTypes implements Payload.
func (StepStarted) EventTypes() []EventType { return []EventType{EventStepStarted} }

// StepRetried is the Data of a step_retried event: a workflow step's attempt failed with Error and
// the step runs again after DelayMS.
type StepRetried struct {
	Attempt int    `json:"attempt"`
	DelayMS int64  `json:"delay_ms"`
	Error   *Error `json:"error"`
	Step    string `json:"step"`
}

// EventTypes implements Payload.
func (StepRetried) EventTypes() []EventType { return []EventType{EventStepRetried} }

// Log is the Data of a log event: a line user code logged (print, ctx.log) with its fields, or the
// marker that counts the entries dropped beyond an attempt's limits (Dropped, Reason). Truncated:
// the entry was over its size limit, so its message was cut and its fields dropped.
type Log struct {
	Dropped   int            `json:"dropped,omitempty"`
	Fields    map[string]any `json:"fields,omitempty"`
	Message   string         `json:"message"`
	Reason    string         `json:"reason,omitempty"`
	Truncated bool           `json:"truncated,omitempty"`
}

// EventTypes implements Payload.
func (Log) EventTypes() []EventType { return []EventType{EventLog} }

// HTTPCall is the Data of an http_call event: an outbound request's method, host and duration,
// and its response status or the egress layer's error kind; never a URL's path or query, a header
// or a body.
type HTTPCall struct {
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	Host       string `json:"host"`
	Method     string `json:"method"`
	Status     int    `json:"status,omitempty"`
}

// EventTypes implements Payload.
func (HTTPCall) EventTypes() []EventType { return []EventType{EventHTTPCall} }

// ChildInvoked is the Data of a child_invoked event: r_invoke_v1 started a child invocation. A
// workflow's child carries the journal position awaiting it (Seq); a function's child, which it
// waits for in the call, the status it ended in.
type ChildInvoked struct {
	ChildInvocationID string `json:"child_invocation_id"`
	EntrypointID      string `json:"entrypoint_id"`
	Seq               *int   `json:"seq,omitempty"`
	Status            Status `json:"status,omitempty"`
}

// EventTypes implements Payload.
func (ChildInvoked) EventTypes() []EventType { return []EventType{EventChildInvoked} }

// Reclaimed is the Data of a reclaimed event: why the attempt is dispatched again, and its new
// engine attempt.
type Reclaimed struct {
	EngineAttempt int    `json:"engine_attempt"`
	Reason        string `json:"reason"`
	Node          string `json:"node,omitempty"`
}

// EventTypes implements Payload.
func (Reclaimed) EventTypes() []EventType { return []EventType{EventReclaimed} }

// LateResult is the Data of a late_result event: a run that finished after losing its lease, of
// engine attempt EngineAttempt; whether it succeeded, and what it consumed and cost (counted, never
// applied).
type LateResult struct {
	Cost          float64  `json:"cost"`
	EngineAttempt int      `json:"engine_attempt"`
	Metrics       *Metrics `json:"metrics"`
	Succeeded     bool     `json:"succeeded"`
}

// EventTypes implements Payload.
func (LateResult) EventTypes() []EventType { return []EventType{EventLateResult} }

// JournalEntry is the Data of a journal event: a workflow helper call's recorded position in the
// replay journal (package journal converts it to and from the sandbox's entry).
type JournalEntry struct {
	Seq      int       `json:"seq"`
	Helper   string    `json:"helper"`
	Key      string    `json:"key,omitempty"`
	ArgsHash string    `json:"args_hash"`
	Input    any       `json:"input,omitempty"`
	Until    time.Time `json:"until,omitzero"`
	Result   any       `json:"result"`
	Done     bool      `json:"done"`
}

// EventTypes implements Payload.
func (JournalEntry) EventTypes() []EventType { return []EventType{EventJournal} }

// JournalResolved is the Data of a journal_resolved event: the pending journal position Seq
// completed with Result (nil for a due timer). What resolved it: the child invocation that ended,
// the published event delivered to the wait (its id, arrival seq and type), or the wait's timeout.
type JournalResolved struct {
	ChildInvocationID string `json:"child_invocation_id,omitempty"`
	EventID           string `json:"event_id,omitempty"`
	EventSeq          int64  `json:"event_seq,omitempty"`
	EventTypeID       string `json:"event_type_id,omitempty"`
	Result            any    `json:"result"`
	Seq               int    `json:"seq"`
	Timeout           bool   `json:"timeout,omitempty"`
}

// EventTypes implements Payload.
func (JournalResolved) EventTypes() []EventType { return []EventType{EventJournalResolved} }

// StepCompensating is the Data of a step_compensating event: the compensate_fn Fn of the workflow
// step Step (journal position Seq) began.
type StepCompensating struct {
	Fn   string `json:"fn"`
	Seq  int    `json:"seq"`
	Step string `json:"step"`
}

// EventTypes implements Payload.
func (StepCompensating) EventTypes() []EventType { return []EventType{EventStepCompensating} }

// StepCompensated is the Data of a step_compensated event: a step's compensate_fn ran, for
// DurationMS, and succeeded (OK) or failed with Error.
type StepCompensated struct {
	DurationMS int64  `json:"duration_ms"`
	Error      *Error `json:"error,omitempty"`
	Fn         string `json:"fn"`
	OK         bool   `json:"ok"`
	Seq        int    `json:"seq"`
	Step       string `json:"step"`
}

// EventTypes implements Payload.
func (StepCompensated) EventTypes() []EventType { return []EventType{EventStepCompensated} }

// ContinuedAsNew is the Data of a continued_as_new event: the workflow's next journal generation
// and the input its main runs with (r_continue_as_new_v1).
type ContinuedAsNew struct {
	Generation int `json:"generation"`
	Input      any `json:"input"`
}

// EventTypes implements Payload.
func (ContinuedAsNew) EventTypes() []EventType { return []EventType{EventContinuedAsNew} }

// Package invocation holds the invocation record, its append-only event log and the reducer that
// projects events onto the record (003: the record is a projection of the log and can be rebuilt
// from it). It is pure: no I/O.
package invocation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Status is 000's public invocation status.
type Status string

// The statuses of 000's invocation state machine.
const (
	StatusQueued       Status = "queued"
	StatusRunning      Status = "running"
	StatusSuspended    Status = "suspended"
	StatusSucceeded    Status = "succeeded"
	StatusFailed       Status = "failed"
	StatusCanceled     Status = "canceled"
	StatusCompensating Status = "compensating"
	StatusCompensated  Status = "compensated"
	StatusDeadLettered Status = "dead_lettered"
)

// InFlight reports whether an invocation in this status still holds or awaits execution resources.
func (s Status) InFlight() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusSuspended, StatusCompensating:
		return true
	}
	return false
}

// Terminal reports whether no further event can change the outcome without a control action
// (succeeded, failed, canceled, compensated, dead_lettered).
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusCanceled, StatusCompensated, StatusDeadLettered:
		return true
	}
	return false
}

// Mode is sync or async.
type Mode string

// Invocation modes.
const (
	ModeSync  Mode = "sync"
	ModeAsync Mode = "async"
)

// Record.Via values.
const (
	// ViaTrigger: started by a trigger (a matched event, a batch, or a dead letter's redrive).
	ViaTrigger = "trigger"
	// ViaOther: started any other way (the API, a schedule, a webhook, a workflow, a replay).
	ViaOther = "other"
)

// Record.Origin values: what the runtime started an invocation for.
const (
	OriginSchedule     = "schedule"      // a schedule's run (the firing loop, or POST /schedules/{id}:trigger)
	OriginBackfill     = "backfill"      // a backfill's partition
	OriginWebhook      = "webhook"       // a webhook delivery
	OriginEventTrigger = "event_trigger" // an event trigger's start (a matched event, a batch, a redrive)
)

// Error is 000's RuntimeErrorPayload.
type Error struct {
	TypeID   string          `json:"error_type_id"`
	Message  string          `json:"message"`
	Category string          `json:"category"`
	Details  json.RawMessage `json:"details,omitempty"`
}

// Metrics are 000's invocation metrics.
type Metrics struct {
	DurationMS       *int64 `json:"duration_ms"`
	BilledDurationMS *int64 `json:"billed_duration_ms"`
	CPUTimeMS        *int64 `json:"cpu_time_ms"`
	MemoryLimitMB    *int64 `json:"memory_limit_mb"`
	MaxMemoryUsedMB  *int64 `json:"max_memory_used_mb"`
	StepCount        *int64 `json:"step_count"`
	// EgressBytes counts the request and response bodies of the execution's r_http_* calls that got
	// a response (Lark's addition to 000's metrics).
	EgressBytes *int64 `json:"egress_bytes"`
	// QueueWaitMS is how long the attempt waited between becoming runnable (created, due for a retry
	// or resumed) and the start of its execution: in the queue, then for admission (Lark's addition;
	// docs/api.md, "Busy servers").
	QueueWaitMS *int64 `json:"queue_wait_ms"`
	// Worker is the remote worker that ran the execution, when one did (Lark's addition;
	// docs/workers.md).
	Worker string `json:"worker,omitempty"`
}

// WarningDeprecated is the code of the warning an invocation of a deprecated entrypoint carries.
const WarningDeprecated = "ENTRYPOINT_DEPRECATED"

// Warning is one warning of an invocation record (Lark's addition to 000's InvocationRecord): a
// code, a message and, for WarningDeprecated, the entrypoint's deprecation (001).
type Warning struct {
	Code         string     `json:"code"`
	Message      string     `json:"message"`
	DeprecatedAt *time.Time `json:"deprecated_at,omitempty"`
	SunsetDate   *time.Time `json:"sunset_date,omitempty"`
	SuccessorID  string     `json:"successor_id,omitempty"`
	Reason       string     `json:"reason,omitempty"`
}

// Deprecation returns the record's WarningDeprecated warning, if it has one.
func (r Record) Deprecation() (Warning, bool) {
	for _, w := range r.Warnings {
		if w.Code == WarningDeprecated {
			return w, true
		}
	}
	return Warning{}, false
}

// Record is the projection of an invocation's event log (000's InvocationRecord plus bookkeeping).
// Record's JSON is its stored form (the record column and the created event): members that are
// empty or zero are left out, which keeps a new record about 40 % smaller; the API renders its own views
// (api.View) with every member 000 lists.
type Record struct {
	ID                string `json:"invocation_id"`
	TenantID          string `json:"tenant_id"`
	EntrypointRef     string `json:"entrypoint_ref"` // opaque ep_ id of the exact version
	EntrypointID      string `json:"entrypoint_id"`  // exact GTS id (pinned version, BR-030)
	EntrypointVersion string `json:"entrypoint_version,omitempty"`
	SubjectID         string `json:"subject_id"`
	// EntrypointOwner is the subject owning the entrypoint when it is user-owned ("" for tenant- and
	// system-owned ones), recorded at creation: it decides who may see the invocation (VisibleTo).
	EntrypointOwner string          `json:"entrypoint_owner,omitempty"`
	Status          Status          `json:"status"`
	Mode            Mode            `json:"mode"`
	Params          json.RawMessage `json:"params"`
	Result          json.RawMessage `json:"result,omitempty"`
	Error           *Error          `json:"error,omitempty"`
	CorrelationID   string          `json:"correlation_id"`
	TraceID         string          `json:"trace_id,omitempty"`
	SpanID          string          `json:"span_id,omitempty"`
	Metrics         Metrics         `json:"metrics,omitzero"`
	Attempt         int             `json:"attempt"`                  // logical attempt, 1-based
	EngineAttempt   int             `json:"engine_attempt,omitempty"` // dispatches of the current logical attempt (crash recovery re-dispatches)
	ParentID        string          `json:"parent_id,omitempty"`
	Depth           int             `json:"depth,omitempty"`            // nesting of r_invoke_v1 children (0 = started through the API)
	ParentSeq       *int            `json:"parent_seq,omitempty"`       // the parent workflow's journal position awaiting this child
	CompensationFor string          `json:"compensation_for,omitempty"` // the workflow invocation this handler compensates

	// RetryBase is the logical attempts made before the current retry budget began: a requeue
	// (the retry control action, a dead letter's redrive) starts a new budget of the retry
	// policy's max_attempts (see BudgetAttempt).
	RetryBase int `json:"retry_base,omitempty"`

	// Via says how the invocation was created, for the engine's own decisions (never shown):
	// ViaTrigger for a trigger's start, whose end its trigger counts, ViaOther for any other start.
	// Records written before it existed have none; the engine then asks the store.
	Via string `json:"via,omitempty"`
	// Origin says what started the invocation when the runtime did (a schedule, a backfill, a
	// webhook, an event trigger: the Origin* values), for the metrics (never shown); "" for the
	// starts the record tells apart itself (the API, a replay, a child, a compensation handler).
	Origin   string `json:"origin,omitempty"`
	CacheKey string `json:"cache_key,omitempty"` // response-cache key when caching is active (never shown)
	// RetryPolicy overrides the entrypoint's traits.retry for this invocation (a trigger's
	// retry_policy), in outcome.RetryPolicy's JSON shape; empty: the entrypoint's.
	RetryPolicy json.RawMessage `json:"retry_policy,omitempty"`
	Replay      string          `json:"replay_of,omitempty"` // the invocation this one replays
	// Warnings are what the caller should know about the start that did not stop it (an
	// entrypoint that was deprecated), as they stood when it was created.
	Warnings    []Warning  `json:"warnings,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	SuspendedAt *time.Time `json:"suspended_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	UpdatedAt   time.Time  `json:"updated_at,omitzero"`
	LastSeq     int64      `json:"last_seq,omitempty"`
	// JournalFrom is the seq of a workflow's last continued_as_new event (0: none): its current
	// journal is the journal events after it. Generation counts those events.
	JournalFrom int64 `json:"journal_from,omitempty"`
	Generation  int   `json:"generation,omitempty"`
	// Cost is what the invocation has cost so far, in the operator's pricing currency: the
	// per-invocation price its created event carries plus the cost every execution's closing event
	// carries (ExecutionOf). It is never recomputed from current prices.
	Cost float64 `json:"cost,omitempty"`
	// Wake is why a suspended workflow becomes runnable, the reason its next resumed event carries
	// (one of the Resume* constants): set from what it waits for when it suspends (see WakeOf),
	// replaced by the first resolution that arrives while it is suspended (an event delivered to its
	// wait, its child ending, an operator's resume), cleared when it resumes.
	Wake string `json:"wake,omitempty"`
	// DAGTask, on a child of a DAG run, is the id of the task it runs: its end is reported to the
	// run (task_child_ended) whatever the run's status, not resolved into a journal.
	DAGTask string `json:"dag_task,omitempty"`
	// DAG, on a DAG run, is its plan's fingerprint and its tasks' counts, projected from its task
	// events (dag.go).
	DAG *DAGSummary `json:"dag,omitempty"`
	// Node is the node that took its latest attempt (ran it, or handed it to a remote worker):
	// from that attempt's started, resumed or reclaimed event.
	Node string `json:"node,omitempty"`
}

// Viewer is who is looking at invocations: a subject of a tenant, and whether it sees all of the
// tenant's invocations (a tenant admin, the platform operator, the runtime acting for the tenant).
type Viewer struct {
	TenantID  string
	SubjectID string
	All       bool
}

// VisibleTo reports whether v may see (and control) r: an invocation is visible within its tenant
// to those who see all, to the subject that started it, and, unless its entrypoint is user-owned,
// to everyone in the tenant; an invocation of a user-owned entrypoint (private or shared) is
// visible to the entrypoint's owner and to the subject that started it, nobody else.
// sqlstore's invocation scope mirrors this rule.
func (r Record) VisibleTo(v Viewer) bool {
	if r.TenantID != v.TenantID {
		return false
	}
	return v.All || r.EntrypointOwner == "" || r.EntrypointOwner == v.SubjectID || r.SubjectID == v.SubjectID
}

// Reasons of a resumed event: why a suspended workflow runs again.
const (
	// ResumeTimer: a durable timer came due (r_sleep, or the timeout of a wait).
	ResumeTimer = "timer"
	// ResumeEvent: a published event satisfied its r_wait_event_v1.
	ResumeEvent = "event"
	// ResumeChild: the child invocation of its r_invoke_v1 ended.
	ResumeChild = "child"
	// ResumeStepRetry: the backoff before a step's next attempt ran out.
	ResumeStepRetry = "step_retry"
	// ResumeOperator: the resume control action.
	ResumeOperator = "operator_resume"
)

// WakeOf is the wake reason of a suspended event whose details give reason (the engine's parking
// reasons: "timer", "step retry", "event <type>", "child <id>", "child ended", "child refused"),
// until a resolution replaces it: a step retry's backoff; a child that had already ended (or could
// not start); otherwise the suspension's deadline, a timer. A suspension without a reason (the
// suspend control action) has none: only a resolution wakes it.
func WakeOf(reason string) string {
	switch reason {
	case "":
		return ""
	case "step retry":
		return ResumeStepRetry
	case "child ended", "child refused":
		return ResumeChild
	}
	return ResumeTimer
}

// resolutionWake is the wake reason of e when it arrives while the workflow is suspended: a
// journal_resolved carrying the event or the child that satisfied a wait, or a resume request.
func resolutionWake(e Event) string {
	switch e.Type {
	case EventJournalResolved:
		r, err := DecodeData[JournalResolved](e)
		switch {
		case err != nil:
		case r.EventID != "":
			return ResumeEvent
		case r.ChildInvocationID != "":
			return ResumeChild
		}
	case EventSignalReceived:
		if c, err := DecodeData[Control](e); err == nil && c.Action == "resume" {
			return ResumeOperator
		}
	}
	return ""
}

// resolves reports whether Apply reads e as a resolution of a suspended workflow's wait.
func resolves(r Record, e Event) bool {
	return r.Status == StatusSuspended && (e.Type == EventJournalResolved || e.Type == EventSignalReceived)
}

// EventType names an event in the log. Timeline event types of 000 are a subset.
type EventType string

// Event types. Those marked with a status change move the record through 000's state machine;
// the rest are informational (they land in the timeline only). The payload type that is each
// event's Data (see Payload) is named after the arrow; events without one carry no Data.
const (
	EventCreated               EventType = "created"                // (start) → queued; Record
	EventStarted               EventType = "started"                // queued → running
	EventSucceeded             EventType = "succeeded"              // running → succeeded; Outcome
	EventFailed                EventType = "failed"                 // running|suspended → failed; Outcome
	EventCanceled              EventType = "canceled"               // queued|running|suspended → canceled; Control
	EventSuspended             EventType = "suspended"              // running → suspended; Suspended, or Control
	EventResumed               EventType = "resumed"                // suspended → running; Resumed
	EventRetryScheduled        EventType = "retry_scheduled"        // running → queued (automatic retry with backoff); RetryScheduled
	EventRequeued              EventType = "requeued"               // failed|dead_lettered → queued (retry control action or DLQ redrive; next logical attempt); Control
	EventDeadLettered          EventType = "dead_lettered"          // failed|compensating → dead_lettered; DeadLettered
	EventCompensationStarted   EventType = "compensation_started"   // failed|canceled → compensating; CompensationStarted
	EventCompensationCompleted EventType = "compensation_completed" // compensating → compensated; CompensationEnded
	EventCompensationFailed    EventType = "compensation_failed"    // compensating → dead_lettered; CompensationEnded
	EventStepStarted           EventType = "step_started"           // StepStarted
	EventStepCompleted         EventType = "step_completed"         // not written: the timeline's name for a step's journal entry
	EventStepFailed            EventType = "step_failed"            // not written (likewise)
	EventStepRetried           EventType = "step_retried"           // StepRetried
	EventSignalReceived        EventType = "signal_received"        // a resume request; Control
	EventCheckpointCreated     EventType = "checkpoint_created"     // not written: the timeline's name for an r_snapshot_v1 entry
	EventLog                   EventType = "log"                    // ctx.log / print from user code; Log
	EventHTTPCall              EventType = "http_call"              // an outbound request: method, host, status, duration (never credentials); HTTPCall
	EventChildInvoked          EventType = "child_invoked"          // r_invoke_v1 started a child invocation; ChildInvoked
	EventReclaimed             EventType = "reclaimed"              // a runner's lease expired; the attempt is dispatched again (engine attempt +1); Reclaimed
	EventLateResult            EventType = "late_result"            // a runner finished after losing its lease: recorded, never applied; LateResult
	EventJournal               EventType = "journal"                // a workflow helper call's recorded result (replay journal); JournalEntry
	EventJournalResolved       EventType = "journal_resolved"       // a pending journal entry (a due timer, an event, a child) completed; JournalResolved
	EventStepCompensating      EventType = "step_compensating"      // a workflow step's compensate_fn began; StepCompensating
	EventStepCompensated       EventType = "step_compensated"       // a workflow step's compensate_fn ran; StepCompensated
	EventContinuedAsNew        EventType = "continued_as_new"       // a workflow started a fresh journal (r_continue_as_new_v1); ContinuedAsNew
	EventEmitted               EventType = "event_emitted"          // r_emit_v1: the outbox record of an event (published by the write that appends it); Emitted
)

// Event is one entry of an invocation's append-only log (003 §1.1). Seq is assigned by the store:
// per invocation, starting at 1, without gaps. IdempotencyKey is unique per invocation: appending an
// event whose key is already present is a no-op (003 §1.3).
type Event struct {
	InvocationID   string          `json:"invocation_id"`
	Seq            int64           `json:"seq"`
	Type           EventType       `json:"type"`
	Data           json.RawMessage `json:"data,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
	EngineAttempt  int             `json:"engine_attempt"`
	LogicalAttempt int             `json:"logical_attempt"`
	At             time.Time       `json:"at"`
	// Initial, on a created event, is the record its Data encodes, when the caller has it at hand:
	// Apply then skips decoding Data (a hot-path saving; Data stays the durable source of truth).
	Initial *Record `json:"-"`
	// Outcome, on a succeeded, failed or canceled event, is the Outcome its Data encodes, when the
	// caller has it at hand: Apply and ExecutionOf then skip decoding Data, which carries the
	// result (up to the payload limit, a few MB) and would otherwise be scanned twice more on the
	// store's writer.
	Outcome *Outcome `json:"-"`
}

// Outcome is the Data of a terminal event.
type Outcome struct {
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
	Metrics *Metrics        `json:"metrics,omitempty"`
	// Cost is the execution's cost (see Execution).
	Cost float64 `json:"cost,omitempty"`
}

// IdempotencyKey computes 003's normative key SHA256(runId | stepId | logicalAttemptId | eventType |
// planVersion) as lowercase hex. Engine attempts are deliberately not part of it.
func IdempotencyKey(invocationID, stepID string, logicalAttempt int, t EventType, planVersion string) string {
	h := sha256.New()
	for i, p := range []string{invocationID, stepID, strconv.Itoa(logicalAttempt), string(t), planVersion} {
		if i > 0 {
			h.Write([]byte{'|'})
		}
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TransitionError reports an event that is not allowed in the record's current status.
type TransitionError struct {
	From  Status
	Event EventType
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("event %q is not allowed in status %q", e.Event, e.From)
}

// statusEvents maps status-changing events to their allowed source statuses and the target status.
var statusEvents = map[EventType]struct {
	from []Status
	to   Status
}{
	EventStarted:               {[]Status{StatusQueued}, StatusRunning},
	EventSucceeded:             {[]Status{StatusRunning}, StatusSucceeded},
	EventFailed:                {[]Status{StatusRunning, StatusSuspended}, StatusFailed},
	EventCanceled:              {[]Status{StatusQueued, StatusRunning, StatusSuspended}, StatusCanceled},
	EventSuspended:             {[]Status{StatusRunning}, StatusSuspended},
	EventResumed:               {[]Status{StatusSuspended}, StatusRunning},
	EventRetryScheduled:        {[]Status{StatusRunning}, StatusQueued},
	EventRequeued:              {[]Status{StatusFailed, StatusDeadLettered}, StatusQueued},
	EventDeadLettered:          {[]Status{StatusFailed, StatusCompensating}, StatusDeadLettered},
	EventCompensationStarted:   {[]Status{StatusFailed, StatusCanceled}, StatusCompensating},
	EventCompensationCompleted: {[]Status{StatusCompensating}, StatusCompensated},
	EventCompensationFailed:    {[]Status{StatusCompensating}, StatusDeadLettered},
}

// StatusAfter is the status an event of type t leaves the record in: ok is false for the events
// that change no status (a created event leaves the new record queued).
func StatusAfter(t EventType) (Status, bool) {
	if t == EventCreated {
		return StatusQueued, true
	}
	se, ok := statusEvents[t]
	return se.to, ok
}

// StatusEventTypes lists the event types StatusAfter gives a status for, sorted.
func StatusEventTypes() []EventType {
	out := []EventType{EventCreated}
	for t := range statusEvents {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// ChangesStatus reports whether events of type t move the record to another status.
func ChangesStatus(t EventType) bool { _, ok := statusEvents[t]; return ok }

// OnlyAdvances reports whether Apply(r, e) changes nothing but LastSeq and UpdatedAt: e is an
// informational event (a timeline entry or a journal entry, no status change) of the record's
// engine attempt or an earlier one. Stores use it to write only those two fields of the projection,
// so an event type Apply gives a meaning of its own (as continued_as_new) must be excluded here.
func OnlyAdvances(r Record, e Event) bool {
	return e.Type != EventCreated && e.Type != EventContinuedAsNew && e.Type != EventLateResult && !ChangesStatus(e.Type) &&
		!changesDAG(e.Type) && e.EngineAttempt <= r.EngineAttempt && !resolves(r, e)
}

// Apply returns r with e applied. It never mutates r's referenced data. e.Seq must be r.LastSeq+1.
func Apply(r Record, e Event) (Record, error) {
	if e.Seq != r.LastSeq+1 {
		return r, fmt.Errorf("invocation %s: event seq %d does not follow %d", r.ID, e.Seq, r.LastSeq)
	}
	if e.Type == EventCreated {
		return applyCreated(r, e)
	}
	if r.LastSeq == 0 {
		return r, fmt.Errorf("invocation %s: first event must be %q, got %q", r.ID, EventCreated, e.Type)
	}
	next := applyEvery(r, e)
	se, changes := statusEvents[e.Type]
	if !changes {
		return next, nil
	}
	if !slices.Contains(se.from, r.Status) {
		return r, &TransitionError{From: r.Status, Event: e.Type}
	}
	next = applyTransition(next, e, se.to)
	next, err := applyOutcome(next, e)
	if err != nil {
		return r, err
	}
	return next, nil
}

// applyCreated starts the record from a created event, the first of every log: the record its
// data encodes (e.Initial when the caller has it at hand), queued, on its first attempt. It
// returns r unchanged, with an error, when r already has events or the data does not decode.
func applyCreated(r Record, e Event) (Record, error) {
	if r.LastSeq != 0 {
		return r, &TransitionError{From: r.Status, Event: e.Type}
	}
	init, err := DecodeData[Record](e)
	if err != nil {
		return r, err
	}
	init.Status = StatusQueued
	init.LastSeq = e.Seq
	init.UpdatedAt = e.At
	if init.Attempt == 0 {
		init.Attempt = 1
	}
	return init, nil
}

// applyEvery applies what every event after the created one does, whether or not it changes the
// status: it advances LastSeq and UpdatedAt and the engine attempt, starts a new generation of
// the journal on continued_as_new, records the wake reason of a suspended workflow's first
// resolution, and adds the cost of an execution that closes without an outcome.
func applyEvery(r Record, e Event) Record {
	next := r
	next.LastSeq = e.Seq
	next.UpdatedAt = e.At
	if e.EngineAttempt > next.EngineAttempt {
		next.EngineAttempt = e.EngineAttempt
	}
	if e.Type == EventContinuedAsNew {
		next.JournalFrom = e.Seq
		next.Generation++
	}
	if e.Type == EventReclaimed {
		next.Node = nodeOf(e)
	}
	next = applyDAG(next, e)
	if resolves(r, e) {
		if w := resolutionWake(e); w != "" && r.Wake != ResumeEvent && r.Wake != ResumeChild && r.Wake != ResumeOperator {
			next.Wake = w // the first resolution wins
		}
	}
	if e.Type == EventLateResult || e.Type == EventRetryScheduled || e.Type == EventSuspended {
		// Closing events of an execution that carry no outcome still carry its cost.
		if x, ok := ExecutionOf(e); ok {
			next.Cost += x.Cost
		}
	}
	return next
}

// BudgetAttempt is the current logical attempt counted within the current retry budget (1-based):
// the attempt the retry policy's max_attempts and backoff apply to. It is Attempt until a requeue,
// which starts the count again.
func (r Record) BudgetAttempt() int { return r.Attempt - r.RetryBase }

// applyTransition moves next, already through applyEvery, to status to (a transition statusEvents
// allows) and sets the fields the transition carries: the start, suspension and finish times,
// the wake reason of a suspension, and the attempt a requeue or retry begins.
func applyTransition(next Record, e Event, to Status) Record {
	next.Status = to
	at := e.At
	switch e.Type {
	case EventStarted:
		if next.StartedAt == nil {
			next.StartedAt = &at
		}
		next.Node = nodeOf(e)
	case EventResumed:
		next.SuspendedAt, next.Wake = nil, ""
		next.Node = nodeOf(e)
	case EventSuspended:
		next.SuspendedAt = &at
		next.Wake = WakeOf(suspendReason(e))
	case EventRequeued:
		next.RetryBase = next.Attempt
		next.Attempt++
		next.EngineAttempt = 0
		next.Result, next.Error, next.FinishedAt = nil, nil, nil
	case EventRetryScheduled:
		next.Attempt++
		next.EngineAttempt = 0
	}
	if to == StatusSucceeded || to == StatusFailed || to == StatusCanceled {
		next.FinishedAt = &at
	}
	return next
}

// suspendReason is the reason a suspended event's data gives, "" when it gives none or does not
// decode.
// nodeOf is the node a started, resumed or reclaimed event names ("" when it names none).
func nodeOf(e Event) string {
	if len(e.Data) == 0 {
		return ""
	}
	var x struct {
		Node string `json:"node"`
	}
	if json.Unmarshal(e.Data, &x) != nil {
		return ""
	}
	return x.Node
}

func suspendReason(e Event) string {
	s, err := DecodeData[Suspended](e)
	if err != nil {
		return ""
	}
	return s.Reason
}

// applyOutcome copies the outcome of a succeeded, failed or canceled event with data (e.Outcome
// when the caller has it at hand) into next: its result, error and metrics when given, and its
// cost. Other events leave next as it is.
func applyOutcome(next Record, e Event) (Record, error) {
	if len(e.Data) == 0 || (e.Type != EventSucceeded && e.Type != EventFailed && e.Type != EventCanceled) {
		return next, nil
	}
	o, err := DecodeData[Outcome](e)
	if err != nil {
		return next, err
	}
	if len(o.Result) > 0 {
		next.Result = o.Result
	}
	if o.Error != nil {
		next.Error = o.Error
	}
	if o.Metrics != nil {
		next.Metrics = *o.Metrics
	}
	next.Cost += o.Cost
	return next, nil
}

// Rebuild folds a complete log (ordered by Seq, starting at 1) into a record.
func Rebuild(events []Event) (Record, error) {
	var r Record
	for _, e := range events {
		var err error
		if r, err = Apply(r, e); err != nil {
			return Record{}, err
		}
	}
	return r, nil
}

// CheckGaps verifies that events are contiguous from after+1; it returns the first missing seq,
// or 0 when there is no gap (003 §1.1 gap check).
func CheckGaps(after int64, events []Event) int64 {
	want := after + 1
	for _, e := range events {
		if e.Seq != want {
			return want
		}
		want++
	}
	return 0
}

// DecodeJSON decodes raw (stored params, results, event data) into v with numbers kept exact
// (json.Number), as user code handed them over.
func DecodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

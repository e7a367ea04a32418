package invocation

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// roundTrip decodes e's Data as a T and encodes it again.
func roundTrip[T Payload](e Event) (json.RawMessage, error) {
	p, err := DecodeData[T](e)
	if err != nil {
		return nil, err
	}
	return EncodeData(p)
}

// TestPayloadGolden: the Data each event type's producers wrote before the payload types existed
// (maps encoded with json.Marshal, members in name order; the journal entry, emitted event, record
// and outcome structs), produced with that code (outcome.Events, journal.Events and Continued, and
// the maps of dispatch, internal/invoke, workerclient and run), decodes into its payload and
// encodes back byte for byte.
func TestPayloadGolden(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		typ  EventType
		trip func(Event) (json.RawMessage, error)
		data string
	}{
		{"suspended until", EventSuspended, roundTrip[Suspended], `{"cost":0.125,"metrics":{"duration_ms":12,"billed_duration_ms":12,"cpu_time_ms":null,"memory_limit_mb":null,"max_memory_used_mb":null,"step_count":null,"egress_bytes":null,"queue_wait_ms":null},"reason":"event order.paid","until":"2025-03-01T12:00:00.123456789Z"}`},
		{"suspended without until", EventSuspended, roundTrip[Suspended], `{"cost":0,"metrics":{"duration_ms":12,"billed_duration_ms":12,"cpu_time_ms":null,"memory_limit_mb":null,"max_memory_used_mb":null,"step_count":null,"egress_bytes":null,"queue_wait_ms":null},"reason":"child inv_2","until":null}`},
		{"succeeded", EventSucceeded, roundTrip[Outcome], `{"result":{"r":[1,2.50,"x"]},"metrics":{"duration_ms":12,"billed_duration_ms":12,"cpu_time_ms":null,"memory_limit_mb":null,"max_memory_used_mb":null,"step_count":null,"egress_bytes":null,"queue_wait_ms":null},"cost":1e-7}`},
		{"retry_scheduled", EventRetryScheduled, roundTrip[RetryScheduled], `{"available_at":"2025-03-01T12:00:00.123456789Z","cost":3,"delay_ms":1500,"error":{"error_type_id":"gts.x.core.faas.err.v1~x.timeout.v1~","message":"boom","category":"retryable","details":{"n":1.5}},"metrics":{"duration_ms":12,"billed_duration_ms":12,"cpu_time_ms":null,"memory_limit_mb":null,"max_memory_used_mb":null,"step_count":null,"egress_bytes":null,"queue_wait_ms":null},"next_attempt":3}`},
		{"failed", EventFailed, roundTrip[Outcome], `{"error":{"error_type_id":"gts.x.core.faas.err.v1~x.timeout.v1~","message":"boom","category":"retryable","details":{"n":1.5}},"metrics":{"duration_ms":12,"billed_duration_ms":12,"cpu_time_ms":null,"memory_limit_mb":null,"max_memory_used_mb":null,"step_count":null,"egress_bytes":null,"queue_wait_ms":null}}`},
		{"dead_lettered", EventDeadLettered, roundTrip[DeadLettered], `{"reason":"no compensation configured"}`},
		{"compensation_started on failure", EventCompensationStarted, roundTrip[CompensationStarted], `{"handler":"gts.h~","handler_invocation_id":"inv_h","trigger":"failure"}`},
		{"resumed", EventResumed, roundTrip[Resumed], `{"reason":"timer"}`},
		{"reclaimed", EventReclaimed, roundTrip[Reclaimed], `{"engine_attempt":3,"reason":"lease expired"}`},
		{"canceled", EventCanceled, roundTrip[Control], `{"action":"cancel"}`},
		{"signal_received", EventSignalReceived, roundTrip[Control], `{"action":"resume"}`},
		{"compensation_started on cancel", EventCompensationStarted, roundTrip[CompensationStarted], `{"handler":"gts.h~","handler_invocation_id":"inv_h","trigger":"cancellation"}`},
		{"journal_resolved child", EventJournalResolved, roundTrip[JournalResolved], `{"child_invocation_id":"inv_c","result":{"ok":true,"value":{"a":12345678901234567890}},"seq":3}`},
		{"compensation_completed", EventCompensationCompleted, roundTrip[CompensationEnded], `{"handler_invocation_id":"inv_h","handler_status":"succeeded"}`},
		{"late_result", EventLateResult, roundTrip[LateResult], `{"cost":0.5,"engine_attempt":2,"metrics":{"duration_ms":12,"billed_duration_ms":12,"cpu_time_ms":null,"memory_limit_mb":null,"max_memory_used_mb":null,"step_count":null,"egress_bytes":null,"queue_wait_ms":null},"succeeded":false}`},
		{"log marker of dropped entries", EventLog, roundTrip[Log], `{"dropped":7,"message":"7 log entries dropped","reason":"an attempt keeps at most 1000 log entries and 1048576 bytes of them"}`},
		{"log", EventLog, roundTrip[Log], `{"fields":{"a":[true,null],"k":1.0},"message":"hello"}`},
		{"log truncated", EventLog, roundTrip[Log], `{"message":"hel…","truncated":true}`},
		{"http_call", EventHTTPCall, roundTrip[HTTPCall], `{"duration_ms":42,"host":"example.com","method":"GET","status":200}`},
		{"http_call refused", EventHTTPCall, roundTrip[HTTPCall], `{"duration_ms":0,"error":"forbidden_address","host":"10.0.0.1","method":"POST"}`},
		{"child_invoked by a function", EventChildInvoked, roundTrip[ChildInvoked], `{"child_invocation_id":"inv_c","entrypoint_id":"gts.c~","status":"failed"}`},
		{"child_invoked by a workflow", EventChildInvoked, roundTrip[ChildInvoked], `{"child_invocation_id":"inv_c","entrypoint_id":"gts.c~","seq":4}`},
		{"journal_resolved event", EventJournalResolved, roundTrip[JournalResolved], `{"event_id":"ev_1","event_seq":17,"event_type_id":"gts.e~","result":{"ok":true,"value":{"event_id":"ev_1","payload":null}},"seq":2}`},
		{"journal_resolved timer", EventJournalResolved, roundTrip[JournalResolved], `{"result":null,"seq":1}`},
		{"journal_resolved timeout", EventJournalResolved, roundTrip[JournalResolved], `{"result":{"error":{"category":"retryable","details":{"n":1.5},"id":"gts.x.core.faas.err.v1~x.timeout.v1~","message":"boom"},"ok":false},"seq":1,"timeout":true}`},
		{"step_retried", EventStepRetried, roundTrip[StepRetried], `{"attempt":1,"delay_ms":250,"error":{"error_type_id":"gts.x.core.faas.err.v1~x.timeout.v1~","message":"boom","category":"retryable","details":{"n":1.5}},"step":"charge"}`},
		{"step_started", EventStepStarted, roundTrip[StepStarted], `{"attempt":2,"step":"charge"}`},
		{"step_compensating", EventStepCompensating, roundTrip[StepCompensating], `{"fn":"refund","seq":3,"step":"charge"}`},
		{"step_compensated failed", EventStepCompensated, roundTrip[StepCompensated], `{"duration_ms":5,"error":{"error_type_id":"gts.x.core.faas.err.v1~x.timeout.v1~","message":"boom","category":"retryable","details":{"n":1.5}},"fn":"refund","ok":false,"seq":3,"step":"charge"}`},
		{"step_compensated ok", EventStepCompensated, roundTrip[StepCompensated], `{"duration_ms":5,"fn":"refund","ok":true,"seq":3,"step":"charge"}`},
		{"event_emitted", EventEmitted, roundTrip[Emitted], `{"event_id":"inv_1.a2.journal-0.e0","event_type_id":"gts.e~","payload":{"a":1},"seq":0,"step":"charge"}`},
		{"journal step", EventJournal, roundTrip[JournalEntry], `{"seq":0,"helper":"r_run_step_v1","key":"charge","args_hash":"ab","input":{"x":1},"result":{"ok":true,"value":2},"done":true}`},
		{"journal timer", EventJournal, roundTrip[JournalEntry], `{"seq":1,"helper":"r_sleep","args_hash":"","until":"2025-03-01T12:00:00.123456789Z","result":null,"done":false}`},
		{"continued_as_new", EventContinuedAsNew, roundTrip[ContinuedAsNew], `{"generation":2,"input":{"n":3}}`},
		{"continued_as_new without input", EventContinuedAsNew, roundTrip[ContinuedAsNew], `{"generation":1,"input":null}`},
		{"created", EventCreated, roundTrip[Record], `{"invocation_id":"inv_1","tenant_id":"acme","entrypoint_ref":"","entrypoint_id":"","subject_id":"","status":"queued","mode":"async","params":{"a":1},"correlation_id":"","attempt":1,"created_at":"2025-03-01T12:00:00.123456789Z"}`},
		{"requeued", EventRequeued, roundTrip[Control], `{"action":"retry"}`},
		{"suspended by the suspend action", EventSuspended, roundTrip[Control], `{"action":"suspend"}`},
		{"compensation_failed", EventCompensationFailed, roundTrip[CompensationEnded], `{"handler_invocation_id":"inv_h","handler_status":"failed"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.trip(Event{Type: c.typ, Data: json.RawMessage(c.data)})
			require.NoError(t, err)
			require.Equal(t, c.data, string(got))
		})
	}
}

// TestDecodeDataRefuses: a payload type that is not the Data of the event's type, and an event
// without Data, are refused with an error that names them.
func TestDecodeDataRefuses(t *testing.T) {
	t.Parallel()
	_, err := DecodeData[Log](Event{Type: EventHTTPCall, Data: json.RawMessage(`{"message":"m"}`)})
	require.ErrorContains(t, err, "a http_call event's data is not a invocation.Log")
	_, err = DecodeData[Log](Event{Type: EventLog})
	require.ErrorContains(t, err, "log event data: none")
	_, err = DecodeData[Log](Event{Type: EventLog, Data: json.RawMessage(`{"message":1}`)})
	require.ErrorContains(t, err, "log event data:")

	_, err = Event{Type: EventLog}.WithData(HTTPCall{})
	require.ErrorContains(t, err, "invocation.HTTPCall is not the data of a log event")
}

// TestDataAtHand: WithData keeps a Record and an Outcome at hand (Initial, Outcome), and
// DecodeData returns them without decoding; numbers in members of type any stay exact.
func TestDataAtHand(t *testing.T) {
	t.Parallel()
	rec := Record{ID: "inv_1", TenantID: "acme", Mode: ModeAsync, CreatedAt: t0, Params: json.RawMessage(`{"a":1}`)}
	e, err := Event{Type: EventCreated}.WithData(rec)
	require.NoError(t, err)
	require.Equal(t, &rec, e.Initial)
	e.Data = json.RawMessage(`not decoded`)
	got, err := DecodeData[Record](e)
	require.NoError(t, err)
	require.Equal(t, rec, got)

	ms := int64(3)
	out := Outcome{Result: json.RawMessage(`{"r":1}`), Metrics: &Metrics{DurationMS: &ms}, Cost: 0.5}
	e, err = Event{Type: EventSucceeded}.WithData(out)
	require.NoError(t, err)
	require.Equal(t, &out, e.Outcome)
	require.JSONEq(t, `{"result":{"r":1},"metrics":{"duration_ms":3,"billed_duration_ms":null,"cpu_time_ms":null,"memory_limit_mb":null,"max_memory_used_mb":null,"step_count":null,"egress_bytes":null,"queue_wait_ms":null},"cost":0.5}`, string(e.Data))

	until := t0.Add(time.Minute)
	e, err = Event{Type: EventSuspended}.WithData(Suspended{Reason: "timer", Until: &until})
	require.NoError(t, err)
	require.Nil(t, e.Outcome)
	require.True(t, strings.HasPrefix(string(e.Data), `{"cost":0,"metrics":null,"reason":"timer"`), string(e.Data))

	big := `{"seq":1,"result":{"ok":true,"value":12345678901234567890}}`
	r, err := DecodeData[JournalResolved](Event{Type: EventJournalResolved, Data: json.RawMessage(big)})
	require.NoError(t, err)
	require.Equal(t, json.Number("12345678901234567890"), r.Result.(map[string]any)["value"])
}

package invocation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func created(t *testing.T, id string) Event {
	t.Helper()
	data, err := json.Marshal(Record{ID: id, TenantID: "acme", Mode: ModeAsync, CreatedAt: t0, CorrelationID: "c"})
	require.NoError(t, err)
	return Event{InvocationID: id, Seq: 1, Type: EventCreated, Data: data, IdempotencyKey: "k1", At: t0}
}

func TestIdempotencyKeyIsNormativeFormula(t *testing.T) {
	sum := sha256.Sum256([]byte("inv_1|step_a|2|succeeded|v7"))
	require.Equal(t, hex.EncodeToString(sum[:]), IdempotencyKey("inv_1", "step_a", 2, EventSucceeded, "v7"))
	require.NotEqual(t, IdempotencyKey("inv_1", "step_a", 1, EventSucceeded, ""), IdempotencyKey("inv_1", "step_a", 2, EventSucceeded, ""),
		"a new logical attempt is a new key")
}

// TestStateMachine walks every status-changing event from every status: exactly the transitions
// of 000's state machine are accepted.
func TestStateMachine(t *testing.T) {
	reach := map[Status][]EventType{ // how to get a record into each status from queued
		StatusQueued:       nil,
		StatusRunning:      {EventStarted},
		StatusSuspended:    {EventStarted, EventSuspended},
		StatusSucceeded:    {EventStarted, EventSucceeded},
		StatusFailed:       {EventStarted, EventFailed},
		StatusCanceled:     {EventCanceled},
		StatusCompensating: {EventStarted, EventFailed, EventCompensationStarted},
		StatusCompensated:  {EventStarted, EventFailed, EventCompensationStarted, EventCompensationCompleted},
		StatusDeadLettered: {EventStarted, EventFailed, EventDeadLettered},
	}
	allowed := map[Status]map[EventType]Status{
		StatusQueued:       {EventStarted: StatusRunning, EventCanceled: StatusCanceled},
		StatusRunning:      {EventSucceeded: StatusSucceeded, EventFailed: StatusFailed, EventSuspended: StatusSuspended, EventCanceled: StatusCanceled, EventRetryScheduled: StatusQueued},
		StatusSuspended:    {EventResumed: StatusRunning, EventCanceled: StatusCanceled, EventFailed: StatusFailed},
		StatusFailed:       {EventCompensationStarted: StatusCompensating, EventDeadLettered: StatusDeadLettered, EventRequeued: StatusQueued},
		StatusCanceled:     {EventCompensationStarted: StatusCompensating},
		StatusCompensating: {EventCompensationCompleted: StatusCompensated, EventCompensationFailed: StatusDeadLettered, EventDeadLettered: StatusDeadLettered},
		StatusDeadLettered: {EventRequeued: StatusQueued},
	}
	for from, path := range reach {
		r, err := Apply(Record{}, created(t, "inv"))
		require.NoError(t, err)
		for _, et := range path {
			r, err = Apply(r, Event{Seq: r.LastSeq + 1, Type: et, At: t0})
			require.NoError(t, err, "reaching %s via %s", from, et)
		}
		require.Equal(t, from, r.Status)
		for et := range statusEvents {
			next, err := Apply(r, Event{Seq: r.LastSeq + 1, Type: et, At: t0.Add(time.Second)})
			if want, ok := allowed[from][et]; ok {
				require.NoError(t, err, "%s + %s", from, et)
				require.Equal(t, want, next.Status)
			} else {
				var te *TransitionError
				require.ErrorAs(t, err, &te, "%s + %s must be refused", from, et)
				require.Equal(t, r, next, "a refused event leaves the record unchanged")
			}
		}
		logged, err := Apply(r, Event{Seq: r.LastSeq + 1, Type: EventLog, At: t0})
		require.NoError(t, err, "informational events are allowed in %s", from)
		require.Equal(t, from, logged.Status)
	}
}

func TestApplyOutcomeAndAttempts(t *testing.T) {
	r, err := Apply(Record{}, created(t, "inv"))
	require.NoError(t, err)
	require.Equal(t, 1, r.Attempt)
	r, err = Apply(r, Event{Seq: 2, Type: EventStarted, At: t0.Add(time.Millisecond)})
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Millisecond), *r.StartedAt)
	out, err := json.Marshal(Outcome{Error: &Error{TypeID: "gts.x", Message: "boom", Category: "retryable"}})
	require.NoError(t, err)
	r, err = Apply(r, Event{Seq: 3, Type: EventFailed, Data: out, At: t0.Add(2 * time.Millisecond)})
	require.NoError(t, err)
	require.Equal(t, "boom", r.Error.Message)
	require.NotNil(t, r.FinishedAt)
	r, err = Apply(r, Event{Seq: 4, Type: EventRequeued, At: t0.Add(3 * time.Millisecond)})
	require.NoError(t, err)
	require.Equal(t, StatusQueued, r.Status)
	require.Equal(t, 2, r.Attempt, "retry is the next logical attempt")
	require.Nil(t, r.Error)
	require.Nil(t, r.FinishedAt)
}

func TestApplyRejectsOutOfOrder(t *testing.T) {
	_, err := Apply(Record{}, Event{Seq: 1, Type: EventStarted})
	require.Error(t, err, "the first event must be created")
	r, err := Apply(Record{}, created(t, "inv"))
	require.NoError(t, err)
	_, err = Apply(r, Event{Seq: 3, Type: EventStarted})
	require.Error(t, err, "seq must be contiguous")
	_, err = Apply(r, created(t, "inv"))
	require.Error(t, err, "created only once")
}

func TestCheckGaps(t *testing.T) {
	ev := func(seqs ...int64) []Event {
		var out []Event
		for _, s := range seqs {
			out = append(out, Event{Seq: s})
		}
		return out
	}
	require.Zero(t, CheckGaps(0, ev(1, 2, 3)))
	require.Equal(t, int64(2), CheckGaps(0, ev(1, 3)))
	require.Equal(t, int64(11), CheckGaps(10, ev(12)))
	require.Zero(t, CheckGaps(5, nil))
}

func TestRebuild(t *testing.T) {
	events := []Event{created(t, "inv"), {Seq: 2, Type: EventStarted, At: t0}, {Seq: 3, Type: EventLog, At: t0}, {Seq: 4, Type: EventCanceled, At: t0}}
	r, err := Rebuild(events)
	require.NoError(t, err)
	require.Equal(t, StatusCanceled, r.Status)
	require.Equal(t, int64(4), r.LastSeq)
	require.True(t, StatusQueued.InFlight())
	require.False(t, StatusCanceled.InFlight())
}

func TestCreatedWithInitialEqualsDecoded(t *testing.T) {
	ev := created(t, "inv")
	decoded, err := Apply(Record{}, ev)
	require.NoError(t, err)
	var init Record
	require.NoError(t, json.Unmarshal(ev.Data, &init))
	ev.Initial = &init
	fast, err := Apply(Record{}, ev)
	require.NoError(t, err)
	require.Equal(t, decoded, fast)
}

func TestApplyContinuedAsNew(t *testing.T) {
	r, err := Rebuild([]Event{created(t, "inv"), {Seq: 2, Type: EventStarted, At: t0}, {Seq: 3, Type: EventJournal, At: t0}})
	require.NoError(t, err)
	require.Zero(t, r.JournalFrom)
	r, err = Apply(r, Event{Seq: 4, Type: EventContinuedAsNew, At: t0})
	require.NoError(t, err)
	require.Equal(t, StatusRunning, r.Status, "the status does not change")
	require.Equal(t, int64(4), r.JournalFrom, "the current journal starts at the rotation")
	require.Equal(t, 1, r.Generation)
	r, err = Apply(r, Event{Seq: 5, Type: EventContinuedAsNew, At: t0})
	require.NoError(t, err)
	require.Equal(t, int64(5), r.JournalFrom)
	require.Equal(t, 2, r.Generation)
}

// TestOnlyAdvances: where OnlyAdvances holds, Apply changes nothing but LastSeq and UpdatedAt (the
// promise stores rely on to write only those); it fails for every status change, for late_result
// (it carries its execution's cost) and for an event of a newer engine attempt.
func TestOnlyAdvances(t *testing.T) {
	r, err := Apply(Record{}, created(t, "inv"))
	require.NoError(t, err)
	r, err = Apply(r, Event{Seq: 2, Type: EventStarted, EngineAttempt: 2, At: t0})
	require.NoError(t, err)
	types := []EventType{EventCreated, EventStepStarted, EventStepCompleted, EventStepFailed, EventStepRetried, EventSignalReceived,
		EventCheckpointCreated, EventLog, EventHTTPCall, EventChildInvoked, EventReclaimed, EventLateResult, EventJournal,
		EventJournalResolved, EventStepCompensating, EventStepCompensated, EventContinuedAsNew}
	for et := range statusEvents {
		types = append(types, et)
	}
	for _, et := range types {
		for _, engine := range []int{1, 2, 3} {
			e := Event{Seq: r.LastSeq + 1, Type: et, EngineAttempt: engine, At: t0.Add(time.Second)}
			if !OnlyAdvances(r, e) {
				require.True(t, et == EventCreated || et == EventContinuedAsNew || et == EventLateResult || ChangesStatus(et) ||
					engine > r.EngineAttempt, "%s from engine attempt %d", et, engine)
				continue
			}
			next, err := Apply(r, e)
			require.NoError(t, err, et)
			want := r
			want.LastSeq, want.UpdatedAt = e.Seq, e.At
			require.Equal(t, want, next, "%s from engine attempt %d", et, engine)
		}
	}
}

// TestWake: the reason a suspended workflow resumes is what it waited for, unless a resolution
// (an event, a child, an operator's resume) came first; the first resolution wins.
func TestWake(t *testing.T) {
	ev := func(typ EventType, data string) Event {
		e := Event{Type: typ, At: t0}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		return e
	}
	suspended := func(reason string) Event { return ev(EventSuspended, `{"reason":"`+reason+`"}`) }
	cases := []struct {
		name string
		evs  []Event
		want string
	}{
		{"timer", []Event{suspended("timer")}, ResumeTimer},
		{"event wait that times out", []Event{suspended("event gts.x~")}, ResumeTimer},
		{"step retry backoff", []Event{suspended("step retry")}, ResumeStepRetry},
		{"child that had ended", []Event{suspended("child ended")}, ResumeChild},
		{"operator suspend", []Event{ev(EventSuspended, `{"action":"suspend"}`)}, ""},
		{"event delivered", []Event{suspended("event gts.x~"), ev(EventJournalResolved, `{"seq":1,"event_id":"e1"}`)}, ResumeEvent},
		{"child ended while waiting", []Event{suspended("child inv_c"), ev(EventJournalResolved, `{"seq":1,"child_invocation_id":"inv_c"}`)}, ResumeChild},
		{"operator resume", []Event{suspended("timer"), ev(EventSignalReceived, `{"action":"resume"}`)}, ResumeOperator},
		{"first resolution wins", []Event{suspended("event gts.x~"), ev(EventJournalResolved, `{"seq":1,"event_id":"e1"}`),
			ev(EventSignalReceived, `{"action":"resume"}`)}, ResumeEvent},
		{"resumed clears it", []Event{suspended("timer"), ev(EventResumed, "")}, ""},
	}
	for _, c := range cases {
		r, err := Apply(Record{}, created(t, "inv"))
		require.NoError(t, err)
		r, err = Apply(r, Event{Seq: 2, Type: EventStarted, At: t0})
		require.NoError(t, err)
		for _, e := range c.evs {
			e.Seq = r.LastSeq + 1
			prev := r
			r, err = Apply(r, e)
			require.NoError(t, err, c.name)
			if prev.Wake != r.Wake {
				require.False(t, OnlyAdvances(prev, e), "%s: an event that changes Wake is not a bare advance", c.name)
			}
		}
		require.Equal(t, c.want, r.Wake, c.name)
	}
}

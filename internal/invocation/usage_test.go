package invocation

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func i64p(v int64) *int64 { return &v }

// closing is the Data of an execution's closing event with these metrics and cost.
func closing(t *testing.T, durationMS, billedMS, cpuMS, memMB, egress int64, cost float64) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(map[string]any{"cost": cost, "metrics": Metrics{DurationMS: i64p(durationMS), BilledDurationMS: i64p(billedMS),
		CPUTimeMS: i64p(cpuMS), MemoryLimitMB: i64p(memMB), EgressBytes: i64p(egress)}})
	require.NoError(t, err)
	return b
}

type step struct {
	t    EventType
	data json.RawMessage
}

// fold applies the steps after a created event that carries the invocation price, and returns the
// record and the usage the events add up to (UsageOf of each).
func fold(t *testing.T, price float64, steps ...step) (Record, Usage) {
	t.Helper()
	data, err := json.Marshal(Record{ID: "inv", TenantID: "acme", EntrypointID: "ep", Mode: ModeAsync, CreatedAt: t0, Cost: price})
	require.NoError(t, err)
	events := []Event{{Seq: 1, Type: EventCreated, Data: data, At: t0}}
	for i, s := range steps {
		events = append(events, Event{Seq: int64(i + 2), Type: s.t, Data: s.data, At: t0.Add(time.Duration(i+1) * time.Second)})
	}
	var r Record
	var u Usage
	for _, e := range events {
		next, err := Apply(r, e)
		require.NoError(t, err, "%s", e.Type)
		u.Add(UsageOf(r, e, next))
		r = next
	}
	rebuilt, err := Rebuild(events)
	require.NoError(t, err)
	require.Equal(t, r, rebuilt)
	require.Equal(t, u.Cost, r.Cost, "the record's cost is the sum the aggregates get")
	return r, u
}

func TestUsageOf(t *testing.T) {
	a := closing(t, 7, 8, 3, 128, 100, 0.5)
	b := closing(t, 20, 20, 10, 128, 0, 0.25)
	log := step{EventLog, json.RawMessage(`{"message":"hi"}`)}
	journal := step{EventJournal, json.RawMessage(`{"seq":0,"helper":"r_run_step_v1","result":{"ok":true}}`)}

	t.Run("a function that succeeds", func(t *testing.T) {
		r, u := fold(t, 0.125, step{EventStarted, nil}, log, step{EventSucceeded, a})
		require.Equal(t, Usage{Invocations: 1, Succeeded: 1, Executions: 1, DurationMS: 7, BilledDurationMS: 8, CPUTimeMS: 3,
			MemoryMBMS: 128 * 8, EgressBytes: 100, Cost: 0.625}, u)
		require.Equal(t, 0.625, r.Cost)
		require.Equal(t, int64(100), *r.Metrics.EgressBytes)
	})
	t.Run("a retry, then failed and dead_lettered: one finish, two executions", func(t *testing.T) {
		_, u := fold(t, 0, step{EventStarted, nil}, step{EventRetryScheduled, a}, step{EventStarted, nil},
			step{EventFailed, b}, step{EventDeadLettered, nil})
		require.Equal(t, int64(1), u.Finished())
		require.Equal(t, Usage{Invocations: 1, Failed: 1, DeadLettered: 1, Executions: 2, DurationMS: 27, BilledDurationMS: 28,
			CPUTimeMS: 13, MemoryMBMS: 128 * 28, EgressBytes: 100, Cost: 0.75}, u)
	})
	t.Run("a redriven invocation counts again when it finishes again", func(t *testing.T) {
		_, u := fold(t, 0, step{EventStarted, nil}, step{EventFailed, a}, step{EventDeadLettered, nil}, step{EventRequeued, nil},
			step{EventStarted, nil}, step{EventSucceeded, b})
		require.Equal(t, int64(1), u.Invocations)
		require.Equal(t, int64(2), u.Finished())
		require.Equal(t, [3]int64{1, 1, 1}, [3]int64{u.Succeeded, u.Failed, u.DeadLettered})
	})
	t.Run("a workflow: activations, then failure and compensation", func(t *testing.T) {
		_, u := fold(t, 0, step{EventStarted, nil}, journal, step{EventSuspended, a}, step{EventResumed, nil}, journal,
			step{EventFailed, b}, step{EventCompensationStarted, nil}, step{EventCompensationCompleted, nil})
		require.Equal(t, Usage{Invocations: 1, Failed: 1, Compensated: 1, Executions: 2, DurationMS: 27, BilledDurationMS: 28,
			CPUTimeMS: 13, MemoryMBMS: 128 * 28, EgressBytes: 100, Cost: 0.75}, u)
	})
	t.Run("canceled while running: the late result's execution is counted", func(t *testing.T) {
		r, u := fold(t, 0.125, step{EventStarted, nil}, step{EventCanceled, json.RawMessage(`{"action":"cancel"}`)},
			step{EventLateResult, a})
		require.Equal(t, StatusCanceled, r.Status)
		require.Equal(t, Usage{Invocations: 1, Canceled: 1, Executions: 1, DurationMS: 7, BilledDurationMS: 8, CPUTimeMS: 3,
			MemoryMBMS: 128 * 8, EgressBytes: 100, Cost: 0.625}, u)
	})
	t.Run("canceled while queued, then compensation failed", func(t *testing.T) {
		_, u := fold(t, 0, step{EventCanceled, nil}, step{EventCompensationStarted, nil}, step{EventCompensationFailed, nil})
		require.Equal(t, Usage{Invocations: 1, Canceled: 1, DeadLettered: 1}, u)
	})
	t.Run("a suspend control action and informational events are no executions", func(t *testing.T) {
		_, u := fold(t, 0, step{EventStarted, nil}, log, journal, step{EventSuspended, json.RawMessage(`{"action":"suspend"}`)},
			step{EventHTTPCall, json.RawMessage(`{"status":200}`)})
		require.Equal(t, Usage{Invocations: 1}, u)
	})
	t.Run("informational events add nothing", func(t *testing.T) {
		r := Record{Status: StatusRunning, LastSeq: 5}
		for _, et := range []EventType{EventLog, EventJournal, EventStepStarted, EventHTTPCall, EventJournalResolved, EventReclaimed} {
			e := Event{Seq: 6, Type: et, Data: a, At: t0}
			next, err := Apply(r, e)
			require.NoError(t, err)
			require.True(t, UsageOf(r, e, next).IsZero(), "%s", et)
		}
	})
}

func TestUsageUnits(t *testing.T) {
	u := Usage{CPUTimeMS: 1500, MemoryMBMS: 512 * 2000}
	require.Equal(t, 1.5, u.CPUSeconds())
	require.Equal(t, 1.0, u.MemoryGBSeconds(), "512 MB for 2 s is 1 GB-second")
	require.Equal(t, time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), UsageHour(time.Date(2026, 1, 1, 10, 59, 0, 0, time.FixedZone("", 3600))))
}

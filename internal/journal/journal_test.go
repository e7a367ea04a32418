package journal_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/journal"
	"github.com/larkrun/lark/internal/sandbox"
)

// TestReplayContinuedAsNew: a continued_as_new event starts an empty journal with its generation
// and input; entries before it are not part of the current journal.
func TestReplayContinuedAsNew(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(seq int64, typ invocation.EventType, data any) invocation.Event {
		b, err := json.Marshal(data)
		require.NoError(t, err)
		return invocation.Event{Seq: seq, Type: typ, Data: b, At: at.Add(time.Duration(seq) * time.Second)}
	}
	first := []invocation.Event{
		ev(3, invocation.EventJournal, invocation.JournalEntry{Seq: 0, Helper: "r_run_step_v1", Key: "a", Result: map[string]any{"ok": true, "value": 1}, Done: true}),
		ev(4, invocation.EventJournal, invocation.JournalEntry{Seq: 1, Helper: "r_sleep", Until: at}),
		ev(5, invocation.EventJournalResolved, map[string]any{"seq": 1, "result": nil}),
	}
	j, err := journal.Replay(first)
	require.NoError(t, err)
	require.Len(t, j.Entries, 2)
	require.True(t, j.Entries[1].Done)
	require.Zero(t, j.Generation)
	require.JSONEq(t, `{"n": 1}`, mustJSON(t, inputOf(t, j, invocation.Record{Params: json.RawMessage(`{"n": 1}`)})))

	rotated := append(first,
		ev(6, invocation.EventContinuedAsNew, map[string]any{"generation": 1, "input": map[string]any{"n": 2}}),
		ev(7, invocation.EventJournal, invocation.JournalEntry{Seq: 0, Helper: "r_run_step_v1", Key: "a", Result: map[string]any{"ok": true, "value": 2}, Done: true}))
	j, err = journal.Replay(rotated)
	require.NoError(t, err)
	require.Len(t, j.Entries, 1, "the current journal starts at the rotation")
	require.Equal(t, 1, j.Generation)
	require.Equal(t, at.Add(7*time.Second), j.Recorded[0])
	require.JSONEq(t, `{"n": 2}`, mustJSON(t, inputOf(t, j, invocation.Record{Params: json.RawMessage(`{"n": 1}`)})))
	require.Equal(t, len(rotated[4].Data), j.Bytes)

	require.Equal(t, "journal-3", journal.Key(0, 3))
	require.Equal(t, "journal-2-3", journal.Key(2, 3))
}

func inputOf(t *testing.T, j journal.Journal, rec invocation.Record) any {
	t.Helper()
	in, err := j.InputOf(rec)
	require.NoError(t, err)
	return in
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestReplayRefusesWhatThisEngineDidNotWrite: an entry out of order or a resolution of a position
// that does not exist is an error, never a journal with a hole.
func TestReplayRefusesWhatThisEngineDidNotWrite(t *testing.T) {
	entry := func(seq int64, pos int) invocation.Event {
		b, err := json.Marshal(invocation.JournalEntry{Seq: pos, Helper: "r_sleep"})
		require.NoError(t, err)
		return invocation.Event{Seq: seq, Type: invocation.EventJournal, Data: b}
	}
	_, err := journal.Replay([]invocation.Event{entry(3, 0), entry(4, 2)})
	require.ErrorContains(t, err, "out of order")
	_, err = journal.Replay([]invocation.Event{entry(3, 0),
		{Seq: 4, Type: invocation.EventJournalResolved, Data: json.RawMessage(`{"seq": 5}`)}})
	require.ErrorContains(t, err, "journal_resolved event 4 is invalid")
	_, err = journal.Replay([]invocation.Event{{Seq: 3, Type: invocation.EventJournal, Data: json.RawMessage(`{"seq":`)}})
	require.Error(t, err)
}

// TestEventsRoundTrip: the events written for an entry replay to the same entry, keyed by its
// position and generation, behind the timeline entries collected before it.
func TestEventsRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := invocation.Record{ID: "inv_1", Attempt: 1, EngineAttempt: 2}
	pending := []invocation.Event{{Type: invocation.EventLog, Data: json.RawMessage(`{"message":"hi"}`)}}
	e := sandbox.JournalEntry{Seq: 0, Helper: "r_run_step_v1", Key: "charge", ArgsHash: "h", Input: json.Number("7"),
		Result: map[string]any{"ok": true, "value": json.Number("8")}, Done: true}
	evs, err := journal.Events(rec, 0, at, e, pending)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, invocation.EventLog, evs[0].Type, "the timeline entries go first")
	last := evs[1]
	require.Equal(t, invocation.EventJournal, last.Type)
	require.Equal(t, 2, last.EngineAttempt)
	require.Equal(t, invocation.IdempotencyKey("inv_1", "journal-0", 1, invocation.EventJournal, ""), last.IdempotencyKey)
	last.Seq, last.At = 3, at
	j, err := journal.Replay([]invocation.Event{last})
	require.NoError(t, err)
	require.Equal(t, []sandbox.JournalEntry{e}, j.Entries)
	require.Equal(t, map[int]time.Time{0: at}, j.Recorded)

	continued, err := journal.Continued(rec, 1, at, map[string]any{"n": 2}, nil)
	require.NoError(t, err)
	require.Len(t, continued, 1)
	require.Equal(t, invocation.EventContinuedAsNew, continued[0].Type)
	continued[0].Seq = 4
	j, err = journal.Replay([]invocation.Event{last, continued[0]})
	require.NoError(t, err)
	require.Empty(t, j.Entries, "a continue-as-new starts an empty journal")
	require.Equal(t, 1, j.Generation)

	_, err = journal.Events(rec, 0, at, sandbox.JournalEntry{Result: func() {}}, nil)
	require.Error(t, err, "a value JSON cannot hold is an error, not a dropped entry")
}

func TestStateSnapshot(t *testing.T) {
	require.Equal(t, map[string]any{}, journal.StateSnapshot(nil), "nothing checkpointed yet")
	got := journal.StateSnapshot([]sandbox.JournalEntry{
		{Helper: "r_run_step_v1", Key: "reserve", Done: true, Result: map[string]any{"ok": true, "value": "r1"}},
		{Helper: "r_run_step_v1", Key: "charge", Done: true, Result: map[string]any{"ok": false}},
		{Helper: "r_snapshot_v1", Done: true, Result: "after-reserve"},
		{Helper: "r_run_step_v1", Key: "ship", Done: false},
	})
	require.Equal(t, map[string]any{"completed_steps": []string{"reserve"}, "outputs": map[string]any{"reserve": "r1"},
		"checkpoint": "after-reserve"}, got)
	require.True(t, journal.IsTimer("r_sleep"))
	require.True(t, journal.IsTimer(sandbox.StepRetryHelper))
	require.False(t, journal.IsTimer("r_wait_event_v1"))
	require.True(t, journal.FirstActivation(invocation.Record{LastSeq: 2, Attempt: 1, EngineAttempt: 1}))
	require.False(t, journal.FirstActivation(invocation.Record{LastSeq: 3, Attempt: 1, EngineAttempt: 1}))
}

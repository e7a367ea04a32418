package invoke

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
)

// TestJournalOfContinuedAsNew: a continued_as_new event starts an empty journal with its generation
// and input; entries before it are not part of the current journal.
func TestJournalOfContinuedAsNew(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(seq int64, typ invocation.EventType, data any) invocation.Event {
		b, _ := json.Marshal(data)
		return invocation.Event{Seq: seq, Type: typ, Data: b, At: at.Add(time.Duration(seq) * time.Second)}
	}
	first := []invocation.Event{
		ev(3, invocation.EventJournal, journalEntry{Seq: 0, Helper: "r_run_step_v1", Key: "a", Result: map[string]any{"ok": true, "value": 1}, Done: true}),
		ev(4, invocation.EventJournal, journalEntry{Seq: 1, Helper: "r_sleep", Until: at}),
		ev(5, invocation.EventJournalResolved, map[string]any{"seq": 1, "result": nil}),
	}
	j, err := journalOf(first)
	require.NoError(t, err)
	require.Len(t, j.entries, 2)
	require.True(t, j.entries[1].Done)
	require.Zero(t, j.generation)
	require.JSONEq(t, `{"n": 1}`, mustJSON(t, j.inputOf(invocation.Record{Params: json.RawMessage(`{"n": 1}`)})))

	rotated := append(first,
		ev(6, invocation.EventContinuedAsNew, map[string]any{"generation": 1, "input": map[string]any{"n": 2}}),
		ev(7, invocation.EventJournal, journalEntry{Seq: 0, Helper: "r_run_step_v1", Key: "a", Result: map[string]any{"ok": true, "value": 2}, Done: true}))
	j, err = journalOf(rotated)
	require.NoError(t, err)
	require.Len(t, j.entries, 1, "the current journal starts at the rotation")
	require.Equal(t, 1, j.generation)
	require.Equal(t, at.Add(7*time.Second), j.recorded[0])
	require.JSONEq(t, `{"n": 2}`, mustJSON(t, j.inputOf(invocation.Record{Params: json.RawMessage(`{"n": 1}`)})))
	require.Equal(t, len(rotated[4].Data), j.bytes)

	require.Equal(t, "journal-3", journalKey(0, 3))
	require.Equal(t, "journal-2-3", journalKey(2, 3))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

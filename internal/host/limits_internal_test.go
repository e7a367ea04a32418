package host

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
)

// An attempt keeps at most maxLogEntries log entries and maxLogBytes of them, each at most
// maxLogEntryBytes; the rest are dropped and counted in one marker entry.
func TestHostLogCaps(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h := (&Env{Clock: c}).New(context.Background(), invocation.Record{ID: "inv-1", Attempt: 1})
	big := strings.Repeat("L", 100000)
	for range 100000 {
		h.Log(context.Background(), big, map[string]any{"f": big})
	}
	tl := h.Drain()
	size := 0
	for _, ev := range tl[:len(tl)-1] {
		require.Equal(t, invocation.EventLog, ev.Type)
		require.LessOrEqual(t, len(ev.Data), maxLogEntryBytes)
		size += len(ev.Data)
	}
	require.LessOrEqual(t, size, maxLogBytes)
	marker := tl[len(tl)-1]
	var m map[string]any
	require.NoError(t, json.Unmarshal(marker.Data, &m))
	kept := len(tl) - 1
	require.EqualValues(t, 100000-kept, m["dropped"])
	require.Contains(t, m["message"], " log entries dropped")
	require.Empty(t, h.Drain(), "one marker")

	// Many small entries stop at maxLogEntries.
	h = (&Env{Clock: c}).New(context.Background(), invocation.Record{ID: "inv-2", Attempt: 1})
	for range 5000 {
		h.Log(context.Background(), "x", nil)
	}
	tl = h.Drain()
	require.Len(t, tl, maxLogEntries+1)
	require.NoError(t, json.Unmarshal(tl[maxLogEntries].Data, &m))
	require.EqualValues(t, 5000-maxLogEntries, m["dropped"])
}

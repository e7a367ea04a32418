package journal_test

import (
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/journal"
	"github.com/larkrun/lark/internal/sandbox"
)

// A workflow's step is written to its log as a journal event; a later activation replays the log
// into the journal the sandbox answers completed steps from.
func Example() {
	rec := invocation.Record{ID: "inv_1", Attempt: 1, EngineAttempt: 1}
	step := sandbox.JournalEntry{Seq: 0, Helper: "r_run_step_v1", Key: "reserve", Result: map[string]any{"ok": true, "value": "r1"}, Done: true}
	evs, err := journal.Events(rec, 0, time.Now(), step, nil)
	if err != nil {
		panic(err)
	}
	j, err := journal.Replay(evs)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(j.Entries), j.Entries[0].Key, j.Entries[0].Done, evs[0].IdempotencyKey != "")
	// Output: 1 reserve true true
}

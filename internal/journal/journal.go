// Package journal is a durable workflow's journal as data: the form its entries take in the
// invocation's event log, and the replay that rebuilds the current journal from that log. A
// workflow activation replays the journal it returns (completed helper calls answer from it), so
// this is the part of the engine that decides what a crash keeps. It knows the log's events and
// the sandbox's entries, never the store: a remote worker can link it.
package journal

import (
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/sandbox"
)

// EntryOf is the persisted form of e, the Data of its journal event.
func EntryOf(e sandbox.JournalEntry) invocation.JournalEntry {
	return invocation.JournalEntry{Seq: e.Seq, Helper: e.Helper, Key: e.Key, ArgsHash: e.ArgsHash, Input: e.Input, Until: e.Until, Result: e.Result, Done: e.Done}
}

// SandboxEntry is the persisted entry j as the sandbox replays it.
func SandboxEntry(j invocation.JournalEntry) sandbox.JournalEntry {
	return sandbox.JournalEntry{Seq: j.Seq, Helper: j.Helper, Key: j.Key, ArgsHash: j.ArgsHash, Input: j.Input, Until: j.Until, Result: j.Result, Done: j.Done}
}

// Journal is a workflow's current journal, rebuilt from its event log by Replay.
type Journal struct {
	// Entries are the journal's positions in order.
	Entries []sandbox.JournalEntry
	// Recorded is when each position was recorded.
	Recorded map[int]time.Time
	// Children is the child invocation started for a pending r_invoke_v1 position.
	Children map[int]string
	// Bytes is the encoded size of the journal's events.
	Bytes int
	// Generation and Input are those of the continued_as_new event the journal starts at (0 and
	// nil for the first journal: the input is the invocation's params).
	Generation int
	Input      any
}

func empty(generation int, input any) Journal {
	return Journal{Recorded: map[int]time.Time{}, Children: map[int]string{}, Generation: generation, Input: input}
}

// Replay rebuilds a workflow's current journal from its event log (read from the record's
// JournalFrom on): journal events in order, with pending entries completed by journal_resolved
// events; a continued_as_new event starts a new, empty journal. An entry out of order or an event
// that does not decode is an error: the log is not a journal this engine wrote.
func Replay(events []invocation.Event) (Journal, error) {
	j := empty(0, nil)
	for _, ev := range events {
		var err error
		switch ev.Type {
		case invocation.EventContinuedAsNew:
			var c invocation.ContinuedAsNew
			if c, err = invocation.DecodeData[invocation.ContinuedAsNew](ev); err != nil {
				return j, fmt.Errorf("continued_as_new event %d: %w", ev.Seq, err)
			}
			j = empty(c.Generation, c.Input)
		case invocation.EventChildInvoked:
			// A child_invoked event without a seq is a function's child (informational only).
			if c, err := invocation.DecodeData[invocation.ChildInvoked](ev); err == nil && c.Seq != nil {
				j.Children[*c.Seq] = c.ChildInvocationID
			}
		case invocation.EventJournal:
			err = j.record(ev)
		case invocation.EventJournalResolved:
			err = j.resolve(ev)
		}
		if err != nil {
			return j, err
		}
	}
	return j, nil
}

// record appends the entry of journal event ev, refusing one out of order.
func (j *Journal) record(ev invocation.Event) error {
	e, err := invocation.DecodeData[invocation.JournalEntry](ev)
	if err != nil {
		return fmt.Errorf("journal event %d: %w", ev.Seq, err)
	}
	if e.Seq != len(j.Entries) {
		return fmt.Errorf("journal event %d: entry %d out of order (expected %d)", ev.Seq, e.Seq, len(j.Entries))
	}
	j.Recorded[e.Seq] = ev.At
	j.Bytes += len(ev.Data)
	j.Entries = append(j.Entries, SandboxEntry(e))
	return nil
}

// resolve completes the pending entry journal_resolved event ev resolves.
func (j *Journal) resolve(ev invocation.Event) error {
	r, err := invocation.DecodeData[invocation.JournalResolved](ev)
	if err != nil || r.Seq < 0 || r.Seq >= len(j.Entries) {
		return fmt.Errorf("journal_resolved event %d is invalid", ev.Seq)
	}
	j.Bytes += len(ev.Data)
	j.Entries[r.Seq].Done, j.Entries[r.Seq].Result = true, r.Result
	return nil
}

// InputOf is the input of the journal's run of main: the invocation's params for the first
// journal, the one given to r_continue_as_new_v1 after that.
func (j Journal) InputOf(rec invocation.Record) (any, error) {
	if j.Generation > 0 {
		return j.Input, nil
	}
	var input any
	if len(rec.Params) == 0 {
		return nil, nil
	}
	if err := invocation.DecodeJSON(rec.Params, &input); err != nil {
		return nil, fmt.Errorf("params of %s: %w", rec.ID, err)
	}
	return input, nil
}

// FirstActivation reports whether rec is a workflow's first activation, with nothing in its log
// but created and started: it has no journal to read (and a sync call's start may not even be
// durable yet).
func FirstActivation(rec invocation.Record) bool {
	return rec.LastSeq == 2 && rec.Attempt == 1 && rec.EngineAttempt == 1 && rec.JournalFrom == 0 && rec.Generation == 0
}

// IsTimer tells the journal entries that are timers: sleeps and the backoff of step retries.
func IsTimer(helper string) bool {
	return helper == "r_sleep" || helper == "r_sleep_v1" || helper == sandbox.StepRetryHelper
}

// Key names a journal position of a generation in idempotency keys (journal-<seq> in the first
// journal, journal-<generation>-<seq> after a continue-as-new).
func Key(generation, seq int) string {
	if generation == 0 {
		return fmt.Sprintf("journal-%d", seq)
	}
	return fmt.Sprintf("journal-%d-%d", generation, seq)
}

// eventKey is the idempotency key of rec's event of type t at step (003 §1.2).
func eventKey(rec invocation.Record, step string, t invocation.EventType) string {
	return invocation.IdempotencyKey(rec.ID, step, rec.Attempt, t, "")
}

// Events are the log events of one journal entry of rec: the timeline entries collected before it
// (pending: the step's attempts, retries and HTTP calls), then an event_emitted entry for each event
// the entry carries (e.Emits: the write that appends them publishes them), then the entry, whose
// idempotency key is its journal position (so writing it twice is a no-op). The entry is always
// the last event.
func Events(rec invocation.Record, generation int, now time.Time, e sandbox.JournalEntry, pending []invocation.Event) ([]invocation.Event, error) {
	if len(e.Emits) > 0 {
		seq, step := e.Seq, ""
		if e.Helper != "r_emit_v1" {
			step = e.Key
		}
		ems := make([]invocation.Emitted, len(e.Emits))
		for i, em := range e.Emits {
			ems[i] = invocation.Emitted{EventTypeID: em.TypeID, Payload: em.Payload, Seq: &seq, Step: step}
		}
		evs, err := invocation.EmittedEvents(rec, Key(generation, e.Seq), now, ems)
		if err != nil {
			return nil, err
		}
		pending = append(pending, evs...)
	}
	ev, err := invocation.Event{Type: invocation.EventJournal, At: now, EngineAttempt: rec.EngineAttempt,
		LogicalAttempt: rec.Attempt, IdempotencyKey: eventKey(rec, Key(generation, e.Seq), invocation.EventJournal)}.WithData(EntryOf(e))
	if err != nil {
		return nil, fmt.Errorf("journal entry %d: %w", e.Seq, err)
	}
	return append(pending, ev), nil
}

// Continued is the log event of r_continue_as_new_v1 (after pending, the timeline entries
// collected before it): it ends the current journal and carries the next generation's number and
// input.
func Continued(rec invocation.Record, generation int, at time.Time, input any, pending []invocation.Event) ([]invocation.Event, error) {
	ev, err := invocation.Event{Type: invocation.EventContinuedAsNew, At: at, EngineAttempt: rec.EngineAttempt, LogicalAttempt: rec.Attempt,
		IdempotencyKey: eventKey(rec, fmt.Sprintf("continue-%d", generation), invocation.EventContinuedAsNew)}.WithData(invocation.ContinuedAsNew{Generation: generation, Input: input})
	if err != nil {
		return nil, fmt.Errorf("continue-as-new input: %w", err)
	}
	return append(pending, ev), nil
}

// StateSnapshot is 000's workflow_state_snapshot, "the last checkpointed workflow state": the
// steps completed successfully among the durable entries of the current journal (in completion
// order) with their outputs, and the label of the last r_snapshot_v1 among them (`checkpoint`);
// {} when there is none yet (000: failure before the first checkpoint). Which entries are durable
// depends on checkpointing.strategy (automatic: all; manual: up to the last r_snapshot_v1 or park;
// disabled: up to the last park).
func StateSnapshot(checkpointed []sandbox.JournalEntry) map[string]any {
	names := []string{}
	outputs := map[string]any{}
	var label any
	labeled := false
	for _, j := range checkpointed {
		if !j.Done {
			continue
		}
		switch j.Helper {
		case "r_run_step_v1", "r_step_v1":
			if r, ok := j.Result.(map[string]any); ok && r["ok"] == true {
				names = append(names, j.Key)
				outputs[j.Key] = r["value"]
			}
		case "r_snapshot_v1":
			label, labeled = j.Result, true
		}
	}
	if len(names) == 0 && !labeled {
		return map[string]any{}
	}
	m := map[string]any{"completed_steps": names, "outputs": outputs}
	if labeled {
		m["checkpoint"] = label
	}
	return m
}

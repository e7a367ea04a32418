package invoke_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/store"
)

// journalSpy watches the journal writes of workflow runs: whether each one's Expect was the stored
// projection (the store's fast path) and how many journal entries it carried, and, once, appends a
// foreign event just ahead of one, as a concurrent writer would.
type journalSpy struct {
	store.Store
	mu        sync.Mutex
	writes    int
	current   []bool // per journal write: Expect matched the stored last_seq
	entries   []int  // per journal write: its journal entries
	interpose int    // the journal write (1-based) ahead of which a foreign event is appended
	// oneByOne makes Enqueue return only once the writer has run the write, so that no later
	// entry joins it (one write per entry, as the chain tests expect).
	oneByOne bool
	// gate, when set, holds the writer after the first enqueued write (which Enqueue returns once
	// run) until it is closed: entries enqueued meanwhile join the next write.
	gate     chan struct{}
	enqueued int
	// replay runs each enqueued write once in a transaction that is rolled back, before the write
	// itself: a batch run again after a closure of it failed (groupcommit.Options.LazySavepoints).
	replay bool
}

// errRolledBack rolls back the first run of a write the spy replays.
var errRolledBack = errors.New("rolled back, to be run again")

// newSpiedEnv is a new env whose service writes through spy, over the env's store.
func newSpiedEnv(t *testing.T, spy *journalSpy) *env {
	e := newEnv(t)
	spy.Store = e.store
	e.svc.Close()
	e.cfg.Store = spy
	e.svc = invoke.NewService(e.cfg)
	return e
}

func (s *journalSpy) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(spyTx{tx, s}) })
}

func (s *journalSpy) Enqueue(ctx context.Context, fn func(store.Tx) error) func() error {
	s.mu.Lock()
	gated := s.gate != nil
	s.mu.Unlock()
	if s.replay {
		err := s.Store.Update(ctx, func(tx store.Tx) error {
			if err := fn(spyTx{tx, s}); err != nil {
				return err
			}
			return errRolledBack
		})
		if !errors.Is(err, errRolledBack) {
			return func() error { return err }
		}
	}
	taken := make(chan struct{})
	var once sync.Once
	wait := s.Store.Enqueue(ctx, func(tx store.Tx) error {
		err := fn(spyTx{tx, s})
		once.Do(func() { close(taken) })
		s.mu.Lock()
		gate := s.gate
		s.gate = nil
		s.mu.Unlock()
		if gate != nil {
			<-gate // the writer stays busy with this write: the next one waits to be taken
		}
		return err
	})
	s.mu.Lock()
	first := s.enqueued == 0
	s.enqueued++
	s.mu.Unlock()
	if s.oneByOne || first && gated {
		<-taken
	}
	return wait
}

type spyTx struct {
	store.Tx
	s *journalSpy
}

func (t spyTx) Append(req store.AppendRequest) (invocation.Record, []invocation.Event, error) {
	tenantID, id, events, opt := req.TenantID, req.InvocationID, req.Events, req.AppendOptions
	entries := 0
	for _, e := range events {
		if e.Type == invocation.EventJournal {
			entries++
		}
	}
	if entries > 0 {
		t.s.mu.Lock()
		t.s.writes++
		n := t.s.writes
		t.s.mu.Unlock()
		if n == t.s.interpose {
			foreign := invocation.Event{Type: invocation.EventLog, Data: []byte(`{"message":"concurrent"}`), At: time.Now(),
				EngineAttempt: 1, LogicalAttempt: 1, IdempotencyKey: "foreign"}
			if _, _, err := t.Tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: []invocation.Event{foreign}}); err != nil {
				return invocation.Record{}, nil, err
			}
		}
		cur, err := t.Invocation(tenantID, id)
		if err != nil {
			return cur, nil, err
		}
		t.s.mu.Lock()
		t.s.current = append(t.s.current, opt.Expect != nil && opt.Expect.LastSeq == cur.LastSeq)
		t.s.entries = append(t.s.entries, entries)
		t.s.mu.Unlock()
	}
	return t.Tx.Append(req)
}

// TestJournalWritesExpectTheirProjection: with checkpointing automatic, each journal write passes
// the projection it expects: the first of a run's chain of writes the claim's record (again after a
// park and resume), each later one the projection its predecessor left; so the store skips reading
// and decoding the record. A first write that something else got ahead of falls back to the stored
// projection, and the chain goes on from what it left.
func TestJournalWritesExpectTheirProjection(t *testing.T) {
	t.Parallel()
	spy := &journalSpy{interpose: 1, oneByOne: true}
	e := newSpiedEnv(t, spy)
	r, evs := runSpySource(t, e, "expect")
	// a (behind the foreign event), b, c, d, the sleep's timer entry, then e after the resume.
	require.Equal(t, []bool{false, true, true, true, true, true}, spy.current)
	require.Equal(t, r.LastSeq, evs[len(evs)-1].Seq, "the projection followed the log")
	stored, err := e.store.Invocation(context.Background(), "acme", r.ID)
	require.NoError(t, err)
	require.Equal(t, r, stored)
}

// TestJournalWriteRunAgainExpectsWhatItFirstDid: a journal write run again, its first run rolled
// back (its batch replayed), expects the projection its first run expected, not the one that run
// left: the chain of a run's writes survives replays, and the log holds each entry once.
func TestJournalWriteRunAgainExpectsWhatItFirstDid(t *testing.T) {
	t.Parallel()
	r, evs := runSpySource(t, newSpiedEnv(t, &journalSpy{replay: true, oneByOne: true}), "replayed")
	require.JSONEq(t, `{"ok":true}`, string(r.Result))
	entries := 0
	for _, ev := range evs {
		if ev.Type == invocation.EventJournal {
			entries++
		}
	}
	require.Equal(t, 6, entries, "a, b, c, d, the sleep's timer and e, each once")
	require.Equal(t, r.LastSeq, evs[len(evs)-1].Seq, "the projection followed the log")
}

// runSpySource runs journalSpySource as workflow name to its end (its sleep passed on e's clock)
// and returns its record, which must have succeeded, and its log.
func runSpySource(t *testing.T, e *env, name string) (invocation.Record, []invocation.Event) {
	t.Helper()
	e.workflow(name, journalSpySource)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + name + ".v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, e.Drain())
	e.clock.Advance(time.Minute)
	require.Equal(t, 1, e.Drain())
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	_, evs, err := e.svc.Events(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	return r, evs
}

const journalSpySource = `
def s(ctx, input):
    return input

def main(ctx, input):
    r_run_step_v1("a", s, 1)
    r_run_step_v1("b", s, 2)
    r_run_step_v1("c", s, 3)
    r_run_step_v1("d", s, 4)
    r_sleep(60000)
    r_run_step_v1("e", s, 5)
    return {"ok": True}
`

// TestChainedJournalWriteAfterAConflict: a journal write whose predecessor in the chain did not
// leave what it expects (here: something else appended in between) fails, and so does every later
// write of the chain; the run ends with a retryable journal error instead of leaving a hole in its
// journal, and the retry replays the durable steps and records the rest once.
func TestChainedJournalWriteAfterAConflict(t *testing.T) {
	t.Parallel()
	spy := &journalSpy{interpose: 3, oneByOne: true}
	e := newSpiedEnv(t, spy)
	e.workflow("conflict", journalSpySource, func(b map[string]any) {
		b["traits"].(map[string]any)["retry"] = map[string]any{"max_attempts": 2, "initial_delay_ms": 0}
	})
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "conflict.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	for range 3 {
		e.Drain()
		e.clock.Advance(time.Minute)
	}
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	require.Equal(t, 2, r.Attempt, "the first attempt ended with the journal error")
	_, evs, err := e.svc.Events(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	var journal []string
	retried := false
	for _, ev := range evs {
		if ev.Type == invocation.EventJournal {
			journal = append(journal, string(ev.Data))
		}
		if ev.Type == invocation.EventRetryScheduled {
			require.Contains(t, string(ev.Data), "journal: ")
			retried = true
		}
	}
	require.True(t, retried)
	require.Len(t, journal, 6, "a, b, c, d, the timer and e, each journaled once: %v", journal)
}

// TestJournalEntriesJoinAQueuedWrite: entries a run records while its last journal write still
// waits for the writer join that write (host.Host.EnqueueJournal): here the writer is held on the
// first (a), so b, c, d and the sleep's timer entry go in one Append, which expects exactly what a
// left; every entry is journaled once and the run goes on as usual.
func TestJournalEntriesJoinAQueuedWrite(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	spy := &journalSpy{gate: gate}
	e := newSpiedEnv(t, spy)
	e.workflow("join", journalSpySource)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: wfPrefix + "join.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	time.AfterFunc(200*time.Millisecond, func() { close(gate) })
	require.Equal(t, 1, e.Drain())
	e.clock.Advance(time.Minute)
	require.Equal(t, 1, e.Drain())
	r, err := e.svc.Get(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, r.Status, r.Error)
	spy.mu.Lock()
	require.Equal(t, []int{1, 4, 1}, spy.entries, "a; b, c, d and the timer, joined; e after the resume")
	require.Equal(t, []bool{true, true, true}, spy.current)
	spy.mu.Unlock()
	_, evs, err := e.svc.Events(context.Background(), bob, st.Record.ID)
	require.NoError(t, err)
	seqs := []int{}
	for _, ev := range evs {
		if ev.Type == invocation.EventJournal {
			j, err := invocation.DecodeData[invocation.JournalEntry](ev)
			require.NoError(t, err)
			seqs = append(seqs, j.Seq)
		}
	}
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, seqs, "each entry journaled once, in order")
}

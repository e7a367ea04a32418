package dagrun

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/dag"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// Task states (004 §4). A task is pending until its upstream tasks have ended, queued (its child
// invocation created; the child's own status says whether it waits, runs or waits for a retry)
// until its child ends, then succeeded, failed, skipped (an upstream task did not succeed) or
// cancelled (the run was canceled first).
const (
	StatePending   = "PENDING"
	StateQueued    = "QUEUED"
	StateSucceeded = "SUCCEEDED"
	StateFailed    = "FAILED"
	StateSkipped   = "SKIPPED"
	StateCancelled = "CANCELLED"
)

// Task is one task of a run as its log tells it.
type Task struct {
	Planned dag.PlannedTask
	State   string
	// Child is the task's child invocation, once queued; Ended is its end as the run was told of
	// it (task_child_ended), not yet decided.
	Child    string
	QueuedAt time.Time
	Ended    *invocation.TaskChildEnded
	// End is the task's terminal event, once it ended, and the run's logical attempt it ended in.
	End        *invocation.TaskEnded
	endAttempt int
}

// Terminal reports whether the task has ended.
func (t *Task) Terminal() bool {
	switch t.State {
	case StateSucceeded, StateFailed, StateSkipped, StateCancelled:
		return true
	}
	return false
}

// Run is a DAG run's state: its plan and its tasks, in the plan's order.
type Run struct {
	Planned     bool
	Plan        dag.RunPlan
	Fingerprint string
	Tasks       []*Task
	byID        map[string]*Task
	// LastSeq is the last event of the log the state was read from, LastKey its idempotency key.
	LastSeq int64
	LastKey string
}

// Task returns the task id.
func (r *Run) Task(id string) *Task { return r.byID[id] }

// Replay rebuilds a run's state from its log, for the run's logical attempt: a run retried after
// it failed (the retry control action) runs again the tasks that did not succeed, and keeps the
// outputs of those that did.
func Replay(events []invocation.Event, attempt int) (*Run, error) {
	r := &Run{byID: map[string]*Task{}}
	if err := r.applyAll(events); err != nil {
		return nil, err
	}
	for _, t := range r.Tasks {
		if t.Terminal() && t.State != StateSucceeded && t.endAttempt < attempt {
			t.State, t.Child, t.End = StatePending, "", nil
		}
	}
	return r, nil
}

// apply folds one event into the state.
func (r *Run) apply(e invocation.Event) error {
	switch e.Type {
	case invocation.EventDAGPlanned:
		p, err := invocation.DecodeData[invocation.DAGPlanned](e)
		if err != nil {
			return err
		}
		return r.setPlan(p)
	case invocation.EventTaskQueued:
		q, err := invocation.DecodeData[invocation.TaskQueued](e)
		if t := r.byID[q.TaskID]; err == nil && t != nil {
			t.State, t.Child, t.Ended, t.QueuedAt = StateQueued, q.ChildInvocationID, nil, e.At
		}
		return err
	case invocation.EventTaskChildEnded:
		c, err := invocation.DecodeData[invocation.TaskChildEnded](e)
		if t := r.byID[c.TaskID]; err == nil && t != nil && t.State == StateQueued && t.Child == c.ChildInvocationID {
			t.Ended = &c
		}
		return err
	case invocation.EventTaskSucceeded, invocation.EventTaskFailed, invocation.EventTaskSkipped, invocation.EventTaskCancelled:
		end, err := invocation.DecodeData[invocation.TaskEnded](e)
		if t := r.byID[end.TaskID]; err == nil && t != nil {
			t.State, t.End, t.Ended, t.endAttempt = endState(e.Type), &end, nil, e.LogicalAttempt
		}
		return err
	}
	return nil
}

func (r *Run) setPlan(p invocation.DAGPlanned) error {
	plan, err := plans.get(p)
	if err != nil {
		return err
	}
	r.Plan = plan
	r.Planned, r.Fingerprint = true, p.Fingerprint
	r.Tasks = make([]*Task, 0, len(r.Plan.Tasks))
	for _, pt := range r.Plan.Tasks {
		t := &Task{Planned: pt, State: StatePending}
		r.Tasks = append(r.Tasks, t)
		r.byID[pt.ID] = t
	}
	return nil
}

// endState is the state a task's terminal event leaves it in.
func endState(t invocation.EventType) string {
	switch t {
	case invocation.EventTaskSucceeded:
		return StateSucceeded
	case invocation.EventTaskFailed:
		return StateFailed
	case invocation.EventTaskSkipped:
		return StateSkipped
	}
	return StateCancelled
}

// Done reports whether every task has ended.
func (r *Run) Done() bool {
	for _, t := range r.Tasks {
		if !t.Terminal() {
			return false
		}
	}
	return true
}

// plans keeps decoded plans by fingerprint: a plan is content-addressed (its fingerprint is the
// SHA-256 of its canonical JSON), so every run of a DAG version for one partition shares one, and
// an activation does not decode the plan again from its log.
var plans = &planCache{m: map[string]dag.RunPlan{}}

// planCacheMax bounds the plans kept (reaching it empties the cache).
const planCacheMax = 1024

type planCache struct {
	mu sync.Mutex
	m  map[string]dag.RunPlan
}

// get decodes p's plan, or returns the one decoded before under its fingerprint. The tasks are
// shared read-only: the run's state copies each into its Task.
func (c *planCache) get(p invocation.DAGPlanned) (dag.RunPlan, error) {
	c.mu.Lock()
	plan, ok := c.m[p.Fingerprint]
	c.mu.Unlock()
	if ok && p.Fingerprint != "" {
		return plan, nil
	}
	if err := json.Unmarshal(p.Plan, &plan); err != nil {
		return plan, err
	}
	c.mu.Lock()
	if len(c.m) >= planCacheMax {
		c.m = map[string]dag.RunPlan{}
	}
	c.m[p.Fingerprint] = plan
	c.mu.Unlock()
	return plan, nil
}

// runCache keeps, per run, its state as this process last read or wrote it, so that the next
// activation reads and applies only the events after it, and a child's end (ChildEnded) none at
// all when the log's head is still where that state left it. Each user gets a copy.
type runCache struct {
	mu sync.Mutex
	m  map[string]cachedRun
}

// cachedRun is a run's committed state and, perhaps, a later tentative one: written by a
// transaction not yet known to have committed (a child's closing one, whose group commit holds its
// siblings' too). A state carries the run's record at its LastSeq when it is known.
type cachedRun struct {
	attempt   int
	run       *Run
	rec       *invocation.Record
	tentative *Run
	trec      *invocation.Record
}

// runCacheMax bounds the runs kept (reaching it empties the cache).
const runCacheMax = 4096

// load is the state of run rec, from its log (read: the events after a seq): the events after the
// committed state cached for it (of the same logical attempt), else all of them. A nil Run means
// the log could not be read (err); a Run with an error, a log that does not replay. The caller owns
// the Run.
func (g *Engine) load(rec invocation.Record, read func(after int64) ([]invocation.Event, error)) (*Run, error) {
	c := &g.runs
	c.mu.Lock()
	cached, ok := c.m[rec.ID]
	c.mu.Unlock()
	if !ok || cached.attempt != rec.Attempt {
		evs, err := read(0)
		if err != nil {
			return nil, err
		}
		run, err := Replay(evs, rec.Attempt)
		if err != nil {
			return &Run{byID: map[string]*Task{}}, err
		}
		return run, nil
	}
	run := cached.run.clone()
	if run.LastSeq == rec.LastSeq {
		return run, nil // nothing since
	}
	evs, err := read(run.LastSeq)
	if err != nil {
		return nil, err
	}
	if err := run.applyAll(evs); err != nil {
		return &Run{byID: map[string]*Task{}}, err
	}
	return run, nil
}

// at is a copy of run id's cached state whose log ends exactly at head (its last seq and the key
// of its last event), with the run's record there; ok is false when none is.
func (c *runCache) at(id string, head store.Head) (*Run, invocation.Record, bool) {
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	for _, st := range []struct {
		run *Run
		rec *invocation.Record
	}{{e.tentative, e.trec}, {e.run, e.rec}} {
		if ok && st.run != nil && st.rec != nil && st.run.LastSeq == head.LastSeq && st.run.LastKey == head.LastKey {
			return st.run.clone(), *st.rec, true
		}
	}
	return nil, invocation.Record{}, false
}

// applyAll folds events that follow the state's LastSeq into it.
func (r *Run) applyAll(evs []invocation.Event) error {
	for _, e := range evs {
		r.LastSeq, r.LastKey = e.Seq, e.IdempotencyKey
		if err := r.apply(e); err != nil {
			return fmt.Errorf("dag run event %d (%s): %w", e.Seq, e.Type, err)
		}
	}
	return nil
}

// put caches run (a committed state, which the caller no longer changes; rec: the run's record at
// its LastSeq, when known), unless a later state of the same attempt is cached; a tentative state
// no later than it is dropped.
func (c *runCache) put(id string, run *Run, rec *invocation.Record, attempt int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= runCacheMax {
		c.m = map[string]cachedRun{}
	}
	e, ok := c.m[id]
	if !ok || e.attempt != attempt {
		c.m[id] = cachedRun{run: run, rec: rec, attempt: attempt}
		return
	}
	if e.run.LastSeq < run.LastSeq {
		e.run, e.rec = run, rec // the writes of one group commit finish in any order
	}
	if e.tentative != nil && e.tentative.LastSeq <= e.run.LastSeq {
		e.tentative, e.trec = nil, nil
	}
	c.m[id] = e
}

// tentative caches run and its record rec, written by a transaction that has not committed,
// beside the committed state of the same attempt (at uses it only while the log's head is where
// it left it: a transaction rolled back leaves another head).
func (c *runCache) tentative(id string, run *Run, rec invocation.Record, attempt int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[id]; ok && e.attempt == attempt && e.run.LastSeq < run.LastSeq {
		e.tentative, e.trec = run, &rec
		c.m[id] = e
	}
}

// drop forgets run id (it ended).
func (c *runCache) drop(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// clone copies r deeply enough for an activation to change its tasks' states.
func (r *Run) clone() *Run {
	out := *r
	out.byID = make(map[string]*Task, len(r.Tasks))
	out.Tasks = make([]*Task, len(r.Tasks))
	for i, t := range r.Tasks {
		c := *t
		out.Tasks[i] = &c
		out.byID[c.Planned.ID] = &c
	}
	return &out
}

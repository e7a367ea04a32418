package dagrun

import (
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// ChildEnded decides, in the closing transaction of child (the child invocation of one of a DAG
// run's tasks, just ended), its task's end and what that end makes ready — the tasks it skips and
// those it queues, their children created in tx — appended to the run's log. The run stays
// suspended, or is made runnable when every task has ended (its activation then records the
// run's outcome). So a task costs its child's lifecycle and no activation of the run.
//
// A run is decided so only when it is suspended (its row locked: no activation of it runs, and
// the closing transactions of its other children wait for this one) and when nothing in the
// decision needs its activation: the task and the tasks it readies have no checks and the task
// names no asset (the blob store is never touched inside a transaction), and no task it readies
// reads an asset's output. Otherwise handled is false and nothing was written: the caller tells
// the run of the end (task_child_ended) for its activation to decide. docs/dag.md, "Runs".
func (g *Engine) ChildEnded(tx store.Tx, child invocation.Record, now time.Time) (handled bool, err error) {
	head, err := tx.InvocationHead(child.TenantID, child.ParentID)
	if err != nil || head.Status != invocation.StatusSuspended {
		return false, nil // gone, running or ended: the caller's path reads it again and decides
	}
	run, rec, ok := g.runs.at(child.ParentID, head)
	if !ok {
		if rec, err = tx.Invocation(child.TenantID, child.ParentID); err != nil {
			return false, err
		}
		run, err = g.load(rec, func(after int64) ([]invocation.Event, error) { return tx.InvocationLog(rec.ID, after) })
		if run == nil {
			return false, err
		}
	}
	t := run.taskOf(child.ID)
	if err != nil || !run.Planned || t == nil || len(t.Planned.Checks) > 0 || t.Planned.AssetKey != "" {
		return false, nil
	}
	a := g.newActivation(tx.Context(), txReader{tx, g.cfg.Catalog}, rec, run, now)
	a.inTx = true
	a.settleChild(t, child)
	a.advance()
	if a.deferred || a.err != nil || len(a.effects) > 0 {
		return false, nil
	}
	for _, s := range a.spawned {
		if _, err := g.cfg.Spawn.Create(tx, s.rec, false, s.def, now); err != nil {
			return false, err
		}
	}
	req := store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: a.events,
		AppendOptions: store.AppendOptions{Expect: &rec}} // current: the head was read under the lock
	var final invocation.Record
	var appended []invocation.Event
	if run.Done() {
		final, appended, err = store.AppendWaking(tx, req, now) // its activation records the outcome
	} else {
		final, appended, err = tx.Append(req)
	}
	if err != nil {
		return false, err
	}
	run.LastSeq = final.LastSeq
	if n := len(appended); n > 0 && appended[n-1].Seq == final.LastSeq {
		run.LastKey = appended[n-1].IdempotencyKey
		g.runs.tentative(rec.ID, run.clone(), final, rec.Attempt)
	} else {
		run.LastKey = "" // unknown: at never matches it
	}
	tx.AfterCommit(func() {
		g.runs.put(rec.ID, run, &final, rec.Attempt)
		a.report()
	})
	return true, nil
}

// taskOf is the queued task whose child is id (nil: none).
func (r *Run) taskOf(id string) *Task {
	for _, t := range r.Tasks {
		if t.State == StateQueued && t.Child == id {
			return t
		}
	}
	return nil
}

package invoke

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/dagrun"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/spawn"
	"github.com/larkrun/lark/internal/store"
)

// Action is a control action of POST /invocations/{id}:control.
type Action string

// Control actions available for functions (suspend/resume come with workflows).
const (
	ActionCancel  Action = "cancel"
	ActionRetry   Action = "retry"
	ActionReplay  Action = "replay"
	ActionSuspend Action = "suspend" // workflows only: running → suspended until resumed
	ActionResume  Action = "resume"  // workflows only: a suspended workflow runs again now
)

// Control applies cancel, retry or replay (000's state machine; any other action in the current
// state answers 409). Replay returns the new invocation and created=true.
func (s *Service) Control(ctx context.Context, sc auth.SecurityContext, id string, action Action) (rec invocation.Record, created bool, err error) {
	if !sc.Has(auth.RoleOperator) {
		return rec, false, problem.Forbidden("controlling invocations needs the operator role")
	}
	cur, err := s.Get(ctx, sc, id)
	if err != nil {
		return cur, false, err
	}
	switch action {
	case ActionCancel:
		rec, err = s.cancel(ctx, cur)
		return rec, false, err
	case ActionRetry:
		now := s.cfg.Clock.Now()
		rec, err = s.transition(ctx, cur, action, invocation.EventRequeued, store.Scheduling{AvailableAt: &now}, nil)
		return rec, false, err
	case ActionReplay:
		rec, err = s.replay(ctx, sc, cur)
		return rec, err == nil, err
	case ActionSuspend, ActionResume:
		if !strings.Contains(cur.EntrypointID, "~x.core.serverless.workflow.") {
			return cur, false, problem.Conflict("invalid_transition", "%s applies to workflows; invocation %s is a function invocation", action, id).
				With("current_status", cur.Status).With("action", action)
		}
		if action == ActionSuspend {
			// The run in flight is stopped; its outcome is not applied (lease released). On resume the
			// journal replays: completed steps are not repeated, the step in flight runs again.
			rec, err = s.transition(ctx, cur, action, invocation.EventSuspended, store.Scheduling{}, nil)
			if err == nil {
				s.stop(id)
			}
			return rec, false, err
		}
		return s.resume(ctx, cur)
	default:
		return cur, false, problem.Validation("unknown action", []problem.Issue{{Path: "$.action", Code: "INVALID_VALUE",
			Message: fmt.Sprintf("unknown action %q: use cancel, retry or replay", action)}})
	}
}

// cancel cancels cur: canceled, its run in flight stopped, and, for a workflow, its completed
// steps compensated by a run queued in the same transaction (execution's KindCompensate) and its
// on_cancel handler started. With both, the handler is created held and the compensation run
// makes it runnable once the step compensations have ended (workflow.Engine.CompensateCanceled),
// so the workflow is compensated only after both.
func (s *Service) cancel(ctx context.Context, cur invocation.Record) (invocation.Record, error) {
	if _, d, err := s.catalog.Lookup(ctx, cur.EntrypointRef); err == nil && d.IsDAG() {
		return s.cancelDAG(ctx, cur)
	}
	var then func(store.Tx, invocation.Record, time.Time) (invocation.Record, error)
	handler, hd, withHandler := s.exec.Workflows().CancelHandler(ctx, cur)
	compensate := strings.Contains(cur.EntrypointID, "~x.core.serverless.workflow.") && (cur.Status != invocation.StatusQueued || cur.StartedAt != nil)
	if withHandler || compensate {
		then = func(tx store.Tx, out invocation.Record, now time.Time) (invocation.Record, error) {
			if compensate {
				// The workflow's completed steps are compensated by a run that replays its journal
				// (workflow.Engine.CompensateCanceled), queued in this transaction.
				if err := tx.SetScheduling(out.TenantID, out.ID, store.Scheduling{AvailableAt: &now}); err != nil {
					return out, err
				}
			}
			if !withHandler {
				return out, nil
			}
			return s.startCompensation(tx, out, handler, hd, now, !compensate)
		}
	}
	rec, err := s.transition(ctx, cur, ActionCancel, invocation.EventCanceled, store.Scheduling{}, then)
	if err == nil {
		s.stop(cur.ID)
		s.exec.Workflows().DropLive(cur.ID)
	}
	return rec, err
}

// cancelDAG cancels DAG run cur (004 §19): in the cancel's transaction its tasks that have not
// ended are cancelled and their children canceled; then the children running here are stopped.
func (s *Service) cancelDAG(ctx context.Context, cur invocation.Record) (invocation.Record, error) {
	events, err := store.EventsAfter(ctx, s.cfg.Store, cur.TenantID, cur.ID, 0)
	if err != nil {
		return cur, problem.Internal(err)
	}
	var children []string
	rec, err := s.transition(ctx, cur, ActionCancel, invocation.EventCanceled, store.Scheduling{},
		func(tx store.Tx, out invocation.Record, now time.Time) (invocation.Record, error) {
			var err error
			if children, err = dagrun.Cancel(tx, out, events, now); err != nil {
				return out, err
			}
			return tx.Invocation(out.TenantID, out.ID)
		})
	if err == nil {
		s.stop(cur.ID)
		for _, id := range children {
			s.stop(id)
		}
	}
	return rec, err
}

// startCompensation moves a canceled workflow to compensating and creates its handler (d: its
// definition), inside the cancel's transaction: runnable now when run, else held until the
// workflow's step compensations have ended.
func (s *Service) startCompensation(tx store.Tx, cur, handler invocation.Record, d catalog.Definition, now time.Time, run bool) (invocation.Record, error) {
	data, err := invocation.EncodeData(invocation.CompensationStarted{Trigger: "cancellation", HandlerInvocationID: handler.ID, Handler: handler.EntrypointID})
	if err != nil {
		return cur, err
	}
	ev := invocation.Event{Type: invocation.EventCompensationStarted, Data: data, At: now, LogicalAttempt: cur.Attempt,
		IdempotencyKey: invocation.IdempotencyKey(cur.ID, "on_cancel", cur.Attempt, invocation.EventCompensationStarted, "")}
	out, _, err := tx.Append(store.AppendRequest{TenantID: cur.TenantID, InvocationID: cur.ID, Events: []invocation.Event{ev}})
	if err != nil {
		return cur, err
	}
	if run {
		_, err = s.spawn.Create(tx, handler, false, d, now)
	} else {
		_, err = s.spawn.CreateHeld(tx, handler, now)
	}
	return out, err
}

// resume makes a suspended workflow runnable now: the dispatcher claims it and records resumed
// (suspended → running) as it starts the run. A workflow resumed while its timer is not yet due
// replays and parks on the timer again.
func (s *Service) resume(ctx context.Context, cur invocation.Record) (invocation.Record, bool, error) {
	var out invocation.Record
	var perr error
	err := s.writer.Update(ctx, func(tx store.Tx) error {
		now := s.cfg.Clock.Now()
		r, err := tx.Invocation(cur.TenantID, cur.ID)
		if err != nil {
			return err
		}
		if r.Status != invocation.StatusSuspended {
			perr = problem.Conflict("invalid_transition", "resume is allowed from suspended; invocation %s is %s", cur.ID, r.Status).
				With("current_status", r.Status).With("action", ActionResume)
			return perr
		}
		data, err := invocation.EncodeData(invocation.Control{Action: string(ActionResume)})
		if err != nil {
			return err
		}
		ev := invocation.Event{Type: invocation.EventSignalReceived, Data: data, At: now, LogicalAttempt: r.Attempt,
			IdempotencyKey: invocation.IdempotencyKey(r.ID, fmt.Sprintf("resume-request-%d", r.LastSeq), r.Attempt, invocation.EventSignalReceived, "")}
		out, _, err = tx.Append(store.AppendRequest{TenantID: r.TenantID, InvocationID: r.ID, Events: []invocation.Event{ev}, AppendOptions: store.AppendOptions{Schedule: &store.Scheduling{AvailableAt: &now}}})
		return err
	})
	if perr != nil {
		return cur, false, perr
	}
	if err != nil {
		return cur, false, problem.Internal(err)
	}
	return out, false, nil
}

// transition appends one status event (refused with 409 when the state machine does not allow it)
// and sets the queue state, in one transaction.
// then, if set, continues inside the same transaction (e.g. starting a compensation).
func (s *Service) transition(ctx context.Context, cur invocation.Record, action Action, t invocation.EventType, next store.Scheduling,
	then func(store.Tx, invocation.Record, time.Time) (invocation.Record, error)) (invocation.Record, error) {
	var out invocation.Record
	err := s.writer.Update(ctx, func(tx store.Tx) error {
		now := s.cfg.Clock.Now()
		data, err := invocation.EncodeData(invocation.Control{Action: string(action)})
		if err != nil {
			return err
		}
		ev := invocation.Event{Type: t, Data: data, At: now, LogicalAttempt: cur.Attempt,
			IdempotencyKey: invocation.IdempotencyKey(cur.ID, "control", cur.Attempt, t, "")}
		var appended []invocation.Event
		if out, appended, err = tx.Append(store.AppendRequest{TenantID: cur.TenantID, InvocationID: cur.ID, Events: []invocation.Event{ev}, AppendOptions: store.AppendOptions{Schedule: &next}}); err != nil {
			return err
		}
		if len(appended) == 0 {
			return &invocation.TransitionError{From: out.Status, Event: t}
		}
		if out.Status.Terminal() {
			if err := s.completer.Ended(tx, out, now); err != nil {
				return err
			}
		}
		if then != nil {
			out, err = then(tx, out, now)
			return err
		}
		return nil
	})
	var te *invocation.TransitionError
	if errors.As(err, &te) {
		return cur, problem.Conflict("invalid_transition", "%s is not allowed while invocation %s is %s", action, cur.ID, te.From).
			With("current_status", te.From).With("action", action)
	}
	if err != nil {
		return cur, problem.Internal(err)
	}
	return out, nil
}

// replay starts a new async invocation with the same params and pinned version; it never reads the
// response cache.
func (s *Service) replay(ctx context.Context, sc auth.SecurityContext, cur invocation.Record) (invocation.Record, error) {
	switch cur.Status {
	case invocation.StatusSucceeded, invocation.StatusFailed, invocation.StatusDeadLettered:
	default:
		return cur, problem.Conflict("invalid_transition", "replay is allowed from succeeded, failed or dead_lettered; invocation %s is %s", cur.ID, cur.Status).
			With("current_status", cur.Status).With("action", ActionReplay)
	}
	e, err := s.catalog.ByRef(ctx, cur.EntrypointRef)
	if err == nil && !InvocationViewer(sc).All && !e.VisibleTo(entrypoint.Viewer{TenantID: sc.TenantID, SubjectID: sc.SubjectID}) {
		// Its starter may see the invocation, but the entrypoint went private since: replay runs its
		// code again, which only those who can invoke it may do.
		return cur, problem.NotFound("entrypoint %s not found", cur.EntrypointID)
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && !e.Status.Callable()) {
		return cur, problem.New(problem.TypeNotActive, "the entrypoint version %s this invocation ran is no longer callable", cur.EntrypointID)
	}
	if err != nil {
		return cur, problem.Internal(err)
	}
	d, err := s.catalog.Definition(e)
	if err != nil {
		return cur, problem.Internal(err)
	}
	now := s.cfg.Clock.Now()
	rec := s.spawn.NewRecord(e, d, cur.TenantID, sc.SubjectID, invocation.ModeAsync, cur.Params, now)
	rec.CorrelationID, rec.Replay = cur.CorrelationID, cur.ID
	rec.TraceID, rec.SpanID = spawn.RecordIDs(ctx, "")
	var created invocation.Record
	if err := s.writer.Update(ctx, func(tx store.Tx) error {
		var err error
		created, err = s.spawn.Create(tx, rec, false, d, now)
		return err
	}); err != nil {
		return cur, problem.Internal(err)
	}
	return created, nil
}

// stop stops the execution of invocation id wherever it runs, once a control action that ends its
// lease has committed: here at once, on the other nodes through Config.AnnounceStop (and, should
// that notification be lost, through their lease checks, execution.Executor.WatchLeases).
func (s *Service) stop(id string) {
	s.exec.Cancel(id)
	if s.cfg.AnnounceStop != nil {
		s.cfg.AnnounceStop(id)
	}
}

// StopLocal stops the executions of ids running in this process: a control action taken on
// another node (wakeup.Hub's stops).
func (s *Service) StopLocal(ids []string) {
	for _, id := range ids {
		s.exec.Cancel(id)
	}
}

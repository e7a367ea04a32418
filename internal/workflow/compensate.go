package workflow

import (
	"context"
	"errors"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/complete"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/journal"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
)

// workflowProgram compiles a workflow once per version (the function cache compiles functions).
func (s *Engine) workflowProgram(e entrypoint.Entrypoint, d catalog.Definition) (*sandbox.Program, *sandbox.Error) {
	s.mu.Lock()
	p, ok := s.workflows[e.ID]
	s.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := sandbox.CompileWorkflow("main.star", d.Implementation.Code.Source)
	if err != nil {
		var se *sandbox.Error
		if errors.As(err, &se) {
			return nil, se
		}
		return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: "compile: " + err.Error()}
	}
	s.mu.Lock()
	if len(s.workflows) >= programCacheMax {
		s.workflows = map[string]*sandbox.Program{}
	}
	s.workflows[e.ID] = p
	s.mu.Unlock()
	return p, nil
}

// CompensateCanceled compensates a canceled workflow (STARLARK_RUNTIME.md: compensation on cancel):
// it replays the journal without running or waiting on anything beyond it (sandbox CancelAtEnd),
// so no step runs again, then calls the compensate_fn of every completed r_step_v1 step in reverse
// completion order and records each outcome. The status stays canceled, or compensating when the
// workflow has an on_cancel handler: that handler, created held by the cancel, is made runnable in
// the transaction that records the outcomes, so the workflow is compensated (when the handler
// ends) only after both. Claimed with its own lease; if this process dies meanwhile, the lease
// expires and the compensations run again (at-least-once, like steps).
func (s *Engine) CompensateCanceled(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d catalog.Definition) error {
	h := s.cfg.Host.NewCompensation(rec)
	logEvents, err := s.JournalEventsOf(ctx, rec)
	if err != nil {
		return err
	}
	wj, jerr := journal.Replay(logEvents)
	input, ierr := wj.InputOf(rec)
	prog, perr := s.workflowProgram(e, d)
	switch {
	case jerr != nil || ierr != nil:
		jerr = errors.Join(jerr, ierr)
		h.Add(invocation.EventLog, invocation.Log{Message: "step compensations skipped: workflow journal unreadable: " + jerr.Error()})
	case perr != nil:
		h.Add(invocation.EventLog, invocation.Log{Message: "step compensations skipped: " + perr.Message})
	default:
		_, rerr := sandbox.RunWorkflow(ctx, sandbox.WorkflowRequest{Journal: wj.Entries, Now: s.cfg.Clock.Now(), CancelAtEnd: true, OnCompensation: h.Compensation,
			Request: sandbox.Request{Program: prog, Input: input, Host: h, CPU: s.cfg.CPU, Gate: s.cfg.Gate, AdmitWithin: s.cfg.AdmitWithin,
				Info: sandbox.Info{InvocationID: rec.ID, TenantID: rec.TenantID, EntrypointID: rec.EntrypointID,
					CorrelationID: rec.CorrelationID, Attempt: rec.Attempt, Generation: wj.Generation},
				Limits: d.Limits(s.cfg.MaxPayloadBytes)}})
		if rerr != nil && rerr.TypeID != sandbox.ErrCanceled {
			h.Add(invocation.EventLog, invocation.Log{Message: "step compensations: the replay ended with " + rerr.Message})
		}
	}
	owner := attempt.CompensationLease(s.cfg.Spawn.LeaseOwner(rec))
	handlerID := cancelHandlerID(logEvents)
	return s.cfg.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: h.Drain(), AppendOptions: store.AppendOptions{RequireLease: owner, Schedule: &store.Scheduling{}}})
		if err != nil || handlerID == "" {
			return err
		}
		return s.releaseHandler(tx, rec.TenantID, handlerID)
	})
}

// cancelHandlerID is the on_cancel handler invocation that the cancel recorded in events (its
// compensation_started), or "" when there is none.
func cancelHandlerID(events []invocation.Event) string {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type != invocation.EventCompensationStarted {
			continue
		}
		var cs invocation.CompensationStarted
		if invocation.DecodeJSON(events[i].Data, &cs) == nil && cs.Trigger == "cancellation" {
			return cs.HandlerInvocationID
		}
	}
	return ""
}

// releaseHandler makes the held on_cancel handler id runnable now, inside tx, and wakes the
// dispatcher once tx commits. A handler that has already started (or was not held) is left alone;
// one that has already ended (an operator canceled it while it was held) resolves the workflow
// now (complete.ResolveCompensation left that to this run).
func (s *Engine) releaseHandler(tx store.Tx, tenantID, id string) error {
	hr, err := tx.Invocation(tenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	now := s.cfg.Clock.Now()
	if err == nil && hr.Status.Terminal() {
		return complete.ResolveCompensation(tx, hr, now)
	}
	if err != nil || hr.Status != invocation.StatusQueued || hr.StartedAt != nil || hr.EngineAttempt > 0 {
		return err
	}
	if err := tx.SetScheduling(tenantID, id, store.Scheduling{AvailableAt: &now}); err != nil {
		return err
	}
	if s.cfg.Host != nil && s.cfg.Host.Writer != nil {
		tx.AfterCommit(s.cfg.Host.Writer.Wake)
	}
	return nil
}

// CancelHandler prepares the on_cancel compensation invocation (000) of workflow cur, being
// canceled; ok is false when it has none (or it cannot start: the cancel goes on without it).
func (s *Engine) CancelHandler(ctx context.Context, cur invocation.Record) (handler invocation.Record, d catalog.Definition, ok bool) {
	e, wd, err := s.cfg.Catalog.Lookup(ctx, cur.EntrypointRef)
	if err != nil || e.Kind != entrypoint.KindWorkflow || wd.Traits.Workflow == nil || wd.Traits.Workflow.Compensation.OnCancel == nil {
		return handler, d, false
	}
	events, err := s.JournalEventsOf(ctx, cur)
	if err != nil {
		return handler, d, false
	}
	j, err := journal.Replay(events)
	if err != nil {
		return handler, d, false
	}
	cc := s.compensationContext(cur, "cancellation", "unknown", j.Entries)
	handler, _, d, serr := s.cfg.Spawn.PrepareChild(ctx, cur, *wd.Traits.Workflow.Compensation.OnCancel, cc, invocation.ModeAsync)
	if serr != nil {
		return handler, d, false
	}
	handler.CompensationFor = cur.ID
	return handler, d, true
}

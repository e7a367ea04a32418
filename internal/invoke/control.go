package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/journal"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
)

// prepareChild resolves and validates an r_invoke_v1 call of parent and builds the child's record
// (not yet stored). The child is visible to the parent's caller; internal entrypoints are allowed.
func (s *Service) prepareChild(ctx context.Context, parent invocation.Record, entrypointID string, params any, mode invocation.Mode) (invocation.Record, entrypoint.Entrypoint, definition, *sandbox.Error) {
	var e entrypoint.Entrypoint
	var d definition
	fail := func(format string, args ...any) (invocation.Record, entrypoint.Entrypoint, definition, *sandbox.Error) {
		return invocation.Record{}, e, d, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable", Message: fmt.Sprintf(format, args...)}
	}
	if parent.Depth+1 > s.cfg.MaxDepth {
		return fail("r_invoke_v1: nesting deeper than %d invocations", s.cfg.MaxDepth)
	}
	v := entrypoint.Viewer{TenantID: parent.TenantID, SubjectID: parent.SubjectID}
	e, err := s.resolve(ctx, v, entrypointID)
	if err != nil {
		return fail("r_invoke_v1 %s: %s", entrypointID, problem.From(err).Detail)
	}
	if e.Kind == entrypoint.KindWorkflow && mode == invocation.ModeSync {
		return fail("r_invoke_v1 %s: a workflow can be awaited only from a workflow (outside a step)", entrypointID)
	}
	if d, err = s.definition(e); err != nil {
		return fail("r_invoke_v1 %s: %v", entrypointID, err)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return fail("r_invoke_v1: params are not JSON: %v", err)
	}
	_, canon, err := s.validateParams(d, raw)
	if err != nil {
		pe := problem.From(err)
		return invocation.Record{}, e, d, &sandbox.Error{TypeID: problem.TypeValidation, Category: "non_retryable", Message: "r_invoke_v1: " + pe.Detail,
			Details: map[string]any{"issues": pe.Issues}}
	}
	now := s.cfg.Clock.Now()
	rec := invocation.Record{ID: s.cfg.IDs.New("inv"), TenantID: parent.TenantID, EntrypointRef: e.ID, EntrypointID: e.GTSID,
		EntrypointVersion: e.Version, SubjectID: parent.SubjectID, EntrypointOwner: entrypointOwner(e), Mode: mode, Params: canon,
		CorrelationID: parent.CorrelationID, TraceID: parent.TraceID, SpanID: randomHex(8), Attempt: 1, CreatedAt: now,
		ParentID: parent.ID, Depth: parent.Depth + 1, Metrics: invocation.Metrics{MemoryLimitMB: i64(d.Traits.Limits.MemoryMB)}}
	switch t, sp := tracing.IDs(ctx); {
	case t == parent.TraceID:
		rec.SpanID = sp // the r_invoke_v1 call's (or the failing attempt's) span: the child's attempts are its children
	case parent.SpanID != "":
		// Started from outside the parent's trace (an on_cancel handler, by the cancel request): its
		// attempts hang under the span that created the parent.
		rec.SpanID = parent.SpanID
	}
	return rec, e, d, nil
}

// startChild runs an r_invoke_v1 call: a real invocation linked to its parent, visible to the
// parent's caller, executed synchronously within the parent's deadline. Internal entrypoints
// (traits.entrypoint: false) are callable this way. The child's rate limit and the tenant's
// max_concurrent_executions apply (the child is one more running execution); a refusal is the
// call's error result, never a wait (so a parent cannot deadlock on its own slot).
func (s *Service) startChild(ctx context.Context, parent invocation.Record, req sandbox.InvokeRequest) (invocation.Record, error) {
	rec, e, d, serr := s.prepareChild(ctx, parent, req.EntrypointID, req.Params, invocation.ModeSync)
	if serr != nil {
		return invocation.Record{}, serr
	}
	if n := s.syncChildren.Add(1); n > int64(s.cfg.MaxSyncChildren) {
		s.syncChildren.Add(-1)
		return invocation.Record{}, &sandbox.Error{TypeID: problem.TypeQuotaExceeded, Category: "retryable",
			Message: fmt.Sprintf("r_invoke_v1: the runtime runs %d child invocations already, the most it runs at once; retry later", s.cfg.MaxSyncChildren),
			Details: map[string]any{"quota": "sync_children", "retry_after_seconds": 1}}
	}
	defer s.syncChildren.Add(-1)
	now := rec.CreatedAt
	// The child's entrypoint rate limit applies as to any start.
	permit, err := s.rateLimit(rec.TenantID, e.GTSID, d, now)
	if err != nil {
		return invocation.Record{}, childRefused(err)
	}
	policy, err := s.policy(ctx, rec.TenantID)
	if err != nil {
		permit.Release()
		return invocation.Record{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "r_invoke_v1: tenant policy unavailable"}
	}
	// It runs now, in its parent's goroutine: it is one more running execution of the tenant, so
	// max_concurrent_executions counts it (its parent is counted already); over it the call fails.
	var perr error
	var created invocation.Record
	err = s.update(ctx, func(tx store.Tx) error {
		if max := policy.Quotas.MaxConcurrentExecutions; max != nil {
			n, err := tx.CountTenantRunning(rec.TenantID)
			if err != nil {
				return err
			}
			if n >= *max {
				perr = quotaExceeded(rec.TenantID, *max)
				return perr
			}
		}
		var err error
		created, err = s.create(tx, rec, true, d, now)
		return err
	})
	if perr != nil {
		permit.Release()
		s.cfg.Observer.QuotaExceeded(rec.TenantID, quotaConcurrent)
		return invocation.Record{}, childRefused(perr)
	}
	if err != nil {
		permit.Release()
		return invocation.Record{}, err
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	return s.execute(ctx, created, e, d, time.Time{})
}

// childRefused is the error result of an r_invoke_v1 call refused by a rate limit or a quota: the
// problem's type and detail, retryable (later the same call may pass), with retry_after_seconds.
func childRefused(err error) *sandbox.Error {
	pe := problem.From(err)
	e := &sandbox.Error{TypeID: pe.Type, Category: "retryable", Message: "r_invoke_v1: " + pe.Detail, Details: map[string]any{}}
	if pe.RetryAfter > 0 {
		e.Details["retry_after_seconds"] = pe.RetryAfter
	}
	for k, v := range pe.Extensions {
		e.Details[k] = v
	}
	return e
}

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
		var then func(store.Tx, invocation.Record, time.Time) (invocation.Record, error)
		handler := s.cancelHandler(ctx, cur)
		compensate := strings.Contains(cur.EntrypointID, "~x.core.serverless.workflow.") && (cur.Status != invocation.StatusQueued || cur.StartedAt != nil)
		if handler != nil || compensate {
			then = func(tx store.Tx, out invocation.Record, now time.Time) (invocation.Record, error) {
				if compensate {
					// The workflow's completed steps are compensated by a run that replays its journal
					// (compensateCanceled), queued in this transaction.
					if err := tx.SetScheduling(out.TenantID, out.ID, store.Scheduling{AvailableAt: &now}); err != nil {
						return out, err
					}
				}
				if handler == nil {
					return out, nil
				}
				return s.startCompensation(tx, out, handler, now)
			}
		}
		rec, err = s.transition(ctx, cur, action, invocation.EventCanceled, store.Scheduling{}, then)
		if err == nil {
			s.mu.Lock()
			if cancel := s.running[id]; cancel != nil {
				cancel()
			}
			s.mu.Unlock()
			s.dropLive(id)
		}
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
				s.mu.Lock()
				if cancel := s.running[id]; cancel != nil {
					cancel()
				}
				s.mu.Unlock()
			}
			return rec, false, err
		}
		return s.resume(ctx, cur)
	default:
		return cur, false, problem.Validation("unknown action", []problem.Issue{{Path: "$.action", Code: "INVALID_VALUE",
			Message: fmt.Sprintf("unknown action %q: use cancel, retry or replay", action)}})
	}
}

// cancelHandler prepares a workflow's on_cancel compensation invocation (000), or returns nil.
func (s *Service) cancelHandler(ctx context.Context, cur invocation.Record) *parking {
	e, d, ok := s.cachedByRef(cur.EntrypointRef)
	if !ok {
		var err error
		if e, err = s.entrypointByRef(ctx, cur.EntrypointRef); err != nil {
			return nil
		}
		if d, err = s.definition(e); err != nil {
			return nil
		}
	}
	if e.Kind != entrypoint.KindWorkflow || d.Traits.Workflow == nil || d.Traits.Workflow.Compensation.OnCancel == nil {
		return nil
	}
	events, err := s.journalEventsOf(ctx, cur)
	if err != nil {
		return nil
	}
	j, err := journal.Replay(events)
	if err != nil {
		return nil
	}
	cc := s.compensationContext(cur, "cancellation", "unknown", j.Entries)
	handler, _, hd, serr := s.prepareChild(ctx, cur, *d.Traits.Workflow.Compensation.OnCancel, cc, invocation.ModeAsync)
	if serr != nil {
		return nil
	}
	handler.CompensationFor = cur.ID
	return &parking{handler: &handler, handlerD: hd}
}

// startCompensation moves a canceled workflow to compensating and starts its handler, inside the
// cancel's transaction.
func (s *Service) startCompensation(tx store.Tx, cur invocation.Record, p *parking, now time.Time) (invocation.Record, error) {
	data, err := json.Marshal(map[string]any{"trigger": "cancellation", "handler_invocation_id": p.handler.ID, "handler": p.handler.EntrypointID})
	if err != nil {
		return cur, err
	}
	ev := invocation.Event{Type: invocation.EventCompensationStarted, Data: data, At: now, LogicalAttempt: cur.Attempt,
		IdempotencyKey: eventKey(cur.ID, "on_cancel", cur.Attempt, invocation.EventCompensationStarted)}
	out, _, err := tx.Append(store.AppendRequest{TenantID: cur.TenantID, InvocationID: cur.ID, Events: []invocation.Event{ev}})
	if err != nil {
		return cur, err
	}
	_, err = s.create(tx, *p.handler, false, p.handlerD, now)
	return out, err
}

// entrypointByRef reads a pinned entrypoint version (unscoped: the invocation was authorized).
func (s *Service) entrypointByRef(ctx context.Context, ref string) (entrypoint.Entrypoint, error) {
	var e entrypoint.Entrypoint
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		e, err = tx.EntrypointByRef(ref)
		return err
	})
	return e, err
}

// resume makes a suspended workflow runnable now: the dispatcher claims it and records resumed
// (suspended → running) as it starts the run. A workflow resumed while its timer is not yet due
// replays and parks on the timer again.
func (s *Service) resume(ctx context.Context, cur invocation.Record) (invocation.Record, bool, error) {
	var out invocation.Record
	var perr error
	err := s.update(ctx, func(tx store.Tx) error {
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
		data, err := json.Marshal(map[string]any{"action": ActionResume})
		if err != nil {
			return err
		}
		ev := invocation.Event{Type: invocation.EventSignalReceived, Data: data, At: now, LogicalAttempt: r.Attempt,
			IdempotencyKey: eventKey(r.ID, fmt.Sprintf("resume-request-%d", r.LastSeq), r.Attempt, invocation.EventSignalReceived)}
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
	err := s.update(ctx, func(tx store.Tx) error {
		now := s.cfg.Clock.Now()
		data, err := json.Marshal(map[string]any{"action": action})
		if err != nil {
			return err
		}
		ev := invocation.Event{Type: t, Data: data, At: now, LogicalAttempt: cur.Attempt,
			IdempotencyKey: eventKey(cur.ID, "control", cur.Attempt, t)}
		var appended []invocation.Event
		if out, appended, err = tx.Append(store.AppendRequest{TenantID: cur.TenantID, InvocationID: cur.ID, Events: []invocation.Event{ev}, AppendOptions: store.AppendOptions{Schedule: &next}}); err != nil {
			return err
		}
		if len(appended) == 0 {
			return &invocation.TransitionError{From: out.Status, Event: t}
		}
		if out.ParentSeq != nil && out.Status.Terminal() {
			if err := s.resolveParent(tx, out, now); err != nil {
				return err
			}
		}
		if out.CompensationFor != "" && out.Status.Terminal() {
			if err := s.resolveCompensation(tx, out, now); err != nil {
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
	e, err := s.entrypointByRef(ctx, cur.EntrypointRef)
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
	d, err := s.definition(e)
	if err != nil {
		return cur, problem.Internal(err)
	}
	now := s.cfg.Clock.Now()
	rec := invocation.Record{ID: s.cfg.IDs.New("inv"), TenantID: cur.TenantID, EntrypointRef: e.ID, EntrypointID: e.GTSID,
		EntrypointVersion: e.Version, SubjectID: sc.SubjectID, EntrypointOwner: entrypointOwner(e), Mode: invocation.ModeAsync, Params: cur.Params,
		CorrelationID: cur.CorrelationID, Metrics: invocation.Metrics{MemoryLimitMB: i64(d.Traits.Limits.MemoryMB)},
		Attempt: 1, CreatedAt: now, Replay: cur.ID}
	rec.TraceID, rec.SpanID = recordIDs(ctx, "")
	var created invocation.Record
	if err := s.update(ctx, func(tx store.Tx) error {
		var err error
		created, err = s.create(tx, rec, false, d, now)
		return err
	}); err != nil {
		return cur, problem.Internal(err)
	}
	return created, nil
}

// Run runs an attempt claimed by dispatch.StoreClaimer to its end (dispatch.Runner): the program
// for attempt.KindRun, the step compensations of a canceled workflow for attempt.KindCompensate.
// Its outcome is recorded, waiting out a database outage of up to the lease grace, or logged when
// it cannot be: the lease then expires and the work is claimed again.
func (s *Service) Run(ctx context.Context, a attempt.Attempt) {
	rec := a.Invocation
	d, err := s.definition(a.Entrypoint)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "claimed attempt not run: definition unreadable", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "err", err)
		return
	}
	switch a.Kind {
	case attempt.KindCompensate:
		if err := s.compensateCanceled(ctx, rec, a.Entrypoint, d); err != nil {
			s.cfg.Logger.ErrorContext(ctx, "step compensations not recorded", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "err", err)
		}
	case attempt.KindRun:
		if s.cfg.Remote != nil && a.Entrypoint.Kind == entrypoint.KindFunction && (d.workerDefinition() != "" || s.cfg.Remote.Takes(a.Entrypoint)) {
			s.runRemote(ctx, a, d)
			return
		}
		// Its writes outlast a database outage of up to the lease's grace: an attempt that finished
		// while the database was away is recorded when it is back, not run again after its lease.
		wctx := store.OutlastOutages(ctx, s.cfg.LeaseGrace)
		if _, err := s.execute(wctx, rec, a.Entrypoint, d, a.Due); err != nil {
			s.cfg.Logger.ErrorContext(ctx, "invocation attempt not recorded", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "err", err)
		}
	default:
		s.cfg.Logger.ErrorContext(ctx, "claimed attempt not run: unknown kind", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "kind", a.Kind)
	}
}

// RecoverLeases is run once at start-up by a process that is its database's only user
// (store.Exclusive): every lease in the database was taken by a process that is gone, so the work it
// held — running, as far as the records say, and counted against concurrency limits — is reclaimed
// at once instead of after each lease's timeout. It returns how many leases it ended.
func (s *Service) RecoverLeases(ctx context.Context) (int64, error) {
	var n int64
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		if n, err = tx.ExpireLeases(s.cfg.Clock.Now()); n > 0 {
			tx.AfterCommit(s.cfg.Wake)
		}
		return err
	})
	if err == nil && n > 0 {
		s.cfg.Logger.InfoContext(ctx, "reclaiming work held by a stopped process", "leases", n)
	}
	return n, err
}

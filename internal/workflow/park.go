package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/complete"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/host"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/journal"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/spawn"
)

// parkingFor turns a workflow's wait into how it suspends: until a time (a timer), until a child
// invocation ends, or until an event arrives (or its timeout); bounded by
// traits.workflow.max_suspension_days. The child of an r_invoke_v1 position is created once, in the
// suspending transaction, and recorded (child_invoked with its seq, in children); a workflow that
// parks there again (after a resume, say) waits for that child rather than starting another, and
// takes its outcome at once if it has ended. A child that cannot start, or has ended, resolves the
// entry at once (the workflow is queued to replay now, see parking.refused).
func (s *Engine) parkingFor(ctx context.Context, rec invocation.Record, d catalog.Definition, p *sandbox.Park, recorded map[int]time.Time,
	children map[int]string, now time.Time, h *host.Host) (*parking, *sandbox.Error) {
	var park *parking
	resolveNow := func(result any, reason, childID string) *parking {
		h.Add(invocation.EventJournalResolved, invocation.JournalResolved{Seq: p.Seq, Result: result, ChildInvocationID: childID})
		n := s.cfg.Clock.Now()
		return &parking{until: &n, reason: reason, refused: result}
	}
	switch p.Kind {
	case "timer", "retry":
		u := p.Until
		park = &parking{until: &u, reason: "timer"}
		if p.Kind == "retry" {
			park.reason = "step retry"
		}
	case "child":
		if id, ok := children[p.Seq]; ok {
			child, err := s.cfg.Store.Invocation(ctx, rec.TenantID, id)
			if err != nil {
				return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "r_invoke_v1: reading child " + id + ": " + err.Error()}
			}
			if child.Status.Terminal() {
				return resolveNow(complete.ChildResult(child), "child ended", child.ID), nil
			}
			park = &parking{child: true, reason: "child " + id}
			break
		}
		if len(children) >= s.cfg.MaxChildren {
			serr := host.ChildBudgetError("r_invoke_v1: workflow invocation %s has started %d child invocations, the most one journal may start; start fewer children, or continue as new (r_continue_as_new_v1)", rec.ID, s.cfg.MaxChildren)
			return resolveNow(sandbox.ErrorResult(serr), "child refused", ""), nil
		}
		child, ce, cd, serr := s.cfg.Spawn.PrepareChild(ctx, rec, p.ChildEntrypointID, p.ChildParams, invocation.ModeAsync)
		if serr != nil {
			// The call fails as a result, not as the workflow (no suspension limit applies).
			return resolveNow(sandbox.ErrorResult(serr), "child refused", ""), nil
		}
		// The child's rate limit applies at its start. It is queued work: the tenant's
		// max_concurrent_executions applies when the dispatcher claims it, like any queued work.
		if _, err := s.cfg.Spawn.RateLimit(rec.TenantID, ce.GTSID, cd, now); err != nil {
			return resolveNow(sandbox.ErrorResult(spawn.ChildRefused(err)), "child refused", ""), nil
		}
		seq := p.Seq
		child.ParentSeq = &seq
		children[seq] = child.ID
		h.Add(invocation.EventChildInvoked, invocation.ChildInvoked{Seq: &seq, ChildInvocationID: child.ID, EntrypointID: child.EntrypointID})
		park = &parking{child: true, effects: []complete.Effect{complete.SpawnChild(child, cd)}, reason: "child " + child.ID}
	case "event":
		// Any event received since the invocation was created can satisfy the wait (waits.Register).
		w := events.Wait{TenantID: rec.TenantID, InvocationID: rec.ID, Seq: p.Seq, TypeID: p.EventTypeID,
			Filter: p.Filter, Since: rec.CreatedAt, TimeoutAt: p.TimeoutAt}
		park = &parking{until: p.TimeoutAt, event: true, effects: []complete.Effect{complete.RegisterWait(w)}, reason: "event " + p.EventTypeID}
	default:
		return nil, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable",
			Message: fmt.Sprintf("workflow waits on an unknown kind %q", p.Kind), Details: map[string]any{"seq": p.Seq}}
	}
	if d.Traits.Workflow == nil {
		return park, nil
	}
	return s.limitSuspension(park, p.Seq, recorded, now, d.Traits.Workflow.MaxSuspensionDays)
}

// failureHandler prepares the on_failure compensation invocation (000): its params are a
// CompensationContext built from the failed run: failed_step_id is the last step recorded failed in
// journal (everything the run recorded), and the workflow state snapshot is built from checkpointed,
// the durable part of it. If the handler cannot be started, the workflow is dead-lettered as
// without compensation, and the reason is logged.
func (s *Engine) failureHandler(ctx context.Context, rec invocation.Record, handlerID string, rerr *sandbox.Error,
	journal, checkpointed []sandbox.JournalEntry, h *host.Host) *parking {
	failedStep := "unknown"
	for _, j := range journal {
		if r, ok := j.Result.(map[string]any); ok && (j.Helper == "r_run_step_v1" || j.Helper == "r_step_v1") && r["ok"] == false {
			failedStep = j.Key
		}
	}
	errMeta := rerr.Details
	if errMeta == nil {
		errMeta = map[string]any{}
	}
	cc := s.compensationContext(rec, "failure", failedStep, checkpointed)
	cc["failed_step_error"] = map[string]any{"error_type": rerr.TypeID, "message": rerr.Message, "error_metadata": errMeta}
	handler, _, hd, serr := s.cfg.Spawn.PrepareChild(ctx, rec, handlerID, cc, invocation.ModeAsync)
	if serr != nil {
		h.Add(invocation.EventLog, invocation.Log{Message: "on_failure compensation could not start: " + serr.Message})
		return nil
	}
	handler.CompensationFor = rec.ID
	return handlerParking(handler, hd)
}

// compensationContext is 000's CompensationContext for an on_failure or on_cancel handler of
// workflow rec; checkpointed are its durable journal entries (the state a crash would keep).
func (s *Engine) compensationContext(rec invocation.Record, trigger, failedStep string, checkpointed []sandbox.JournalEntry) map[string]any {
	var input any
	_ = invocation.DecodeJSON(rec.Params, &input)
	meta := map[string]any{"entrypoint_id": rec.EntrypointID, "original_input": input, "tenant_id": rec.TenantID,
		"correlation_id": rec.CorrelationID}
	if rec.StartedAt != nil {
		meta["started_at"] = rec.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	return map[string]any{
		"trigger":                         trigger,
		"original_workflow_invocation_id": rec.ID,
		"failed_step_id":                  failedStep,
		"workflow_state_snapshot":         journal.StateSnapshot(checkpointed),
		"timestamp":                       s.cfg.Clock.Now().Format(time.RFC3339Nano),
		"invocation_metadata":             meta,
	}
}

// limitSuspension applies traits.workflow.max_suspension_days (000: suspension timeout → failed):
// a workflow waiting on journal position seq since it was recorded is woken no later than the
// deadline, and fails with the timeout error if it is still waiting then.
func (s *Engine) limitSuspension(park *parking, seq int, recorded map[int]time.Time, now time.Time, maxDays int) (*parking, *sandbox.Error) {
	if maxDays <= 0 {
		maxDays = 30
	}
	since, ok := recorded[seq]
	if !ok {
		since = now // recorded by this run
	}
	deadline := since.Add(time.Duration(maxDays) * 24 * time.Hour)
	if !now.Before(deadline) {
		return nil, &sandbox.Error{TypeID: sandbox.ErrTimeout, Category: "timeout",
			Message: fmt.Sprintf("suspended longer than max_suspension_days (%d)", maxDays), Details: map[string]any{"seq": seq, "since": since}}
	}
	if park.until == nil || park.until.After(deadline) {
		park.until = &deadline
	}
	return park, nil
}

// parking is how a workflow run that parked is suspended: until a time (a durable timer, or now to
// replay at once), until a child invocation, created in the same transaction, ends, or until an
// event arrives; and the follow-up writes of its outcome (complete.Effect).
type parking struct {
	until  *time.Time
	reason string
	// child and event: it waits for the child or the event its effects create or register (until
	// is then the event's timeout, if any).
	child, event bool
	// handler, on a failed workflow, means its on_failure compensation starts (an effect): the
	// workflow goes failed → compensating and the handler is created in the same transaction.
	handler bool
	effects []complete.Effect
	// refused is the error result of a child that could not start (the entry is resolved at once).
	refused any
	// final, on a failed run, means it ends the invocation whatever the retry policy says (a
	// workflow's r_exit).
	final bool
}

// suspends reports whether the run parks (rather than ending).
func (p *parking) suspends() bool {
	return p != nil && !p.handler && (p.until != nil || p.child || p.event)
}

// clearWaits makes the outcome remove the workflow's registered event waits.
func (p *parking) clearWaits() { p.effects = append(p.effects, complete.ClearWaits()) }

// effectsOf is p's effects (none for nil).
func effectsOf(p *parking) []complete.Effect {
	if p == nil {
		return nil
	}
	return p.effects
}

// handlerParking is the parking of a failed workflow whose on_failure handler starts.
func handlerParking(handler invocation.Record, d catalog.Definition) *parking {
	return &parking{handler: true, effects: []complete.Effect{complete.StartHandler(handler, d)}}
}

// decide is what a workflow run of rec came to: suspended when it parked (park.suspends), otherwise
// outcome.Decide of its output or error under the retry policy — r_exit (park.final) is never
// retried, and a failure with an on_failure handler (park.handler) goes on to the compensation.
func (s *Engine) decide(rec invocation.Record, d catalog.Definition, output json.RawMessage, rerr *sandbox.Error,
	metrics invocation.Metrics, park *parking) outcome.Outcome {
	var o outcome.Outcome
	if rerr == nil && park.suspends() {
		o = outcome.Outcome{Kind: outcome.Suspended, Until: park.until, Reason: park.reason}
	} else {
		o = outcome.Decide(rec, d.RetryOf(rec), output, rerr, park != nil && park.final, s.cfg.Clock.Now())
	}
	if h := complete.Handler(effectsOf(park)); o.Kind == outcome.Failed && h != nil {
		o.Handler = &outcome.Handler{InvocationID: h.ID, EntrypointID: h.EntrypointID}
	}
	o.Metrics = metrics
	return o
}

// withoutEmits is evs without its event_emitted entries: what stays of a journal entry's events when
// the entry itself is not recorded.
func withoutEmits(evs []invocation.Event) []invocation.Event {
	var out []invocation.Event
	for _, e := range evs {
		if e.Type != invocation.EventEmitted {
			out = append(out, e)
		}
	}
	return out
}

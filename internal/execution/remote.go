package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/host"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
)

// RemoteAttempt is a claimed function attempt handed to remote workers: the claim's data, the run
// stage's view of it (source, limits, retry policy, compiled returns schema) and the stored
// returns schema, for a worker to check against.
type RemoteAttempt struct {
	Attempt attempt.Attempt
	Run     run.Job
	Returns json.RawMessage
	// DefinitionID, for a worker-provided implementation (implementation.kind adapter_ref), is its
	// adapter_ref.definition_id: only a worker that serves it may run the attempt.
	DefinitionID string
	// AllowedOutboundDomains is the tenant policy's allowed_outbound_domains: the worker's
	// outbound requests are held to it, as the server's are.
	AllowedOutboundDomains []string
}

// Remote runs claimed function attempts in remote workers (package workerhub). Takes reports
// whether an attempt of a Starlark function goes to a worker (a worker-provided implementation
// always does); Run hands it over and waits for what it came to. Run
// answers ok=false when no result will come (the worker was lost, or no worker took the attempt
// in time): the attempt is then not completed here; its lease is ended at once (one write, under
// the lease check), so the claim stage reclaims it like a crashed node's and retries or fails it.
type Remote interface {
	Takes(e entrypoint.Entrypoint) bool
	Run(ctx context.Context, a RemoteAttempt) (res run.Result, ok bool)
}

// runRemote runs a claimed function attempt in a remote worker and completes it here, with the
// lease check, like a local one. Cancellation (Cancel) cancels ctx, which the remote side passes
// on to the worker in its next heartbeat answer; the worker's result then arrives after the lease
// was cleared and is recorded as late_result.
func (x *Executor) runRemote(ctx context.Context, a attempt.Attempt, d catalog.Definition) {
	rec := a.Invocation
	x.writer.Dequeued(rec, a.Due, nil)
	ctx, span := x.env.StartAttempt(ctx, rec) // the worker records no spans of its own (yet)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	x.running.Track(rec.ID, x.spawn.LeaseOwner(rec), cancel)
	defer x.running.Untrack(rec.ID)
	ok := false
	var res run.Result
	if p, err := x.catalog.Policy(ctx, rec.TenantID); err != nil {
		x.logger.ErrorContext(ctx, "remote attempt not handed out: tenant policy unreadable", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "err", err)
	} else {
		res, ok = x.remote.Run(runCtx, RemoteAttempt{Attempt: a, Run: x.catalog.RunJob(rec, a.Entrypoint, d, nil, a.Due, x.admitWithin), Returns: d.Schema.Returns,
			DefinitionID: d.WorkerDefinition(), AllowedOutboundDomains: p.Policies.AllowedOutboundDomains})
	}
	if !ok {
		host.EndAttempt(span, rec.Status, errors.New("remote attempt lost"))
		x.writer.AttemptEnded(rec, "function", "lost")
		if err := x.endLease(context.WithoutCancel(ctx), rec.TenantID, rec.ID, a.Lease.Owner); err != nil {
			x.logger.ErrorContext(ctx, "lease of a lost remote attempt not ended; it runs out", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "err", err)
		}
		return
	}
	final, err := x.completer.Complete(context.WithoutCancel(ctx), rec, d, res.Timeline, res.Outcome, nil)
	if err != nil {
		x.logger.ErrorContext(ctx, "remote attempt not recorded", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "err", err)
	}
	host.EndAttempt(span, final.Status, err)
	x.writer.AttemptEnded(rec, "function", res.Outcome.Kind.String())
}

// endLease ends the lease owner holds on an invocation (its expiry becomes now), if it still holds
// it, so that the next claim reclaims the work.
func (x *Executor) endLease(ctx context.Context, tenantID, id, owner string) error {
	return x.store.Update(ctx, func(tx store.Tx) error {
		sch, err := tx.Scheduling(tenantID, id)
		if err != nil || sch.LeaseOwner != owner {
			return err
		}
		now := x.clock.Now()
		sch.LeaseExpiresAt = &now
		if err := tx.SetScheduling(tenantID, id, sch); err != nil {
			return err
		}
		tx.AfterCommit(x.writer.Wake)
		return nil
	})
}

// workerOnly is the error of an attempt of a worker-provided implementation that this server
// cannot hand to a worker: a sync invocation, or a server without remote workers.
func workerOnly(id string) *sandbox.Error {
	return &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable",
		Message: fmt.Sprintf("the implementation of %s is provided by remote workers: invoke it async on a server with worker keys (docs/workers.md)", id)}
}

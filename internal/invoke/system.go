package invoke

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/dag"
	"github.com/larkrun/lark/internal/dagrun"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
)

// SystemStart is an invocation the runtime starts on a tenant's behalf: a schedule's run or a
// backfill's partition. It is always asynchronous and queued in the caller's transaction, so that
// whatever decided to start it (a schedule's instant, a backfill's partition) is recorded in the
// same commit as the invocation itself. It is not rate limited (the cadence is the schedule's, and
// max_schedules bounds it); the tenant's max_concurrent_executions and the entrypoint's
// max_concurrent apply at claim time, like any queued work.
type SystemStart struct {
	// As is the identity the invocation runs as: its tenant, and the subject whose visibility
	// resolves the entrypoint (a user's private entrypoints are visible to that user only).
	As           auth.SecurityContext
	EntrypointID string
	// Params are the caller's params (a JSON object; empty means {}). Plan fills in the defaults of
	// the entrypoint's params schema, as every start does (catalog.Catalog.ValidateParams), and
	// validates them.
	Params        json.RawMessage
	CorrelationID string
	// Retry, when set, replaces the entrypoint's traits.retry for this invocation (a trigger's
	// retry_policy); its non_retryable_errors are the entrypoint's.
	Retry *outcome.RetryPolicy
	// Trigger says a trigger starts it (invocation.ViaTrigger): its end is then counted in the
	// trigger's metrics.
	Trigger bool
	// Origin is what starts it (invocation.OriginSchedule, …), recorded for the metrics.
	Origin string
}

// Planned is a SystemStart that resolved and validated; Enqueue writes it.
type Planned struct {
	rec invocation.Record
}

// InTrace returns the planned start created in the trace of ctx's span (when it has one): for a
// plan shared by several starts (a schedule's runs), each in a span of its own.
func (p Planned) InTrace(ctx context.Context) Planned {
	if tid, sid := tracing.IDs(ctx); tid != "" {
		p.rec.TraceID, p.rec.SpanID = tid, sid
	}
	return p
}

// As returns the planned start run as another subject of the same tenant (who resolves the
// entrypoint alike, e.g. another schedule's principal).
func (p Planned) As(subjectID string) Planned {
	p.rec.SubjectID = subjectID
	return p
}

// Plan resolves the entrypoint (which must exist, be callable by st.As and not be internal) and
// validates the params. Its errors are problem documents (403, 404, 409 not_active, 422). The run
// is asynchronous whatever traits.invocation says: nobody waits on it.
func (s *Service) Plan(ctx context.Context, st SystemStart) (Planned, error) {
	e, err := s.catalog.Resolve(ctx, viewer(st.As), st.EntrypointID)
	if err != nil {
		return Planned{}, err
	}
	d, err := s.catalog.Definition(e)
	if err != nil {
		return Planned{}, problem.Internal(err)
	}
	if d.Traits.Entrypoint != nil && !*d.Traits.Entrypoint {
		return Planned{}, problem.Forbidden("entrypoint %s is internal (traits.entrypoint: false): only other entrypoints can call it, with r_invoke_v1", e.GTSID)
	}
	params, err := dagParams(d, st.Params)
	if err != nil {
		return Planned{}, err
	}
	_, canon, err := s.catalog.ValidateParams(d, params)
	if err != nil {
		return Planned{}, err
	}
	rec := s.spawn.NewRecord(e, d, st.As.TenantID, st.As.SubjectID, invocation.ModeAsync, canon, time.Time{})
	rec.ID, rec.CorrelationID = "", st.CorrelationID // both set by EnqueueAt
	if st.Trigger {
		rec.Via = invocation.ViaTrigger
	}
	rec.Origin = st.Origin
	// Planned under a span (a webhook delivery's request, an event publication's, a schedule's
	// manual run), the invocation continues that trace; a plan shared by a schedule's runs puts
	// each in its own span (InTrace); otherwise (a backfill) spawn's createdEvent gives it a trace
	// of its own.
	rec.TraceID, rec.SpanID = tracing.IDs(ctx)
	if st.Retry != nil {
		r := *st.Retry
		r.NonRetryableErrors = nil // the entrypoint's apply (catalog.Definition.RetryOf)
		if rec.RetryPolicy, err = json.Marshal(r); err != nil {
			return Planned{}, problem.Internal(err)
		}
	}
	return Planned{rec: rec}, nil
}

// CanSee reports whether sc may see the entrypoint id (entrypoint.Entrypoint.VisibleTo, as
// resolved for an invocation: a major-only id names its latest active minor).
func (s *Service) CanSee(ctx context.Context, sc auth.SecurityContext, id string) (bool, error) {
	_, err := s.catalog.Resolve(ctx, viewer(sc), id)
	if err == nil {
		return true, nil
	}
	if pe := problem.From(err); pe.Status == http.StatusNotFound {
		return false, nil
	} else if pe.Status >= 500 {
		return false, err
	}
	return true, nil
}

// NewID returns a new invocation id (for a caller that records it before Enqueue).
func (s *Service) NewID() string { return s.cfg.IDs.New("inv") }

// Enqueue writes a planned invocation inside tx as queued work available at now, under id (from
// NewID). Once the transaction commits, the Observer hears of it and the dispatcher wakes up to run
// it (the transaction's AfterCommit hook).
func (s *Service) Enqueue(tx store.Tx, p Planned, id string, now time.Time) (invocation.Record, error) {
	return s.EnqueueAt(tx, p, id, now, now)
}

// EnqueueAt is Enqueue for work that becomes runnable at `at` (a schedule's instant queued ahead
// of time): it is created at now, and the dispatcher claims it from `at` on.
func (s *Service) EnqueueAt(tx store.Tx, p Planned, id string, now, at time.Time) (invocation.Record, error) {
	if p.rec.EntrypointRef == "" || id == "" {
		return invocation.Record{}, fmt.Errorf("enqueue: the start was not planned")
	}
	rec := p.rec
	rec.ID = id
	rec.CreatedAt = now
	if rec.CorrelationID == "" {
		rec.CorrelationID = s.cfg.IDs.New("corr")
	}
	if at.Before(now) {
		at = now
	}
	return s.spawn.CreateAt(s.writer.Tx(tx), rec, now, at)
}

// Tasks lists the tasks of DAG run id (GET /invocations/{id}/tasks): 404 when the caller may not
// see it, 409 not_a_dag when it is not a DAG run.
func (s *Service) Tasks(ctx context.Context, sc auth.SecurityContext, id string) ([]dagrun.TaskView, error) {
	rec, err := s.Get(ctx, sc, id)
	if err != nil {
		return nil, err
	}
	if _, d, err := s.catalog.Lookup(ctx, rec.EntrypointRef); err != nil || !d.IsDAG() {
		return nil, problem.Conflict("not_a_dag", "invocation %s is not a DAG run", id)
	}
	events, err := store.EventsAfter(ctx, s.cfg.Store, rec.TenantID, rec.ID, 0)
	if err != nil {
		return nil, problem.Internal(err)
	}
	run, err := dagrun.Replay(events, rec.Attempt)
	if err != nil {
		return nil, problem.Internal(err)
	}
	return run.Views(ctx, func(ctx context.Context, child string) (invocation.Record, error) {
		return s.cfg.Store.Invocation(ctx, rec.TenantID, child)
	}), nil
}

// dagParams are a DAG's params for a system start: a schedule's run or a backfill's partition
// (params with scheduled_at and no partition_key) runs the partition of its instant, in the
// DAG's partitioning (docs/dag.md, "Schedules and backfills"). Other params are left as they are.
func dagParams(d catalog.Definition, params json.RawMessage) (json.RawMessage, error) {
	if !d.IsDAG() || len(params) == 0 {
		return params, nil
	}
	var p map[string]any
	if json.Unmarshal(params, &p) != nil || p["partition_key"] != nil {
		return params, nil
	}
	at, ok := p["scheduled_at"].(string)
	if !ok {
		return params, nil
	}
	// Only the partitioning is read (the spec was validated at registration).
	var ws struct {
		Spec struct {
			Partitioning *dag.Partitioning `json:"partitioning"`
		} `json:"spec"`
	}
	if json.Unmarshal(d.Implementation.WorkflowSpec, &ws) != nil || ws.Spec.Partitioning == nil {
		return params, nil
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return params, nil
	}
	key, err := ws.Spec.Partitioning.KeyAt(t)
	if err != nil {
		return nil, problem.Validation("no partition at this instant", []problem.Issue{{Path: "$.params.scheduled_at", Code: "INVALID_VALUE", Message: err.Error()}})
	}
	p["partition_key"] = key
	return json.Marshal(p)
}

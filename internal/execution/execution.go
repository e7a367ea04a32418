// Package execution runs claimed attempts to their end: the dispatcher's runner (Run) takes an
// attempt the claim stage leased and runs a function through the run stage (or hands it to a
// remote worker) and then records its outcome (package complete), or activates a workflow
// (package workflow), or compensates a canceled one. It also runs the executions that start
// outside the queue — sync calls' and r_invoke_v1 children's (StartChild, the host's Children) —
// and owns the hosts' environment, so that a child started from a host runs here.
package execution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/complete"
	"github.com/larkrun/lark/internal/dagrun"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/host"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/running"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/spawn"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/workflow"
	"github.com/larkrun/lark/internal/writer"
)

// Store is the store methods the executor uses directly: the plain writes of lease ends and
// lease recovery, and the lease check of WatchLeases (everything else goes through the writer, the
// catalog and the workflow engine).
type Store interface {
	Update(ctx context.Context, fn func(store.Tx) error) error
	dagrun.Store
	// LeaseOwners is store.QueueReader's (WatchLeases).
	LeaseOwners(ctx context.Context, ids []string) (map[string]string, error)
}

// Config wires an Executor.
type Config struct {
	Store     Store
	Catalog   *catalog.Catalog
	Writer    *writer.Writer
	Spawn     *spawn.Spawner
	Completer *complete.Completer
	// Runner is the run stage of function attempts.
	Runner *run.Runner
	// Host is the hosts' environment, less Children (the Executor itself).
	Host host.Env
	// Tracing starts the spans of attempts (nil: off).
	Tracing *tracing.Tracing
	// Workflow configures the workflow engine (its Store and limits); its Catalog, Spawn, Completer, Host,
	// Running, Runner, Clock and Logger are the Executor's.
	Workflow workflow.Config
	// DAGs activates DAG runs (the Completer decides their tasks' ends with it too).
	DAGs *dagrun.Engine
	// Remote, when set, runs the function attempts it takes (Remote.Takes) in remote workers.
	Remote Remote
	Clock  clock.Clock
	Logger *slog.Logger
	// LeaseGrace is how long a lease outlives its attempt's timeout (default 30 s); an execution
	// waits for admission at most half of it.
	LeaseGrace time.Duration
	// MaxSyncChildren bounds the sync children running at once in this process (default 256).
	MaxSyncChildren int
}

// Executor runs attempts (see the package doc).
type Executor struct {
	store           Store
	catalog         *catalog.Catalog
	writer          *writer.Writer
	spawn           *spawn.Spawner
	completer       *complete.Completer
	runner          *run.Runner
	env             *host.Env
	workflows       *workflow.Engine
	dags            *dagrun.Engine
	running         running.Set
	remote          Remote
	clock           clock.Clock
	logger          *slog.Logger
	leaseGrace      time.Duration
	admitWithin     time.Duration
	maxSyncChildren int
	// syncChildren counts the sync r_invoke_v1 children running in this process (MaxSyncChildren).
	syncChildren atomic.Int64
}

// DefaultMaxSyncChildren is the default Config.MaxSyncChildren.
const DefaultMaxSyncChildren = 256

// New returns an Executor with its hosts' environment and workflow engine.
func New(cfg Config) *Executor {
	if cfg.LeaseGrace <= 0 {
		cfg.LeaseGrace = 30 * time.Second
	}
	if cfg.MaxSyncChildren <= 0 {
		cfg.MaxSyncChildren = DefaultMaxSyncChildren
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	x := &Executor{store: cfg.Store, catalog: cfg.Catalog, writer: cfg.Writer, spawn: cfg.Spawn, completer: cfg.Completer,
		runner: cfg.Runner, remote: cfg.Remote, clock: cfg.Clock, logger: cfg.Logger, leaseGrace: cfg.LeaseGrace,
		admitWithin: cfg.LeaseGrace / 2, maxSyncChildren: cfg.MaxSyncChildren}
	env := cfg.Host
	env.Children = x
	x.env = host.NewEnv(env, cfg.Tracing)
	wc := cfg.Workflow
	wc.Catalog, wc.Spawn, wc.Completer, wc.Host, wc.Running = cfg.Catalog, cfg.Spawn, cfg.Completer, x.env, &x.running
	wc.Runner, wc.Clock, wc.Logger, wc.AdmitWithin = cfg.Runner, cfg.Clock, cfg.Logger, x.admitWithin
	x.workflows = workflow.New(wc)
	x.dags = cfg.DAGs
	return x
}

// Workflows is the workflow engine the executor activates workflows with.
func (x *Executor) Workflows() *workflow.Engine { return x.workflows }

// Env is the hosts' environment.
func (x *Executor) Env() *host.Env { return x.env }

// Cancel stops the execution of invocation id running in this process, if one does.
func (x *Executor) Cancel(id string) { x.running.Cancel(id) }

// Close ends the workflow executions waiting in memory.
func (x *Executor) Close() { x.workflows.Close() }

// Run runs an attempt claimed by dispatch.StoreClaimer to its end (dispatch.Runner): the program
// for attempt.KindRun, the step compensations of a canceled workflow for attempt.KindCompensate.
// Its outcome is recorded, waiting out a database outage of up to the lease grace, or logged when
// it cannot be: the lease then expires and the work is claimed again.
func (x *Executor) Run(ctx context.Context, a attempt.Attempt) {
	rec := a.Invocation
	d, err := x.catalog.Definition(a.Entrypoint)
	if err != nil {
		x.logger.ErrorContext(ctx, "claimed attempt not run: definition unreadable", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "err", err)
		return
	}
	switch a.Kind {
	case attempt.KindCompensate:
		if err := x.workflows.CompensateCanceled(ctx, rec, a.Entrypoint, d); err != nil {
			x.logger.ErrorContext(ctx, "step compensations not recorded", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "err", err)
		}
	case attempt.KindRun:
		if x.remote != nil && a.Entrypoint.Kind == entrypoint.KindFunction && (d.WorkerDefinition() != "" || x.remote.Takes(a.Entrypoint)) {
			x.runRemote(ctx, a, d)
			return
		}
		// Its writes outlast a database outage of up to the lease's grace: an attempt that finished
		// while the database was away is recorded when it is back, not run again after its lease.
		wctx := store.OutlastOutages(ctx, x.leaseGrace)
		if _, err := x.Execute(wctx, rec, a.Entrypoint, d, a.Due); err != nil {
			x.logger.ErrorContext(ctx, "invocation attempt not recorded", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "err", err)
		}
	default:
		x.logger.ErrorContext(ctx, "claimed attempt not run: unknown kind", "invocation_id", rec.ID, "tenant_id", rec.TenantID, "kind", a.Kind)
	}
}

// RecoverLeases is run once at start-up by a process that is its database's only user
// (store.Exclusive): every lease in the database was taken by a process that is gone, so the work it
// held — running, as far as the records say, and counted against concurrency limits — is reclaimed
// at once instead of after each lease's timeout. It returns how many leases it ended.
func (x *Executor) RecoverLeases(ctx context.Context) (int64, error) {
	var n int64
	err := x.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if n, err = tx.ExpireLeases(x.clock.Now()); n > 0 {
			tx.AfterCommit(x.writer.Wake)
		}
		return err
	})
	if err == nil && n > 0 {
		x.logger.InfoContext(ctx, "reclaiming work held by a stopped process", "leases", n)
	}
	return n, err
}

// StartChild runs an r_invoke_v1 call: a real invocation linked to its parent, visible to the
// parent's caller, executed synchronously within the parent's deadline. Internal entrypoints
// (traits.entrypoint: false) are callable this way. The child's rate limit and the tenant's
// max_concurrent_executions apply (the child is one more running execution); a refusal is the
// call's error result, never a wait (so a parent cannot deadlock on its own slot).
func (x *Executor) StartChild(ctx context.Context, parent invocation.Record, req sandbox.InvokeRequest) (invocation.Record, error) {
	rec, e, d, serr := x.spawn.PrepareChild(ctx, parent, req.EntrypointID, req.Params, invocation.ModeSync)
	if serr != nil {
		return invocation.Record{}, serr
	}
	if n := x.syncChildren.Add(1); n > int64(x.maxSyncChildren) {
		x.syncChildren.Add(-1)
		return invocation.Record{}, &sandbox.Error{TypeID: problem.TypeQuotaExceeded, Category: "retryable",
			Message: fmt.Sprintf("r_invoke_v1: the runtime runs %d child invocations already, the most it runs at once; retry later", x.maxSyncChildren),
			Details: map[string]any{"quota": "sync_children", "retry_after_seconds": 1}}
	}
	defer x.syncChildren.Add(-1)
	// A sync parent's start may still be held back (invoke's runSync): it reaches the disk first.
	if err := spawn.StartDurable(ctx); err != nil {
		return invocation.Record{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "r_invoke_v1: the calling invocation's start could not be written"}
	}
	now := rec.CreatedAt
	// The child's entrypoint rate limit applies as to any start.
	permit, err := x.spawn.RateLimit(rec.TenantID, e.GTSID, d, now)
	if err != nil {
		return invocation.Record{}, spawn.ChildRefused(err)
	}
	policy, err := x.catalog.Policy(ctx, rec.TenantID)
	if err != nil {
		permit.Release()
		return invocation.Record{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "retryable", Message: "r_invoke_v1: tenant policy unavailable"}
	}
	// It runs now, in its parent's goroutine: it is one more running execution of the tenant, so
	// max_concurrent_executions counts it (its parent is counted already); over it the call fails.
	var refused *problem.Error
	var created invocation.Record
	err = x.writer.Update(ctx, func(tx store.Tx) error {
		err := x.spawn.CheckRunning(rec.TenantID, policy.Quotas.MaxConcurrentExecutions, func() (int64, error) {
			return tx.CountTenantRunning(rec.TenantID)
		})
		if pe, ok := errors.AsType[*problem.Error](err); ok {
			refused = pe
		}
		if err != nil {
			return err
		}
		created, err = x.spawn.Create(tx, rec, true, d, now)
		return err
	})
	if refused != nil {
		permit.Release()
		x.spawn.QuotaRefused(rec.TenantID)
		return invocation.Record{}, spawn.ChildRefused(refused)
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
	return x.Execute(ctx, created, e, d, time.Time{})
}

// Execute runs one started attempt of rec and records its outcome. It is used by sync invocations,
// by the dispatcher for queued work, and for r_invoke_v1 children.
func (x *Executor) Execute(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d catalog.Definition, due time.Time) (invocation.Record, error) {
	if e.Kind == entrypoint.KindWorkflow {
		x.writer.Dequeued(rec, time.Time{}, nil)
		if d.IsDAG() {
			out, err := x.dags.Activate(ctx, x.completer, rec, e, d)
			x.writer.AttemptEnded(rec, "dag", writer.ActivationOutcome(out.Status, err))
			return out, err
		}
		return x.workflows.Activate(ctx, workflow.NewClaim(rec), e, d)
	}
	a := x.RunFunction(ctx, rec, e, d, nil, due)
	x.writer.Dequeued(rec, due, a.Outcome.Metrics.QueueWaitMS)
	return x.completer.Complete(context.WithoutCancel(ctx), rec, d, a.Timeline, a.Outcome, nil)
}

// RunFunction runs one attempt of a function (rec as started, runnable since due) through the run
// stage, cancelable by cancel while it runs. Its timeout starts when the run stage admits it, not
// here. It writes nothing.
func (x *Executor) RunFunction(ctx context.Context, rec invocation.Record, e entrypoint.Entrypoint, d catalog.Definition, input any, due time.Time) run.Result {
	if d.WorkerDefinition() != "" {
		a := x.catalog.RunJob(rec, e, d, input, due, x.admitWithin)
		o := outcome.Decide(rec, a.Retry, nil, workerOnly(e.GTSID), true, x.clock.Now())
		o.Metrics = run.Metrics(0, sandbox.Result{}, a.Limits.MemoryMB, 0)
		return run.Result{Outcome: o}
	}
	ctx, span := x.env.StartAttempt(ctx, rec)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	x.running.Track(rec.ID, x.spawn.LeaseOwner(rec), cancel)
	defer x.running.Untrack(rec.ID)
	res := x.runner.Function(runCtx, x.catalog.RunJob(rec, e, d, input, due, x.admitWithin), x.env.New(ctx, rec))
	x.writer.AttemptEnded(rec, "function", res.Outcome.Kind.String())
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrStatus.String(res.Outcome.Kind.String()))
		host.EndSpan(span, res.Outcome.Err)
	}
	return res
}

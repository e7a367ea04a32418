// Package dagrun runs DAG runs: the invocations of entrypoints whose implementation is a
// workflow_spec DAG (internal/dag). An activation reads the run's log (its plan and its tasks'
// events), decides the tasks whose child invocation ended, queues the tasks whose upstream tasks
// all succeeded (each a child invocation, through the same dispatcher as everything else) and
// skips those with an upstream task that did not, then records all of it with the run's outcome
// in one completion: suspended until a child ends, or ended when every task has. docs/dag.md.
package dagrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/complete"
	"github.com/larkrun/lark/internal/dag"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/failpoint"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/quality"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/spawn"
	"github.com/larkrun/lark/internal/store"
)

// Store is the store methods the engine reads: the run's log, its children's records and the
// latest materializations of its assets.
type Store interface {
	Invocation(ctx context.Context, tenantID, id string) (invocation.Record, error)
	Events(ctx context.Context, q store.EventLogQuery) ([]invocation.Event, error)
	LatestMaterialization(ctx context.Context, tenantID, assetKey, partitionKey string) (asset.Materialization, error)
}

// reader is what an activation reads besides the run's log: its tasks' entrypoint versions, its
// children's records and the latest materializations of its assets, from the store (an
// activation) or inside a transaction (a child's closing one, ChildEnded).
type reader interface {
	Lookup(ref string) (entrypoint.Entrypoint, catalog.Definition, error)
	Invocation(tenantID, id string) (invocation.Record, error)
	LatestMaterialization(tenantID, assetKey, partitionKey string) (asset.Materialization, error)
}

// storeReader is a reader of the store, under ctx.
type storeReader struct {
	ctx context.Context
	s   Store
	cat *catalog.Catalog
}

func (r storeReader) Lookup(ref string) (entrypoint.Entrypoint, catalog.Definition, error) {
	return r.cat.Lookup(r.ctx, ref)
}

func (r storeReader) Invocation(tenantID, id string) (invocation.Record, error) {
	return r.s.Invocation(r.ctx, tenantID, id)
}

func (r storeReader) LatestMaterialization(tenantID, assetKey, partitionKey string) (asset.Materialization, error) {
	return r.s.LatestMaterialization(r.ctx, tenantID, assetKey, partitionKey)
}

// txReader is a reader inside a transaction.
type txReader struct {
	store.Tx
	cat *catalog.Catalog
}

func (r txReader) Lookup(ref string) (entrypoint.Entrypoint, catalog.Definition, error) {
	return r.cat.LookupTx(r.Tx, ref)
}

// Config wires an Engine.
type Config struct {
	Store   Store
	Catalog *catalog.Catalog
	Spawn   *spawn.Spawner
	// Blobs holds the tasks' outputs (the output commit protocol, output.go).
	Blobs  blob.Store
	Clock  clock.Clock
	Logger *slog.Logger
	// Observer hears of tasks ended, checks run and materializations recorded, once the
	// activation that records them has committed (nil: nobody; package metrics implements it).
	Observer Observer
}

// Observer hears what DAG activations recorded (lark_dag_* metrics).
type Observer interface {
	// TaskEnded: a task ended in state (succeeded, failed, skipped, cancelled), queued for that
	// long before (0 for a task that was never queued).
	TaskEnded(tenantID, state string, queued time.Duration)
	// CheckRan: a quality check ran on a task's output (result: passed, failed, skipped).
	CheckRan(tenantID, result string)
	// Materialized: a materialization was recorded (state: promoted, quarantined).
	Materialized(tenantID, state string)
}

// Engine activates DAG runs.
type Engine struct {
	cfg  Config
	runs runCache // runs' states as this process last read or wrote them (load, ChildEnded)
	memo planMemo // plans made here, by DAG version, partition and subject
}

// New returns an Engine.
func New(cfg Config) *Engine {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Engine{cfg: cfg}
}

// ErrTaskFailed is the error type of a run with a task that did not succeed.
const ErrTaskFailed = "gts.x.core.serverless.err.v1~x.core.serverless.err.dag_task_failed.v1~"

// Activate runs one activation of DAG run rec (e's version, parsed as d) and records it through c.
func (g *Engine) Activate(ctx context.Context, c *complete.Completer, rec invocation.Record, e entrypoint.Entrypoint, d catalog.Definition) (invocation.Record, error) {
	run, err := &Run{byID: map[string]*Task{}, LastSeq: rec.LastSeq}, error(nil) // not planned yet: nothing to read
	if rec.DAG != nil {
		run, err = g.load(rec, func(after int64) ([]invocation.Event, error) {
			return store.EventsAfter(ctx, g.cfg.Store, rec.TenantID, rec.ID, after)
		})
	}
	if run == nil {
		return rec, err // the log could not be read: the lease runs out and the run is claimed again
	}
	if err == nil { // as read: committed
		var at *invocation.Record
		if run.LastSeq == rec.LastSeq {
			at = &rec
		}
		g.runs.put(rec.ID, run.clone(), at, rec.Attempt)
	}
	a := g.newActivation(ctx, storeReader{ctx, g.cfg.Store, g.cfg.Catalog}, rec, run, g.cfg.Clock.Now())
	if err == nil && !run.Planned {
		err = a.plan(e.ID, d)
	}
	if err != nil {
		return a.fail(c, d, err.Error())
	}
	a.settle()
	a.advance()
	return a.complete(c, d)
}

// newActivation starts an activation of run (rec's state) at now, reading through read.
func (g *Engine) newActivation(ctx context.Context, read reader, rec invocation.Record, run *Run, now time.Time) *activation {
	return &activation{g: g, ctx: ctx, read: read, rec: rec, run: run, now: now, outputs: map[string]json.RawMessage{}}
}

// activation is one activation's state: the run as read, and the events and effects it adds.
type activation struct {
	g       *Engine
	ctx     context.Context
	read    reader
	rec     invocation.Record
	run     *Run
	now     time.Time
	events  []invocation.Event
	effects []complete.Effect
	spawned []spawned                  // the children of the tasks it queued
	outputs map[string]json.RawMessage // succeeded tasks' outputs, read as needed
	err     error                      // the first event that could not be built
	reports []func(Observer)           // told to the Observer once the activation is recorded
	// inTx is set for a decision made in a child's closing transaction (ChildEnded), which must
	// not read the blob store nor run checks; deferred is then set when it had to.
	inTx, deferred bool
}

// spawned is a task's child invocation and its entrypoint version's definition.
type spawned struct {
	rec invocation.Record
	def catalog.Definition
}

// add appends an event of the activation, keyed so that a repeated activation adds it once.
func (a *activation) add(t invocation.EventType, key string, p invocation.Payload) invocation.Event {
	e, err := invocation.Event{Type: t, At: a.now, EngineAttempt: a.rec.EngineAttempt, LogicalAttempt: a.rec.Attempt,
		IdempotencyKey: invocation.IdempotencyKey(a.rec.ID, key, a.rec.Attempt, t, "")}.WithData(p)
	if err != nil && a.err == nil {
		a.err = err
	}
	a.events = append(a.events, e)
	return e
}

// plan fixes the run's plan: the DAG of d (version ref) for the run's partition key, each task's
// entrypoint pinned to the version it resolves to now, as the run's subject sees them. A plan made
// before for the same version, partition and subject is reused when every task's entrypoint still
// resolves to the same version (planMemo).
func (a *activation) plan(ref string, d catalog.Definition) error {
	var params struct {
		PartitionKey string `json:"partition_key"`
	}
	if len(a.rec.Params) > 0 {
		if err := json.Unmarshal(a.rec.Params, &params); err != nil {
			return fmt.Errorf("params: %w", err)
		}
	}
	v := entrypoint.Viewer{TenantID: a.rec.TenantID, SubjectID: a.rec.SubjectID}
	resolve := func(id string) (dag.Pinned, error) {
		e, err := a.g.cfg.Catalog.Resolve(a.ctx, v, id)
		return dag.Pinned{EntrypointID: e.GTSID, Ref: e.ID, Version: e.Version}, err
	}
	key := planKey{ref: ref, partition: params.PartitionKey, tenant: v.TenantID, subject: v.SubjectID}
	m, ok := a.g.memo.get(key, resolve)
	if !ok {
		var err error
		if m, err = newPlanned(d, params.PartitionKey, resolve); err != nil {
			return err
		}
		a.g.memo.put(key, m)
	}
	ev := a.add(invocation.EventDAGPlanned, "dag-planned", invocation.DAGPlanned{Fingerprint: m.fingerprint,
		PartitionKey: m.plan.PartitionKey, Plan: m.raw, Tasks: len(m.plan.Tasks)})
	return a.run.apply(ev)
}

// settle decides the tasks whose child ended: succeeded with the child's result as its output,
// or failed with the child's error.
func (a *activation) settle() {
	for _, t := range a.run.Tasks {
		if t.Ended == nil {
			continue
		}
		child, err := a.read.Invocation(a.rec.TenantID, t.Child)
		if err != nil {
			a.endTask(t, invocation.EventTaskFailed, invocation.TaskEnded{Reason: "child unreadable: " + err.Error()})
			continue
		}
		a.settleChild(t, child)
	}
}

// settleChild decides task t, whose child ended (child: its record).
func (a *activation) settleChild(t *Task, child invocation.Record) {
	end := invocation.TaskEnded{ChildInvocationID: child.ID, Attempts: child.Attempt}
	if child.Status != invocation.StatusSucceeded {
		end.Error, end.Reason = child.Error, "child invocation "+string(child.Status)
		a.assetFailed(t, "")
		a.endTask(t, invocation.EventTaskFailed, end)
		return
	}
	a.succeed(t, child, end)
}

// succeed decides task t, whose child succeeded: its post checks and their gating, and for an
// asset the output's materialization, recorded with the task's end (promoted unless quarantined).
// A blocking check fails the task.
func (a *activation) succeed(t *Task, child invocation.Record, end invocation.TaskEnded) {
	m, err := a.checkOutput(t, child.Result, child.Attempt)
	if err != nil {
		end.Reason = "output: " + err.Error()
		a.endTask(t, invocation.EventTaskFailed, end)
		return
	}
	if len(m.results) > 0 {
		var err error
		if end.Checks, err = json.Marshal(m.results); err != nil {
			end.Reason = "checks: " + err.Error()
			a.endTask(t, invocation.EventTaskFailed, end)
			return
		}
	}
	end.GatingDecision = strings.ToLower(string(m.decision.Action))
	if m.decision.Action == quality.Block {
		end.Reason = m.decision.Reason
		a.assetFailed(t, asset.GatingDecision(end.GatingDecision))
		a.endTask(t, invocation.EventTaskFailed, end)
		return
	}
	tenantID := a.rec.TenantID
	for _, r := range m.results {
		result := map[bool]string{true: "passed", false: "failed"}[r.Passed]
		if r.Skipped {
			result = "skipped"
		}
		a.reports = append(a.reports, func(o Observer) { o.CheckRan(tenantID, result) })
	}
	if m.mat != nil {
		end.MaterializationID = m.mat.ID
		a.effects = append(a.effects, complete.Also(a.record(m.mat)))
		state := string(asset.StateQuarantined)
		if m.mat.State != asset.StateQuarantined {
			state = string(asset.StatePromoted)
		}
		a.reports = append(a.reports, func(o Observer) { o.Materialized(tenantID, state) })
	}
	if m.mat == nil || m.mat.State != asset.StateQuarantined {
		a.outputs[t.Planned.ID] = child.Result
	}
	a.endTask(t, invocation.EventTaskSucceeded, end)
}

// assetFailed counts a failure in the health of task t's asset, if it names one, with the
// task's end (its consecutive failures; the gating decision when checks blocked it).
func (a *activation) assetFailed(t *Task, gating asset.GatingDecision) {
	key := t.Planned.AssetKey
	if key == "" {
		return
	}
	o := store.AssetOutcome{TenantID: a.rec.TenantID, AssetKey: key, At: a.now, GatingDecision: gating}
	if gating != "" {
		failed := false
		o.ChecksPassed = &failed
	}
	a.effects = append(a.effects, complete.Also(func(tx store.Tx, _ invocation.Record) error {
		_, err := tx.RecordAssetOutcome(o)
		return err
	}))
}

// endTask records task t's end.
func (a *activation) endTask(t *Task, typ invocation.EventType, end invocation.TaskEnded) {
	end.TaskID = t.Planned.ID
	if end.ChildInvocationID == "" {
		end.ChildInvocationID = t.Child
	}
	ev := a.add(typ, "task-end-"+t.Planned.ID, end)
	var queued time.Duration
	if !t.QueuedAt.IsZero() {
		queued = a.now.Sub(t.QueuedAt)
	}
	state, tenantID := strings.ToLower(endState(typ)), a.rec.TenantID
	a.reports = append(a.reports, func(o Observer) { o.TaskEnded(tenantID, state, queued) })
	_ = a.run.apply(ev) // decoded from what was just encoded
}

// advance skips the pending tasks with an upstream task that did not succeed and queues those
// whose upstream tasks all succeeded, in the plan's (topological) order, so that a skip reaches
// every task downstream in one pass.
func (a *activation) advance() {
	for _, t := range a.run.Tasks {
		if t.State != StatePending {
			continue
		}
		ready, blocker := true, ""
		for _, up := range t.Planned.DependsOn {
			u := a.run.Task(up)
			switch {
			case u == nil || !u.Terminal():
				ready = false
			case u.State != StateSucceeded && blocker == "":
				blocker = fmt.Sprintf("upstream task %s %s", up, strings.ToLower(u.State))
			}
		}
		switch {
		case blocker != "":
			a.endTask(t, invocation.EventTaskSkipped, invocation.TaskEnded{Reason: blocker})
		case ready:
			a.queue(t)
		}
	}
}

// queue creates task t's child invocation (with the run's outcome) and records task_queued, or
// fails the task when its params cannot be rendered or its entrypoint no longer starts.
func (a *activation) queue(t *Task) {
	child, d, err := a.child(t)
	if err != nil {
		a.endTask(t, invocation.EventTaskFailed, invocation.TaskEnded{Reason: err.Error()})
		return
	}
	ev := a.add(invocation.EventTaskQueued, "task-queued-"+t.Planned.ID, invocation.TaskQueued{TaskID: t.Planned.ID,
		ChildInvocationID: child.ID, EntrypointID: child.EntrypointID, Params: child.Params})
	_ = a.run.apply(ev)
	a.spawned = append(a.spawned, spawned{rec: child, def: d})
}

// child builds task t's child invocation: its pinned version, its params rendered over the
// partition key and the upstream outputs and checked against the version's schema, and its retry
// policy.
func (a *activation) child(t *Task) (invocation.Record, catalog.Definition, error) {
	pt := t.Planned
	e, d, err := a.read.Lookup(pt.EntrypointRef)
	if err != nil {
		return invocation.Record{}, d, fmt.Errorf("entrypoint %s: %w", pt.EntrypointID, err)
	}
	outputs, err := a.upstreamOutputs(referenced(pt.Params))
	if err != nil {
		return invocation.Record{}, d, err
	}
	params, err := dag.Render(pt.Params, a.run.Plan.PartitionKey, outputs)
	if err != nil {
		return invocation.Record{}, d, fmt.Errorf("params: %w", err)
	}
	input, canon, err := a.g.cfg.Catalog.ValidateParams(d, params)
	if err != nil {
		return invocation.Record{}, d, fmt.Errorf("params: %w", err)
	}
	if err := a.preChecks(pt, input); err != nil {
		return invocation.Record{}, d, err
	}
	rec := a.g.cfg.Spawn.NewRecord(e, d, a.rec.TenantID, a.rec.SubjectID, invocation.ModeAsync, canon, a.now)
	rec.CorrelationID, rec.TraceID, rec.SpanID = a.rec.CorrelationID, a.rec.TraceID, a.rec.SpanID
	rec.ParentID, rec.Depth, rec.DAGTask = a.rec.ID, a.rec.Depth+1, pt.ID
	if pt.Retry != nil {
		p := outcome.RetryPolicy{MaxAttempts: pt.Retry.MaxAttempts}
		if rec.RetryPolicy, err = json.Marshal(p); err != nil {
			return invocation.Record{}, d, err
		}
	}
	return rec, d, nil
}

// errDeferred stops a decision in a child's closing transaction that needs the run's activation.
var errDeferred = errors.New("deferred to the run's activation")

// refPattern finds the task ids a params template reads outputs of ({{tasks.<id>.output…}}).
var refPattern = regexp.MustCompile(`\{\{\s*tasks\.([A-Za-z0-9_-]+)\.output`)

// referenced are the ids of the tasks whose outputs params reads (none: no output is read).
func referenced(params json.RawMessage) map[string]bool {
	m := map[string]bool{}
	for _, sub := range refPattern.FindAllSubmatch(params, -1) {
		m[string(sub[1])] = true
	}
	return m
}

// upstreamOutputs are the outputs of the run's succeeded tasks in want, by task id: for a task that names
// an asset, the latest promoted materialization of the asset for the run's partition (so a
// quarantined output is never read: the previous good one is), else its child's result.
func (a *activation) upstreamOutputs(want map[string]bool) (map[string]json.RawMessage, error) {
	for _, t := range a.run.Tasks {
		id := t.Planned.ID
		if t.State != StateSucceeded || a.outputs[id] != nil || !want[id] {
			continue
		}
		if t.Planned.AssetKey != "" {
			out, ok, err := a.latestOutput(t.Planned.AssetKey)
			if err != nil {
				return nil, fmt.Errorf("output of task %s: %w", id, err)
			}
			if !ok {
				return nil, fmt.Errorf("output of task %s: asset %s has no promoted materialization for this partition", id, t.Planned.AssetKey)
			}
			a.outputs[id] = out
			continue
		}
		if t.End == nil || t.End.ChildInvocationID == "" {
			continue
		}
		child, err := a.read.Invocation(a.rec.TenantID, t.End.ChildInvocationID)
		if err != nil {
			return nil, fmt.Errorf("output of task %s: %w", id, err)
		}
		a.outputs[id] = child.Result
	}
	return a.outputs, nil
}

// complete records the activation: its events, then the run suspended (until a child ends) or
// ended, succeeded when every task succeeded.
func (a *activation) complete(c *complete.Completer, d catalog.Definition) (invocation.Record, error) {
	if a.err != nil {
		return a.fail(c, d, a.err.Error())
	}
	for _, s := range a.spawned {
		a.effects = append(a.effects, complete.SpawnChild(s.rec, s.def))
	}
	var o outcome.Outcome
	switch {
	case !a.run.Done():
		o = outcome.Outcome{Kind: outcome.Suspended, Reason: "tasks"}
		a.effects = append(a.effects, complete.WakeIfNewer(a.run.LastSeq))
	case a.run.count(StateSucceeded) == len(a.run.Tasks):
		out, err := json.Marshal(a.summary())
		if err != nil {
			return a.fail(c, d, err.Error())
		}
		o = outcome.Outcome{Kind: outcome.Succeeded, Output: out}
	default:
		s := a.summary()
		o = outcome.Outcome{Kind: outcome.Failed, Final: true, Err: &sandbox.Error{TypeID: ErrTaskFailed, Category: "non_retryable",
			Message: fmt.Sprintf("%d of %d tasks did not succeed (%d failed, %d skipped, %d cancelled)",
				len(a.run.Tasks)-s.Succeeded, len(a.run.Tasks), s.Failed, s.Skipped, s.Cancelled),
			Details: map[string]any{"succeeded": s.Succeeded, "failed": s.Failed, "skipped": s.Skipped, "cancelled": s.Cancelled}}}
	}
	promotes := slices.ContainsFunc(a.events, func(e invocation.Event) bool { return e.Type == invocation.EventTaskSucceeded })
	if promotes {
		failpoint.Hit("dag-before-promote") // outputs committed to the blob store, nothing recorded yet
	}
	final, err := c.CompleteShared(a.ctx, a.rec, d, a.events, o, a.effects)
	if promotes && err == nil {
		failpoint.Hit("dag-after-promote") // the task's end and its promotion recorded
	}
	if err == nil && final.LastSeq > a.rec.LastSeq && final.Status != invocation.StatusRunning {
		a.report()
	}
	if err == nil && final.Status.Terminal() {
		a.g.runs.drop(a.rec.ID)
	}
	return final, err
}

// report tells the Observer what the activation recorded, once it is.
func (a *activation) report() {
	if a.g.cfg.Observer == nil {
		return
	}
	for _, r := range a.reports {
		r(a.g.cfg.Observer)
	}
}

// fail ends the run failed for reason, before any task could run (an unreadable log, a plan that
// cannot be made).
func (a *activation) fail(c *complete.Completer, d catalog.Definition, reason string) (invocation.Record, error) {
	o := outcome.Outcome{Kind: outcome.Failed, Final: true, Err: &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: "non_retryable",
		Message: "dag run: " + reason}}
	a.g.runs.drop(a.rec.ID)
	return c.CompleteShared(a.ctx, a.rec, d, nil, o, nil)
}

// summary is the run's counts (the result of a run whose tasks all succeeded).
func (a *activation) summary() invocation.DAGSummary {
	return invocation.DAGSummary{Fingerprint: a.run.Fingerprint, PartitionKey: a.run.Plan.PartitionKey, Tasks: len(a.run.Tasks),
		Succeeded: a.run.count(StateSucceeded), Failed: a.run.count(StateFailed), Skipped: a.run.count(StateSkipped),
		Cancelled: a.run.count(StateCancelled)}
}

// count is how many tasks are in state.
func (r *Run) count(state string) int {
	n := 0
	for _, t := range r.Tasks {
		if t.State == state {
			n++
		}
	}
	return n
}

// Cancel records, in the transaction that cancels run (already canceled: out), 004 §19's
// cancellation of its tasks: every task that has not ended is cancelled, and the child of each
// queued one is canceled too (its late result is never promoted: the run no longer hears of it).
// It returns the children it canceled, whose executions running in this process the caller stops
// once the transaction has committed. events is the run's log, read before the transaction.
func Cancel(tx store.Tx, out invocation.Record, events []invocation.Event, now time.Time) ([]string, error) {
	run, err := Replay(events, out.Attempt)
	if err != nil || !run.Planned {
		return nil, err
	}
	var evs []invocation.Event
	var children []string
	for _, t := range run.Tasks {
		if t.Terminal() {
			continue
		}
		e, err := invocation.Event{Type: invocation.EventTaskCancelled, At: now, LogicalAttempt: out.Attempt,
			IdempotencyKey: invocation.IdempotencyKey(out.ID, "task-end-"+t.Planned.ID, out.Attempt, invocation.EventTaskCancelled, "")}.
			WithData(invocation.TaskEnded{TaskID: t.Planned.ID, ChildInvocationID: t.Child, Reason: "the run was canceled"})
		if err != nil {
			return nil, err
		}
		evs = append(evs, e)
		if t.Child != "" {
			if err := cancelChild(tx, out.TenantID, t.Child, now); err != nil {
				return nil, err
			}
			children = append(children, t.Child)
		}
	}
	if len(evs) == 0 {
		return nil, nil
	}
	_, _, err = tx.Append(store.AppendRequest{TenantID: out.TenantID, InvocationID: out.ID, Events: evs})
	return children, err
}

// cancelChild cancels a task's child invocation unless it has ended.
func cancelChild(tx store.Tx, tenantID, id string, now time.Time) error {
	child, err := tx.Invocation(tenantID, id)
	if err != nil || child.Status.Terminal() {
		return err
	}
	e, err := invocation.Event{Type: invocation.EventCanceled, At: now, LogicalAttempt: child.Attempt,
		IdempotencyKey: invocation.IdempotencyKey(child.ID, "control", child.Attempt, invocation.EventCanceled, "")}.
		WithData(invocation.Control{Action: "cancel"})
	if err != nil {
		return err
	}
	_, _, err = tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: []invocation.Event{e},
		AppendOptions: store.AppendOptions{Schedule: &store.Scheduling{}}})
	return err
}

// preChecks runs task pt's pre checks on its input params: a blocking result fails the task
// before its child is created.
func (a *activation) preChecks(pt dag.PlannedTask, input any) error {
	checks, err := parseChecks(pt.Checks)
	if err != nil || len(checks) == 0 {
		return err
	}
	if a.inTx && slices.ContainsFunc(checks, func(c quality.Check) bool { return c.In(quality.PhasePre) }) {
		a.deferred = true // checks run in the run's activation
		return errDeferred
	}
	results := quality.Runner{Clock: a.g.cfg.Clock}.Run(a.ctx, checks, quality.PhasePre, input, nil)
	if d := quality.Gate(results, false); d.Action == quality.Block {
		return fmt.Errorf("pre checks: %s", d.Reason)
	}
	return nil
}

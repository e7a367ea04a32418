package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The DAG scenario's DAGs: workflow_spec DAGs whose every task runs the no-op function (NoopID).
const (
	DAGWideID = wfPrefix + "vendor.app.bench.dag_wide.v1~"
	DAGDeepID = wfPrefix + "vendor.app.bench.dag_deep.v1~"
	// dagAdapter is the DAG adapter's GTS type id (docs/dag.md).
	dagAdapter = "gts.x.core.serverless.adapter.dag.v1~"
)

// Limits of the DAG scenario's shapes (docs/dag.md): the wide DAG's join depends on every one of
// its DAGMaxWidth middle tasks, and a DAG holds at most DAGMaxTasks tasks.
const (
	DAGMaxWidth = 50
	DAGMaxTasks = 500
)

// Default sizes of the dag scenario.
const (
	DefaultDAGWidth = 50
	DefaultDAGDepth = 20
	DefaultDAGRuns  = 100
)

// dagDefaults fills the dag scenario's unset sizes.
func (o *Options) dagDefaults() {
	if o.DAGWidth <= 0 {
		o.DAGWidth = DefaultDAGWidth
	}
	if o.DAGDepth <= 0 {
		o.DAGDepth = DefaultDAGDepth
	}
	if o.DAGRuns <= 0 {
		o.DAGRuns = DefaultDAGRuns
	}
}

// DAGOverheadGoal bounds a DAG task's cost against a plain async invocation of the same function:
// baseline tasks/s ÷ DAG tasks/s ≤, for each shape (issue 32).
const DAGOverheadGoal = 1.5

// dagActive is the filter of the invocations that have not ended: a DAG run waits suspended while
// its tasks run.
const dagActive = "status in ('queued','running','suspended')"

// startedActive is the filter a phase waits on: the invocations of the entrypoint it started
// (entrypointID) that have not ended. A DAG run ends only once each of its tasks has, so the runs
// are enough to wait for; polling them, not every task of the tenant, keeps the harness's own
// requests from weighing on the DAG phase (each poll would otherwise walk back past the runs'
// finished children to find the oldest run still suspended).
func startedActive(entrypointID string) string {
	return "entrypoint_id eq '" + entrypointID + "' and " + dagActive
}

// WideDAGTasks is the wide DAG's tasks: "root", then width tasks "t0"… that each depend on it, then
// "join", which depends on all of them.
func WideDAGTasks(width int) []map[string]any {
	tasks := []map[string]any{{"id": "root", "entrypoint_id": NoopID}}
	mid := make([]string, width)
	for i := range mid {
		mid[i] = fmt.Sprintf("t%d", i)
		tasks = append(tasks, map[string]any{"id": mid[i], "entrypoint_id": NoopID, "depends_on": []string{"root"}})
	}
	return append(tasks, map[string]any{"id": "join", "entrypoint_id": NoopID, "depends_on": mid})
}

// DeepDAGTasks is the deep DAG's tasks: a chain "t0" → "t1" → … of depth tasks.
func DeepDAGTasks(depth int) []map[string]any {
	tasks := make([]map[string]any, depth)
	for i := range tasks {
		tasks[i] = map[string]any{"id": fmt.Sprintf("t%d", i), "entrypoint_id": NoopID}
		if i > 0 {
			tasks[i]["depends_on"] = []string{fmt.Sprintf("t%d", i-1)}
		}
	}
	return tasks
}

// DAGDefinition is a registration body of DAG id over tasks: unpartitioned, async only, no
// retries, the minimal traits.workflow.
func DAGDefinition(id string, tasks []map[string]any) []byte {
	def := map[string]any{
		"entrypoint_id": id,
		"title":         "bench DAG",
		"owner":         map[string]any{"owner_type": "tenant"},
		"schema":        map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []string{"async"}, "default": "async"},
			"retry":      map[string]any{"max_attempts": 1},
			"limits":     map[string]any{"timeout_seconds": 600},
			"workflow": map[string]any{
				"compensation":        map[string]any{"on_failure": nil, "on_cancel": nil},
				"checkpointing":       map[string]any{"strategy": "automatic"},
				"max_suspension_days": 30,
			},
		},
		"implementation": map[string]any{
			"adapter": dagAdapter, "kind": "workflow_spec",
			"workflow_spec": map[string]any{"format": "dag", "spec": map[string]any{"tasks": tasks}},
		},
	}
	b, err := json.Marshal(def)
	if err != nil {
		panic("bench: the DAG definition does not encode: " + err.Error()) // maps of strings and slices
	}
	return b
}

// DAGDetail is the dag scenario's breakdown: Runs runs of each shape, started by Clients starters.
type DAGDetail struct {
	Runs    int        `json:"runs"`
	Clients int        `json:"clients"`
	Shapes  []DAGShape `json:"shapes"`
}

// DAGShape is one DAG shape measured against its baseline: as many plain async invocations of the
// same function as the runs have tasks, in the same server just before.
type DAGShape struct {
	Name        string   `json:"name"`  // "wide" or "deep"
	Shape       string   `json:"shape"` // e.g. "1 → 50 → 1"
	TasksPerRun int      `json:"tasks_per_run"`
	Runs        int      `json:"runs"`
	Tasks       int      `json:"tasks"` // Runs × TasksPerRun
	Baseline    DAGPhase `json:"baseline"`
	DAG         DAGPhase `json:"dag"`
	// Overhead is Baseline.TasksPerS ÷ DAG.TasksPerS (the goal's figure); CPUOverhead is
	// DAG.CPUPerTaskMs ÷ Baseline.CPUPerTaskMs.
	Overhead    float64 `json:"overhead_per_task"`
	CPUOverhead float64 `json:"cpu_overhead_per_task"`
}

// DAGPhase is one measured burst: Starts POSTs /invocations (DAG runs, or plain invocations) from
// the first start until none of the tenant's invocations is queued, running or suspended.
type DAGPhase struct {
	Starts    int     `json:"starts"`
	SubmitS   float64 `json:"submit_s"`
	Submit    Summary `json:"submit_latency"`
	WallS     float64 `json:"wall_s"`
	TasksPerS float64 `json:"tasks_per_s"`
	// CPUS is the server's CPU over WallS; CPUPerTaskMs is CPUS ÷ the tasks, in ms.
	CPUS         float64 `json:"server_cpu_s"`
	CPUPerTaskMs float64 `json:"server_cpu_ms_per_task"`
	// BackendsCPUS is the server's PostgreSQL backends' CPU over WallS, when it could be read.
	BackendsCPUS *float64 `json:"pg_backends_cpu_s,omitempty"`
	// BackendsNote says why BackendsCPUS is missing on PostgreSQL.
	BackendsNote string `json:"pg_backends_note,omitempty"`
	// RunDuration is each DAG run's finished_at − created_at (DAG phases only).
	RunDuration *Summary `json:"run_duration,omitempty"`
}

// dagShapeSpec is what dagShape measures.
type dagShapeSpec struct {
	name, shape, id string
	tasks           []map[string]any
}

// DAG measures DAG runs against plain invocations of the same trivial function: for a wide DAG
// (root → DAGWidth tasks → join) and a deep one (a chain of DAGDepth tasks), DAGRuns async runs
// started at once, tasks/s = tasks ÷ (first start → every run ended) and the server's CPU per
// task; each against as many plain async invocations, measured in the same server just before.
func (r *Runner) DAG(ctx context.Context) Scenario {
	o := r.Opts
	s := Scenario{Name: "dag", Status: StatusOK, Unit: "tasks/s"}
	d := &DAGDetail{Runs: o.DAGRuns, Clients: o.AsyncClients}
	s.DAG = d
	shapes := []dagShapeSpec{
		{name: "wide", shape: fmt.Sprintf("1 → %d → 1", o.DAGWidth), id: DAGWideID, tasks: WideDAGTasks(o.DAGWidth)},
		{name: "deep", shape: fmt.Sprintf("chain of %d", o.DAGDepth), id: DAGDeepID, tasks: DeepDAGTasks(o.DAGDepth)},
	}
	r.logf("dag: %d runs of a wide DAG (%s) and of a deep one (%s), each after as many plain invocations as their tasks",
		d.Runs, shapes[0].shape, shapes[1].shape)
	l, err := r.startLark(ctx, "dag", d.Clients)
	if err != nil {
		return failed(s, err)
	}
	defer l.discard()
	s.Profile = l.profile
	if err := registerNoop(ctx, l); err != nil {
		return failed(s, err)
	}
	for _, sp := range shapes {
		if err := registerDefinition(ctx, l, sp.id, DAGDefinition(sp.id, sp.tasks)); err != nil {
			return failed(s, err)
		}
	}
	if err := r.dagWarmup(ctx, l, shapes); err != nil {
		return failed(s, fmt.Errorf("warm-up: %w", err))
	}
	win := openWindow(l) // for the machine's load and the load generator's CPU
	for _, sp := range shapes {
		sh, err := r.dagShape(ctx, l, sp)
		d.Shapes = append(d.Shapes, sh)
		if err != nil {
			s = failed(s, fmt.Errorf("%s: %w", sp.name, err))
			break
		}
	}
	win.close()
	s.ClientCPUS, s.MachineLoad = win.clientCPU(), win.machineLoad()
	if s.Status == StatusOK {
		if bad, err := r.notSucceeded(ctx, l); err != nil {
			s = failed(s, fmt.Errorf("check outcomes: %w", err))
		} else if len(bad) > 0 {
			s = failed(s, fmt.Errorf("invocations that did not succeed, e.g. %s", strings.Join(bad, "; ")))
		}
	}
	usage, stopErr := l.stop()
	s.Process = &usage
	if stopErr != nil {
		s = failed(s, stopErr)
	}
	dagTotals(&s, d)
	return s
}

// registerDefinition registers and activates entrypoint id from its registration body.
func registerDefinition(ctx context.Context, l *lark, id string, body []byte) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := l.api.Register(sctx, l.token, body)
	if err == nil {
		err = l.api.Activate(sctx, l.token, id)
	}
	if err != nil {
		return fmt.Errorf("register %s: %w", id, err)
	}
	return nil
}

// dagWarmupInvocations and dagWarmupRuns are the dag scenario's warm-up, not measured: plain
// invocations, then runs of each DAG (a fresh server's first seconds are slower: its caches and
// heap grow, and the first phase would pay for it).
const (
	dagWarmupInvocations = 500
	dagWarmupRuns        = 2
)

// dagWarmup runs the warm-up and waits until it has ended.
func (r *Runner) dagWarmup(ctx context.Context, l *lark, shapes []dagShapeSpec) error {
	if _, _, err := r.dagPhase(ctx, l, NoopID, dagWarmupInvocations, noopAsyncRequest, dagWarmupInvocations); err != nil {
		return err
	}
	for _, sp := range shapes {
		if _, _, err := r.dagPhase(ctx, l, sp.id, dagWarmupRuns, startRequest(sp.id, "async"), dagWarmupRuns*len(sp.tasks)); err != nil {
			return fmt.Errorf("%s: %w", sp.name, err)
		}
	}
	return nil
}

// dagShape measures one shape: the baseline's plain invocations, then the DAG runs.
func (r *Runner) dagShape(ctx context.Context, l *lark, sp dagShapeSpec) (DAGShape, error) {
	runs := r.Opts.DAGRuns
	sh := DAGShape{Name: sp.name, Shape: sp.shape, TasksPerRun: len(sp.tasks), Runs: runs, Tasks: runs * len(sp.tasks)}
	var err error
	r.logf("dag: %s: baseline, %d plain async invocations", sp.name, sh.Tasks)
	if sh.Baseline, _, err = r.dagPhase(ctx, l, NoopID, sh.Tasks, noopAsyncRequest, sh.Tasks); err != nil {
		return sh, fmt.Errorf("baseline: %w", err)
	}
	r.logf("dag: %s: %s, %s of server CPU per task", sp.name, rate(sh.Baseline.TasksPerS, "inv/s"), msCell(sh.Baseline.CPUPerTaskMs))
	r.logf("dag: %s: %d runs of %d tasks", sp.name, runs, sh.TasksPerRun)
	ph, ids, err := r.dagPhase(ctx, l, sp.id, runs, startRequest(sp.id, "async"), sh.Tasks)
	sh.DAG = ph
	if err != nil {
		return sh, err
	}
	dur, err := runDurations(ctx, l, ids, sh.TasksPerRun)
	if err != nil {
		return sh, err
	}
	sh.DAG.RunDuration = &dur
	if ph.TasksPerS > 0 {
		sh.Overhead = sh.Baseline.TasksPerS / ph.TasksPerS
	}
	if sh.Baseline.CPUPerTaskMs > 0 {
		sh.CPUOverhead = ph.CPUPerTaskMs / sh.Baseline.CPUPerTaskMs
	}
	r.logf("dag: %s: %s, %s of server CPU per task: overhead per task %.2f× (CPU %.2f×)", sp.name, rate(ph.TasksPerS, "tasks/s"),
		msCell(ph.CPUPerTaskMs), sh.Overhead, sh.CPUOverhead)
	return sh, nil
}

// dagPhase starts n async invocations of entrypointID with body from the scenario's clients, waits
// until none of them is queued, running or suspended, and measures the phase as tasks of work; it
// returns the ids started.
func (r *Runner) dagPhase(ctx context.Context, l *lark, entrypointID string, n int, body []byte, tasks int) (DAGPhase, []string, error) {
	ph := DAGPhase{Starts: n}
	win := openWindow(l)
	first := time.Now()
	res, ids := submitIDs(ctx, l, min(r.Opts.AsyncClients, n), n, body)
	ph.SubmitS, ph.Submit = res.WindowS, res.Latency
	if res.Errors > 0 {
		return ph, ids, fmt.Errorf("%d of %d starts failed, e.g. %s", res.Errors, n, strings.Join(res.ErrorSamples, "; "))
	}
	limit := BurnDownLimit(n, res.Throughput, r.Opts.BurnDownMax)
	done, err := r.waitNone(ctx, l, startedActive(entrypointID), 20*time.Millisecond, first.Add(limit))
	if err != nil {
		return ph, ids, withUnfinished(ctx, l, err)
	}
	win.close()
	ph.WallS = done.Sub(first).Seconds()
	ph.TasksPerS = float64(tasks) / ph.WallS
	if cpu, ok := win.serverCPU(); ok {
		ph.CPUS = cpu
		ph.CPUPerTaskMs = ph.CPUS * 1000 / float64(tasks)
	}
	ph.BackendsCPUS, ph.BackendsNote = win.backends()
	return ph, ids, nil
}

// withUnfinished adds to err a few of the tenant's invocations that have not ended.
func withUnfinished(ctx context.Context, l *lark, err error) error {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	left, lerr := l.api.listInvocations(lctx, l.token, dagActive, 5)
	if lerr != nil || len(left) == 0 {
		return err
	}
	return fmt.Errorf("%w, e.g. %s", err, strings.Join(left, "; "))
}

// runDurations reads each DAG run, checks that it succeeded with all its tasks, and summarizes
// their durations (finished_at − created_at).
func runDurations(ctx context.Context, l *lark, ids []string, tasks int) (Summary, error) {
	rec := NewRecorder(0)
	var mu sync.Mutex
	var next int
	res := Load{Workers: min(16, len(ids)), Count: int64(len(ids)), Do: func(ctx context.Context) error {
		mu.Lock()
		id := ids[next]
		next++
		mu.Unlock()
		_, b, err := l.api.Call(ctx, http.MethodGet, "/invocations/"+id, l.token, nil, http.StatusOK)
		if err != nil {
			return err
		}
		d, err := DAGRunDuration(b, tasks)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		rec.Add(d)
		return nil
	}}.Run(ctx)
	if res.Errors > 0 {
		return rec.Summary(), fmt.Errorf("%d of %d runs: %s", res.Errors, len(ids), strings.Join(res.ErrorSamples, "; "))
	}
	return rec.Summary(), nil
}

// DAGRunDuration reads a DAG run's InvocationRecord: it must have succeeded with tasks tasks
// succeeded (its result is the run's summary); the duration is finished_at − created_at.
func DAGRunDuration(record []byte, tasks int) (time.Duration, error) {
	var r struct {
		Status string `json:"status"`
		Result struct {
			Tasks     int `json:"tasks"`
			Succeeded int `json:"succeeded"`
		} `json:"result"`
		Timestamps struct {
			CreatedAt  time.Time  `json:"created_at"`
			FinishedAt *time.Time `json:"finished_at"`
		} `json:"timestamps"`
	}
	if err := json.Unmarshal(record, &r); err != nil {
		return 0, fmt.Errorf("the run's record: %w", err)
	}
	switch {
	case r.Status != "succeeded":
		return 0, fmt.Errorf("run %s: %.300s", r.Status, record)
	case r.Result.Tasks != tasks || r.Result.Succeeded != tasks:
		return 0, fmt.Errorf("run succeeded with %d of %d tasks succeeded, want %d", r.Result.Succeeded, r.Result.Tasks, tasks)
	case r.Timestamps.FinishedAt == nil:
		return 0, errors.New("run succeeded without finished_at")
	}
	return r.Timestamps.FinishedAt.Sub(r.Timestamps.CreatedAt), nil
}

// dagTotals sets s's figures from the shapes measured: throughput and the baseline's over both
// shapes (tasks ÷ the phases' wall time), the ratio, and a goal per shape on its overhead.
func dagTotals(s *Scenario, d *DAGDetail) {
	bl := &Baseline{Name: "plain async invocations", Unit: "tasks/s"}
	s.Baseline = bl
	var tasks, dagS, blS, dagCPU, blCPU float64
	pg := dagBackends{}
	for _, sh := range d.Shapes {
		if sh.DAG.WallS <= 0 || sh.Baseline.WallS <= 0 {
			continue
		}
		tasks += float64(sh.Tasks)
		dagS, blS = dagS+sh.DAG.WallS, blS+sh.Baseline.WallS
		dagCPU, blCPU = dagCPU+sh.DAG.CPUS, blCPU+sh.Baseline.CPUS
		pg.add(sh)
		s.Goals = append(s.Goals, Goal{Name: sh.Name + " overhead", Target: fmt.Sprintf("≤ %g×", DAGOverheadGoal),
			Value: sh.Overhead, Met: sh.Overhead > 0 && sh.Overhead <= DAGOverheadGoal})
	}
	if dagS > 0 && blS > 0 {
		s.Throughput, bl.Throughput = tasks/dagS, tasks/blS
		s.Ratio = s.Throughput / bl.Throughput
		bl.Process = &Usage{CPUS: blCPU, WallS: blS, CPUWindowS: blCPU}
		if s.Process != nil {
			s.Process.CPUWindowS = dagCPU
		}
		dagB, blB := pg.totals()
		s.CPU = NewCPUPerUnit("task", int64(tasks), dagCPU, dagB, pg.note)
		if c := NewCPUPerUnit("task", int64(tasks), blCPU, blB, pg.note); c != nil {
			bl.CPUPerUnitMs = c.TotalMs
			s.CPU.Compare(c.TotalMs, "")
		}
	}
	s.Result = goalsResult(s.Goals)
}

// dagBackends sums the PostgreSQL backends' CPU of the DAG and baseline phases; any phase without
// it leaves both totals unknown.
type dagBackends struct {
	dag, bl float64
	missing bool
	note    string
}

func (b *dagBackends) add(sh DAGShape) {
	if sh.DAG.BackendsCPUS == nil || sh.Baseline.BackendsCPUS == nil {
		b.missing = true
		b.note = cmp.Or(b.note, sh.DAG.BackendsNote, sh.Baseline.BackendsNote)
		return
	}
	b.dag += *sh.DAG.BackendsCPUS
	b.bl += *sh.Baseline.BackendsCPUS
}

// totals are the DAG phases' and the baseline phases' backends' CPU seconds, nil when unknown.
func (b *dagBackends) totals() (dag, bl *float64) {
	if b.missing {
		return nil, nil
	}
	return &b.dag, &b.bl
}

// dagDetails are the report's lines for the dag scenario: each shape against its baseline.
func dagDetails(d *DAGDetail) []string {
	if d == nil {
		return nil
	}
	var out []string
	for _, sh := range d.Shapes {
		line := fmt.Sprintf("dag %s (%s, %d tasks): %d runs from %d clients, all ended %.1f s after the first start: %s, server CPU %s per task; baseline: %d plain async invocations in %.1f s: %s, %s per task; overhead per task %.2f× (CPU %.2f×)",
			sh.Name, sh.Shape, sh.TasksPerRun, sh.Runs, min(d.Clients, sh.Runs), sh.DAG.WallS, rate(sh.DAG.TasksPerS, "tasks/s"), msCell(sh.DAG.CPUPerTaskMs),
			sh.Tasks, sh.Baseline.WallS, rate(sh.Baseline.TasksPerS, "inv/s"), msCell(sh.Baseline.CPUPerTaskMs), sh.Overhead, sh.CPUOverhead)
		if rd := sh.DAG.RunDuration; rd != nil {
			line += fmt.Sprintf("; run duration p50/p99 %s/%s", msCell(rd.P50Ms), msCell(rd.P99Ms))
		}
		out = append(out, line)
	}
	return out
}

package bench

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDAGShapes(t *testing.T) {
	t.Parallel()
	wide := WideDAGTasks(3)
	require.Len(t, wide, 5)
	require.Equal(t, map[string]any{"id": "root", "entrypoint_id": NoopID}, wide[0])
	require.Equal(t, []string{"root"}, wide[2]["depends_on"])
	require.Equal(t, "join", wide[4]["id"])
	require.Equal(t, []string{"t0", "t1", "t2"}, wide[4]["depends_on"])
	deep := DeepDAGTasks(3)
	require.Len(t, deep, 3)
	require.NotContains(t, deep[0], "depends_on")
	require.Equal(t, []string{"t1"}, deep[2]["depends_on"])

	var def struct {
		ID     string `json:"entrypoint_id"`
		Traits struct {
			Invocation struct {
				Supported []string `json:"supported"`
			} `json:"invocation"`
			Workflow map[string]any `json:"workflow"`
		} `json:"traits"`
		Impl struct {
			Adapter string `json:"adapter"`
			Kind    string `json:"kind"`
			Spec    struct {
				Format string `json:"format"`
				Spec   struct {
					Tasks []map[string]any `json:"tasks"`
				} `json:"spec"`
			} `json:"workflow_spec"`
		} `json:"implementation"`
	}
	require.NoError(t, json.Unmarshal(DAGDefinition(DAGDeepID, deep), &def))
	require.Equal(t, DAGDeepID, def.ID)
	require.Equal(t, []string{"async"}, def.Traits.Invocation.Supported, "a DAG starts async only")
	require.NotEmpty(t, def.Traits.Workflow)
	require.Equal(t, "gts.x.core.serverless.adapter.dag.v1~", def.Impl.Adapter)
	require.Equal(t, "workflow_spec", def.Impl.Kind)
	require.Equal(t, "dag", def.Impl.Spec.Format)
	require.Len(t, def.Impl.Spec.Spec.Tasks, 3)
}

func TestDAGRunDuration(t *testing.T) {
	t.Parallel()
	rec := func(status string, tasks, succeeded int, finished string) []byte {
		return []byte(`{"status":"` + status + `","result":{"fingerprint":"f","tasks":` + strconv.Itoa(tasks) + `,"succeeded":` + strconv.Itoa(succeeded) +
			`},"timestamps":{"created_at":"2026-11-27T10:00:00Z","finished_at":` + finished + `}}`)
	}
	d, err := DAGRunDuration(rec("succeeded", 5, 5, `"2026-11-27T10:00:01.5Z"`), 5)
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, d)
	_, err = DAGRunDuration(rec("failed", 5, 4, `"2026-11-27T10:00:01Z"`), 5)
	require.ErrorContains(t, err, "run failed")
	_, err = DAGRunDuration(rec("succeeded", 4, 4, `"2026-11-27T10:00:01Z"`), 5)
	require.ErrorContains(t, err, "want 5")
	_, err = DAGRunDuration(rec("succeeded", 5, 5, `null`), 5)
	require.ErrorContains(t, err, "finished_at")
}

func TestDAGTotals(t *testing.T) {
	t.Parallel()
	d := &DAGDetail{Runs: 10, Clients: 32, Shapes: []DAGShape{
		{Name: "wide", Shape: "1 → 3 → 1", TasksPerRun: 5, Runs: 10, Tasks: 50, Overhead: 1.25, CPUOverhead: 1.5,
			Baseline: DAGPhase{WallS: 1, TasksPerS: 50, CPUS: 0.5, CPUPerTaskMs: 10},
			DAG:      DAGPhase{WallS: 1.25, TasksPerS: 40, CPUS: 0.75, CPUPerTaskMs: 15, RunDuration: &Summary{P50Ms: 100, P99Ms: 200}}},
		{Name: "deep", Shape: "chain of 5", TasksPerRun: 5, Runs: 10, Tasks: 50, Overhead: 2, CPUOverhead: 2,
			Baseline: DAGPhase{WallS: 1, TasksPerS: 50, CPUS: 0.5, CPUPerTaskMs: 10},
			DAG:      DAGPhase{WallS: 2, TasksPerS: 25, CPUS: 1, CPUPerTaskMs: 20}},
	}}
	s := Scenario{Name: "dag", Status: StatusOK, Unit: "tasks/s", DAG: d, Process: &Usage{CPUS: 3}}
	dagTotals(&s, d)
	require.InDelta(t, 100/3.25, s.Throughput, 1e-9)
	require.InDelta(t, 50.0, s.Baseline.Throughput, 1e-9)
	require.InDelta(t, s.Throughput/s.Baseline.Throughput, s.Ratio, 1e-9)
	require.InDelta(t, 1.75, s.Process.CPUWindowS, 1e-9, "the DAG phases' CPU")
	require.InDelta(t, 1.0, s.Baseline.Process.CPUS, 1e-9, "the baselines' CPU")
	require.Len(t, s.Goals, 2)
	require.True(t, s.Goals[0].Met)
	require.False(t, s.Goals[1].Met)
	require.Equal(t, ResultMiss, s.Result)
	// CPU per task: the DAG phases' 1.75 s over 100 tasks against the plain invocations' 1.0 s.
	require.Equal(t, "task", s.CPU.Unit)
	require.InDelta(t, 17.5, s.CPU.TotalMs, 1e-9)
	require.InDelta(t, 10.0, s.Baseline.CPUPerUnitMs, 1e-9)
	require.InDelta(t, 1.75, s.CPU.Ratio, 1e-9)
	require.Equal(t, "1.75×", scenarioCells(s)[colCPURatio])
	lines := details(s)
	require.Len(t, lines, 3)
	require.Equal(t, "dag: CPU per task in the measured window (100): server 17.5 ms; baseline 10.0 ms: 1.75×", lines[0])
	require.True(t, strings.HasPrefix(lines[1], "dag wide (1 → 3 → 1, 5 tasks): 10 runs from 10 clients"), lines[1])
	require.Contains(t, lines[1], "overhead per task 1.25× (CPU 1.50×); run duration p50/p99 100 ms/200 ms")
	require.Equal(t, "wide overhead ≤ 1.5×", goalText(s.Goals[0]))

	// On PostgreSQL the backends' CPU adds to both sides when every phase has it.
	b1, b2 := 0.25, 0.5
	for i := range d.Shapes {
		d.Shapes[i].DAG.BackendsCPUS, d.Shapes[i].Baseline.BackendsCPUS = &b2, &b1
	}
	dagTotals(&s, d)
	require.InDelta(t, 17.5+10, s.CPU.TotalMs, 1e-9)
	require.InDelta(t, 10.0+5, s.Baseline.CPUPerUnitMs, 1e-9)
	d.Shapes[1].DAG.BackendsCPUS, d.Shapes[1].DAG.BackendsNote = nil, "n/a: the database is not on this machine"
	dagTotals(&s, d)
	require.Nil(t, s.CPU.BackendsMs)
	require.Equal(t, "n/a: the database is not on this machine", s.CPU.BackendsNote)
}

func TestDAGOptions(t *testing.T) {
	t.Parallel()
	var o Options
	o.Defaults()
	require.Equal(t, [3]int{DefaultDAGWidth, DefaultDAGDepth, DefaultDAGRuns}, [3]int{o.DAGWidth, o.DAGDepth, o.DAGRuns})
	require.NoError(t, o.Validate())
	o = Options{Scale: ScaleSmall, DAGDepth: 7}
	o.Defaults()
	require.Equal(t, [3]int{DefaultDAGWidth, 7, 20}, [3]int{o.DAGWidth, o.DAGDepth, o.DAGRuns})
	o = Options{DAGWidth: DAGMaxWidth + 1}
	o.Defaults()
	require.ErrorContains(t, o.Validate(), "--dag-width")
	o = Options{DAGDepth: DAGMaxTasks + 1}
	o.Defaults()
	require.ErrorContains(t, o.Validate(), "--dag-depth")
}

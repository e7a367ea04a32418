package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/bench"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// buildLark builds ./cmd/lark from the module root into dir.
func buildLark(t *testing.T, dir string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(mod), "module github.com/larkrun/lark\n", "%s is not the module root", root)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is needed to build the binary:", err)
	}
	bin := filepath.Join(dir, "lark")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-o", bin, "./cmd/lark")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/lark:\n%s", out)
	return bin
}

// runBench runs `lark bench args...` in dir and returns its stdout and the JSON report.
func runBench(t *testing.T, bin, dir string, args ...string) (string, bench.Report) {
	t.Helper()
	out := filepath.Join(dir, "results.json")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"bench", "--out", out}, args...)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "lark bench %v\nstdout:\n%s\nstderr:\n%s", args, stdout.String(), stderr.String())
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep bench.Report
	require.NoError(t, json.Unmarshal(b, &rep), "%s", b)
	t.Logf("lark bench %v:\n%s", args, stdout.String())
	return stdout.String(), rep
}

func TestBenchCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lark binary")
	}
	dir := t.TempDir()
	bin := buildLark(t, dir)

	// sync and coldstart, short.
	stdout, rep := runBench(t, bin, dir, "--scenarios", "sync,coldstart", "--duration", "2s", "--async-n", "2000")
	require.Len(t, rep.Scenarios, 2)
	require.Positive(t, rep.Machine.CPUs)
	require.Equal(t, []string{"sync", "coldstart"}, rep.Options.Scenarios)
	for _, s := range rep.Scenarios {
		require.Equal(t, bench.StatusOK, s.Status, "%s: %s", s.Name, s.Error)
		require.Positive(t, s.Throughput, s.Name)
		require.Zero(t, s.Errors, s.Name)
		require.NotNil(t, s.Latency, s.Name)
		require.Positive(t, s.Latency.P99Ms, s.Name)
		require.GreaterOrEqual(t, s.Latency.P99Ms, s.Latency.P50Ms, s.Name)
		require.NotNil(t, s.Process, s.Name)
		require.Positive(t, s.Process.CPUS, s.Name)
		require.Positive(t, s.Process.MaxRSSKiB, s.Name)
		require.Contains(t, []string{bench.ResultPass, bench.ResultMiss}, s.Result, s.Name)
		require.Contains(t, stdout, "| "+s.Name+" | ")
	}
	sync := rep.Scenarios[0]
	require.Equal(t, "sync", sync.Name)
	require.NotNil(t, sync.Baseline)
	require.Positive(t, sync.Baseline.Throughput, "echo req/s")
	require.Positive(t, sync.Baseline.Process.CPUS, "echo CPU")
	require.InDelta(t, sync.Throughput/sync.Baseline.Throughput, sync.Ratio, 1e-9)
	require.Len(t, sync.Goals, 3)
	require.NotNil(t, sync.Sync, "durable writes per call")
	require.Greater(t, sync.Sync.DurableWritesPerCall, 0.9, "at least the one write of each call")
	// CPU per request, Lark's beside echo's, and the machine's load over the window.
	require.NotNil(t, sync.CPU)
	require.Equal(t, "request", sync.CPU.Unit)
	require.Equal(t, sync.Latency.Count, sync.CPU.Units)
	require.Positive(t, sync.CPU.ServerMs)
	require.Positive(t, sync.Baseline.CPUPerUnitMs)
	require.InDelta(t, sync.CPU.TotalMs/sync.Baseline.CPUPerUnitMs, sync.CPU.Ratio, 1e-9)
	require.NotNil(t, sync.MachineLoad)
	require.Equal(t, runtime.NumCPU(), sync.MachineLoad.CPUs)
	cold := rep.Scenarios[1]
	require.Equal(t, 200, cold.ColdStart.Iterations)
	require.Equal(t, int64(200), cold.Latency.Count)
	require.True(t, strings.HasPrefix(stdout, "| scenario | throughput | p50 | p99 | CPU s | peak RSS MiB | CPU/unit | load | baseline | ratio | CPU/unit ratio | goal | result |\n"))

	// async, small, with profiles and the pending scenario listed.
	prof := filepath.Join(dir, "prof")
	stdout, rep = runBench(t, bin, dir, "--scenarios", "async,cron10k", "--async-n", "2000", "--profile-dir", prof,
		"--cron-n", "50", "--cron-expr", "*/2 * * * * *", "--cron-fires", "2")
	require.Len(t, rep.Scenarios, 2)
	async := rep.Scenarios[0]
	require.Equal(t, bench.StatusOK, async.Status, async.Error)
	require.Positive(t, async.Throughput)
	require.Equal(t, 2000, async.Async.N)
	require.Equal(t, int64(2000), async.Async.Submit.Count)
	require.Positive(t, async.Async.BurnDownS)
	require.NotNil(t, async.Baseline.Raw)
	require.Positive(t, async.Baseline.Throughput, "raw lifecycles/s")
	require.Equal(t, 2000, async.Baseline.Raw.Rows)
	require.Positive(t, async.Ratio)
	require.Equal(t, int64(2000), async.CPU.Units)
	require.Positive(t, async.CPU.ServerMs)
	require.Positive(t, async.Baseline.CPUPerUnitMs, "the raw loop's CPU per lifecycle")
	require.Positive(t, async.CPU.Ratio)
	require.GreaterOrEqual(t, async.Async.LimitS, 240.0, "at least --burn-down-max")
	require.NotNil(t, async.MachineLoad)
	require.Equal(t, filepath.Join(prof, "async.pprof"), async.Profile)
	st, err := os.Stat(async.Profile)
	require.NoError(t, err, "the server's CPU profile")
	require.Positive(t, st.Size())
	cr := rep.Scenarios[1]
	require.Equal(t, "cron10k", cr.Name)
	require.Equal(t, bench.StatusOK, cr.Status, cr.Error)
	require.Equal(t, 50, cr.Cron10k.N)
	require.Equal(t, 100, cr.Cron10k.Runs, "50 schedules × 2 instants")
	require.Zero(t, cr.Cron10k.Missing)
	require.Equal(t, int64(100), cr.Latency.Count)
	require.Positive(t, cr.Cron10k.Cores)
	require.Len(t, cr.Goals, 2)
	require.Contains(t, stdout, "| cron10k | ")

	// workflow10 and sleepers at --scale small, two sizes set explicitly over the preset.
	stdout, wrep := runBench(t, bin, dir, "--scenarios", "workflow10,sleepers", "--scale", "small",
		"--workflow10-n", "300", "--sleepers-n", "200")
	require.Equal(t, bench.ScaleSmall, wrep.Options.Scale)
	require.Equal(t, 3.0, wrep.Options.SleepersSleepS, "the preset's sleep")
	require.Len(t, wrep.Scenarios, 2)
	for _, s := range wrep.Scenarios {
		require.Equal(t, bench.StatusOK, s.Status, "%s: %s", s.Name, s.Error)
		require.Zero(t, s.Errors, s.Name)
		require.NotNil(t, s.Latency, s.Name)
		require.Positive(t, s.Latency.Count, s.Name)
		require.Contains(t, []string{bench.ResultPass, bench.ResultMiss}, s.Result, s.Name)
	}
	wf := wrep.Scenarios[0].Workflow10
	require.Equal(t, 10, wf.Steps)
	require.Equal(t, int64(20), wf.Serial.Count)
	require.Equal(t, int64(300), wf.Submit.Count)
	require.InDelta(t, wf.StepsPerS, 10*wf.WorkflowsS, 1e-6)
	require.Positive(t, wf.StepsPerS)
	require.Len(t, wrep.Scenarios[0].Goals, 2)
	sl := wrep.Scenarios[1].Sleepers
	require.Equal(t, 200, sl.LagSampled)
	require.Equal(t, int64(200), sl.Lag.Count)
	require.Positive(t, sl.SleepRSSMaxKiB)
	require.Positive(t, sl.RSSSamples)
	require.GreaterOrEqual(t, sl.DoneS, 3.0)
	require.Contains(t, stdout, "| workflow10 | ")
	require.Contains(t, stdout, "| sleepers | — | ")

	// events, small: every event accepted started exactly one invocation, which succeeded.
	stdout, erep := runBench(t, bin, dir, "--scenarios", "events", "--events-n", "300", "--events-triggers", "20")
	require.Len(t, erep.Scenarios, 1)
	ev := erep.Scenarios[0]
	require.Equal(t, bench.StatusOK, ev.Status, ev.Error)
	require.Equal(t, 300, ev.Events.N)
	require.EqualValues(t, 300, ev.Events.Triggered, "none lost, none doubled")
	require.Equal(t, int64(300), ev.Latency.Count)
	require.Positive(t, ev.Events.DeliverRate)
	require.Positive(t, ev.Events.CELMicrosPerEvent)
	require.Positive(t, ev.Baseline.Throughput, "raw inserts/s")
	require.InDelta(t, ev.Throughput/ev.Baseline.Throughput, ev.Ratio, 1e-9)
	require.Contains(t, stdout, "| events | ")

	checkDAG(t, bin, dir)
	checkScale(t, bin, dir)

	// A scenario that errors makes the command fail, after writing the table and the JSON file.
	out := filepath.Join(dir, "failed.json")
	cmd := exec.Command(bin, "bench", "--scenarios", "coldstart", "--store", "postgres://nobody@127.0.0.1:1/none", "--out", out)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	require.Error(t, cmd.Run(), "an errored scenario is a failure")
	require.Contains(t, so.String(), "| coldstart | ")
	require.Contains(t, so.String(), "FAILED")
	require.Contains(t, se.String(), "scenario(s) failed: coldstart")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var failed bench.Report
	require.NoError(t, json.Unmarshal(b, &failed))
	require.Equal(t, bench.StatusFailed, failed.Scenarios[0].Status)
	require.Contains(t, failed.Scenarios[0].Error, "PostgreSQL", "the reason names the store that failed")

	// Unknown scenario names are refused before anything runs.
	o, err := exec.Command(bin, "bench", "--scenarios", "sync,bogus", "--out", filepath.Join(dir, "r.json")).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(o), `unknown scenario "bogus"`)
}

// On PostgreSQL (LARK_TEST_POSTGRES_URL): async and workflow10 at small sizes, each in a database
// of its own that is dropped afterwards (the test role may create databases); async is compared with the raw SKIP LOCKED loop, and both
// report PostgreSQL's writes; heartbeat measures the writes of a worker's heartbeats against a
// control without them.
func TestBenchCommandPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lark binary")
	}
	base := pgtest.URL(t)
	dir := t.TempDir()
	bin := buildLark(t, dir)
	_, rep := runBench(t, bin, dir, "--store", base, "--scale", "small", "--scenarios", "async,workflow10,heartbeat", "--async-n", "500", "--workflow10-n", "50")
	require.Len(t, rep.Scenarios, 3)
	for _, s := range rep.Scenarios[:2] {
		require.Equal(t, bench.StatusOK, s.Status, "%s: %s", s.Name, s.Error)
		require.Positive(t, s.Throughput, s.Name)
		require.NotNil(t, s.StoreWrites, s.Name)
		require.Positive(t, s.StoreWrites.RowsPer, s.Name)
		require.Positive(t, s.StoreWrites.Commits, s.Name)
	}
	a := rep.Scenarios[0]
	require.NotNil(t, a.Baseline)
	require.NotNil(t, a.Baseline.PGRaw)
	require.Equal(t, 500, a.Baseline.PGRaw.Rows)
	require.Equal(t, bench.PGRawWorkers, a.Baseline.PGRaw.Workers)
	require.Positive(t, a.Ratio)
	require.Len(t, a.Goals, 3, "the ratio, rows and CPU per invocation")
	require.Equal(t, "rows_per_invocation", a.Goals[1].Name)
	require.InDelta(t, a.StoreWrites.RowsPer, a.Goals[1].Value, 1e-9)
	require.Equal(t, "cpu_ms_per_invocation", a.Goals[2].Name)
	require.Equal(t, "invocation", a.StoreWrites.Per)
	require.Equal(t, "step", rep.Scenarios[1].StoreWrites.Per)

	require.Contains(t, a.StoreWrites.CommitsSource, "own database", "the test role may create databases")

	hb := rep.Scenarios[2]
	require.Equal(t, bench.StatusOK, hb.Status, "%s", hb.Error)
	require.NotNil(t, hb.Heartbeats)
	require.Greater(t, hb.Heartbeats.Heartbeats, int64(20), "a heartbeat every 50 ms for 5 s")
	require.LessOrEqual(t, hb.Heartbeats.ControlHeartbeats, int64(2), "the control's worker does not heartbeat")
	require.Zero(t, hb.Heartbeats.ServerCountedWrites)
	require.Less(t, hb.Heartbeats.RowsPerHeartbeat, 0.5, "a heartbeat writes no row")

	checkScale(t, bin, dir, "--store", base)

	// Every scenario's database (or schema) is gone.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var left int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'lark_bench_%'`).Scan(&left))
	require.Zero(t, left, "schemas left behind")
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE 'lark_bench_%'`).Scan(&left))
	require.Zero(t, left, "databases left behind")
}

// checkDAG runs the dag scenario tiny: each shape's runs succeeded with all their tasks, and each is
// compared with as many plain invocations.
func checkDAG(t *testing.T, bin, dir string) {
	t.Helper()
	stdout, rep := runBench(t, bin, dir, "--scenarios", "dag", "--dag-width", "3", "--dag-depth", "4", "--dag-runs", "5")
	require.Len(t, rep.Scenarios, 1)
	s := rep.Scenarios[0]
	require.Equal(t, bench.StatusOK, s.Status, s.Error)
	require.Equal(t, [3]int{3, 4, 5}, [3]int{rep.Options.DAGWidth, rep.Options.DAGDepth, rep.Options.DAGRuns})
	require.NotNil(t, s.DAG)
	require.Len(t, s.DAG.Shapes, 2)
	for i, want := range []struct {
		name  string
		tasks int
	}{{"wide", 5}, {"deep", 4}} {
		sh := s.DAG.Shapes[i]
		require.Equal(t, want.name, sh.Name)
		require.Equal(t, want.tasks, sh.TasksPerRun, sh.Name)
		require.Equal(t, 5*want.tasks, sh.Tasks, sh.Name)
		require.Equal(t, 5, sh.DAG.Starts, sh.Name)
		require.Equal(t, sh.Tasks, sh.Baseline.Starts, "as many plain invocations as the runs have tasks")
		require.NotNil(t, sh.DAG.RunDuration, sh.Name)
		require.EqualValues(t, 5, sh.DAG.RunDuration.Count, "every run read back succeeded with all its tasks")
		require.Positive(t, sh.DAG.TasksPerS, sh.Name)
		require.Positive(t, sh.Baseline.TasksPerS, sh.Name)
		require.InDelta(t, sh.Baseline.TasksPerS/sh.DAG.TasksPerS, sh.Overhead, 1e-9, sh.Name)
	}
	require.Positive(t, s.Throughput)
	require.Positive(t, s.Baseline.Throughput)
	require.InDelta(t, s.Throughput/s.Baseline.Throughput, s.Ratio, 1e-9)
	require.Len(t, s.Goals, 2)
	require.Contains(t, []string{bench.ResultPass, bench.ResultMiss}, s.Result)
	require.Contains(t, stdout, "| dag | ")
	require.Contains(t, stdout, "- dag deep (chain of 4, 4 tasks): 5 runs")
}

// checkScale runs the scale scenario small: both stages filled and every filter measured, the
// selective ones answering nothing and the others a page.
func checkScale(t *testing.T, bin, dir string, args ...string) {
	t.Helper()
	stdout, rep := runBench(t, bin, dir, append([]string{"--scenarios", "scale", "--scale-n", "5000", "--scale-calls", "5"}, args...)...)
	require.Len(t, rep.Scenarios, 1)
	sc := rep.Scenarios[0]
	require.Equal(t, bench.StatusOK, sc.Status, sc.Error)
	require.NotNil(t, sc.Scale)
	require.Len(t, sc.Scale.Stages, 2)
	require.Equal(t, []int{500, 5000}, []int{sc.Scale.Stages[0].N, sc.Scale.Stages[1].N})
	for _, st := range sc.Scale.Stages {
		require.Positive(t, st.Fill.Rows)
		require.Positive(t, st.Fill.Bytes)
		require.NotEmpty(t, st.Filters)
		for _, f := range st.Filters {
			require.EqualValues(t, 5, f.Latency.Count, f.Name)
			switch {
			case strings.Contains(f.Name, "(none)"):
				require.Zero(t, f.Items, f.Name)
			case strings.Contains(f.Name, "(one)"):
				require.Equal(t, 1, f.Items, f.Name)
			case st.N == 5000:
				require.Positive(t, f.Items, f.Name)
			}
		}
	}
	require.Len(t, sc.Goals, 2)
	require.Contains(t, stdout, "| scale | ")
}

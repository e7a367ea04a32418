package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func sampleReport() *Report {
	return &Report{
		Timestamp: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		Machine:   Machine{CPUs: 2, CPUModel: "AMD EPYC", MemMiB: 24105, GOOS: "linux", GOARCH: "amd64", GoVersion: "go1.26.8", Kernel: "6.18"},
		Options:   Options{Scenarios: All, Out: "bench-results.json", Store: "sqlite", Clients: 64, AsyncN: 100000},
		TotalS:    123.4,
		Scenarios: []Scenario{
			{Name: "sync", Status: StatusOK, Throughput: 3063.4, Unit: "req/s",
				Latency: &Summary{Count: 30634, Samples: 30634, P50Ms: 20.41, P99Ms: 34.4},
				Process: &Usage{CPUS: 23.26, MaxRSSKiB: 43008, CPUWindowS: 19.5},
				Baseline: &Baseline{Name: "echo", Throughput: 35168, Unit: "req/s",
					Latency: &Summary{Count: 351680, P50Ms: 1.5, P99Ms: 6.24}, Process: &Usage{CPUS: 18.04, MaxRSSKiB: 21504},
					CPUPerUnitMs: 0.0612},
				Ratio: 0.0871, P99Ratio: 5.51,
				Goals:  []Goal{{Name: "ratio", Target: "≥ 0.30", Value: 0.0871}, {Name: "p99_ratio", Target: "≤ 2×", Value: 5.51}},
				Result: ResultMiss,
				CPU: &CPUPerUnit{Unit: "request", Units: 30634, ServerS: 39.82, ServerMs: 1.3, TotalMs: 1.3,
					BaselineMs: 0.0612, Ratio: 21.24},
				MachineLoad: &MachineLoad{CPUs: 2, Start: LoadAvg{One: 1.93, Five: 1.5, Fifteen: 1.2, Runnable: 3, Threads: 400},
					End: LoadAvg{One: 2.41, Five: 1.6, Fifteen: 1.25, Runnable: 4, Threads: 410}}},
			{Name: "async", Status: StatusOK, Throughput: 2270.9, Unit: "inv/s",
				Latency: &Summary{Count: 100000, P50Ms: 11.9, P99Ms: 22},
				Process: &Usage{CPUS: 61.2, MaxRSSKiB: 80 * 1024},
				Baseline: &Baseline{Name: "raw SQLite", Throughput: 29925, Unit: "lifecycles/s", Process: &Usage{CPUS: 3.4},
					Raw: &RawResult{Rows: 100000, BatchRows: 1000, InsertRate: 80000, RunningRate: 94000, SucceededRate: 95000}},
				Ratio:  0.0759,
				Result: ResultNA,
				CPU:    NewCPUPerUnit("invocation", 100000, 130, new(40.0), ""),
				Async:  &AsyncDetail{N: 100000, SubmitClients: 32, SubmitS: 38.2, SubmitRate: 2618, BurnDownS: 44, DrainS: 5.8}},
			{Name: "coldstart", Status: StatusFailed, Error: "3 of 200 iterations failed", Errors: 3,
				ErrorSamples: []string{"POST /entrypoints: HTTP 500 (want 201): |internal|"},
				Throughput:   306, Unit: "/s", Latency: &Summary{Count: 197, P50Ms: 2.98, P99Ms: 5.58},
				Goals:  []Goal{{Name: "median_ms", Target: "≤ 5 ms", Value: 2.98, Met: true}},
				Result: ResultFail, ColdStart: &ColdStartDetail{Iterations: 200}},
			{Name: "workflow10", Status: StatusNotAvailable, Note: "not available yet (needs workflows)", Result: ResultNA},
			{Name: "cron10k", Status: StatusNotAvailable, Note: "not available yet (needs schedules)", Result: ResultNA},
		},
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, sampleReport().WriteMarkdown(&b))
	out := b.String()
	lines := strings.Split(out, "\n")
	require.Equal(t, "| scenario | throughput | p50 | p99 | CPU s | peak RSS MiB | CPU/unit | load | baseline | ratio | CPU/unit ratio | goal | result |", lines[0])
	require.Equal(t, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | --- |", lines[1])
	require.Equal(t, "| sync | 3,063 req/s | 20.4 ms | 34.4 ms | 23.3 | 42 | 1.30 ms/req | 1.9→2.4 /2 | echo: 35,168 req/s, p99 6.24 ms | 0.087; p99 5.5× | 21.24× | ratio ≥ 0.30; p99 ≤ 2× echo | MISS |", lines[2])
	require.Equal(t, "| ↳ baseline: echo | 35,168 req/s | 1.50 ms | 6.24 ms | 18.0 | 21 | 0.061 ms/req |  |  |  |  |  |  |", lines[3])
	require.Equal(t, "| async | 2,271 inv/s | 11.9 ms | 22.0 ms | 61.2 | 80 | 1.70 ms/inv (PG 0.400 ms) |  | raw SQLite: 29,925 lifecycles/s | 0.076 |  |  | n/a |", lines[4])
	require.Equal(t, "| ↳ baseline: raw SQLite | 29,925 lifecycles/s |  |  | 3.4 |  |  |  |  |  |  |  |  |", lines[5])
	require.Equal(t, "| coldstart | 306 /s | 2.98 ms | 5.58 ms |  |  |  |  |  |  |  | median ≤ 5 ms | FAILED |", lines[6])
	require.Equal(t, "| workflow10 | not available yet (needs workflows) |  |  |  |  |  |  |  |  |  |  | n/a |", lines[7])
	require.Equal(t, "| cron10k | not available yet (needs schedules) |  |  |  |  |  |  |  |  |  |  | n/a |", lines[8])
	require.Equal(t, "", lines[9], "the table ends")
	// Every table row has the same number of cells (pipes inside cells are escaped).
	for _, l := range lines[:9] {
		require.Equal(t, len(tableHeader)+1, strings.Count(l, "|")-strings.Count(l, `\|`), l)
	}
	require.Contains(t, out, "- sync: CPU per request in the measured window (30634): server 1.30 ms; baseline 0.061 ms: 21.24×; load average 1.93 1.50 1.20 at the start, 2.41 1.60 1.25 at the end (4/410 runnable), 2 CPUs\n")
	require.Contains(t, out, "- async: CPU per invocation in the measured window (100000): server 1.30 ms + PostgreSQL backends 0.400 ms = 1.70 ms\n")
	require.Contains(t, out, "- **coldstart FAILED**: 3 of 200 iterations failed\n")
	require.Contains(t, out, "- coldstart error: POST /entrypoints: HTTP 500 (want 201): |internal|\n")
	require.Contains(t, out, "- async: 100000 invocations; submitted in 38.2 s (2,618 req/s, 32 clients")
	require.Contains(t, out, "- async baseline: 100000 rows in the same SQLite file, 1000-row transactions: insert 80,000 rows/s")
	require.Contains(t, out, "Machine: 2 CPU AMD EPYC, 23.5 GiB RAM, linux/amd64 (kernel 6.18), go1.26.8. Run: 2026-11-21T10:00:00Z, 123 s in total.")
}

func TestWriteJSONRoundTrip(t *testing.T) {
	rep := sampleReport()
	var b bytes.Buffer
	require.NoError(t, rep.WriteJSON(&b))
	require.NotContains(t, b.String(), `\u003e`, "no HTML escaping: ≥ and > stay readable")
	var back Report
	require.NoError(t, json.Unmarshal(b.Bytes(), &back))
	require.Equal(t, rep.Machine, back.Machine)
	require.Len(t, back.Scenarios, 5)
	require.Equal(t, rep.Scenarios[0].Goals, back.Scenarios[0].Goals)
	require.Equal(t, *rep.Scenarios[1].Async, *back.Scenarios[1].Async)
	require.Equal(t, 29925.0, back.Scenarios[1].Baseline.Throughput)
	require.Equal(t, []string{"coldstart"}, back.Failed())

	var raw map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &raw))
	for _, k := range []string{"timestamp", "machine", "options", "scenarios", "total_s"} {
		require.Contains(t, raw, k)
	}
	sync := raw["scenarios"].([]any)[0].(map[string]any)
	require.Equal(t, 43008.0, sync["process"].(map[string]any)["max_rss_kib"])
	cpu := sync["cpu_per_unit"].(map[string]any)
	require.Equal(t, "request", cpu["unit"])
	require.Equal(t, 1.3, cpu["server_ms_per_unit"])
	require.Equal(t, 0.0612, cpu["baseline_ms_per_unit"])
	require.Equal(t, 21.24, cpu["ratio"])
	require.NotContains(t, cpu, "pg_backends_cpu_s", "no backends on SQLite")
	load := sync["machine_load"].(map[string]any)
	require.Equal(t, 2.0, load["cpus"])
	require.Equal(t, 1.93, load["start"].(map[string]any)["load1"])
	require.Equal(t, 2.41, load["end"].(map[string]any)["load1"])
	require.Equal(t, 0.0612, sync["baseline"].(map[string]any)["cpu_ms_per_unit"])
	async := raw["scenarios"].([]any)[1].(map[string]any)["cpu_per_unit"].(map[string]any)
	require.Equal(t, 40.0, async["pg_backends_cpu_s"])
	require.InDelta(t, 0.4, async["pg_backends_ms_per_unit"], 1e-9)
	require.Equal(t, 34.4, sync["latency"].(map[string]any)["p99_ms"])
}

func TestFormatting(t *testing.T) {
	require.Equal(t, "1,234,568 req/s", rate(1234567.6, "req/s"))
	require.Equal(t, "100", rate(99.96, ""))
	require.Equal(t, "12.3 /s", rate(12.34, "/s"))
	require.Equal(t, "10.0", rate(9.996, ""))
	require.Equal(t, "0.50", rate(0.5, ""))
	require.Equal(t, "999", group(999))
	require.Equal(t, "1,000", group(1000))
	require.Equal(t, "123 ms", msCell(123.4))
	require.Equal(t, "12.3 ms", msCell(12.34))
	require.Equal(t, "1.23 ms", msCell(1.234))
}

func TestCPUModel(t *testing.T) {
	x86 := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
	require.Equal(t, "AMD EPYC 7B13", cpuModel(strings.NewReader(x86)))
	arm := "processor\t: 0\nBogoMIPS\t: 108.00\nCPU part\t: 0xd0c\n\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n"
	require.Equal(t, "Raspberry Pi 4 Model B Rev 1.4", cpuModel(strings.NewReader(arm)))
	require.Equal(t, "", cpuModel(strings.NewReader("")))
}

func TestOptions(t *testing.T) {
	var o Options
	o.Defaults()
	require.Equal(t, All, o.Scenarios)
	require.Equal(t, 10*time.Second, o.Duration)
	require.Equal(t, 2*time.Second, o.Warmup)
	require.Equal(t, 64, o.Clients)
	require.Equal(t, 100000, o.AsyncN)
	require.NoError(t, o.Validate())

	o = Options{Duration: 2 * time.Second}
	o.Defaults()
	require.Equal(t, 400*time.Millisecond, o.Warmup, "a fifth of a short duration")

	o = Options{}
	o.Defaults()
	require.Equal(t, 10_000, o.SleepersN)
	require.Equal(t, 20*time.Second, o.SleepersSleep)
	require.Equal(t, DefaultSleepersLagSample, o.SleepersLagSample)
	require.Equal(t, "FULL", o.SQLiteSynchronous)

	// Presets fill what is not set; what is set wins.
	o = Options{Scale: ScaleSmall, AsyncN: 5000}
	o.Defaults()
	require.NoError(t, o.Validate())
	require.Equal(t, time.Second, o.Duration)
	require.Equal(t, 5000, o.AsyncN, "an explicit size overrides the preset")
	require.Equal(t, 200, o.Workflow10N)
	require.Equal(t, 50, o.Workflow10Clients, "not in the preset: the default")
	require.Equal(t, 500, o.SleepersN)
	require.Equal(t, 3*time.Second, o.SleepersSleep)
	require.Equal(t, "*/2 * * * * *", o.Cron10kExpr)
	o = Options{Scale: ScaleFull}
	o.Defaults()
	require.Equal(t, 100_000, o.SleepersN)
	require.Equal(t, 290*time.Second, o.SleepersSleep, "20 s + 3 ms per sleeper above 10,000")
	require.Equal(t, 100_000, o.AsyncN)
	o = Options{Scale: "huge"}
	o.Defaults()
	require.ErrorContains(t, o.Validate(), "--scale")

	o = Options{SQLiteSynchronous: "normal"}
	o.Defaults()
	require.NoError(t, o.Validate())
	require.Equal(t, "NORMAL", o.SQLiteSynchronous)
	o = Options{SQLiteSynchronous: "off"}
	o.Defaults()
	require.ErrorContains(t, o.Validate(), "--sqlite-synchronous")
	o = Options{ServerArgs: []string{"--sqlite-synchronous=normal"}}
	o.Defaults()
	require.ErrorContains(t, o.Validate(), "lark bench's own --sqlite-synchronous")

	o = Options{Scenarios: []string{"sync", "nope"}}
	o.Defaults()
	require.ErrorContains(t, o.Validate(), `unknown scenario "nope"`)
	o = Options{Store: "mysql://x"}
	o.Defaults()
	require.ErrorContains(t, o.Validate(), "--store")
	o = Options{Store: "postgres://u@h/db"}
	o.Defaults()
	require.NoError(t, o.Validate())
}

func TestRedactStore(t *testing.T) {
	require.Equal(t, "sqlite", redactStore("sqlite"))
	require.Equal(t, "postgres://lark:xxxxx@db:5432/lark?sslmode=disable", redactStore("postgres://lark:s3cret@db:5432/lark?sslmode=disable"))
	require.Equal(t, "postgres://db/lark", redactStore("postgres://db/lark"))
}

func TestGoalsResult(t *testing.T) {
	require.Equal(t, ResultNA, goalsResult(nil))
	require.Equal(t, ResultPass, goalsResult([]Goal{{Met: true}, {Met: true}}))
	require.Equal(t, ResultMiss, goalsResult([]Goal{{Met: true}, {Met: false}}))
}

// TestSyncWritesDetail: the sync scenario's durable writes per call is a line of the report.
func TestSyncWritesDetail(t *testing.T) {
	t.Parallel()
	s := Scenario{Name: "sync", Status: StatusOK, Sync: &SyncDetail{DurableWritesPerCall: 1.02}}
	require.Contains(t, details(s), "sync: 1.020 durable writes per call (the group committer's writes over the window ÷ its calls)")
	require.Empty(t, details(Scenario{Name: "sync", Status: StatusOK}), "no line without the figure")
}

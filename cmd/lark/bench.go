package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/bench"
)

// benchLong is the help text of `lark bench`.
const benchLong = `
Runs the named scenarios, each against its own "lark serve" child process (this binary) on a fresh
temporary data directory, and prints a Markdown table: throughput, p50/p99 latency, the server's
CPU seconds and peak RSS, and the ratio against the scenario's baseline measured in the same run.
Every raw figure, the machine and the flags go to the JSON file (--out).

  sync        calculate_tax in sync mode, --clients concurrent HTTP callers, vs a bare Go JSON handler
  sync-instr  instructions per sync request (--instr-n after --instr-warmup, counted by valgrind's
              callgrind) vs the same bare Go JSON handler; skipped when valgrind is missing
  sync-oidc   the same sync invocation with an OIDC issuer's JWT (keys cached) vs with a Lark token
  async       --async-n trivial invocations submitted up front, until all are done,
              vs raw inserts and updates of the same rows in the same SQLite file
  coldstart   register + activate + first sync result of a new function, sequentially
  workflow10  10-step workflows from 50 concurrent starters (steps/s), and one serially (p50)
  dag         runs of a wide DAG (root, 50 tasks, join) and of a deep one (a chain of 20): tasks/s
              and server CPU per task, vs as many plain async invocations of the same function
  sleepers    10k workflows sleeping (100k with --scale full): server RSS, and wake-up lag p99
  cron10k     10k schedules firing every minute: fire lag p99 and server CPU
  events      20k events published to 100 triggers with CEL filters: accepted and delivered
              events/s, CEL cost per event, vs raw inserts of the same rows
  heartbeat   (PostgreSQL) a worker's heartbeats: rows and commits per heartbeat beyond a
              control server whose worker holds the same tasks without heartbeating

--scale small runs every scenario at sizes that finish in well under a minute (CI); --scale full
is the defaults with 100,000 sleepers. A size flag given explicitly overrides the preset.

Beside each throughput ratio the table gives the server's CPU per unit of work in the measured
window (with its PostgreSQL backends' when the database runs on this machine) and the baseline's,
and the machine's load average as the window opened and closed: figures a busy machine barely moves.

Missed goals do not fail the command (it is a measurement); a scenario that errors does.
See docs/benchmarks.md.`

// benchCmd is `lark bench`: it runs each scenario against its own `lark serve` child (this binary)
// on a fresh data directory and prints a Markdown table; every raw figure goes to a JSON file.
func benchCmd() *cobra.Command {
	var o bench.Options
	var scenarios string
	var instructions bool
	c := &cobra.Command{Use: "bench", Short: "Measure Lark (sync, sync-instr, sync-oidc, async, coldstart, workflow10, dag, sleepers, cron10k, events, heartbeat, scale) against baselines run on this machine",
		Long: strings.TrimSpace(benchLong),
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			for _, s := range strings.Split(scenarios, ",") {
				if s = strings.TrimSpace(s); s != "" {
					o.Scenarios = append(o.Scenarios, s)
				}
			}
			if instructions && !slices.Contains(o.Scenarios, "sync-instr") {
				o.Scenarios = append(o.Scenarios, "sync-instr")
			}
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("bench: the lark binary: %w", err)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, runErr := bench.Run(ctx, bin, o, c.ErrOrStderr())
			if rep == nil {
				return runErr
			}
			if err := rep.WriteMarkdown(c.OutOrStdout()); err != nil {
				return err
			}
			if err := rep.WriteJSONFile(o.Out); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			fmt.Fprintf(c.ErrOrStderr(), "bench: figures written to %s\n", o.Out)
			if runErr != nil {
				return runErr
			}
			if f := rep.Failed(); len(f) > 0 {
				return fmt.Errorf("bench: scenario(s) failed: %s", strings.Join(f, ", "))
			}
			return nil
		}}
	fl := c.Flags()
	fl.StringVar(&scenarios, "scenarios", strings.Join(bench.All, ","), "comma-separated scenarios to run")
	fl.StringVar(&o.Out, "out", "bench-results.json", "write every figure to this JSON file")
	fl.StringVar(&o.Scale, "scale", "", "preset of the sizes below: small (the whole suite in well under a minute, for CI) or full (the defaults with 100000 sleepers); explicit flags override it")
	fl.DurationVar(&o.Duration, "duration", 0, "measured time per side of the sync scenario (default 10s; small: 1s)")
	fl.DurationVar(&o.Warmup, "warmup", 0, "warm-up before each measured window, not counted (default: min(2s, duration/5))")
	fl.IntVar(&o.Clients, "clients", 0, "concurrent HTTP clients of the sync scenario and of its echo baseline (default 64)")
	fl.BoolVar(&instructions, "instructions", false, "also run sync-instr (e.g. --scenarios sync --instructions)")
	fl.IntVar(&o.InstrN, "instr-n", 0, fmt.Sprintf("sync requests whose instructions sync-instr counts (default %d; small: 200)", bench.DefaultInstrN))
	fl.IntVar(&o.InstrWarmup, "instr-warmup", 0, fmt.Sprintf("sync requests before sync-instr's count, not counted (default %d; small: 20)", bench.DefaultInstrWarmup))
	fl.DurationVar(&o.BurnDownMax, "burn-down-max", 0, fmt.Sprintf("least time async, workflow10, dag, sleepers and events wait for their invocations to end, from the first submission; raised to %d× the submission time when that is longer (default 4m)", bench.BurnDownFactor))
	fl.IntVar(&o.AsyncN, "async-n", 0, "invocations of the async scenario (default 100000; small: 2000)")
	fl.IntVar(&o.AsyncClients, "async-clients", 0, "concurrent submitters of the async scenario (default 32)")
	fl.IntVar(&o.ColdStartN, "coldstart-n", 0, "iterations of the coldstart scenario, at most 60 s (default 200; small: 50)")
	fl.IntVar(&o.Workflow10N, "workflow10-n", 0, "async 10-step workflows of the workflow10 scenario (default 5000; small: 200)")
	fl.IntVar(&o.Workflow10Clients, "workflow10-clients", 0, "concurrent starters of the workflow10 scenario (default 50)")
	fl.IntVar(&o.Workflow10Serial, "workflow10-serial", 0, "sync 10-step workflows run one at a time by the workflow10 scenario (default 200; small: 20)")
	fl.IntVar(&o.DAGWidth, "dag-width", 0, fmt.Sprintf("independent tasks between the root and the join of the dag scenario's wide DAG, at most %d (default %d)", bench.DAGMaxWidth, bench.DefaultDAGWidth))
	fl.IntVar(&o.DAGDepth, "dag-depth", 0, fmt.Sprintf("tasks of the dag scenario's deep DAG, a chain, at most %d (default %d)", bench.DAGMaxTasks, bench.DefaultDAGDepth))
	fl.IntVar(&o.DAGRuns, "dag-runs", 0, fmt.Sprintf("runs of each DAG of the dag scenario, started at once (default %d; small: 20)", bench.DefaultDAGRuns))
	fl.IntVar(&o.SleepersN, "sleepers-n", 0, "sleeping workflows of the sleepers scenario (default 10000; small: 500; full: 100000)")
	fl.DurationVar(&o.SleepersSleep, "sleepers-sleep", 0,
		"each sleeper's r_sleep; all must be parked before the first is due (default 20s + 3ms per sleeper above 10000: 290s at 100000; small: 3s)")
	fl.IntVar(&o.SleepersLagSample, "sleepers-lag-sample", 0, fmt.Sprintf("sleepers whose timelines give the wake-up lag, evenly spaced (default %d)", bench.DefaultSleepersLagSample))
	fl.IntVar(&o.Cron10kN, "cron-n", 0, "schedules of the cron10k scenario (default 10000; small: 200)")
	fl.StringVar(&o.Cron10kExpr, "cron-expr", "", "cron expression of the cron10k schedules, 6 fields: seconds first (default \"* * * * *\"; small: \"*/2 * * * * *\")")
	fl.IntVar(&o.Cron10kFires, "cron-fires", 0, "instants the cron10k scenario measures (default 2)")
	fl.IntVar(&o.EventsN, "events-n", 0, "events the events scenario publishes (default 20000; small: 1000)")
	fl.IntVar(&o.EventsTriggers, "events-triggers", 0, "triggers with CEL filters of the events scenario (default 100)")
	fl.IntVar(&o.ScaleN, "scale-n", 0, "finished invocations the scale scenario fills its store with, measured at a tenth and at all of them (default 1000000; small: 20000)")
	fl.IntVar(&o.ScaleCalls, "scale-calls", 0, "GET /invocations per documented filter and store size in the scale scenario (default 100; small: 20)")
	fl.StringVar(&o.Store, "store", "sqlite", "store of the server under test: sqlite, or a postgres:// URL")
	fl.StringVar(&o.ProfileDir, "profile-dir", "", "write a CPU profile of each server child to DIR/<scenario>.pprof")
	fl.StringVar(&o.SQLiteSynchronous, "sqlite-synchronous", "full",
		"full or normal: each server child's --sqlite-synchronous, and the setting of async's raw-SQLite baseline")
	fl.StringArrayVar(&o.ServerArgs, "server-arg", nil, "extra flag for each \"lark serve\" child, e.g. --server-arg=--workers=128 (repeatable)")
	return c
}

// benchEchoCmd is the sync scenario's baseline server: any POST gets a fixed JSON document. It
// announces its address on stderr like `lark serve` and stops on SIGTERM.
func benchEchoCmd() *cobra.Command {
	var addr, profile, durable string
	c := &cobra.Command{Use: "bench-echo", Short: "Bare Go JSON handler: the baseline of `lark bench`'s sync scenario",
		Hidden: true, Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			f := flags{cpuProfile: profile}
			stopProfile, err := f.startProfile()
			if err != nil {
				return err
			}
			defer stopProfile()
			return bench.ServeEcho(ctx, addr, durable, slog.New(slog.NewJSONHandler(os.Stderr, nil)))
		}}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "listen address")
	c.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the run to this file")
	c.Flags().StringVar(&durable, "durable", "", "directory of a SQLite database each call is written to before its answer (bench.DurableEcho)")
	return c
}

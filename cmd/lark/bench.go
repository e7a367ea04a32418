package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/bench"
)

// benchCmd is `lark bench`: it runs each scenario against its own `lark serve` child (this binary)
// on a fresh data directory and prints a Markdown table; every raw figure goes to a JSON file.
func benchCmd() *cobra.Command {
	var o bench.Options
	var scenarios string
	c := &cobra.Command{Use: "bench", Short: "Measure Lark (sync, async, coldstart, workflow10, sleepers, cron10k) against baselines run on this machine",
		Long: strings.TrimSpace(`
Runs the named scenarios, each against its own "lark serve" child process (this binary) on a fresh
temporary data directory, and prints a Markdown table: throughput, p50/p99 latency, the server's
CPU seconds and peak RSS, and the ratio against the scenario's baseline measured in the same run.
Every raw figure, the machine and the flags go to the JSON file (--out).

  sync        calculate_tax in sync mode, --clients concurrent HTTP callers, vs a bare Go JSON handler
  async       --async-n trivial invocations submitted up front, until all are done,
              vs raw inserts and updates of the same rows in the same SQLite file
  coldstart   register + activate + first sync result of a new function, sequentially
  workflow10  10-step workflows from 50 concurrent starters (steps/s), and one serially (p50)
  sleepers    10k workflows sleeping: server RSS, and wake-up lag p99
  cron10k     10k schedules firing every minute: fire lag p99 and server CPU

Missed goals do not fail the command (it is a measurement); a scenario that errors does.
See docs/benchmarks.md.`),
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			for _, s := range strings.Split(scenarios, ",") {
				if s = strings.TrimSpace(s); s != "" {
					o.Scenarios = append(o.Scenarios, s)
				}
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
	fl.DurationVar(&o.Duration, "duration", 10*time.Second, "measured time per side of the sync scenario")
	fl.DurationVar(&o.Warmup, "warmup", 0, "warm-up before each measured window, not counted (default: min(2s, duration/5))")
	fl.IntVar(&o.Clients, "clients", 64, "concurrent HTTP clients of the sync scenario (and of its echo baseline)")
	fl.IntVar(&o.AsyncN, "async-n", 100000, "invocations of the async scenario")
	fl.IntVar(&o.AsyncClients, "async-clients", 32, "concurrent submitters of the async scenario")
	fl.IntVar(&o.ColdStartN, "coldstart-n", 200, "iterations of the coldstart scenario (at most 60 s)")
	fl.IntVar(&o.Cron10kN, "cron-n", 10000, "schedules of the cron10k scenario")
	fl.StringVar(&o.Cron10kExpr, "cron-expr", "* * * * *", "cron expression of the cron10k schedules (6 fields: seconds first)")
	fl.IntVar(&o.Cron10kFires, "cron-fires", 2, "instants the cron10k scenario measures")
	fl.StringVar(&o.Store, "store", "sqlite", "store of the server under test: sqlite, or a postgres:// URL")
	fl.StringVar(&o.ProfileDir, "profile-dir", "", "write a CPU profile of each server child to DIR/<scenario>.pprof")
	fl.StringArrayVar(&o.ServerArgs, "server-arg", nil, "extra flag for each \"lark serve\" child, e.g. --server-arg=--workers=128 (repeatable)")
	return c
}

// benchEchoCmd is the sync scenario's baseline server: any POST gets a fixed JSON document. It
// announces its address on stderr like `lark serve` and stops on SIGTERM.
func benchEchoCmd() *cobra.Command {
	var addr, profile string
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
			return bench.ServeEcho(ctx, addr, slog.New(slog.NewJSONHandler(os.Stderr, nil)))
		}}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "listen address")
	c.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the run to this file")
	return c
}

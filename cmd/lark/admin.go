package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/projection"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store/pgstore"
)

// adminCmd is `lark admin`: operator commands that work on the store directly, not through the API.
func adminCmd() *cobra.Command {
	c := &cobra.Command{Use: "admin", Short: "Operator commands that work on the store directly"}
	p := &cobra.Command{Use: "projections", Short: "Verify or rebuild the projections of the invocation event log (records, usage aggregates)"}
	p.AddCommand(projectionsCmd("verify", false), projectionsCmd("rebuild", true))
	c.AddCommand(p)
	return c
}

// errDiffs is verify's failure when it found differences (exit status 1).
var errDiffs = errors.New("projections differ from the event log")

type projectionFlags struct {
	data, store, tenant, since string
	pageSize                   int
	json                       bool
}

func projectionsCmd(name string, rebuild bool) *cobra.Command {
	var f projectionFlags
	short := "Recompute the invocation records and usage aggregates from the event log and report every difference (exit 1 when any)"
	if rebuild {
		short = "Rewrite the invocation records and usage aggregates that differ from the event log"
	}
	c := &cobra.Command{Use: name, Short: short, Args: cobra.NoArgs,
		Long: short + `.

On SQLite the command opens the data directory's database, which takes its lock: stop the server
first (the command refuses to start while a server holds it). On PostgreSQL it runs beside the
servers: each invocation is rewritten in its own transaction under its row lock, each usage hour
with the aggregates table locked, and a rebuild holds an advisory lock so that two never overlap.
See docs/operations.md, "Rebuilding projections".`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runProjections(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), f, rebuild, time.Now())
		}}
	c.Flags().StringVar(&f.data, "data", env("LARK_DATA", "./lark-data"), "data directory of the SQLite store (env LARK_DATA)")
	c.Flags().StringVar(&f.store, "store", env("LARK_STORE", "sqlite"), "store: sqlite, or a postgres:// URL (env LARK_STORE)")
	c.Flags().StringVar(&f.tenant, "tenant", "", "only this tenant's projections (default: every tenant)")
	c.Flags().StringVar(&f.since, "since", "",
		"only invocations updated since, and usage hours from, this time: RFC 3339 (2026-01-02T15:00:00Z) or a duration back from now (72h); rounded down to the hour (default: all)")
	c.Flags().IntVar(&f.pageSize, "page-size", 200, "invocations per page and events per read of a log (1-10000)")
	c.Flags().BoolVar(&f.json, "json", false, "print each difference as a JSON object on its own line")
	return c
}

// parseSince reads --since: an RFC 3339 time, or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("--since: want an RFC 3339 time or a positive duration, got %q", s)
	}
	return now.Add(-d), nil
}

// diffJSON is a difference as --json prints it.
type diffJSON struct {
	Projection   string `json:"projection"`
	TenantID     string `json:"tenant_id"`
	InvocationID string `json:"invocation_id,omitempty"`
	Hour         string `json:"hour,omitempty"`
	EntrypointID string `json:"entrypoint_id,omitempty"`
	Field        string `json:"field"`
	Stored       string `json:"stored"`
	Recomputed   string `json:"recomputed"`
}

func runProjections(ctx context.Context, out, errOut io.Writer, f projectionFlags, rebuild bool, now time.Time) error {
	since, err := parseSince(f.since, now)
	if err != nil {
		return err
	}
	if f.pageSize < 1 || f.pageSize > 10000 {
		return fmt.Errorf("--page-size: want 1 to 10000, got %d", f.pageSize)
	}
	if f.store != "sqlite" && !pgstore.IsURL(f.store) {
		return fmt.Errorf("--store: want sqlite or a postgres:// URL, got %q", f.store)
	}
	if f.store == "sqlite" {
		if _, err := os.Stat(f.data); err != nil {
			return fmt.Errorf("--data: %w", err) // never create an empty store to verify
		}
	}
	// An operator's run, not a request: no client-side bound on its reads and rebuilds (a page of
	// 10,000 may take longer than a request's; the server's statement timeout still applies).
	st, err := server.OpenStore(ctx, server.Config{DataDir: f.data, Store: f.store, PGClientTimeout: -1})
	if err != nil {
		if f.store == "sqlite" {
			return fmt.Errorf("%w (the SQLite store is offline-only: stop lark serve first)", err)
		}
		return err
	}
	defer st.Close()
	report := func(d projection.Diff) error {
		if !f.json {
			_, err := fmt.Fprintln(out, d.String())
			return err
		}
		j := diffJSON{Projection: d.Kind, TenantID: d.TenantID, InvocationID: d.InvocationID, EntrypointID: d.EntrypointID,
			Field: d.Field, Stored: d.Stored, Recomputed: d.Recomputed}
		if d.Kind == projection.KindUsage {
			j.Hour = d.Hour.UTC().Format(time.RFC3339)
		}
		b, err := json.Marshal(j)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	o := projection.Options{TenantID: f.tenant, Since: since, Now: now, PageSize: f.pageSize}
	run := projection.Verify
	if rebuild {
		run = projection.Rebuild
	}
	sum, err := run(ctx, st, o, report)
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "%d invocations and %d usage aggregates checked, %d differences", sum.Invocations, sum.UsageRows, sum.Diffs)
	if sum.Unreplayable > 0 {
		fmt.Fprintf(errOut, ", %d logs that cannot be replayed", sum.Unreplayable)
	}
	if rebuild {
		fmt.Fprintf(errOut, "; rebuilt %d invocations and %d usage hours", sum.RebuiltInvocations, sum.RebuiltUsageHours)
		if len(sum.SkippedUsageTenants) > 0 {
			fmt.Fprintf(errOut, "; usage left alone for tenants %s", strings.Join(sum.SkippedUsageTenants, ", "))
		}
	}
	fmt.Fprintln(errOut)
	switch {
	case rebuild && (sum.Unreplayable > 0 || len(sum.SkippedUsageTenants) > 0):
		return errors.New("some projections could not be rebuilt: their logs cannot be replayed")
	case !rebuild && sum.Diffs > 0:
		return errDiffs
	}
	return nil
}

package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/pkg/larkclient"
)

func invocationsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "invocations", Aliases: []string{"inv"}, Short: "List, inspect and control invocations"}
	var filter, status, entrypoint, order string
	var limit int
	list := &cobra.Command{Use: "list", Short: "List invocations, newest first", Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := ctxOf(c)
			cl, err := g.client()
			if err != nil {
				return err
			}
			var parts []string
			if filter != "" {
				parts = append(parts, "("+filter+")")
			}
			if status != "" {
				var qs []string
				for _, s := range strings.Split(status, ",") {
					qs = append(qs, quote(strings.TrimSpace(s)))
				}
				parts = append(parts, "status in ("+strings.Join(qs, ",")+")")
			}
			if entrypoint != "" {
				ep, err := resolveEntrypoint(ctx, cl, entrypoint)
				if err != nil {
					return err
				}
				parts = append(parts, "entrypoint_id eq "+quote(ep.EntrypointID))
			}
			opts := larkclient.ListOptions{Filter: strings.Join(parts, " and "), OrderBy: order, Limit: min(max(limit, 1), 200)}
			t := newTable(g.out, "INVOCATION", "ENTRYPOINT", "STATUS", "MODE", "CREATED", "DURATION")
			n := 0
			for inv, err := range cl.AllInvocations(ctx, opts) {
				if err != nil {
					return err
				}
				if g.output == "json" {
					if err := printJSONLine(g.out, inv.JSON); err != nil {
						return err
					}
				} else {
					t.row(inv.InvocationID, shortID(inv.EntrypointID), inv.Status, inv.Mode, ts(inv.Timestamps.CreatedAt), duration(&inv))
				}
				if n++; n >= limit {
					break
				}
			}
			if g.output == "json" {
				return nil
			}
			return t.flush()
		}}
	list.Flags().StringVar(&filter, "filter", "", "an OData $filter (docs/api.md §3)")
	list.Flags().StringVar(&status, "status", "", "only these statuses (comma-separated)")
	list.Flags().StringVar(&entrypoint, "entrypoint", "", "only this entrypoint's (GTS id, ep_ id or short name)")
	list.Flags().StringVar(&order, "orderby", "", "an OData $orderby (default created_at desc)")
	list.Flags().IntVar(&limit, "limit", 25, "at most this many rows")

	get := &cobra.Command{Use: "get ID", Short: "Show one invocation", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			inv, err := cl.GetInvocation(ctxOf(c), a[0])
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, inv.JSON)
			}
			t := newTable(g.out)
			t.row("invocation", inv.InvocationID)
			t.row("entrypoint", inv.EntrypointID)
			t.row("status", inv.Status)
			t.row("mode", inv.Mode)
			t.row("attempt", fmt.Sprint(inv.Attempt))
			t.row("created", ts(inv.Timestamps.CreatedAt))
			t.row("started", tsp(inv.Timestamps.StartedAt))
			t.row("finished", tsp(inv.Timestamps.FinishedAt))
			t.row("params", compact(inv.Params, 200))
			if len(inv.Result) > 0 && string(inv.Result) != "null" {
				t.row("result", compact(inv.Result, 200))
			}
			if inv.Error != nil {
				t.row("error", formatError(inv.Error.TypeID, inv.Error.Message, inv.Error.Category))
			}
			return t.flush()
		}}

	var followTL bool
	timeline := &cobra.Command{Use: "timeline ID [--follow]", Short: "Print an invocation's timeline", Args: args(1, 1),
		Long: `Print an invocation's timeline, one entry a line with the cause its details carry (the
error, a retry's delay and next attempt, a suspension's until, a step's name). --follow keeps
printing new entries until the invocation ends, then exits like lark invoke: 0 succeeded, 1 failed,
4 canceled, 5 compensated, 6 dead-lettered.`,
		RunE: func(c *cobra.Command, a []string) error {
			ctx := ctxOf(c)
			cl, err := g.client()
			if err != nil {
				return err
			}
			if followTL {
				rec, err := g.follow(ctx, cl, a[0], true)
				if err != nil {
					return err
				}
				if g.output == "table" {
					fmt.Fprintf(g.out, "%s %s\n", rec.InvocationID, rec.Status)
				}
				return outcomeErr(rec)
			}
			cursor := ""
			for page := 0; ; page++ {
				tl, err := cl.InvocationTimeline(ctx, a[0], cursor, 200)
				if err != nil {
					return err
				}
				for _, e := range tl.Items {
					if g.output == "json" {
						if err := printJSONLine(g.out, e.JSON); err != nil {
							return err
						}
					} else {
						fmt.Fprintln(g.out, timelineLine(e))
					}
				}
				if !tl.PageInfo.HasMore || tl.PageInfo.NextCursor == "" || page > 10000 {
					return nil
				}
				cursor = tl.PageInfo.NextCursor
			}
		}}
	timeline.Flags().BoolVarP(&followTL, "follow", "f", false, "keep printing new entries until the invocation ends")

	c.AddCommand(list, get, timeline)
	for _, action := range []string{"cancel", "retry", "replay", "suspend", "resume"} {
		c.AddCommand(controlCmd(g, action))
	}
	return c
}

func controlCmd(g *globals, action string) *cobra.Command {
	short := map[string]string{
		"cancel":  "Cancel a queued, running or suspended invocation",
		"retry":   "Queue a failed or dead-lettered invocation again (its next attempt)",
		"replay":  "Start a new invocation with the same params and version",
		"suspend": "Suspend a running workflow",
		"resume":  "Resume a suspended workflow",
	}[action]
	return &cobra.Command{Use: action + " ID", Short: short, Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			inv, err := cl.ControlInvocation(ctxOf(c), a[0], action)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, inv.JSON)
			}
			if action == "replay" {
				fmt.Fprintf(g.out, "%s replayed as %s (%s)\n", a[0], inv.InvocationID, inv.Status)
				return nil
			}
			fmt.Fprintf(g.out, "%s %s\n", inv.InvocationID, inv.Status)
			return nil
		}}
}

// duration is an invocation's run time so far (finished, or "running").
func duration(inv *larkclient.Invocation) string {
	st := inv.Timestamps.StartedAt
	if st == nil {
		return "-"
	}
	if f := inv.Timestamps.FinishedAt; f != nil {
		return f.Sub(*st).Round(time.Millisecond).String()
	}
	return "-"
}

func tailCmd(g *globals) *cobra.Command {
	var entrypoint string
	c := &cobra.Command{Use: "tail", Short: "Stream the tenant's invocations as they start and finish (until Ctrl-C)",
		Long: `Print a line each time an invocation of the tenant is created or changes status, from now on,
until interrupted. It polls the invocation list (created since tail started), so an invocation
that changes status twice between two polls shows its latest status only.`,
		Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := ctxOf(c)
			cl, err := g.client()
			if err != nil {
				return err
			}
			filter := ""
			if entrypoint != "" {
				ep, err := resolveEntrypoint(ctx, cl, entrypoint)
				if err != nil {
					return err
				}
				filter = "entrypoint_id eq " + quote(ep.EntrypointID) + " and "
			}
			since := g.now().UTC().Add(-2 * time.Second).Format(time.RFC3339Nano)
			seen := map[string]string{}
			for {
				opts := larkclient.ListOptions{Filter: filter + "created_at ge " + since, OrderBy: "created_at asc", Limit: 200}
				n := 0
				for inv, err := range cl.AllInvocations(ctx, opts) {
					if err != nil {
						return err
					}
					if n++; n > 5000 {
						break // bound one poll
					}
					if seen[inv.InvocationID] == inv.Status {
						continue
					}
					seen[inv.InvocationID] = inv.Status
					if g.output == "json" {
						if err := printJSONLine(g.out, inv.JSON); err != nil {
							return err
						}
						continue
					}
					fmt.Fprintf(g.out, "%s  %s  %-10s %s\n", ts(g.now()), inv.InvocationID, inv.Status, shortID(inv.EntrypointID))
				}
				if err := sleep(ctx, g.poll); err != nil {
					return nil // interrupted: a normal end
				}
			}
		}}
	c.Flags().StringVar(&entrypoint, "entrypoint", "", "only this entrypoint's invocations")
	return c
}

package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/pkg/larkclient"
)

func schedulesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "schedules", Aliases: []string{"schedule"}, Short: "List, inspect, pause, resume and trigger schedules"}
	list := &cobra.Command{Use: "list", Short: "List the tenant's schedules", Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			t := newTable(g.out, "SCHEDULE", "NAME", "ENTRYPOINT", "EXPRESSION", "STATUS", "NEXT RUN")
			for s, err := range cl.AllSchedules(ctxOf(c), larkclient.ListOptions{Limit: 200}) {
				if err != nil {
					return err
				}
				if g.output == "json" {
					if err := printJSONLine(g.out, s.JSON); err != nil {
						return err
					}
					continue
				}
				t.row(s.ScheduleID, s.Name, shortID(s.EntrypointID), s.Expression.Kind+" "+s.Expression.Value, s.Status, tsZone(s.NextRunAt, s.Timezone))
			}
			if g.output == "json" {
				return nil
			}
			return t.flush()
		}}
	one := func(use, short string, run func(*larkclient.Client, *cobra.Command, string) (*larkclient.Schedule, error)) *cobra.Command {
		return &cobra.Command{Use: use + " ID", Short: short, Args: args(1, 1),
			RunE: func(c *cobra.Command, a []string) error {
				cl, err := g.client()
				if err != nil {
					return err
				}
				s, err := run(cl, c, a[0])
				if err != nil {
					return err
				}
				return g.printSchedule(s)
			}}
	}
	get := one("get", "Show one schedule", func(cl *larkclient.Client, c *cobra.Command, id string) (*larkclient.Schedule, error) {
		return cl.GetSchedule(ctxOf(c), id)
	})
	pause := one("pause", "Stop a schedule firing", func(cl *larkclient.Client, c *cobra.Command, id string) (*larkclient.Schedule, error) {
		return cl.PauseSchedule(ctxOf(c), id)
	})
	var catchUp bool
	resume := one("resume", "Re-arm a paused schedule", func(cl *larkclient.Client, c *cobra.Command, id string) (*larkclient.Schedule, error) {
		return cl.ResumeSchedule(ctxOf(c), id, catchUp)
	})
	resume.Flags().BoolVar(&catchUp, "catch-up", false, "run the instants missed while paused (per the schedule's policy)")

	var params string
	trigger := &cobra.Command{Use: "trigger ID [--params JSON|@file]", Short: "Run a schedule now", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var p json.RawMessage
			if params != "" {
				if p, err = readData(params, c.InOrStdin()); err != nil {
					return err
				}
			}
			t, err := cl.TriggerSchedule(ctxOf(c), a[0], p)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, t.JSON)
			}
			fmt.Fprintf(g.out, "triggered %s: run %s, invocation %s (%s)\n", t.ScheduleID, t.RunID, t.Invocation.InvocationID, t.Invocation.Status)
			return nil
		}}
	trigger.Flags().StringVarP(&params, "params", "p", "", "params_override: a JSON object, or @file")

	var limit int
	history := &cobra.Command{Use: "history ID", Short: "Show a schedule's runs, newest first", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			p, err := cl.ScheduleHistory(ctxOf(c), a[0], larkclient.ListOptions{Limit: min(max(limit, 1), 200)})
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, p.JSON)
			}
			t := newTable(g.out, "RUN", "SCHEDULED", "KIND", "STATUS", "INVOCATION", "DURATION")
			for _, r := range p.Items {
				st := r.Status
				if r.SkipReason != "" {
					st += " (" + r.SkipReason + ")"
				}
				d := "-"
				if r.DurationMS != nil {
					d = fmt.Sprintf("%dms", *r.DurationMS)
				}
				t.row(r.RunID, ts(r.ScheduledAt), r.Kind, st, orDash(r.InvocationID), d)
			}
			return t.flush()
		}}
	history.Flags().IntVar(&limit, "limit", 25, "at most this many runs (1-200)")
	c.AddCommand(list, get, pause, resume, trigger, history)
	return c
}

func (g *globals) printSchedule(s *larkclient.Schedule) error {
	if g.output == "json" {
		return printJSON(g.out, s.JSON)
	}
	t := newTable(g.out)
	t.row("schedule", s.ScheduleID)
	t.row("name", s.Name)
	t.row("entrypoint", s.EntrypointID)
	t.row("expression", s.Expression.Kind+" "+s.Expression.Value+" ("+orDash(s.Timezone)+")")
	t.row("status", s.Status)
	t.row("next run", tsZone(s.NextRunAt, s.Timezone))
	t.row("last run", tsZone(s.LastRunAt, s.Timezone))
	return t.flush()
}

// tsZone formats a schedule's time in the schedule's time zone (UTC when it has none, or an
// unknown one), with the zone: "2026-11-29 02:00:00 CET".
func tsZone(t *time.Time, zone string) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	loc := time.UTC
	if zone != "" {
		if l, err := time.LoadLocation(zone); err == nil {
			loc = l
		}
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/manifest"
	"github.com/larkrun/lark/pkg/larkclient"
)

func backfillCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "backfill", Aliases: []string{"backfills"}, Short: "Create and drive backfills (runs over a past range)"}

	var schedule, start, end, step, params, id, threshold string
	var chunk, parallel int
	var stopOnFailure bool
	create := &cobra.Command{Use: "create [ENTRYPOINT] --start T --end T [--step P1D] [--schedule ID]",
		Short: "Create a backfill of an entrypoint (with --step) or of a schedule (--schedule)",
		Args:  args(0, 1),
		RunE: func(c *cobra.Command, a []string) error {
			ctx := ctxOf(c)
			if (len(a) == 1) == (schedule != "") {
				return usageErr("name an ENTRYPOINT or give --schedule, not both")
			}
			if start == "" || end == "" {
				return usageErr("--start and --end are required (RFC 3339, or a date such as 2024-01-01)")
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			body := map[string]any{"start": dateTime(start), "end": dateTime(end)}
			if len(a) == 1 {
				ep, err := resolveEntrypoint(ctx, cl, a[0])
				if err != nil {
					return err
				}
				body["entrypoint_id"] = ep.EntrypointID
			} else {
				body["schedule_id"] = schedule
			}
			if step != "" {
				body["step"] = step
			}
			if id != "" {
				body["backfill_id"] = id
			}
			if params != "" {
				p, err := readData(params, c.InOrStdin())
				if err != nil {
					return err
				}
				body["params"] = p
			}
			if c.Flags().Changed("chunk-size") {
				body["chunk_size"] = chunk
			}
			if c.Flags().Changed("max-parallel") {
				body["max_concurrent_runs"] = parallel
			}
			if stopOnFailure {
				body["stop_on_failure"] = true
			}
			if threshold != "" {
				if strings.HasSuffix(threshold, "%") {
					body["failure_threshold"] = threshold
				} else {
					body["failure_threshold"] = json.Number(threshold)
				}
			}
			raw, err := json.Marshal(body)
			if err != nil {
				return err
			}
			b, err := cl.CreateBackfill(ctx, raw)
			if err != nil {
				return err
			}
			return g.printBackfill(b)
		}}
	f := create.Flags()
	f.StringVar(&schedule, "schedule", "", "backfill this schedule (its entrypoint, expression and params)")
	f.StringVar(&start, "start", "", "first instant, inclusive (RFC 3339 or YYYY-MM-DD, UTC)")
	f.StringVar(&end, "end", "", "end, exclusive (RFC 3339 or YYYY-MM-DD, UTC)")
	f.StringVar(&step, "step", "", "ISO 8601 interval between instants (P1D, PT1H); required with an entrypoint")
	f.StringVarP(&params, "params", "p", "", "params of every run: a JSON object, or @file")
	f.StringVar(&id, "id", "", "the backfill's id (default: assigned)")
	f.IntVar(&chunk, "chunk-size", 100, "partitions per chunk (1-1000)")
	f.IntVar(&parallel, "max-parallel", 3, "chunks in flight at once (1-50)")
	f.BoolVar(&stopOnFailure, "stop-on-failure", false, "fail the backfill at the first failed partition")
	f.StringVar(&threshold, "failure-threshold", "", "failed partitions (count, or percent like 10%) that fail the backfill")

	var watch bool
	status := &cobra.Command{Use: "status ID [--watch]", Short: "Show a backfill's progress (--watch: until it ends)", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			ctx := ctxOf(c)
			cl, err := g.client()
			if err != nil {
				return err
			}
			tty := isTTY(g.out) && g.output == "table"
			for {
				b, err := cl.GetBackfill(ctx, a[0])
				if err != nil {
					return err
				}
				if !watch || g.output == "json" {
					return g.printBackfill(b)
				}
				line := progressLine(b)
				if tty {
					fmt.Fprintf(g.out, "\r\033[K%s", line)
				} else {
					fmt.Fprintln(g.out, line)
				}
				if b.Done() {
					if tty {
						fmt.Fprintln(g.out)
					}
					if b.State != "succeeded" {
						return failed("backfill %s %s %s", b.BackfillID, b.State, b.FailureReason)
					}
					return nil
				}
				if err := sleep(ctx, g.poll*2); err != nil {
					return err
				}
			}
		}}
	status.Flags().BoolVarP(&watch, "watch", "w", false, "keep showing the progress until the backfill ends")

	act := func(name, short string, run func(*larkclient.Client, *cobra.Command, string) (*larkclient.Backfill, error)) *cobra.Command {
		return &cobra.Command{Use: name + " ID", Short: short, Args: args(1, 1),
			RunE: func(c *cobra.Command, a []string) error {
				cl, err := g.client()
				if err != nil {
					return err
				}
				b, err := run(cl, c, a[0])
				if err != nil {
					return err
				}
				return g.printBackfill(b)
			}}
	}
	c.AddCommand(create, status,
		act("pause", "Stop starting new chunks", func(cl *larkclient.Client, c *cobra.Command, id string) (*larkclient.Backfill, error) {
			return cl.PauseBackfill(ctxOf(c), id)
		}),
		act("resume", "Resume a paused backfill", func(cl *larkclient.Client, c *cobra.Command, id string) (*larkclient.Backfill, error) {
			return cl.ResumeBackfill(ctxOf(c), id)
		}),
		act("cancel", "Cancel a backfill", func(cl *larkclient.Client, c *cobra.Command, id string) (*larkclient.Backfill, error) {
			return cl.CancelBackfill(ctxOf(c), id)
		}),
		act("retry", "Run the failed partitions again", func(cl *larkclient.Client, c *cobra.Command, id string) (*larkclient.Backfill, error) {
			return cl.RetryBackfill(ctxOf(c), id)
		}))
	return c
}

// dateTime accepts a bare date as midnight UTC.
func dateTime(s string) string {
	if len(s) == len("2006-01-02") && strings.Count(s, "-") == 2 {
		return s + "T00:00:00Z"
	}
	return s
}

func progressLine(b *larkclient.Backfill) string {
	p := b.Progress
	done := p.Completed + p.Failed + p.Skipped
	pct := 0
	if p.Total > 0 {
		pct = done * 100 / p.Total
	}
	return fmt.Sprintf("%s %s %3d%% %d/%d done (%d failed, %d running, %d pending) %s",
		b.BackfillID, bar(done, p.Total, 30), pct, done, p.Total, p.Failed, p.Running, p.Pending, b.State)
}

func (g *globals) printBackfill(b *larkclient.Backfill) error {
	if g.output == "json" {
		return printJSON(g.out, b.JSON)
	}
	fmt.Fprintln(g.out, progressLine(b))
	if b.FailureReason != "" {
		fmt.Fprintf(g.out, "failure: %s\n", b.FailureReason)
	}
	return nil
}

func eventsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "events", Short: "Publish events"}
	var data, id, source, subject string
	publish := &cobra.Command{Use: "publish TYPE [--data JSON|@file]", Short: "Publish an event of a GTS event type to the tenant",
		Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			e := larkclient.PublishEvent{EventTypeID: a[0], EventID: id, Source: source, Subject: subject}
			if data != "" {
				if e.Payload, err = readData(data, c.InOrStdin()); err != nil {
					return err
				}
			}
			p, err := cl.PublishEvent(ctxOf(c), e)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, p.JSON)
			}
			fmt.Fprintf(g.out, "published %s: %d waiting workflows resumed, %d triggers fired\n", p.Event.EventID, p.Delivered, p.Triggered)
			return nil
		}}
	publish.Flags().StringVarP(&data, "data", "d", "", "payload: JSON, or @file (@- for stdin)")
	publish.Flags().StringVar(&id, "id", "", "event_id (default: assigned); publishing an id again delivers nothing")
	publish.Flags().StringVar(&source, "source", "", "source attribute")
	publish.Flags().StringVar(&subject, "subject", "", "subject attribute")
	c.AddCommand(publish)
	return c
}

func triggersCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "triggers", Aliases: []string{"trigger"}, Short: "Manage event triggers (dead letters: lark dead-letters)"}
	list := &cobra.Command{Use: "list", Short: "List the tenant's event triggers", Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			t := newTable(g.out, "TRIGGER", "EVENT TYPE", "ENTRYPOINT", "STATUS")
			for tr, err := range cl.AllTriggers(ctxOf(c), larkclient.ListOptions{Limit: 200}) {
				if err != nil {
					return err
				}
				if g.output == "json" {
					if err := printJSONLine(g.out, tr.JSON); err != nil {
						return err
					}
					continue
				}
				t.row(tr.TriggerID, shortID(tr.EventTypeID), shortID(tr.EntrypointID), tr.Status)
			}
			if g.output == "json" {
				return nil
			}
			return t.flush()
		}}
	get := &cobra.Command{Use: "get ID", Short: "Show one event trigger", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			tr, err := cl.GetTrigger(ctxOf(c), a[0])
			if err != nil {
				return err
			}
			return printJSON(g.out, tr.JSON)
		}}
	var file string
	create := &cobra.Command{Use: "create -f FILE", Short: "Create an event trigger from a JSON or YAML file", Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if file == "" {
				return usageErr("-f FILE is required")
			}
			obj, probs := manifest.ReadObject(file)
			if len(probs) > 0 {
				for _, p := range probs {
					fmt.Fprintln(g.errOut, p)
				}
				return failed("%s cannot be read", file)
			}
			delete(obj, "kind")
			body, err := manifest.Encode(obj)
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			tr, err := cl.CreateTrigger(ctxOf(c), body)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, tr.JSON)
			}
			fmt.Fprintf(g.out, "created trigger %s (%s)\n", tr.TriggerID, tr.Status)
			return nil
		}}
	create.Flags().StringVarP(&file, "file", "f", "", "the trigger's body (JSON or YAML; docs/events.md)")
	del := &cobra.Command{Use: "delete ID", Short: "Delete an event trigger", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			if err := cl.DeleteTrigger(ctxOf(c), a[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "deleted trigger %s\n", a[0])
			return nil
		}}
	var window string
	metrics := &cobra.Command{Use: "metrics ID [--window 24h]", Short: "Show an event trigger's counters", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			raw, err := cl.TriggerMetrics(ctxOf(c), a[0], window)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, raw)
			}
			return printTriggerMetrics(g, raw)
		}}
	metrics.Flags().StringVar(&window, "window", "", "1h to 90d (default 24h)")
	status := func(verb string, set func(*larkclient.Client, context.Context, string) (*larkclient.Trigger, error)) *cobra.Command {
		return g.idCmd(verb+" ID", verb+" an event trigger", func(ctx context.Context, cl *larkclient.Client, id string) error {
			tr, err := set(cl, ctx, id)
			if err != nil {
				return err
			}
			return g.done(tr.JSON, "trigger %s %s", tr.TriggerID, tr.Status)
		})
	}
	c.AddCommand(list, get, create, del, metrics,
		status("enable", (*larkclient.Client).EnableTrigger), status("disable", (*larkclient.Client).DisableTrigger))
	return c
}

// printTriggerMetrics prints GET /triggers/{id}/metrics as a table: the window, each counter and
// the latency quantiles.
func printTriggerMetrics(g *globals, raw json.RawMessage) error {
	var m struct {
		TriggerID string           `json:"trigger_id"`
		Period    string           `json:"period"`
		From      string           `json:"from"`
		Metrics   map[string]int64 `json:"metrics"`
		P50       *int64           `json:"p50_latency_ms"`
		P99       *int64           `json:"p99_latency_ms"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("reading the metrics: %w", err)
	}
	t := newTable(g.out)
	t.row("trigger", m.TriggerID)
	t.row("window", m.Period+" from "+m.From)
	for _, k := range []string{"events_received", "events_filtered_out", "executions_triggered", "executions_succeeded",
		"executions_failed", "events_dead_lettered"} {
		t.row(k, fmt.Sprint(m.Metrics[k]))
	}
	for _, q := range []struct {
		name string
		v    *int64
	}{{"p50_latency", m.P50}, {"p99_latency", m.P99}} {
		v := "-"
		if q.v != nil {
			v = fmt.Sprintf("%dms", *q.v)
		}
		t.row(q.name, v)
	}
	return t.flush()
}

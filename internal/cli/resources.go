package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/manifest"
	"github.com/larkrun/lark/pkg/larkclient"
)

// printList prints the items of seq, up to limit (0: all): one JSON line each with -o json,
// else a table of header and row's columns.
func printList[T any](g *globals, seq iter.Seq2[T, error], limit int, raw func(T) json.RawMessage, header []string, row func(T) []string) error {
	t := newTable(g.out, header...)
	n := 0
	for it, err := range seq {
		if err != nil {
			return err
		}
		if g.output == "json" {
			if err := printJSONLine(g.out, raw(it)); err != nil {
				return err
			}
		} else {
			t.row(row(it)...)
		}
		if n++; limit > 0 && n >= limit {
			break
		}
	}
	if g.output == "json" {
		return nil
	}
	return t.flush()
}

// withClient wraps a command's body: it builds the client and passes the command's context.
func (g *globals) withClient(run func(ctx context.Context, cl *larkclient.Client, a []string) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, a []string) error {
		cl, err := g.client()
		if err != nil {
			return err
		}
		return run(ctxOf(c), cl, a)
	}
}

// done prints a one-line confirmation in table mode, or the resource's JSON with -o json.
func (g *globals) done(raw json.RawMessage, format string, args ...any) error {
	if g.output == "json" {
		return printJSON(g.out, raw)
	}
	fmt.Fprintf(g.out, format+"\n", args...)
	return nil
}

// readBody reads a JSON or YAML body file (-f) as the API's JSON, without its kind.
func (g *globals) readBody(file string) (json.RawMessage, error) {
	if file == "" {
		return nil, usageErr("-f FILE is required")
	}
	obj, probs := manifest.ReadObject(file)
	if len(probs) > 0 {
		for _, p := range probs {
			fmt.Fprintln(g.errOut, p)
		}
		return nil, usageErr("%s cannot be read", file)
	}
	delete(obj, "kind")
	return manifest.Encode(obj)
}

// listFlags are the list parameters a list command takes.
type listFlags struct {
	filter, orderBy string
	limit           int
}

func (l *listFlags) add(c *cobra.Command, defLimit int) {
	c.Flags().StringVar(&l.filter, "filter", "", "an OData $filter (docs/api.md §3)")
	c.Flags().StringVar(&l.orderBy, "orderby", "", "an OData $orderby")
	c.Flags().IntVar(&l.limit, "limit", defLimit, "at most this many rows (0: all)")
}

func (l *listFlags) opts() larkclient.ListOptions {
	o := larkclient.ListOptions{Filter: l.filter, OrderBy: l.orderBy, Limit: 200}
	if l.limit > 0 && l.limit < 200 {
		o.Limit = l.limit
	}
	return o
}

// createFromFile is a `create -f FILE` command that posts the file's body.
func (g *globals) createFromFile(short, fileHelp string, create func(context.Context, *larkclient.Client, json.RawMessage) error) *cobra.Command {
	var file string
	c := &cobra.Command{Use: "create -f FILE", Short: short, Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			body, err := g.readBody(file)
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			return create(ctxOf(c), cl, body)
		}}
	c.Flags().StringVarP(&file, "file", "f", "", fileHelp)
	return c
}

// idCmd is a command taking one ID argument.
func (g *globals) idCmd(use, short string, run func(ctx context.Context, cl *larkclient.Client, id string) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args(1, 1),
		RunE: g.withClient(func(ctx context.Context, cl *larkclient.Client, a []string) error { return run(ctx, cl, a[0]) })}
}

func eventTypesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "event-types", Aliases: []string{"event-type"}, Short: "List, show, register and delete event types"}
	var lf listFlags
	list := &cobra.Command{Use: "list", Short: "List the tenant's and the platform's event types", Args: args(0, 0),
		RunE: g.withClient(func(ctx context.Context, cl *larkclient.Client, _ []string) error {
			return printList(g, cl.AllEventTypes(ctx, lf.opts()), lf.limit, func(e larkclient.EventType) json.RawMessage { return e.JSON },
				[]string{"EVENT TYPE", "SCOPE", "CREATED", "DESCRIPTION"},
				func(e larkclient.EventType) []string {
					return []string{e.EventTypeID, e.Scope, ts(e.CreatedAt), e.Description}
				})
		})}
	lf.add(list, 0)
	get := g.idCmd("get ID", "Print an event type (JSON)", func(ctx context.Context, cl *larkclient.Client, id string) error {
		e, err := cl.GetEventType(ctx, id)
		if err != nil {
			return err
		}
		return printJSON(g.out, e.JSON)
	})
	create := g.createFromFile("Register an event type from a JSON or YAML file ({event_type_id, schema, description})",
		"the body of POST /event-types (JSON or YAML; docs/events.md)",
		func(ctx context.Context, cl *larkclient.Client, body json.RawMessage) error {
			e, err := cl.CreateEventType(ctx, body)
			if err != nil {
				return err
			}
			return g.done(e.JSON, "created event type %s (%s scope)", e.EventTypeID, e.Scope)
		})
	del := g.idCmd("delete ID", "Delete an event type of the caller's scope", func(ctx context.Context, cl *larkclient.Client, id string) error {
		if err := cl.DeleteEventType(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(g.out, "deleted event type %s\n", id)
		return nil
	})
	c.AddCommand(list, get, create, del)
	return c
}

func auditCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "audit", Short: "Read the tenant's audit log (admin)"}
	var lf listFlags
	list := &cobra.Command{Use: "list [--filter ODATA]", Short: "List audit events, oldest first (--orderby 'timestamp desc' for newest)",
		Long: `List the audit log (GET /audit-events, admin role): time, type, actor, resource and details.
--filter takes an OData $filter on type, resource_type, resource_id, actor_id, correlation_id and
timestamp, e.g. --filter "resource_type eq 'token' and timestamp ge 2026-11-01T00:00:00Z".`,
		Args: args(0, 0),
		RunE: g.withClient(func(ctx context.Context, cl *larkclient.Client, _ []string) error {
			return printList(g, cl.AllAuditEvents(ctx, lf.opts()), lf.limit, func(e larkclient.AuditEvent) json.RawMessage { return e.JSON },
				[]string{"TIME", "TYPE", "ACTOR", "RESOURCE", "DETAILS"},
				func(e larkclient.AuditEvent) []string {
					return []string{ts(e.Timestamp), auditType(e.Type), e.ActorID, e.ResourceType + " " + e.ResourceID, compact(e.Details, 80)}
				})
		})}
	lf.add(list, 50)
	c.AddCommand(list)
	return c
}

// auditType shortens an audit event type to its name: …audit.token_created.v1~ → token_created.
func auditType(t string) string {
	if n := errorTypeName(t); n != "" {
		return n
	}
	return t
}

func deadLettersCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "dead-letters", Aliases: []string{"dlq"}, Short: "List, redrive and purge an event trigger's dead letters"}
	var lf listFlags
	list := &cobra.Command{Use: "list TRIGGER", Short: "List a trigger's dead letters, oldest first", Args: args(1, 1),
		RunE: g.withClient(func(ctx context.Context, cl *larkclient.Client, a []string) error {
			return printList(g, cl.AllDeadLetters(ctx, a[0], lf.opts()), lf.limit, func(d larkclient.DeadLetter) json.RawMessage { return d.JSON },
				[]string{"DEAD LETTER", "CREATED", "INVOCATION", "EVENTS", "ERROR"},
				func(d larkclient.DeadLetter) []string {
					e := ""
					if d.Error != nil {
						e = formatError(d.Error.TypeID, d.Error.Message, d.Error.Category)
					}
					return []string{d.DeadLetterID, ts(d.CreatedAt), orDash(d.InvocationID), strings.Join(d.EventIDs, ","), e}
				})
		})}
	lf.add(list, 0)
	var redriveAll bool
	redrive := &cobra.Command{Use: "redrive TRIGGER [DEAD_LETTER_ID | --all]",
		Short: "Start each letter's invocation again and remove the letter (one, or --all)", Args: args(1, 2),
		RunE: g.withClient(func(ctx context.Context, cl *larkclient.Client, a []string) error {
			if (len(a) == 2) == redriveAll {
				return usageErr("name one DEAD_LETTER_ID or give --all")
			}
			return g.redrive(ctx, cl, a)
		})}
	redrive.Flags().BoolVar(&redriveAll, "all", false, "redrive every letter (100 a call, until none is left of those there were)")
	purge := g.idCmd("purge TRIGGER", "Delete all of a trigger's dead letters", func(ctx context.Context, cl *larkclient.Client, id string) error {
		n, err := cl.PurgeDeadLetters(ctx, id)
		if err != nil {
			return err
		}
		return g.done(json.RawMessage(fmt.Sprintf(`{"purged":%d}`, n)), "purged %d dead letters of %s", n, id)
	})
	c.AddCommand(list, redrive, purge)
	return c
}

// redrive redrives one letter (a = TRIGGER ID) or all of a trigger's (a = TRIGGER): the API takes
// 100 a call, so it calls again while a call took a full 100.
func (g *globals) redrive(ctx context.Context, cl *larkclient.Client, a []string) error {
	var letters []larkclient.DeadLetter
	if len(a) == 2 {
		l, err := cl.RedriveDeadLetter(ctx, a[0], a[1])
		if err != nil {
			return err
		}
		letters = l
	} else {
		for range 10000 {
			l, err := cl.RedriveDeadLetters(ctx, a[0])
			if err != nil {
				return err
			}
			letters = append(letters, l...)
			if len(l) < 100 {
				break
			}
		}
	}
	for _, d := range letters {
		if g.output == "json" {
			if err := printJSONLine(g.out, d.JSON); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(g.out, "redrove %s as %s\n", d.DeadLetterID, d.RedrivenAs)
	}
	if g.output == "table" && len(letters) == 0 {
		fmt.Fprintf(g.out, "no dead letters on %s\n", a[0])
	}
	return nil
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/pkg/larkclient"
)

func webhooksCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "webhooks", Aliases: []string{"webhook"}, Short: "Manage webhook triggers and read their deliveries"}
	var lf listFlags
	list := &cobra.Command{Use: "list", Short: "List the tenant's webhook triggers", Args: args(0, 0),
		RunE: g.withClient(func(ctx context.Context, cl *larkclient.Client, _ []string) error {
			return printList(g, cl.AllWebhooks(ctx, lf.opts()), lf.limit, func(w larkclient.Webhook) json.RawMessage { return w.JSON },
				[]string{"WEBHOOK", "NAME", "ENTRYPOINT", "STATUS", "URL"},
				func(w larkclient.Webhook) []string {
					return []string{w.WebhookTriggerID, w.Name, shortID(w.EntrypointID), w.Status, w.WebhookURL}
				})
		})}
	lf.add(list, 0)
	get := g.idCmd("get ID", "Print a webhook trigger (JSON, never its secret)", func(ctx context.Context, cl *larkclient.Client, id string) error {
		w, err := cl.GetWebhook(ctx, id)
		if err != nil {
			return err
		}
		return printJSON(g.out, w.JSON)
	})
	create := g.createFromFile("Create a webhook trigger from a JSON or YAML file; its secret is printed this once",
		"the body of POST /webhook-triggers (JSON or YAML; docs/webhooks.md)",
		func(ctx context.Context, cl *larkclient.Client, body json.RawMessage) error {
			w, err := cl.CreateWebhook(ctx, body)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, w.JSON)
			}
			fmt.Fprintf(g.out, "created webhook %s (%s): POST %s\n", w.WebhookTriggerID, w.Status, w.WebhookURL)
			if w.Secret != "" {
				fmt.Fprintf(g.out, "secret (shown only this once): %s\n", w.Secret)
			}
			return nil
		})
	del := g.idCmd("delete ID", "Delete a webhook trigger with its secrets and deliveries", func(ctx context.Context, cl *larkclient.Client, id string) error {
		if err := cl.DeleteWebhook(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(g.out, "deleted webhook %s\n", id)
		return nil
	})
	status := func(verb string, set func(*larkclient.Client, context.Context, string) (*larkclient.Webhook, error)) *cobra.Command {
		return g.idCmd(verb+" ID", verb+" a webhook trigger", func(ctx context.Context, cl *larkclient.Client, id string) error {
			w, err := set(cl, ctx, id)
			if err != nil {
				return err
			}
			return g.done(w.JSON, "webhook %s %s", w.WebhookTriggerID, w.Status)
		})
	}
	enable := status("enable", (*larkclient.Client).EnableWebhook)
	disable := status("disable", (*larkclient.Client).DisableWebhook)
	c.AddCommand(list, get, create, del, enable, disable, deliveriesCmd(g))
	return c
}

func deliveriesCmd(g *globals) *cobra.Command {
	var lf listFlags
	c := &cobra.Command{Use: "deliveries ID", Short: "List a webhook trigger's last deliveries, newest first", Args: args(1, 1),
		RunE: g.withClient(func(ctx context.Context, cl *larkclient.Client, a []string) error {
			p, err := cl.ListDeliveries(ctx, a[0], lf.opts())
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, p.JSON)
			}
			t := newTable(g.out, "DELIVERY", "RECEIVED", "STATUS", "OUTCOME", "INVOCATION", "SOURCE", "BYTES", "REASON")
			for _, d := range p.Items {
				t.row(d.DeliveryID, ts(d.ReceivedAt), fmt.Sprint(d.StatusCode), d.Outcome, orDash(d.InvocationID), d.SourceIP,
					fmt.Sprint(d.BodyBytes), d.Reason)
			}
			return t.flush()
		})}
	lf.add(c, 100)
	return c
}

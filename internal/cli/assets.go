package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/pkg/larkclient"
)

// assetsCmd is `lark assets`: the Assets API (docs/dag.md, "Assets").
func assetsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "assets", Aliases: []string{"asset"}, Short: "List assets and their materializations; approve or reject quarantined ones"}
	list := &cobra.Command{Use: "list", Short: "List the tenant's assets with their latest materialization and health", Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			t := newTable(g.out, "ASSET", "LATEST", "PARTITION", "LATEST AT", "FAILURES", "LAST CHECK", "GATING")
			for a, err := range cl.AllAssets(ctxOf(c), larkclient.ListOptions{Limit: 200}) {
				if err != nil {
					return err
				}
				if g.output == "json" {
					if err := printJSONLine(g.out, a.JSON); err != nil {
						return err
					}
					continue
				}
				t.row(a.AssetKey, orDash(a.LatestMaterializationID), orDash(a.LatestPartitionKey), tsp(a.LatestAt),
					strconv.Itoa(a.ConsecutiveFailures), checkPassed(a.LastCheckPassed), orDash(a.LastGatingDecision))
			}
			if g.output == "json" {
				return nil
			}
			return t.flush()
		}}
	c.AddCommand(list, materializationsCmd(g), decideCmd(g, "approve"), decideCmd(g, "reject"))
	return c
}

// checkPassed renders an asset's last check result.
func checkPassed(p *bool) string {
	switch {
	case p == nil:
		return "-"
	case *p:
		return "passed"
	}
	return "failed"
}

func materializationsCmd(g *globals) *cobra.Command {
	var f larkclient.MaterializationFilter
	var limit int
	c := &cobra.Command{Use: "materializations ASSET_KEY [--partition K] [--state S]", Aliases: []string{"mats"},
		Short: "List an asset's materializations, newest first", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			t := newTable(g.out, "MATERIALIZATION", "PARTITION", "STATE", "GATING", "ROWS", "CHECKS", "RUN", "TASK", "CREATED")
			n := 0
			for m, err := range cl.AllMaterializations(ctxOf(c), a[0], f, larkclient.ListOptions{Limit: min(max(limit, 1), 200)}) {
				if err != nil {
					return err
				}
				if g.output == "json" {
					if err := printJSONLine(g.out, m.JSON); err != nil {
						return err
					}
				} else {
					t.row(m.MaterializationID, orDash(m.PartitionKey), m.State, orDash(m.GatingDecision), strconv.FormatInt(m.RowCount, 10),
						fmt.Sprintf("%d passed, %d failed", m.ChecksPassed, m.ChecksFailed), m.RunID, m.TaskID, ts(m.CreatedAt))
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
	c.Flags().StringVar(&f.PartitionKey, "partition", "", "only this partition's")
	c.Flags().StringVar(&f.State, "state", "", "only those in this state: staged, committed, promoted, quarantined or rejected")
	c.Flags().IntVar(&limit, "limit", 25, "at most this many rows")
	return c
}

// decideCmd is `lark assets approve` or `lark assets reject`.
func decideCmd(g *globals, action string) *cobra.Command {
	var reason string
	short := "Promote a quarantined materialization: it becomes the latest of its partition"
	if action == "reject" {
		short = "Discard a quarantined materialization: it is never promoted and its data is deleted"
	}
	c := &cobra.Command{Use: action + " ASSET_KEY MATERIALIZATION_ID [--reason TEXT]", Short: short, Args: args(2, 2),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			decide := cl.ApproveMaterialization
			if action == "reject" {
				decide = cl.RejectMaterialization
			}
			m, err := decide(ctxOf(c), a[0], a[1], reason)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, m.JSON)
			}
			fmt.Fprintf(g.out, "%s %s (%s, partition %s)\n", m.MaterializationID, m.State, m.AssetKey, orDash(m.PartitionKey))
			return nil
		}}
	c.Flags().StringVar(&reason, "reason", "", "why (recorded with the decision and in the audit log)")
	return c
}

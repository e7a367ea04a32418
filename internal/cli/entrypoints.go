package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/pkg/larkclient"
)

func entrypointsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "entrypoints", Aliases: []string{"ep"}, Short: "List, inspect and change the status of entrypoints"}
	var filter string
	list := &cobra.Command{Use: "list [--filter ODATA]", Short: "List the entrypoints the caller can see", Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			t := newTable(g.out, "ID", "ENTRYPOINT", "KIND", "VERSION", "STATUS", "TITLE")
			for e, err := range cl.AllEntrypoints(ctxOf(c), larkclient.ListOptions{Filter: filter, Limit: 200}, false) {
				if err != nil {
					return err
				}
				if g.output == "json" {
					if err := printJSONLine(g.out, e.JSON); err != nil {
						return err
					}
					continue
				}
				t.row(e.ID, shortID(e.EntrypointID), e.Kind, e.Version, e.Status, e.Title)
			}
			if g.output == "json" {
				return nil
			}
			return t.flush()
		}}
	list.Flags().StringVar(&filter, "filter", "", "an OData $filter, e.g. \"status eq 'active'\"")

	var source bool
	get := &cobra.Command{Use: "get ENTRYPOINT [--source]", Short: "Print an entrypoint's definition (JSON)", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			e, err := resolveEntrypoint(ctxOf(c), cl, a[0])
			if err != nil {
				return err
			}
			if source {
				if e, err = cl.GetEntrypoint(ctxOf(c), e.ID, true); err != nil {
					return err
				}
			}
			return printJSON(g.out, e.JSON)
		}}
	get.Flags().BoolVar(&source, "source", false, "include implementation.code.source")

	versions := &cobra.Command{Use: "versions ENTRYPOINT", Short: "List every version of an entrypoint's family", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			e, err := resolveEntrypoint(ctxOf(c), cl, a[0])
			if err != nil {
				return err
			}
			v, err := cl.EntrypointVersions(ctxOf(c), e.ID)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, v.JSON)
			}
			t := newTable(g.out, "ID", "ENTRYPOINT", "VERSION", "STATUS")
			for _, it := range v.Items {
				t.row(it.ID, shortID(it.EntrypointID), it.Version, it.Status)
			}
			return t.flush()
		}}

	validate := &cobra.Command{Use: "validate ENTRYPOINT", Short: "Re-check a stored entrypoint against the current schemas and policy",
		Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			rep, err := cl.ValidateExistingEntrypoint(ctxOf(c), a[0])
			if err != nil {
				return err
			}
			if g.output == "json" {
				if err := printJSON(g.out, rep.JSON); err != nil {
					return err
				}
			} else {
				for _, f := range append(rep.Errors, rep.Warnings...) {
					loc := f.Location.Path
					if f.Location.Line > 0 {
						loc += fmt.Sprintf(":%d:%d", f.Location.Line, f.Location.Column)
					}
					fmt.Fprintf(g.out, "%s: %s [%s]\n", loc, f.Message, f.Code)
				}
			}
			if !rep.Valid {
				return failed("%s is not valid: %d errors", a[0], len(rep.Errors))
			}
			if g.output == "table" {
				fmt.Fprintln(g.out, "valid")
			}
			return nil
		}}

	c.AddCommand(list, get, versions, validate)
	var notes, reason, successor, sunset string
	for _, action := range []string{"activate", "deprecate", "disable", "enable", "archive"} {
		s := &cobra.Command{Use: action + " ID", Short: "Run the " + action + " lifecycle action (id: ep_… or the exact GTS id)", Args: args(1, 1),
			RunE: func(c *cobra.Command, a []string) error {
				cl, err := g.client()
				if err != nil {
					return err
				}
				e, err := cl.SetEntrypointStatus(ctxOf(c), a[0], larkclient.StatusAction{Action: action,
					ReleaseNotes: notes, Reason: reason, SuccessorID: successor, SunsetDate: sunset})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.out, e.JSON)
				}
				fmt.Fprintf(g.out, "%s %s\n", e.EntrypointID, e.Status)
				return nil
			}}
		switch action {
		case "activate":
			s.Flags().StringVar(&notes, "release-notes", "", "release notes")
		case "deprecate":
			s.Flags().StringVar(&reason, "reason", "", "why")
			s.Flags().StringVar(&successor, "successor", "", "the GTS id that replaces it")
			s.Flags().StringVar(&sunset, "sunset", "", "RFC 3339 sunset date")
		}
		c.AddCommand(s)
	}
	var force bool
	del := &cobra.Command{Use: "delete ID [--force]", Short: "Delete a draft, archive anything else", Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			e, err := cl.DeleteEntrypoint(ctxOf(c), a[0], force)
			if err != nil {
				return err
			}
			if e == nil {
				fmt.Fprintf(g.out, "%s deleted\n", a[0])
				return nil
			}
			fmt.Fprintf(g.out, "%s %s\n", e.EntrypointID, e.Status)
			return nil
		}}
	del.Flags().BoolVar(&force, "force", false, "archive even with invocations in flight")
	c.AddCommand(del)
	return c
}

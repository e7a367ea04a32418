package cli

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/pkg/larkclient"
)

// completionTimeout bounds the server calls of a shell completion: a slow or unreachable server
// completes nothing rather than hanging the shell.
const completionTimeout = 2 * time.Second

// completionLimit bounds the entrypoints a completion reads.
const completionLimit = 1000

// groupsAndCompletion walks the command tree under c: a command group (subcommands, no action of
// its own) prints its help when called alone and refuses an unknown subcommand as a usage error
// (exit 2); a command taking an ENTRYPOINT argument, and every --entrypoint flag, completes
// entrypoint names from the server.
func groupsAndCompletion(c *cobra.Command, g *globals) {
	for _, sub := range c.Commands() {
		groupsAndCompletion(sub, g)
	}
	if c.HasSubCommands() && c.RunE == nil && c.Run == nil {
		c.Args = cobra.ArbitraryArgs
		c.SuggestionsMinimumDistance = 2
		c.RunE = func(c *cobra.Command, a []string) error {
			if len(a) == 0 {
				return c.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", a[0], c.CommandPath())
			if s := c.SuggestionsFor(a[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageErr("%s (see %s --help)", msg, c.CommandPath())
		}
	}
	if strings.Contains(c.Use, "ENTRYPOINT") && c.ValidArgsFunction == nil {
		c.ValidArgsFunction = func(cmd *cobra.Command, a []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(a) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return g.completeEntrypoints(cmd, toComplete)
		}
	}
	if c.Flags().Lookup("entrypoint") != nil {
		_ = c.RegisterFlagCompletionFunc("entrypoint", func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return g.completeEntrypoints(cmd, toComplete)
		})
	}
}

// completeEntrypoints returns the names of the active entrypoints that start with toComplete, with
// their titles: short names (calculate_tax), or GTS ids once toComplete starts with "gts.". It
// uses the current profile (or --server, --token, --profile) and stays silent on any error.
func (g *globals) completeEntrypoints(cmd *cobra.Command, toComplete string) ([]string, cobra.ShellCompDirective) {
	server, token, err := g.credentials()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cl, err := larkclient.New(server, token, larkclient.WithUserAgent("lark-cli"),
		larkclient.WithHTTPClient(&http.Client{Timeout: completionTimeout}))
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(ctxOf(cmd), completionTimeout)
	defer cancel()
	return entrypointNames(ctx, cl, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// entrypointNames lists the active entrypoints' names starting with prefix, "name\ttitle" each,
// sorted and without repeats (nil on any error).
func entrypointNames(ctx context.Context, cl *larkclient.Client, prefix string) []string {
	seen := map[string]bool{}
	var out []string
	n := 0
	for e, err := range cl.AllEntrypoints(ctx, larkclient.ListOptions{Filter: "status eq 'active'", Limit: 200}, false) {
		if err != nil {
			return nil
		}
		if n++; n > completionLimit {
			break
		}
		name := e.EntrypointID
		if !strings.HasPrefix(prefix, "gts.") {
			id, err := gts.Parse(e.EntrypointID)
			if err != nil {
				continue
			}
			name = id.Last().Type
		}
		if !strings.HasPrefix(name, prefix) || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, name+"\t"+strings.ReplaceAll(e.Title, "\t", " "))
	}
	slices.Sort(out)
	return out
}

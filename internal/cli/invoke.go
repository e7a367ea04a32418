package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/pkg/larkclient"
)

func invokeCmd(g *globals) *cobra.Command {
	var params, key string
	var async, follow bool
	c := &cobra.Command{Use: "invoke ENTRYPOINT [--params JSON|@file] [--async] [--follow] [--idempotency-key K]",
		Short: "Start an invocation and print its result (or follow it live)",
		Long: `Start an invocation of ENTRYPOINT, which is one of:
  - a GTS id (gts.x.core.serverless.entrypoint.v1~…calculate_tax.v1~; a major-only id runs the
    latest active minor),
  - an ep_… id,
  - a short name: the last segment's name (calculate_tax), or more of its tokens
    (billing.calculate_tax, vendor.app.billing.calculate_tax), optionally with a version
    (calculate_tax.v2, calculate_tax.v2.1). It must match active entrypoints of one family;
    the highest active version matching runs.

--params takes a JSON object, or @file (@- for stdin). The default mode is the entrypoint's;
--async starts it in the background and prints its id. --follow prints the timeline as it
grows until the invocation ends, each line with the cause its details carry (the error, a
retry's delay and next attempt, a suspension's until), then its result or error.

Exit codes: 0 succeeded, 1 failed, 4 canceled, 5 compensated, 6 dead-lettered (2 usage, 3 API).`,
		Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			ctx := ctxOf(c)
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
			ep, err := resolveEntrypoint(ctx, cl, a[0])
			if err != nil {
				return err
			}
			mode := ""
			if async {
				mode = "async"
			}
			if follow && !async && supports(ep, "async") {
				mode = "async" // the timeline is followed while it runs
			}
			res, err := cl.StartInvocation(ctx, larkclient.StartInvocation{EntrypointID: ep.EntrypointID, Mode: mode,
				Params: p, IdempotencyKey: key})
			if err != nil {
				return err
			}
			rec := &res.Record
			if follow {
				if rec, err = g.follow(ctx, cl, rec.InvocationID, true); err != nil {
					return err
				}
			} else if async || !rec.Terminal() {
				if g.output == "json" {
					return printJSON(g.out, rec.JSON)
				}
				fmt.Fprintf(g.out, "%s %s\n", rec.InvocationID, rec.Status)
				if !async {
					fmt.Fprintf(g.errOut, "not finished yet; follow it with: lark invocations timeline %s --follow\n", rec.InvocationID)
				}
				return nil
			}
			return g.printOutcome(rec)
		}}
	c.Flags().StringVarP(&params, "params", "p", "", "params: a JSON object, or @file (@- for stdin)")
	c.Flags().BoolVar(&async, "async", false, "start it in the background and print its id")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "print the timeline live until it ends")
	c.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key: the same key and request return the first invocation")
	return c
}

// supports reports whether the entrypoint's traits.invocation.supported lists mode.
func supports(ep *larkclient.Entrypoint, mode string) bool {
	var v struct {
		Traits struct {
			Invocation struct {
				Supported []string `json:"supported"`
			} `json:"invocation"`
		} `json:"traits"`
	}
	if err := json.Unmarshal(ep.JSON, &v); err != nil {
		return false
	}
	return slices.Contains(v.Traits.Invocation.Supported, mode)
}

// printOutcome prints a terminal invocation: its result, or its error with exit code 1.
func (g *globals) printOutcome(rec *larkclient.Invocation) error {
	if g.output == "json" {
		if err := printJSON(g.out, rec.JSON); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(g.out, "%s %s", rec.InvocationID, rec.Status)
		if ts := rec.Timestamps; ts.StartedAt != nil && ts.FinishedAt != nil {
			fmt.Fprintf(g.out, " in %s", ts.FinishedAt.Sub(*ts.StartedAt).Round(time.Millisecond))
		}
		fmt.Fprintln(g.out)
		if rec.Status == "succeeded" && len(rec.Result) > 0 {
			if err := printJSON(g.out, rec.Result); err != nil {
				return err
			}
		}
	}
	return outcomeErr(rec)
}

// outcomeErr is nil for a succeeded invocation, else an error with its status's exit code
// (statusExit) that says why: its error's type, message and category.
func outcomeErr(rec *larkclient.Invocation) error {
	code := statusExit(rec.Status)
	if code == ExitOK {
		return nil
	}
	msg := rec.Status
	if rec.Error != nil {
		msg = fmt.Sprintf("%s: %s", rec.Status, formatError(rec.Error.TypeID, rec.Error.Message, rec.Error.Category))
	}
	return &exitError{code: code, err: fmt.Errorf("invocation %s %s", rec.InvocationID, msg)}
}

// follow prints an invocation's timeline as it grows until the invocation is terminal, and
// returns its final record. Pages are walked with their cursors; the last page is fetched again
// with the cursor it was fetched with, printing only entries with a new seq.
func (g *globals) follow(ctx context.Context, cl *larkclient.Client, id string, print bool) (*larkclient.Invocation, error) {
	cursor := ""
	var last int64
	ended := false
	for {
		tl, err := cl.InvocationTimeline(ctx, id, cursor, 200)
		if err != nil {
			return nil, err
		}
		for _, e := range tl.Items {
			if e.Seq <= last {
				continue
			}
			last = e.Seq
			if !print {
				continue
			}
			if g.output == "json" {
				if err := printJSONLine(g.out, e.JSON); err != nil {
					return nil, err
				}
			} else {
				fmt.Fprintln(g.out, timelineLine(e))
			}
		}
		if tl.PageInfo.HasMore && tl.PageInfo.NextCursor != "" {
			cursor = tl.PageInfo.NextCursor
			continue
		}
		if ended {
			break
		}
		if larkclient.TerminalStatus(tl.Status) {
			ended = true // one more read picks up entries written with the final status
			continue
		}
		if err := sleep(ctx, g.poll); err != nil {
			return nil, err
		}
	}
	return cl.GetInvocation(ctx, id)
}

// printJSONLine writes one JSON document on one line.
func printJSONLine(out io.Writer, raw json.RawMessage) error {
	s := compact(raw, 1<<20)
	_, err := fmt.Fprintln(out, s)
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var versionSuffix = regexp.MustCompile(`^(.*?)\.v(\d+)(?:\.(\d+))?$`)

// resolveEntrypoint finds the entrypoint a command names by GTS id, ep_ id or short name.
func resolveEntrypoint(ctx context.Context, cl *larkclient.Client, ref string) (*larkclient.Entrypoint, error) {
	if strings.HasPrefix(ref, "gts.") || strings.HasPrefix(ref, "ep_") {
		ep, err := cl.GetEntrypoint(ctx, ref, false)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(ref, "gts.") {
			// Keep the id as given: a major-only id follows the latest active minor.
			ep.EntrypointID = ref
		}
		return ep, nil
	}
	name, major, minor := ref, -1, -1
	if sm := versionSuffix.FindStringSubmatch(ref); sm != nil {
		name = sm[1]
		var err error
		if major, err = strconv.Atoi(sm[2]); err != nil {
			return nil, usageErr("%s: bad version", ref)
		}
		if sm[3] != "" {
			if minor, err = strconv.Atoi(sm[3]); err != nil {
				return nil, usageErr("%s: bad version", ref)
			}
		}
	}
	want := strings.Split(name, ".")
	if name == "" || len(want) > 4 {
		return nil, usageErr("%q is not a GTS id, an ep_ id or a short name (name, ns.name, …, with an optional .vN)", ref)
	}
	type cand struct {
		ep           larkclient.Entrypoint
		major, minor int
	}
	var cands []cand
	for e, err := range cl.AllEntrypoints(ctx, larkclient.ListOptions{Filter: "status eq 'active'", Limit: 200}, false) {
		if err != nil {
			return nil, err
		}
		id, err := gts.Parse(e.EntrypointID)
		if err != nil {
			continue
		}
		l := id.Last()
		tokens := []string{l.Vendor, l.Package, l.Namespace, l.Type}
		if !slices.Equal(tokens[4-len(want):], want) {
			continue
		}
		if (major >= 0 && l.Major != major) || (minor >= 0 && l.Minor != minor) {
			continue
		}
		cands = append(cands, cand{ep: e, major: l.Major, minor: l.Minor})
	}
	if len(cands) == 0 {
		return nil, usageErr("no active entrypoint matches %q (lark invoke takes a GTS id, an ep_ id or a short name)", ref)
	}
	families := map[string]bool{}
	for _, c := range cands {
		id, err := gts.Parse(c.ep.EntrypointID)
		if err != nil {
			return nil, err
		}
		families[id.Family()] = true
	}
	if len(families) > 1 {
		names := make([]string, 0, len(families))
		for f := range families {
			names = append(names, f)
		}
		sort.Strings(names)
		return nil, usageErr("%q matches several entrypoints; name one by GTS id or a longer name:\n  %s", ref, strings.Join(names, "\n  "))
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].major != cands[j].major {
			return cands[i].major > cands[j].major
		}
		return cands[i].minor > cands[j].minor
	})
	best := cands[0].ep
	return &best, nil
}

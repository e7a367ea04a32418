package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/manifest"
	"github.com/larkrun/lark/pkg/larkclient"
)

func validateCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "validate DIR", Short: "Check every manifest of a folder, locally and with the server, without deploying",
		Long: `Check every manifest of DIR (see lark deploy for the format): parse errors locally, then each
entrypoint with the server (POST /entrypoints:validate). Every problem is printed as
file:line:column: message; the exit code is 1 when there is any.`,
		Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			ms, err := g.check(ctxOf(c), cl, a[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "%s valid.\n", plural(len(ms), "manifest"))
			return nil
		}}
}

// check loads and validates a folder; problems are printed and make it fail with ExitFailed.
func (g *globals) check(ctx context.Context, cl *larkclient.Client, dir string) ([]manifest.Resource, error) {
	ms, probs, err := manifest.LoadTree(dir)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	ids := map[string]bool{}
	for _, m := range ms {
		if m.Kind == manifest.KindEntrypoint {
			ids[m.Key()] = true
		}
	}
	for _, m := range ms {
		if m.Kind != manifest.KindEntrypoint {
			continue
		}
		ps, err := serverValidate(ctx, cl, m, ids)
		if err != nil {
			return nil, err
		}
		probs = append(probs, ps...)
	}
	if len(probs) > 0 {
		probs.Sort()
		for _, p := range probs {
			fmt.Fprintln(g.errOut, p)
		}
		return nil, failed("%s in %s", plural(len(probs), "problem"), dir)
	}
	return ms, nil
}

// serverValidate runs POST /entrypoints:validate on an entrypoint manifest and maps each error
// to a file position: Starlark findings to the .star file (or the inline source), the others to
// the manifest member they name.
func serverValidate(ctx context.Context, cl *larkclient.Client, m manifest.Resource, deployed map[string]bool) (manifest.Problems, error) {
	body, err := m.JSON()
	if err != nil {
		return nil, err
	}
	rep, err := cl.ValidateEntrypoint(ctx, body)
	if err != nil {
		return nil, err
	}
	var out manifest.Problems
	for _, f := range rep.Errors {
		if (f.Code == "COMPENSATION_HANDLER" || f.Code == "TASK_ENTRYPOINT") && mentionsAny(f.Message, deployed) {
			continue // the handler or task function is part of this deploy: it is created before this entrypoint
		}
		msg := f.Message
		if f.Code != "" {
			msg += " [" + f.Code + "]"
		}
		out = append(out, m.Finding(f.Location.Path, f.Location.Line, f.Location.Column, msg))
	}
	return out, nil
}

func mentionsAny(msg string, ids map[string]bool) bool {
	for id := range ids {
		if strings.Contains(msg, id) {
			return true
		}
	}
	return false
}

func deployCmd(g *globals) *cobra.Command {
	var dryRun bool
	c := &cobra.Command{Use: "deploy DIR", Short: "Validate a folder of manifests, then register and activate what changed",
		Long: `Deploy a folder of manifests (docs/cli.md, "The deploy folder"): *.yaml, *.yml and *.json files,
one object each, in DIR and its subfolders (hidden files skipped).

  - no kind, or kind: entrypoint: a registration body (POST /entrypoints); the Starlark source
    may come from implementation.code.file or from the .star file with the manifest's name.
  - kind: schedule, kind: trigger, kind: webhook: a schedule, event trigger or webhook trigger.

Every manifest is validated first, locally and by the server; any problem is printed as
file:line:column: message and nothing is deployed (exit code 1). Then the plan is shown and
applied: entrypoints first. An entrypoint whose active version already has the manifest's
definition is unchanged; a changed one gets a new minor version, registered and activated.
Running deploy again with no change does nothing.`,
		Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			ctx := ctxOf(c)
			cl, err := g.client()
			if err != nil {
				return err
			}
			ms, err := g.check(ctx, cl, a[0])
			if err != nil {
				return err
			}
			steps := make([]*step, 0, len(ms))
			for _, m := range ms {
				s, err := plan(ctx, cl, m)
				if err != nil {
					return err
				}
				steps = append(steps, s)
			}
			changes := 0
			t := newTable(g.out, "KIND", "NAME", "ACTION", "TARGET")
			for _, s := range steps {
				if s.action != actUnchanged {
					changes++
				}
				target := s.target
				if s.m.Kind == manifest.KindEntrypoint {
					target = shortID(target)
				}
				t.row(s.m.Kind, s.name(), string(s.action), target)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if changes == 0 {
				fmt.Fprintln(g.out, "Nothing to deploy: everything is up to date.")
				return nil
			}
			if dryRun {
				fmt.Fprintf(g.out, "Dry run: %s not applied.\n", plural(changes, "change"))
				return nil
			}
			for _, s := range steps {
				if err := s.apply(ctx, cl, g); err != nil {
					return fmt.Errorf("%s (%s): %w", s.name(), s.m.File, err)
				}
			}
			fmt.Fprintf(g.out, "Deployed %s.\n", plural(changes, "change"))
			return nil
		}}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "validate and show the plan; change nothing")
	return c
}

// plural is "1 change", "2 changes": n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// action is what deploy does with one manifest.
type action string

const (
	actCreate     action = "create"
	actNewVersion action = "new version"
	actUpdate     action = "update draft"
	actActivate   action = "activate"
	actReplace    action = "update"
	actUnchanged  action = "unchanged"
)

// step is one manifest's planned action.
type step struct {
	m      manifest.Resource
	action action
	target string // the id acted on (a new version's id, an existing schedule's id, …)
	body   map[string]any
}

func (s *step) name() string {
	if s.m.Kind == manifest.KindEntrypoint {
		return shortID(s.m.Key())
	}
	return s.m.Key()
}

// plan compares a manifest with the server.
func plan(ctx context.Context, cl *larkclient.Client, m manifest.Resource) (*step, error) {
	switch m.Kind {
	case manifest.KindEntrypoint:
		return planEntrypoint(ctx, cl, m)
	case manifest.KindSchedule:
		return planKeyed(m, "schedule_id", func() (string, json.RawMessage, error) {
			if id := str(m.Body["schedule_id"]); id != "" {
				s, err := cl.GetSchedule(ctx, id)
				if err != nil {
					return "", nil, err
				}
				return s.ScheduleID, s.JSON, nil
			}
			p, err := cl.ListSchedules(ctx, larkclient.ListOptions{Filter: "name eq " + quote(m.Key()), Limit: 2})
			if err != nil || len(p.Items) == 0 {
				return "", nil, err
			}
			return p.Items[0].ScheduleID, p.Items[0].JSON, nil
		})
	case manifest.KindTrigger:
		return planKeyed(m, "trigger_id", func() (string, json.RawMessage, error) {
			t, err := cl.GetTrigger(ctx, m.Key())
			if err != nil {
				return "", nil, err
			}
			return t.TriggerID, t.JSON, nil
		})
	default:
		return planKeyed(m, "webhook_trigger_id", func() (string, json.RawMessage, error) {
			if id := str(m.Body["webhook_trigger_id"]); id != "" {
				w, err := cl.GetWebhook(ctx, id)
				if err != nil {
					return "", nil, err
				}
				return w.WebhookTriggerID, w.JSON, nil
			}
			p, err := cl.ListWebhooks(ctx, larkclient.ListOptions{Filter: "name eq " + quote(m.Key()), Limit: 2})
			if err != nil || len(p.Items) == 0 {
				return "", nil, err
			}
			return p.Items[0].WebhookTriggerID, p.Items[0].JSON, nil
		})
	}
}

// str is v when it is a string, else "".
func str(v any) string {
	s, _ := v.(string)
	return s
}

// quote writes an OData string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// planKeyed plans a schedule, trigger or webhook: create when find finds nothing, update when
// the server's differs from the manifest, else unchanged.
func planKeyed(m manifest.Resource, idField string, find func() (string, json.RawMessage, error)) (*step, error) {
	id, cur, err := find()
	var p *larkclient.Problem
	if errors.As(err, &p) && p.NotFound() {
		err, cur = nil, nil
	}
	if err != nil {
		return nil, err
	}
	s := &step{m: m, body: m.Body}
	if cur == nil {
		s.action, s.target = actCreate, orDash(str(m.Body[idField]))
		return s, nil
	}
	s.target = id
	var server any
	if err := unmarshalNumbers(cur, &server); err != nil {
		return nil, err
	}
	// A webhook secret is never read back: it cannot be compared.
	if subset(m.Body, server, map[string]bool{idField: true, "secret": true}) {
		s.action = actUnchanged
	} else {
		s.action = actReplace
	}
	return s, nil
}

// planEntrypoint compares an entrypoint manifest with the versions of its major on the server.
func planEntrypoint(ctx context.Context, cl *larkclient.Client, m manifest.Resource) (*step, error) {
	id, err := gts.Parse(m.Key())
	if err != nil {
		return nil, usageErr("%s: entrypoint_id: %v", m.File, err)
	}
	last := id.Last()
	pattern := fmt.Sprintf("%s.v%d.*", id.Family(), last.Major)
	type version struct {
		id     string
		minor  int
		status string
		def    any
	}
	var vs []version
	for e, err := range cl.AllEntrypoints(ctx, larkclient.ListOptions{Filter: "entrypoint_id eq " + quote(pattern), Limit: 200}, true) {
		if err != nil {
			return nil, err
		}
		vid, err := gts.Parse(e.EntrypointID)
		if err != nil || vid.Family() != id.Family() || vid.Last().Major != last.Major {
			continue
		}
		var def any
		if err := unmarshalNumbers(e.JSON, &def); err != nil {
			return nil, err
		}
		vs = append(vs, version{id: e.EntrypointID, minor: vid.Last().Minor, status: e.Status, def: def})
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].minor < vs[j].minor })
	s := &step{m: m, body: m.Body, target: m.Key()}
	if len(vs) == 0 {
		s.action = actCreate
		return s, nil
	}
	ignore := map[string]bool{"entrypoint_id": true, "version": true}
	same := func(v version) bool { return subset(m.Body, v.def, ignore) }
	var active *version
	for i := range vs {
		if vs[i].status == "active" {
			active = &vs[i]
		}
	}
	if active != nil && same(*active) {
		s.action, s.target = actUnchanged, active.id
		return s, nil
	}
	for _, v := range vs {
		if v.status == "draft" && same(v) {
			s.action, s.target = actActivate, v.id
			return s, nil
		}
	}
	if last.HasMinor {
		for _, v := range vs {
			if v.minor != last.Minor {
				continue
			}
			if v.status != "draft" {
				return nil, failed("%s: %s is %s and differs from the manifest: raise the minor version in entrypoint_id", m.File, v.id, v.status)
			}
			s.action, s.target = actUpdate, v.id
			return s, nil
		}
		s.action = actCreate
		return s, nil
	}
	// A major-only id: a draft left as the newest version is updated, else a new minor follows the
	// newest one.
	newest := vs[len(vs)-1]
	if newest.status == "draft" {
		s.action, s.target = actUpdate, newest.id
		return s, nil
	}
	s.action = actNewVersion
	s.target = fmt.Sprintf("%s.v%d.%d~", id.Family(), last.Major, newest.minor+1)
	return s, nil
}

// apply carries out a step.
func (s *step) apply(ctx context.Context, cl *larkclient.Client, g *globals) error {
	if s.action == actUnchanged {
		return nil
	}
	body := s.body
	if s.m.Kind == manifest.KindEntrypoint && s.target != s.m.Key() {
		body = copyMap(body)
		body["entrypoint_id"] = s.target
		delete(body, "version") // it names the manifest's minor; the server sets MAJOR.MINOR.0
	}
	raw, err := manifest.Encode(body)
	if err != nil {
		return err
	}
	switch s.m.Kind {
	case manifest.KindEntrypoint:
		switch s.action {
		case actCreate, actNewVersion:
			if _, err := cl.RegisterEntrypoint(ctx, raw); err != nil {
				return err
			}
		case actUpdate:
			if _, err := cl.UpdateEntrypoint(ctx, s.target, raw); err != nil {
				return err
			}
		}
		if _, err := cl.ActivateEntrypoint(ctx, s.target, "lark deploy"); err != nil {
			return err
		}
		fmt.Fprintf(g.out, "activated %s\n", s.target)
	case manifest.KindSchedule:
		if s.action == actCreate {
			sc, err := cl.CreateSchedule(ctx, raw)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "created schedule %s\n", sc.ScheduleID)
		} else {
			if _, err := cl.ReplaceSchedule(ctx, s.target, raw); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "updated schedule %s\n", s.target)
		}
	case manifest.KindTrigger:
		if s.action == actCreate {
			if _, err := cl.CreateTrigger(ctx, raw); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "created trigger %s\n", s.m.Key())
		} else {
			if _, err := cl.ReplaceTrigger(ctx, s.target, raw); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "updated trigger %s\n", s.target)
		}
	case manifest.KindWebhook:
		var w *larkclient.Webhook
		if s.action == actCreate {
			w, err = cl.CreateWebhook(ctx, raw)
		} else {
			w, err = cl.ReplaceWebhook(ctx, s.target, raw)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(g.out, "%s webhook %s at %s\n", map[bool]string{true: "created", false: "updated"}[s.action == actCreate], w.WebhookTriggerID, w.WebhookURL)
		if w.Secret != "" {
			fmt.Fprintf(g.out, "  secret (shown once, store it now): %s\n", w.Secret)
		}
	}
	return nil
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// unmarshalNumbers decodes JSON keeping numbers as json.Number.
func unmarshalNumbers(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	return dec.Decode(v)
}

// subset reports whether every member the manifest sets is on the server with an equal value
// (members the server adds, such as defaults and timestamps, are not compared). Objects compare
// member-wise, arrays and scalars whole; numbers by value (2 equals 2.0).
func subset(want, have any, ignoreTop map[string]bool) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if ignoreTop[k] {
				continue
			}
			hv, ok := h[k]
			if !ok {
				if v == nil {
					continue
				}
				return false
			}
			if !subset(v, hv, nil) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !equalJSON(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return equalJSON(want, have)
	}
}

// equalJSON compares two decoded JSON values exactly (objects in full), numbers by value.
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !equalJSON(v, y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fa, _, errA := big.ParseFloat(string(x), 10, 200, big.ToNearestEven)
		fb, _, errB := big.ParseFloat(string(y), 10, 200, big.ToNearestEven)
		if errA != nil || errB != nil {
			return x == y
		}
		return fa.Cmp(fb) == 0
	default:
		return a == b
	}
}

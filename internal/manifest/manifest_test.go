package manifest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/manifest"
)

func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

func TestLoadKindsAndDefaults(t *testing.T) {
	dir := write(t, map[string]string{
		"tax.yaml": "entrypoint_id: gts.a~\ntraits:\n  retry: {max_attempts: 3, backoff_multiplier: 2.0}\n",
		"tax.star": "def main(ctx, input):\n    return {}\n",
		"other.json": `{"kind": "entrypoint", "entrypoint_id": "gts.b~",
			"implementation": {"adapter": "custom", "code": {"file": "src/b.star"}}}`,
		"inline.yml":    "entrypoint_id: gts.c~\nimplementation:\n  code: {source: \"def main(ctx, input):\\n  return 1\\n\"}\n",
		"nightly.yaml":  "kind: schedule\nschedule_id: nightly\nexpression: {kind: cron, value: \"0 2 * * *\"}\n",
		"on-paid.yaml":  "kind: trigger\ntrigger_id: on-paid\n",
		"hook.json":     `{"kind": "webhook", "webhook_trigger_id": "hook"}`,
		".hidden.yaml":  "kind: nonsense\n",
		"tax_test.star": "def test_x(t):\n    pass\n",
		"README.md":     "not a manifest",
	})
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "b.star"), []byte("def main(ctx, input):\n    return 2\n"), 0o644))

	set, err := manifest.Load(dir)
	require.NoError(t, err)
	require.Len(t, set.Entrypoints, 3)
	ids := []string{}
	for _, e := range set.Entrypoints {
		ids = append(ids, e.ID())
	}
	require.Equal(t, []string{"gts.c~", "gts.b~", "gts.a~"}, ids, "file-name order: inline.yml, other.json, tax.yaml")

	tax := set.Entrypoints[2]
	require.Equal(t, filepath.Join(dir, "tax.star"), tax.SourceFile)
	impl := tax.Body["implementation"].(map[string]any)
	require.Equal(t, manifest.StarlarkAdapter, impl["adapter"])
	require.Equal(t, "code", impl["kind"])
	code := impl["code"].(map[string]any)
	require.Equal(t, "starlark", code["language"])
	require.Equal(t, "def main(ctx, input):\n    return {}\n", code["source"])
	b, err := json.Marshal(tax.Body["traits"])
	require.NoError(t, err)
	require.JSONEq(t, `{"retry": {"max_attempts": 3, "backoff_multiplier": 2.0}}`, string(b))
	require.Contains(t, string(b), "2.0", "numbers are kept as written")

	other := set.Entrypoints[1]
	oimpl := other.Body["implementation"].(map[string]any)
	require.Equal(t, "custom", oimpl["adapter"], "a given adapter is kept")
	ocode := oimpl["code"].(map[string]any)
	require.NotContains(t, ocode, "file")
	require.Equal(t, "def main(ctx, input):\n    return 2\n", ocode["source"])
	require.NotContains(t, other.Body, "kind")

	require.Empty(t, set.Entrypoints[0].SourceFile, "inline source")

	require.Len(t, set.Schedules, 1)
	require.Equal(t, "nightly", set.Schedules[0].ID())
	require.NotContains(t, set.Schedules[0].Body, "kind")
	require.Len(t, set.Triggers, 1)
	require.Equal(t, "on-paid", set.Triggers[0].ID())
	require.Len(t, set.Webhooks, 1)
	require.Equal(t, "hook", set.Webhooks[0].ID())
}

func TestLoadErrorsHavePositions(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"kind":          {"title: x\nkind: cron\n", "m.yaml:2:7: kind must be entrypoint, schedule, trigger or webhook"},
		"duplicate key": {"a: 1\nb: 2\na: 3\n", "m.yaml:3:1: key \"a\" given twice"},
		"two documents": {"a: 1\n---\nb: 2\n", "a manifest holds one document"},
		"not an object": {"- 1\n- 2\n", "m.yaml:1:1: a manifest is one object"},
		"empty":         {"", "m.yaml: empty manifest"},
		"syntax":        {"a: [1, 2\n", "m.yaml:1:1: did not find expected"},
		"no source":     {"entrypoint_id: x\n", "m.star does not exist"},
		"both":          {"implementation:\n  code:\n    source: x\n    file: y.star\n", "m.yaml:4:11: give implementation.code.source or implementation.code.file, not both"},
		"absolute file": {"implementation:\n  code:\n    file: /etc/passwd\n", "m.yaml:3:11: implementation.code.file must be relative"},
		"impl type":     {"implementation: 3\n", "m.yaml:1:17: implementation must be an object"},
		"timestamp":     {"at: 2026-01-01\n", "m.yaml:1:5: unsupported value"},
		"infinity":      {"x: .inf\n", "JSON has no infinities"},
		"merge key":     {"a: &x {b: 1}\nc:\n  <<: *x\n", "merge keys"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := write(t, map[string]string{"m.yaml": tc.body})
			_, err := manifest.Load(dir)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.True(t, strings.HasPrefix(err.Error(), filepath.Join(dir, "m.yaml")), err.Error())
		})
	}
}

func TestLoadBounds(t *testing.T) {
	dir := write(t, map[string]string{"big.yaml": "a: \"" + strings.Repeat("x", manifest.MaxManifestBytes) + "\"\n"})
	_, err := manifest.Load(dir)
	require.ErrorContains(t, err, "larger than")

	deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	dir = write(t, map[string]string{"deep.json": `{"a": ` + deep + `}`})
	_, err = manifest.Load(dir)
	require.ErrorContains(t, err, "nested more than")
}

func TestLoadReportsEveryBadFile(t *testing.T) {
	dir := write(t, map[string]string{"a.yaml": "kind: x\n", "b.yaml": "kind: y\n"})
	_, err := manifest.Load(dir)
	require.ErrorContains(t, err, "a.yaml:1:7")
	require.ErrorContains(t, err, "b.yaml:1:7")
}

func TestPosition(t *testing.T) {
	dir := write(t, map[string]string{"m.yaml": "title: x\ntraits:\n  limits: {cpu: 7}\ntags:\n  - a\n  - b\n", "m.star": ""})
	set, err := manifest.Load(dir)
	require.NoError(t, err)
	r := set.Entrypoints[0]
	for path, want := range map[string][2]int{
		"$.traits.limits.cpu": {3, 12},
		"$.tags[1]":           {6, 5},
		"$.traits.retry.x":    {2, 1}, // left out: the closest member written
		"$.traits":            {2, 1},
		"$":                   {1, 1},
	} {
		l, c, ok := r.Position(path)
		require.True(t, ok, path)
		require.Equal(t, want, [2]int{l, c}, path)
	}
}

// TestWorkflowTraitDefaults: a workflow manifest may leave traits.workflow out, or any of its
// members; what it writes is kept, and functions get nothing.
func TestWorkflowTraitDefaults(t *testing.T) {
	t.Parallel()
	const (
		wf = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~acme.app.orders.flow.v1~"
		fn = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.app.orders.tax.v1~"
	)
	star := "def main(ctx, input):\n    return {}\n"
	for name, tc := range map[string]struct{ body, want string }{
		"none": {"entrypoint_id: " + wf + "\ntraits:\n  retry: {max_attempts: 1}\n",
			`{"retry": {"max_attempts": 1}, "workflow": {"compensation": {"on_failure": null, "on_cancel": null},
			  "checkpointing": {"strategy": "automatic"}, "max_suspension_days": 30}}`},
		"no traits": {"entrypoint_id: " + wf + "\n",
			`{"workflow": {"compensation": {"on_failure": null, "on_cancel": null},
			  "checkpointing": {"strategy": "automatic"}, "max_suspension_days": 30}}`},
		"some": {"entrypoint_id: " + wf + "\ntraits:\n  workflow:\n    compensation: {on_failure: " + fn + "}\n    max_suspension_days: 2\n    checkpointing: null\n",
			`{"workflow": {"compensation": {"on_failure": "` + fn + `", "on_cancel": null},
			  "checkpointing": {"strategy": "automatic"}, "max_suspension_days": 2}}`},
		"all written": {"entrypoint_id: " + wf + "\ntraits:\n  workflow:\n    compensation: {on_failure: null, on_cancel: " + fn + "}\n    checkpointing: {strategy: manual}\n    max_suspension_days: 7\n",
			`{"workflow": {"compensation": {"on_failure": null, "on_cancel": "` + fn + `"},
			  "checkpointing": {"strategy": "manual"}, "max_suspension_days": 7}}`},
		"function": {"entrypoint_id: " + fn + "\ntraits:\n  retry: {max_attempts: 1}\n", `{"retry": {"max_attempts": 1}}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := write(t, map[string]string{"m.yaml": tc.body, "m.star": star})
			set, err := manifest.Load(dir)
			require.NoError(t, err)
			require.Len(t, set.Entrypoints, 1)
			b, err := json.Marshal(set.Entrypoints[0].Body["traits"])
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(b))
		})
	}

	dir := write(t, map[string]string{"m.yaml": "entrypoint_id: " + wf + "\ntraits:\n  workflow: [1]\n", "m.star": star})
	_, err := manifest.Load(dir)
	require.ErrorContains(t, err, "m.yaml:3:13: traits.workflow must be an object")
}

package manifest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/manifest"
)

// writeTree writes files (paths with slashes, folders made) into a new folder.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

// problemLines renders problems relative to dir, sorted.
func problemLines(dir string, ps manifest.Problems) []string {
	ps.Sort()
	var out []string
	for _, p := range ps {
		out = append(out, strings.TrimPrefix(p.String(), dir+string(filepath.Separator)))
	}
	return out
}

const (
	fnID  = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~a.b.c."
	wfID  = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~a.b.c."
	mainA = "def main(ctx, input):\n    return 1\n"
)

// TestLoadTreeFormat: subfolders read, hidden ones and _test.star files skipped, defaults filled,
// numbers sent as written, code.file and kind not sent.
func TestLoadTreeFormat(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"a.yaml":         "entrypoint_id: " + fnID + "a.v1~\nscore: 2.50\nbig: 0x10\n",
		"a.star":         mainA,
		"a_test.star":    "def test(t): pass\n",
		"sub/b.json":     `{"entrypoint_id": "` + fnID + `b.v1~", "implementation": {"code": {"file": "../src/b.star"}}}`,
		"src/b.star":     "def main(ctx, input):\n    return 2\n",
		"s.yml":          "kind: schedule\nname: every hour\nentrypoint_id: x\n",
		".hidden/c.yaml": "not: loaded\n",
	})
	rs, probs, err := manifest.LoadTree(dir)
	require.NoError(t, err)
	require.Empty(t, probs)
	require.Len(t, rs, 3)
	require.Equal(t, manifest.KindEntrypoint, rs[0].Kind)
	body, err := rs[0].JSON()
	require.NoError(t, err)
	require.Contains(t, string(body), `"score":2.50`, "numbers are sent as written")
	require.Contains(t, string(body), `"big":16`)
	require.Contains(t, string(body), `"adapter":"gts.x.core.serverless.adapter.starlark.v1~"`)
	require.Contains(t, string(body), `"language":"starlark"`)
	require.Contains(t, string(body), `return 1`)
	require.Equal(t, filepath.Join(dir, "a.star"), rs[0].SourceFile)
	b, err := rs[1].JSON()
	require.NoError(t, err)
	require.Contains(t, string(b), `return 2`)
	require.NotContains(t, string(b), `"file"`, "code.file is not sent")
	require.Equal(t, manifest.KindSchedule, rs[2].Kind)
	require.Equal(t, "every hour", rs[2].Key())
	require.NotContains(t, rs[2].Body, "kind", "kind is not sent")
}

// TestLoadTreeProblems: every problem of every file, each at its position.
func TestLoadTreeProblems(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"two.yaml":   "a: 1\n---\nb: 2\n",
		"list.yaml":  "- 1\n- 2\n",
		"kind.yaml":  "kind: cronjob\n",
		"both.yaml":  "entrypoint_id: gts.x\nimplementation:\n  code:\n    source: x\n    file: y.star\n",
		"dup.yaml":   "a: 1\na: 2\nb: 1\nb: 2\n",
		"trig.yaml":  "kind: trigger\nevent_type_id: x\n",
		"empty.yaml": "",
		"noid.yaml":  "title: x\nimplementation: 3\n",
		"hook.yaml":  "kind: webhook\n",
		"date.yaml":  "kind: schedule\nname: n\nstart: 2026-01-01\nend: .inf\n",
		"bad.json":   `{"entrypoint_id": "gts.x", "title": "t",,}`,
		"nostar.yml": "entrypoint_id: gts.nostar\n",
		"abs.yaml":   "entrypoint_id: gts.abs\nimplementation:\n  code: {file: /etc/hostname}\n",
		"one.yaml":   "entrypoint_id: gts.same\nimplementation: {code: {source: x}}\n",
		"sub/o.yaml": "entrypoint_id: gts.same\nimplementation: {code: {source: x}}\n",
	})
	rs, probs, err := manifest.LoadTree(dir)
	require.NoError(t, err)
	require.Len(t, rs, 1, "only one.yaml is read well")
	require.Equal(t, []string{
		"abs.yaml:3:16: implementation.code.file must be relative to the manifest",
		`bad.json:1:42: invalid character ',' looking for beginning of object key string`,
		"both.yaml:5:11: give implementation.code.source or implementation.code.file, not both",
		"date.yaml:3:8: unsupported value \"2026-01-01\" (tag !!timestamp): quote it to make it a string",
		"date.yaml:4:6: invalid number \".inf\" (JSON has no infinities or NaN)",
		`dup.yaml:2:1: key "a" given twice`,
		`dup.yaml:4:1: key "b" given twice`,
		"empty.yaml: empty manifest: want one object",
		"hook.yaml:1:1: a webhook manifest needs a name (or its id) to identify it on later deploys",
		`kind.yaml:1:7: kind must be entrypoint, schedule, trigger or webhook, got "cronjob"`,
		"list.yaml:1:1: a manifest is one object (a mapping)",
		"noid.yaml:1:1: an entrypoint manifest needs entrypoint_id (a GTS id), or a kind: schedule, trigger or webhook",
		"noid.yaml:2:17: implementation must be an object",
		"nostar.yml:1:1: no Starlark source: " + filepath.Join(dir, "nostar.star") + " does not exist (give implementation.code.source or implementation.code.file)",
		"sub/o.yaml:1:1: entrypoint gts.same is also declared in " + filepath.Join(dir, "one.yaml"),
		"trig.yaml:1:1: a trigger manifest needs trigger_id (it identifies the trigger on later deploys)",
		"two.yaml:2:1: a manifest holds one document; split the documents into files",
	}, problemLines(dir, probs))
}

// TestLoadTreeOrder: compensation handlers first, then the other entrypoints, schedules,
// triggers and webhook triggers.
func TestLoadTreeOrder(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"a_hook.yaml":  "kind: webhook\nname: h\n",
		"b_trig.yaml":  "kind: trigger\ntrigger_id: t\n",
		"c_sched.yaml": "kind: schedule\nname: s\n",
		"d_flow.yaml":  "entrypoint_id: " + wfID + "flow.v1~\ntraits:\n  workflow:\n    compensation: {on_failure: " + fnID + "undo.v1~}\n",
		"d_flow.star":  mainA,
		"e_fn.yaml":    "entrypoint_id: " + fnID + "fn.v1~\n",
		"e_fn.star":    mainA,
		"f_undo.yaml":  "entrypoint_id: " + fnID + "undo.v1~\n",
		"f_undo.star":  mainA,
	})
	rs, probs, err := manifest.LoadTree(dir)
	require.NoError(t, err)
	require.Empty(t, probs)
	var names []string
	for _, r := range rs {
		names = append(names, filepath.Base(r.File))
	}
	require.Equal(t, []string{"f_undo.yaml", "d_flow.yaml", "e_fn.yaml", "c_sched.yaml", "b_trig.yaml", "a_hook.yaml"}, names)
}

func TestLoadTreeFolderErrors(t *testing.T) {
	_, _, err := manifest.LoadTree(filepath.Join(t.TempDir(), "missing"))
	require.ErrorContains(t, err, "no such file")
	dir := writeTree(t, map[string]string{"f.yaml": "a: 1\n"})
	_, _, err = manifest.LoadTree(filepath.Join(dir, "f.yaml"))
	require.ErrorContains(t, err, "is not a folder")
}

// TestFinding: a server's findings placed in the manifest (at the value a path names, at the
// closest written ancestor, or at the start with the path) and in the Starlark source (the
// .star file, or an inline source line by line).
func TestFinding(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"m.yaml": "entrypoint_id: gts.m\ntraits:\n  retry:\n    max_attempts: 0\n  tags: [a, b]\n",
		"m.star": mainA,
		"block.yaml": "entrypoint_id: gts.block\nimplementation:\n  code:\n    source: |\n" +
			"      def main(ctx, input):\n          return nope\n",
		"plain.yaml": "entrypoint_id: gts.plain\nimplementation: {code: {source: \"def main(ctx, input):\\n  return nope\\n\"}}\n",
	})
	rs, probs, err := manifest.LoadTree(dir)
	require.NoError(t, err)
	require.Empty(t, probs)
	by := map[string]manifest.Resource{}
	for _, r := range rs {
		by[filepath.Base(r.File)] = r
	}
	m := by["m.yaml"]
	for path, want := range map[string]string{
		"$.traits.retry.max_attempts": "m.yaml:4:19: x",
		"$.traits.tags[1]":            "m.yaml:5:13: x",
		"$.traits.retry.missing":      "m.yaml:4:5: x", // at the parent's value
		"$.nope":                      "m.yaml:1:1: $.nope: x",
		"$":                           "m.yaml:1:1: x",
	} {
		require.Equal(t, want, strings.TrimPrefix(m.Finding(path, 0, 0, "x").String(), dir+string(filepath.Separator)), path)
	}
	rel := func(p manifest.Problem) string {
		return strings.TrimPrefix(p.String(), dir+string(filepath.Separator))
	}
	require.Equal(t, "m.star:2:12: undefined", rel(m.Finding("$.implementation.code.source", 2, 12, "undefined")))
	require.Equal(t, "block.yaml:6:18: undefined", rel(by["block.yaml"].Finding("$.implementation.code.source", 2, 12, "undefined")))
	require.Equal(t, "plain.yaml:2:33: source line 2 column 10: undefined",
		rel(by["plain.yaml"].Finding("$.implementation.code.source", 2, 10, "undefined")))
	require.Equal(t, "x.yaml: $.a: y", manifest.Resource{File: "x.yaml"}.Finding("$.a", 0, 0, "y").String(), "no manifest read")
}

func TestReadObjectAndEncode(t *testing.T) {
	dir := writeTree(t, map[string]string{"t.yaml": "kind: trigger\nq: \"<a & b>\"\nn: 1.50\n", "bad.yaml": "a: [1\n"})
	obj, probs := manifest.ReadObject(filepath.Join(dir, "t.yaml"))
	require.Empty(t, probs)
	require.Equal(t, "trigger", obj["kind"], "ReadObject leaves kind in")
	b, err := manifest.Encode(obj)
	require.NoError(t, err)
	require.JSONEq(t, `{"kind":"trigger","q":"<a & b>","n":1.50}`, string(b))
	require.Contains(t, string(b), `"<a & b>"`, "HTML characters are not escaped")
	require.Contains(t, string(b), `1.50`)
	_, probs = manifest.ReadObject(filepath.Join(dir, "bad.yaml"))
	require.Len(t, probs, 1)
	require.Equal(t, 1, probs[0].Line)
	_, probs = manifest.ReadObject(filepath.Join(dir, "missing.yaml"))
	require.Len(t, probs, 1)
	require.Error(t, manifest.Problems(probs).Err())
	require.NoError(t, manifest.Problems(nil).Err())
}

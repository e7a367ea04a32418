package manifest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/manifest"
)

// dagManifest is a DAG entrypoint whose two tasks run the functions extract and clean.
const dagManifest = `entrypoint_id: ` + wfID + `daily.v1~
title: Daily
implementation:
  kind: workflow_spec
  workflow_spec:
    format: dag
    spec:
      partitioning: {type: daily, start: "2026-01-01"}
      tasks:
        - id: extract
          entrypoint_id: ` + fnID + `extract.v1~
        - id: clean
          entrypoint_id: ` + fnID + `clean.v1~
          depends_on: [extract]
          params: {rows: "{{tasks.extract.output.rows}}"}
`

// TestLoadTreeDAG: a DAG manifest needs no .star file, gets the DAG adapter, carries no code, and
// is deployed after the folder's functions (its tasks need them), whatever the file names.
func TestLoadTreeDAG(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"a_daily.yaml":   dagManifest,
		"extract.yaml":   "entrypoint_id: " + fnID + "extract.v1~\n",
		"extract.star":   mainA,
		"sub/clean.yaml": "entrypoint_id: " + fnID + "clean.v1~\n",
		"sub/clean.star": mainA,
		"nightly.yaml":   "kind: schedule\nname: nightly\nentrypoint_id: " + wfID + "daily.v1~\n",
	})
	rs, probs, err := manifest.LoadTree(dir)
	require.NoError(t, err)
	require.Empty(t, probs)
	var keys []string
	for _, r := range rs {
		keys = append(keys, r.Key())
	}
	require.Equal(t, []string{fnID + "extract.v1~", fnID + "clean.v1~", wfID + "daily.v1~", "nightly"}, keys)
	d := rs[2]
	require.True(t, d.IsDAG())
	require.False(t, rs[0].IsDAG())
	require.Empty(t, d.SourceFile)
	require.Equal(t, []string{fnID + "extract.v1~", fnID + "clean.v1~"}, d.TaskEntrypoints())
	body, err := d.JSON()
	require.NoError(t, err)
	require.Contains(t, string(body), `"adapter":"gts.x.core.serverless.adapter.dag.v1~"`)
	require.NotContains(t, string(body), `"code"`)
	require.Contains(t, string(body), `"rows":"{{tasks.extract.output.rows}}"`)
}

// TestDAGFindingsPlaced: the server's findings on a DAG's spec land on the member they name, a
// missing member at its parent.
func TestDAGFindingsPlaced(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{"daily.yaml": dagManifest})
	rs, probs, err := manifest.LoadTree(dir)
	require.NoError(t, err)
	require.Empty(t, probs, "no .star file needed")
	d := rs[0]
	p := d.Finding("$.implementation.workflow_spec.spec.tasks[1].entrypoint_id", 0, 0, "no such function [TASK_ENTRYPOINT]")
	require.Equal(t, "daily.yaml:13:26: no such function [TASK_ENTRYPOINT]", problemLines(dir, manifest.Problems{p})[0])
	p = d.Finding("$.implementation.workflow_spec.spec.tasks[1].depends_on[0]", 0, 0, "cycle")
	require.Equal(t, "daily.yaml:14:24: cycle", problemLines(dir, manifest.Problems{p})[0])
	p = d.Finding("$.implementation.workflow_spec.spec.tasks[0].checks", 0, 0, "missing")
	require.Equal(t, "daily.yaml:10:11: missing", problemLines(dir, manifest.Problems{p})[0])
}

// TestLoadDAGWithoutAdapterForOtherFormats: a workflow_spec of another format is sent as written
// (no adapter filled in), never looked up as Starlark.
func TestLoadDAGWithoutAdapterForOtherFormats(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"x.yaml": "entrypoint_id: " + wfID + "x.v1~\nimplementation: {kind: workflow_spec, workflow_spec: {format: other}}\n",
	})
	set, err := manifest.Load(dir)
	require.NoError(t, err)
	require.Len(t, set.Entrypoints, 1)
	impl := set.Entrypoints[0].Body["implementation"].(map[string]any)
	require.NotContains(t, impl, "adapter")
	require.NotContains(t, impl, "code")
}

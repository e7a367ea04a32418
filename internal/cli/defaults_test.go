package cli

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMinimalWorkflowDeploys deploys a workflow manifest without traits.workflow: deploy sends
// 000's defaults, the server accepts them, the workflow runs (a step and a durable timer) to its
// result, and a second deploy finds nothing to do.
func TestMinimalWorkflowDeploys(t *testing.T) {
	srv := startServer(t)
	t.Setenv("LARK_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("LARK_SERVER", srv.URL)
	t.Setenv("LARK_TOKEN", srv.Token)
	t.Setenv("LARK_URL", "")
	t.Setenv("LARK_PROFILE", "")
	n := &normaliser{}
	const folder = "testdata/minimal_workflow"

	r := cmdStep(t, n, "minimal_workflow_deploy", "deploy", folder)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "Deployed 1 change.\n")
	r = run(t, "deploy", folder)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "Nothing to deploy", "the defaults are what the server stored")

	r = run(t, "entrypoints", "get", "greet", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var ep struct {
		Traits struct {
			Workflow json.RawMessage `json:"workflow"`
		} `json:"traits"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ep), r.stdout)
	require.JSONEq(t, `{"compensation": {"on_failure": null, "on_cancel": null},
		"checkpointing": {"strategy": "automatic"}, "max_suspension_days": 30}`, string(ep.Traits.Workflow))

	r = cmdStep(t, n, "minimal_workflow_invoke", "invoke", "greet", "--follow", "-p", `{"name": "Ada"}`)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"greeting": "hello, Ada"`)
}

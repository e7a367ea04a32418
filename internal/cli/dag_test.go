package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDAGCommands deploys examples/sales_dag with the CLI, plans and runs its DAG, lists a run's
// tasks and the assets, and approves and rejects quarantined materializations; every transcript is
// a golden file.
func TestDAGCommands(t *testing.T) {
	srv := startServer(t)
	t.Setenv("LARK_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("LARK_SERVER", srv.URL)
	t.Setenv("LARK_TOKEN", srv.Token)
	t.Setenv("LARK_URL", "")
	t.Setenv("LARK_PROFILE", "")
	n := &normaliser{}
	const folder = "../../examples/sales_dag"

	cmdStep(t, n, "dag_validate", "validate", folder)
	cmdStep(t, n, "dag_deploy", "deploy", folder)
	r := run(t, "deploy", folder)
	require.Contains(t, r.stdout, "Nothing to deploy", "a DAG deployed again is unchanged")

	r = cmdStep(t, n, "dag_plan", "dag", "plan", "daily_sales", "--partition", "2026-03-02")
	require.Equal(t, 0, r.code, r.stderr)
	r2 := run(t, "dag", "plan", "daily_sales", "--partition", "2026-03-02", "-o", "json")
	require.Equal(t, 0, r2.code, r2.stderr)
	var plan struct {
		Fingerprint string `json:"fingerprint"`
	}
	require.NoError(t, json.Unmarshal([]byte(r2.stdout), &plan))
	require.Contains(t, r.stdout, "fingerprint "+plan.Fingerprint)
	r = cmdStep(t, n, "dag_plan_no_partition", "dag", "plan", "daily_sales")
	require.Equal(t, ExitAPI, r.code)

	r = cmdStep(t, n, "dag_invoke_follow", "invoke", "daily_sales", "-p", `{"partition_key": "2026-03-02"}`, "--follow")
	require.Equal(t, 0, r.code, r.stderr)
	cmdStep(t, n, "dag_tasks", "dag", "tasks", runID(t, r.stdout))

	// An empty day: clean's output is quarantined; summarize has no good one to read and fails.
	r = cmdStep(t, n, "dag_invoke_quarantine", "invoke", "daily_sales", "-p", `{"partition_key": "2026-12-25"}`, "--follow")
	require.Equal(t, ExitFailed, r.code)
	cmdStep(t, n, "dag_tasks_quarantine", "dag", "tasks", runID(t, r.stdout))
	cmdStep(t, n, "assets_list", "assets", "list")
	cmdStep(t, n, "assets_quarantined", "assets", "materializations", "sales.clean", "--state", "quarantined")
	mat := quarantined(t, "2026-12-25")
	r = cmdStep(t, n, "assets_approve", "assets", "approve", "sales.clean", mat, "--reason", "closed for the holiday")
	require.Equal(t, 0, r.code, r.stderr)
	r = cmdStep(t, n, "assets_approve_again", "assets", "approve", "sales.clean", mat)
	require.Equal(t, ExitAPI, r.code)

	// The next run of the day reads the approved output downstream; its own is quarantined again,
	// and rejected.
	r = run(t, "invoke", "daily_sales", "-p", `{"partition_key": "2026-12-25"}`, "--follow")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	next := quarantined(t, "2026-12-25")
	require.NotEqual(t, mat, next)
	r = cmdStep(t, n, "assets_reject", "assets", "reject", "sales.clean", next)
	require.Equal(t, 0, r.code, r.stderr)
	cmdStep(t, n, "assets_materializations", "assets", "materializations", "sales.clean", "--partition", "2026-12-25")
}

// runID is the invocation id on the last line of `lark invoke --follow` ("inv_… succeeded in …").
func runID(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], "inv_") {
			return f[0]
		}
	}
	t.Fatalf("no invocation id in %q", out)
	return ""
}

// quarantined is the id of the newest quarantined materialization of sales.clean for partition.
func quarantined(t *testing.T, partition string) string {
	t.Helper()
	r := run(t, "assets", "materializations", "sales.clean", "--partition", partition, "--state", "quarantined", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var m struct {
		ID string `json:"materialization_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.Split(r.stdout, "\n")[0]), &m))
	require.NotEmpty(t, m.ID)
	return m.ID
}

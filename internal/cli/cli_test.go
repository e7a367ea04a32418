package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLIAgainstServer drives the client commands against a real in-process server, in the order
// a user would: validate a broken folder, deploy a project (dry run, for real, again), invoke a
// function and a workflow, list and cancel invocations, change a source and deploy a new version,
// then schedules, events and triggers. Every transcript is a golden file.
func TestCLIAgainstServer(t *testing.T) {
	srv := startServer(t)
	t.Setenv("LARK_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("LARK_SERVER", srv.URL)
	t.Setenv("LARK_TOKEN", srv.Token)
	t.Setenv("LARK_URL", "")
	t.Setenv("LARK_PROFILE", "")
	n := &normaliser{}

	r := cmdStep(t, n, "validate_broken", "validate", "testdata/broken")
	require.Equal(t, ExitFailed, r.code)
	cmdStep(t, n, "validate_project", "validate", "testdata/project")
	cmdStep(t, n, "deploy_dry_run", "deploy", "testdata/project", "--dry-run")
	cmdStep(t, n, "deploy", "deploy", "testdata/project")
	r = cmdStep(t, n, "deploy_again", "deploy", "testdata/project")
	require.Contains(t, r.stdout, "Nothing to deploy")

	cmdStep(t, n, "invoke_sync", "invoke", "calculate_tax", "--params", `{"amount": 50}`)
	r = cmdStep(t, n, "invoke_bad_params", "invoke", "calculate_tax", "-p", `{}`)
	require.Equal(t, ExitAPI, r.code)
	r = cmdStep(t, n, "invoke_unknown", "invoke", "no_such_thing")
	require.Equal(t, ExitUsage, r.code)
	cmdStep(t, n, "invoke_follow", "invoke", "orders.process_order", "--follow", "-p", `{"sku": "A1", "sleep_ms": 50}`)

	// A workflow parked on a long durable timer, canceled from the CLI.
	r = cmdStep(t, n, "invoke_async", "invoke", "process_order", "--async", "-p", `{"sleep_ms": 600000}`)
	id := strings.Fields(r.stdout)[0]
	waitStatus(t, id, "suspended")
	r = cmdStep(t, n, "cancel", "invocations", "cancel", id)
	require.Contains(t, r.stdout, "canceled")
	cmdStep(t, n, "invocations_list", "invocations", "list", "--entrypoint", "process_order")
	r = run(t, "invocations", "get", id, "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
	require.Equal(t, "canceled", rec["status"])

	// A changed source is a new minor version, activated; the next run uses it.
	changed := copyTree(t, "testdata/project")
	star := filepath.Join(changed, "calculate_tax.star")
	src, err := os.ReadFile(star)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(star, []byte(strings.Replace(string(src), "0.2", "0.25", 1)), 0o644))
	r = run(t, "deploy", changed)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "new version")
	require.Contains(t, r.stdout, "calculate_tax.v1.1~")
	r = run(t, "deploy", changed)
	require.Contains(t, r.stdout, "Nothing to deploy", "a second deploy of the changed folder is idempotent")
	cmdStep(t, n, "invoke_new_version", "invoke", "calculate_tax", "-p", `{"amount": 100}`)

	cmdStep(t, n, "entrypoints_versions", "entrypoints", "versions", "calculate_tax")
	r = cmdStep(t, n, "entrypoints_deprecate", "entrypoints", "deprecate",
		"gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.billing.tax.calculate_tax.v1~", "--reason", "use v1.1")
	require.Equal(t, 0, r.code, r.stderr)
	cmdStep(t, n, "entrypoints_list", "entrypoints", "list", "--filter", "kind eq 'function'")

	cmdStep(t, n, "schedules_list", "schedules", "list")
	cmdStep(t, n, "schedules_pause", "schedules", "pause", "nightly-tax")
	cmdStep(t, n, "schedules_resume", "schedules", "resume", "nightly-tax")
	cmdStep(t, n, "events_publish", "events", "publish", "gts.x.core.events.event.v1~acme.shop.orders.paid.v1~",
		"--data", `{"amount": 3}`, "--id", "paid-1")
	cmdStep(t, n, "triggers_list", "triggers", "list")

	// A dead-lettered invocation exits 6 with its error.
	require.Equal(t, 0, run(t, "deploy", "testdata/failing").code)
	r = cmdStep(t, n, "invoke_failed", "invoke", "explode", "-p", `{"a": 1}`)
	require.Equal(t, ExitDeadLettered, r.code)

	// A backfill of four days, watched until it ends (the scheduler loop runs its chunks).
	r = cmdStep(t, n, "backfill_create", "backfill", "create", "calculate_tax", "--start", "2024-01-01", "--end", "2024-01-05",
		"--step", "P1D", "-p", `{"amount": 1}`, "--id", "jan")
	require.Equal(t, 0, r.code, r.stderr)
	r = run(t, "backfill", "status", "jan", "--watch")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Contains(t, lines[len(lines)-1], "100% 4/4 done (0 failed, 0 running, 0 pending) succeeded")

	r = cmdStep(t, n, "usage_error", "invoke")
	require.Equal(t, ExitUsage, r.code)
	r = cmdStep(t, n, "unknown_flag", "invoke", "calculate_tax", "--nope")
	require.Equal(t, ExitUsage, r.code)
}

// waitStatus polls an invocation until it has status (10 s at most).
func waitStatus(t *testing.T, id, status string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		r := run(t, "invocations", "get", id, "-o", "json")
		require.Equal(t, 0, r.code, r.stderr)
		var rec struct {
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
		if rec.Status == status {
			return
		}
		require.NoError(t, sleep(t.Context(), 20e6))
	}
	t.Fatalf("invocation %s never reached %s", id, status)
}

// copyTree copies a folder (recursively) into a temporary one.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

package cli

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFollowShowsWhyAndExitsByOutcome follows runs that end each unsuccessful way: a function
// retried once then dead-lettered (its retry line says when and why), the README's process_order
// failing at its first step and compensated, and a canceled workflow; each ends with its own exit
// code and says why on stderr.
func TestFollowShowsWhyAndExitsByOutcome(t *testing.T) {
	srv := startServer(t)
	t.Setenv("LARK_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("LARK_SERVER", srv.URL)
	t.Setenv("LARK_TOKEN", srv.Token)
	t.Setenv("LARK_URL", "")
	t.Setenv("LARK_PROFILE", "")
	n := &normaliser{}
	require.Equal(t, 0, run(t, "deploy", "testdata/retrying").code)
	require.Equal(t, 0, run(t, "deploy", filepath.Join("..", "..", "examples", "process_order")).code)

	r := cmdStep(t, n, "invoke_follow_retried", "invoke", "flaky", "--follow")
	require.Equal(t, ExitDeadLettered, r.code, r.stderr)
	require.Regexp(t, `step_retried\s+queued\s+retrying at \d{2}:\d{2}:\d{2}\.\d{3}Z after 50ms \(attempt 2\): runtime: fail: flaky: attempt 1 failed \(retryable\)`, r.stdout)
	require.Contains(t, r.stderr, "dead_lettered: runtime: fail: flaky: attempt 2 failed (retryable)")

	r = cmdStep(t, n, "invoke_follow_compensated", "invoke", "process_order", "--follow",
		"-p", `{"order_id": "ORD-1", "customer_id": "C-1", "shop_url": "http://127.0.0.1:1"}`)
	require.Equal(t, ExitCompensated, r.code, r.stderr)
	require.Regexp(t, `(?m)^\s+\d+\s+\S+\s+failed\s+failed\s+http_transport: egress: forbidden_address`, r.stdout)
	require.Regexp(t, `compensation_completed\s+compensated\s+handler_invocation=inv_\w+ handler_status=succeeded`, r.stdout)

	// A workflow parked on a durable timer, canceled; following it ends with 4.
	r = run(t, "invoke", "process_order", "--async", "-p", `{"order_id": "ORD-2", "customer_id": "C-2"}`)
	require.Equal(t, 0, r.code, r.stderr)
	id := regexp.MustCompile(`inv_\w+`).FindString(r.stdout)
	waitStatus(t, id, "suspended")
	require.Equal(t, 0, run(t, "invocations", "cancel", id).code)
	r = run(t, "invocations", "timeline", id, "--follow")
	require.Equal(t, ExitCanceled, r.code, r.stderr)
	require.Contains(t, r.stderr, "invocation "+id+" canceled")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Equal(t, id+" canceled", lines[len(lines)-1])

	// -o json: each timeline entry on a line, then the record; the exit code is the same.
	r = run(t, "invoke", "flaky", "--follow", "-o", "json")
	require.Equal(t, ExitDeadLettered, r.code)
	require.Contains(t, r.stdout, `"event_type":"step_retried"`)
	require.Contains(t, r.stdout, `"status": "dead_lettered"`)
}

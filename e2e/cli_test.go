package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cliResult is one run of a client command of the binary.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs `lark <args>` against p with its tenant token (through LARK_SERVER and LARK_TOKEN, and
// a config file of its own).
func (p *larkProc) cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, larkBin, args...)
	cmd.Env = append(larkEnv(), "LARK_SERVER="+p.URL, "LARK_TOKEN="+p.Token,
		"LARK_CONFIG="+filepath.Join(p.DataDir, "cli-config.yaml"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err, "lark %v", args)
	}
	return cliResult{stdout: out.String(), stderr: errOut.String(), code: code}
}

// TestCLIDeployInvokeFollowCancel drives the CLI binary against `lark dev`: deploy a folder
// (twice: the second run changes nothing), follow a workflow live through its steps and durable
// timer, cancel a workflow parked on a long timer, and check the exit codes of failures.
func TestCLIDeployInvokeFollowCancel(t *testing.T) {
	p := startLark(t, t.TempDir())
	project := filepath.Join(moduleRoot, "internal", "cli", "testdata", "project")

	r := p.cli(t, "deploy", project)
	require.Equal(t, 0, r.code, "%s\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "Deployed 4 changes.")
	r = p.cli(t, "deploy", project)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "Nothing to deploy")

	r = p.cli(t, "invoke", "process_order", "--follow", "-p", `{"sku": "B2", "sleep_ms": 200}`)
	require.Equal(t, 0, r.code, "%s\n%s", r.stdout, r.stderr)
	for _, want := range []string{"step_started", "step=reserve", "suspended", "resumed", "step=charge", "succeeded", `"reserved": "B2"`} {
		require.Contains(t, r.stdout, want)
	}
	require.Less(t, strings.Index(r.stdout, "step=reserve"), strings.Index(r.stdout, "step=charge"), "entries in log order")

	r = p.cli(t, "invoke", "process_order", "--async", "-p", `{"sleep_ms": 600000}`)
	require.Equal(t, 0, r.code, r.stderr)
	id := strings.Fields(r.stdout)[0]
	require.True(t, strings.HasPrefix(id, "inv_"), r.stdout)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = p.cli(t, "invocations", "get", id, "-o", "json")
		require.Equal(t, 0, r.code, r.stderr)
		var rec struct {
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
		if rec.Status == "suspended" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the workflow never parked on its timer (status %s)", rec.Status)
		time.Sleep(50 * time.Millisecond)
	}
	r = p.cli(t, "invocations", "cancel", id)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, id+" canceled\n", r.stdout)
	r = p.cli(t, "invocations", "timeline", id)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "canceled")

	// Exit codes: an API refusal is 3, a usage error 2.
	r = p.cli(t, "invoke", "calculate_tax", "-p", `{"amount": "lots"}`)
	require.Equal(t, 3, r.code, r.stdout)
	require.Contains(t, r.stderr, "$.params.amount")
	r = p.cli(t, "invoke", "calculate_tax", "--bogus")
	require.Equal(t, 2, r.code)
}

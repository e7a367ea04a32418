package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// quickStartTimeout bounds one quick-start block: process_order's compensated run waits out four
// durable backoffs (1+2+4+8 s).
const quickStartTimeout = 90 * time.Second

// goShim stands in for the go tool in the README's blocks: `go run ./cmd/lark ARGS` runs the
// binary TestMain built (the same code, without compiling it again); anything else fails.
const goShim = `go() {
  if [ "$#" -ge 2 ] && [ "$1" = run ] && [ "$2" = ./cmd/lark ]; then
    shift 2
    "$LARK_BIN" "$@"
  else
    echo "the README's blocks may only run go run ./cmd/lark, not: go $*" >&2
    return 2
  fi
}
`

// quickStartResult is the README's sentence saying what calculate_tax returns.
var quickStartResult = regexp.MustCompile("follow it to its result, `(\\{[^`]*\\})`")

// readmeSetupCommands returns the command lines of the first ```sh block under "## Set-up".
func readmeSetupCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	require.NoError(t, err)
	_, setup, ok := strings.Cut(string(b), "\n## Set-up\n")
	require.True(t, ok, "README.md has no ## Set-up section")
	blocks, ok := shBlocks(setup)
	require.True(t, ok && len(blocks) > 0, "README.md's set-up has no ```sh block")
	var cmds []string
	for _, line := range strings.Split(blocks[0], "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// TestReadmeQuickStart keeps the README honest: exactly two set-up commands (one starts the
// runtime, one runs the tests), and the quick start's blocks, run verbatim against `lark dev` with
// its export lines in the environment, deploy and run the examples as the text says.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	// -v: a first run from an empty build cache compiles for minutes, naming each package as it goes.
	require.Equal(t, []string{"go run -v ./cmd/lark dev", "go test ./..."}, readmeSetupCommands(t))

	_, err := exec.LookPath("bash")
	require.NoError(t, err, "the README's blocks need bash")
	blocks := markedBlocks(t, "README.md", "quickstart")
	p := startLark(t, t.TempDir())
	home := t.TempDir() // no lark config of the user's

	outs := make([]string, len(blocks))
	for i, block := range blocks {
		ctx, cancel := context.WithTimeout(context.Background(), quickStartTimeout)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", goShim+block)
		cmd.Dir = moduleRoot
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LARK_BIN=" + larkBin,
			"LARK_URL=" + p.URL, "LARK_TOKEN=" + p.Token, "LARK_ADMIN_TOKEN=" + p.AdminToken}
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		cancel()
		require.NoError(t, err, "quick start block %d failed:\n%s\nstdout:\n%s\nstderr:\n%s", i+1, block, stdout.String(), stderr.String())
		t.Logf("quick start block %d ran in %v:\n%s", i+1, time.Since(start).Round(time.Millisecond), stdout.String())
		outs[i] = stdout.String()
	}
	all := strings.Join(outs, "")

	// calculate_tax: deployed, then followed to the result the README promises.
	b, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	require.NoError(t, err)
	m := quickStartResult.FindSubmatch(b)
	require.NotNil(t, m, "README.md no longer says what calculate_tax returns")
	var want bytes.Buffer
	require.NoError(t, json.Compact(&want, m[1]))
	_, after, ok := strings.Cut(all, " succeeded in ")
	require.True(t, ok, "calculate_tax did not succeed:\n%s", all)
	_, result, ok := strings.Cut(after, "\n")
	require.True(t, ok, all)
	var got bytes.Buffer
	dec := json.NewDecoder(strings.NewReader(result))
	var raw json.RawMessage
	require.NoError(t, dec.Decode(&raw), "no result after the succeeded line:\n%s", all)
	require.NoError(t, json.Compact(&got, raw))
	require.Equal(t, want.String(), got.String(), "the README's calculate_tax result is not what lark invoke prints")

	// process_order: against the default (unreachable) shop it is retried, then compensated.
	for _, s := range []string{"Deployed ", "step=reserve_inventory", "compensated"} {
		require.Contains(t, all, s)
	}
	require.Contains(t, all, "ok  \texamples/process_order", "lark test examples/ ran the examples' tests")
	require.NotContains(t, all, "FAIL")
	// Deploying again changes nothing, as the README says.
	r := p.cli(t, "deploy", filepath.Join(moduleRoot, "examples", "process_order"))
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, string(b), "`Nothing to deploy: everything is up to date.`")
	require.Contains(t, r.stdout, "Nothing to deploy: everything is up to date.")
}

package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/oidctest"
)

// TestCLIDeviceLoginAgainstProvider: `lark login --oidc` signs alice in at the real OIDC provider
// CI runs (.ci/oidc-server) with the device authorization grant, end to end: the server trusts the
// provider from its --identity-providers file, the CLI prints the code, the user enters it and
// approves at the provider's pages, and the saved profile then acts as alice of tenant acme with
// the developer role (her change audited under her subject), without LARK_TOKEN.
func TestCLIDeviceLoginAgainstProvider(t *testing.T) {
	t.Parallel()
	p := oidctest.CIProvider(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "identity-providers.json")
	require.NoError(t, os.WriteFile(file, mustJSON(t, map[string]any{"identity_providers": []any{map[string]any{
		"issuer": p.URL, "audiences": []string{"lark-cli"},
		"claims":       map[string]any{"subject": "sub", "tenant": "tenant", "roles": "groups"},
		"role_mapping": map[string]any{"lark-devs": "developer"}}}}), 0o600))
	// SSL_CERT_FILE: the server and the CLI trust the provider's CA, as a deployment would its own.
	trust := "SSL_CERT_FILE=" + p.CAFile
	lp := startLarkEnv(t, filepath.Join(dir, "data"), []string{trust}, "--identity-providers", file)
	lp.tenant(t, "acme")

	config := "LARK_CONFIG=" + filepath.Join(dir, "cli-config.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	login := exec.CommandContext(ctx, larkBin, "login", "--server", lp.URL, "--oidc", p.URL, "--client-id", "lark-cli")
	login.Env = append(larkEnv(), trust, config)
	stderr, err := login.StderrPipe()
	require.NoError(t, err)
	var out strings.Builder
	login.Stdout = &out
	require.NoError(t, login.Start())
	code := userCode(t, stderr)
	p.ApproveDevice(t, code, "alice")
	require.NoError(t, login.Wait(), "lark login: %s", out.String())
	require.Contains(t, out.String(), "signed in with "+p.URL)

	cli := func(args ...string) string {
		c := exec.CommandContext(ctx, larkBin, args...)
		c.Env = append(larkEnv(), trust, config)
		b, err := c.CombinedOutput()
		require.NoError(t, err, "lark %v: %s", args, b)
		return string(b)
	}
	project := filepath.Join(moduleRoot, "internal", "cli", "testdata", "project")
	require.Contains(t, cli("deploy", project), "Deployed")
	require.Contains(t, cli("entrypoints", "list"), "process_order")
	adm := lp.token(t, "acme", "auditor", "admin")
	r := lp.do("GET", apiBase+"/audit-events?%24filter=actor_id+eq+%27alice%27", adm, nil)
	var page struct {
		Items []map[string]any `json:"items"`
	}
	requireJSON(t, r, 200, &page)
	require.NotEmpty(t, page.Items, "alice's deploy is audited under her subject")
}

// userCode reads the CLI's sign-in prompt ("… enter the code XXXX-XXXX") and returns the code,
// draining the rest of stderr in the background.
func userCode(t *testing.T, stderr io.Reader) string {
	t.Helper()
	re := regexp.MustCompile(`enter the code (\S+)`)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return m[1]
		}
	}
	t.Fatalf("lark login printed no user code (%v)", sc.Err())
	return ""
}

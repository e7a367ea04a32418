package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSecretOnlyWhereItIsSent is issue 17's "a secret never appears anywhere but where it is
// sent", against the real binary: `lark dev` creates its master key, an admin stores a secret,
// functions send it to an echoing upstream (sync and async, returning, logging and raising what
// came back), and the server is stopped. The value must have reached the upstream, and must not
// be in any API answer, in the process's stdout or stderr, or in any file of the data directory
// (database, WAL, the master key file).
func TestSecretOnlyWhereItIsSent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops the server; skipped with -short")
	}
	const value = "E2ECANARY-b6f1d0a7c93e4258"
	var mu sync.Mutex
	var received []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("X-Echo", r.Header.Get("X-Api-Key"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"key":%q}`, r.Header.Get("X-Api-Key"))
	}))
	t.Cleanup(upstream.Close)

	dataDir := t.TempDir()
	p := startLark(t, dataDir, "--unsafe-egress-allow-loopback", "--log-level", "debug")
	st, err := os.Stat(filepath.Join(dataDir, "master.key"))
	require.NoError(t, err, "lark dev creates its master key")
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	var answers [][]byte
	keep := func(r response) response { answers = append(answers, r.Body); return r }
	r := keep(p.do(http.MethodPost, apiBase+"/secrets", p.Token,
		mustJSON(t, map[string]any{"name": "api_key", "value": value, "allowed_hosts": []string{"127.0.0.1"}})))
	requireJSON(t, r, http.StatusCreated, nil)

	id := p.register(t, p.Token, fnSpec{id: fnPrefix + "vendor.app.secrets.echo.v1~", src: fmt.Sprintf(`def main(ctx, input):
    r = r_await(r_http_get_v1(%q, headers={"X-Api-Key": "{{secret:api_key}}"}, timeout_ms=5000))
    print("echo", r.response.body, r.response.headers)
    if input.get("raise"):
        fail("echo: " + json.encode(r.response.body) + " " + str(r.response.headers))
    return {"body": r.response.body, "headers": r.response.headers}
`, upstream.URL)})
	rec := record(t, keep(p.invoke(t, p.Token, id, "sync", nil)), http.StatusOK)
	require.Equal(t, "succeeded", rec.Status)
	require.Contains(t, string(rec.Result), "[REDACTED]")
	rec = record(t, keep(p.invoke(t, p.Token, id, "sync", map[string]any{"raise": true})), http.StatusOK)
	require.Contains(t, []string{"failed", "dead_lettered"}, rec.Status)
	since := time.Now()
	async := record(t, keep(p.invoke(t, p.Token, id, "async", nil)), http.StatusAccepted)
	done := waitAllTerminal[invocationRecord](t, p, []string{async.ID}, since, startTimeout, nil)
	require.Equal(t, "succeeded", done[async.ID].Status)
	for _, path := range []string{"/invocations?limit=200", "/invocations/" + async.ID + "/timeline?limit=200",
		"/invocations/" + rec.ID, "/audit-events?limit=200", "/secrets/api_key"} {
		keep(p.do(http.MethodGet, apiBase+path, p.Token, nil))
	}
	p.Stop()

	mu.Lock()
	require.Contains(t, received, value, "the value reached the upstream")
	mu.Unlock()
	look := func(what string, b []byte) {
		t.Helper()
		require.False(t, bytes.Contains(b, []byte(value)), "the secret's value is in %s", what)
	}
	for i, a := range answers {
		look(fmt.Sprintf("answer %d", i), a)
	}
	look("stdout", []byte(p.stdout.String()))
	look("stderr", []byte(p.stderr.String()))
	require.Contains(t, p.stderr.String(), "secret created", "the server's log was captured")
	n := 0
	require.NoError(t, filepath.WalkDir(dataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		look(path, b)
		if strings.HasSuffix(path, "lark.db") {
			n++
		}
		return nil
	}))
	require.Equal(t, 1, n, "the database was read")
}

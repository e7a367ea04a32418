package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// acked collects what the server acknowledged, in order.
type acked struct {
	mu          sync.Mutex
	invocations []string
	schedules   []string
}

func (a *acked) snapshot() ([]string, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.invocations), slices.Clone(a.schedules)
}

// post sends a JSON POST from a load goroutine (no require: it runs off the test goroutine) and
// returns the status and body.
func post(ctx context.Context, p *larkProc, path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.Token)
	res, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, out, err
}

// runLark runs the binary with args and returns its combined output and exit code.
func runLark(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, larkBin, args...)
	cmd.Env = larkEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "lark %s: %s", strings.Join(args, " "), out)
		return string(out), ee.ExitCode()
	}
	return string(out), 0
}

// TestBackupWhileServing: `lark backup` runs while the server serves a stream of writes
// (invocations and schedules); the backup is restored into a new data directory with `lark
// restore`, a server started on it (with the master key, which the backup leaves out) has every
// invocation, entrypoint, schedule and secret acknowledged before the backup began, and the secret
// is still usable. A restore into a directory that is not empty is refused; a server refuses to
// start on a database whose schema is newer than it knows, naming both versions.
func TestBackupWhileServing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops the server; skipped with -short")
	}
	const value = "BACKUP-CANARY-7d3f"
	var mu sync.Mutex
	var keys []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(upstream.Close)
	sent := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(keys, value)
	}

	src := t.TempDir()
	p := startLark(t, src, "--unsafe-egress-allow-loopback")
	requireJSON(t, p.do(http.MethodPost, apiBase+"/secrets", p.Token,
		mustJSON(t, map[string]any{"name": "api_key", "value": value, "allowed_hosts": []string{"127.0.0.1"}})), http.StatusCreated, nil)
	hello := p.register(t, p.Token, fnSpec{id: fnPrefix + "vendor.app.backup.hello.v1~",
		src: "def main(ctx, input):\n    return {\"n\": input.get(\"n\", 0)}\n"})
	withSecret := p.register(t, p.Token, fnSpec{id: fnPrefix + "vendor.app.backup.secret.v1~", src: fmt.Sprintf(
		"def main(ctx, input):\n    r = r_await(r_http_get_v1(%q, headers={\"X-Api-Key\": \"{{secret:api_key}}\"}, timeout_ms=5000))\n    return {\"status\": r.response.status_code}\n",
		upstream.URL)})

	// The load: two clients invoke and create schedules until told to stop.
	var got acked
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	loadErr := make(chan error, 2)
	for c := range 2 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if i%5 == 4 {
					id := fmt.Sprintf("s%d-%d", c, i)
					status, body, err := post(ctx, p, apiBase+"/schedules", map[string]any{"schedule_id": id, "entrypoint_id": hello,
						"expression": map[string]any{"kind": "cron", "value": "0 3 * * *"}})
					if ctx.Err() != nil {
						return
					}
					if err != nil || status != http.StatusCreated {
						loadErr <- loadFailure("create schedule", status, body, err)
						return
					}
					got.mu.Lock()
					got.schedules = append(got.schedules, id)
					got.mu.Unlock()
					continue
				}
				status, body, err := post(ctx, p, apiBase+"/invocations", map[string]any{"entrypoint_id": hello, "mode": "sync", "params": map[string]any{"n": i}})
				if ctx.Err() != nil {
					return
				}
				var rec struct {
					Record invocationRecord `json:"record"`
				}
				if err == nil && status == http.StatusOK {
					err = json.Unmarshal(body, &rec)
				}
				if err != nil || status != http.StatusOK || rec.Record.ID == "" {
					loadErr <- loadFailure("invoke", status, body, err)
					return
				}
				got.mu.Lock()
				got.invocations = append(got.invocations, rec.Record.ID)
				got.mu.Unlock()
			}
		})
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(startTimeout)
		for !cond() {
			select {
			case err := <-loadErr:
				t.Fatalf("the load failed: %v", err)
			default:
			}
			require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("the load to start", func() bool { inv, sch := got.snapshot(); return len(inv) >= 20 && len(sch) >= 3 })

	file := filepath.Join(t.TempDir(), "lark.backup")
	invBefore, schBefore := got.snapshot()
	out, code := runLark(t, "backup", "--to", file, "--data", src)
	require.Zero(t, code, out)
	require.Contains(t, out, "master.key is NOT in the backup")
	invDuring, _ := got.snapshot()
	// The server was still taking writes after the backup: wait for a few more, then stop.
	waitFor("writes after the backup", func() bool { inv, _ := got.snapshot(); return len(inv) >= len(invDuring)+5 })
	stopLoad()
	wg.Wait()
	select {
	case err := <-loadErr:
		t.Fatalf("the load failed: %v", err)
	default:
	}
	t.Logf("backup taken with %d invocations acknowledged before it, %d by its end", len(invBefore), len(invDuring))
	p.Stop()

	out, code = runLark(t, "restore", "--from", file, "--data", src)
	require.NotZero(t, code, "a restore into a directory that is not empty is refused")
	require.Contains(t, out, "not empty")

	dst := filepath.Join(t.TempDir(), "restored")
	out, code = runLark(t, "restore", "--from", file, "--data", dst)
	require.Zero(t, code, out)
	_, err := os.Stat(filepath.Join(dst, "master.key"))
	require.ErrorIs(t, err, os.ErrNotExist, "the master key is not in the backup")
	key, err := os.ReadFile(filepath.Join(src, "master.key"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dst, "master.key"), key, 0o600))

	q := startLark(t, dst, "--unsafe-egress-allow-loopback")
	require.Equal(t, p.Token, q.Token, "the dev credentials are restored")
	for _, id := range invBefore {
		var rec invocationRecord
		requireJSON(t, q.do(http.MethodGet, apiBase+"/invocations/"+id, q.Token, nil), http.StatusOK, &rec)
		require.Equal(t, "succeeded", rec.Status, "invocation %s", id)
	}
	for _, id := range schBefore {
		requireJSON(t, q.do(http.MethodGet, apiBase+"/schedules/"+id, q.Token, nil), http.StatusOK, nil)
	}
	for _, id := range []string{hello, withSecret} {
		requireJSON(t, q.do(http.MethodGet, apiBase+"/entrypoints/"+url.PathEscape(id), q.Token, nil), http.StatusOK, nil)
	}
	rec := record(t, q.invoke(t, q.Token, withSecret, "sync", nil), http.StatusOK)
	require.Equal(t, "succeeded", rec.Status)
	require.True(t, sent(), "the restored secret opens with the same master key and reaches the upstream")
	q.Stop()

	// A newer binary's schema: the start stops, naming both versions, before it serves anything.
	db, err := sql.Open("sqlite", filepath.Join(dst, "lark.db"))
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, 1)")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	out, code = runLark(t, "serve", "--addr", "127.0.0.1:0", "--data", dst)
	require.NotZero(t, code, "lark serve starts on a database newer than it knows: %s", out)
	require.Contains(t, out, "schema is at version 999")
	require.Contains(t, out, "newer than this binary's version")
	require.NotContains(t, out, "lark serving")
	out, code = runLark(t, "migrate", "status", "--data", dst)
	require.NotZero(t, code)
	require.Contains(t, out, "current version: 999")
}

// loadFailure is the error of a load request that failed (err) or was answered status and body.
func loadFailure(what string, status int, body []byte, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %d %s: %w", what, status, body, err)
	}
	return fmt.Errorf("%s: %d %s", what, status, body)
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	blockTimeout = 30 * time.Second
	taxGTSID     = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.calculate_tax.v1~"
	auditBase    = "gts.x.core.serverless.audit.v1~x.core.serverless.audit."
)

// walkthroughDoc is the page whose walkthrough section (between the walkthrough markers) is run
// verbatim with curl; the README's quick start (between the quickstart markers) is run with the
// lark client.
const walkthroughDoc = "docs/api.md"

// walkthroughBlocks returns the ```sh blocks between the walkthrough markers of walkthroughDoc.
func walkthroughBlocks(t testing.TB) []string {
	t.Helper()
	return markedBlocks(t, walkthroughDoc, "walkthrough")
}

// markedBlocks returns the ```sh blocks of file between <!-- name:start --> and <!-- name:end -->.
func markedBlocks(t testing.TB, file, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, file))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "<!-- "+name+":start -->")
	require.True(t, ok, "%s has no <!-- %s:start --> marker", file, name)
	section, _, ok := strings.Cut(rest, "<!-- "+name+":end -->")
	require.True(t, ok, "%s has no <!-- %s:end --> marker after the start marker", file, name)
	blocks, ok := shBlocks(section)
	require.True(t, ok, "%s: the %s section has an unterminated code fence", file, name)
	require.NotEmpty(t, blocks, "%s: the %s section has no ```sh blocks", file, name)
	return blocks
}

// shBlocks returns the bodies of the ```sh fenced blocks of text (other languages are skipped),
// and false if the last fence is not closed.
func shBlocks(text string) ([]string, bool) {
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && strings.HasPrefix(trimmed, "```"):
			in = true
			if strings.TrimSpace(strings.TrimPrefix(trimmed, "```")) == "sh" {
				cur = []string{}
			} else {
				cur = nil // another language: skipped
			}
		case in && trimmed == "```":
			in = false
			if cur != nil {
				blocks = append(blocks, strings.Join(cur, "\n")+"\n")
			}
			cur = nil
		case in && cur != nil:
			cur = append(cur, line)
		}
	}
	return blocks, !in
}

// registerBody is the JSON body of the walkthrough's register block (its here-document).
func registerBody(t testing.TB) map[string]any {
	t.Helper()
	for _, b := range walkthroughBlocks(t) {
		_, doc, ok := strings.Cut(b, "<<'EOF'\n")
		if !ok {
			continue
		}
		doc, _, ok = strings.Cut(doc, "\nEOF\n")
		require.True(t, ok, "unterminated here-document in:\n%s", b)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(doc), &m), "the README's register body is not JSON")
		require.Equal(t, taxGTSID, m["entrypoint_id"])
		return m
	}
	t.Fatalf("no %s walkthrough block registers an entrypoint (no <<'EOF' here-document)", walkthroughDoc)
	return nil
}

// curlCount is how many curl commands a block runs (one per line starting with curl).
func curlCount(block string) int {
	n := 0
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "curl ") {
			n++
		}
	}
	return n
}

// requireJSONStream asserts out is exactly n JSON values, one after another.
func requireJSONStream(t testing.TB, out []byte, n int, what string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	got := 0
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "%s: stdout is not a stream of JSON values:\n%s", what, out)
		got++
	}
	require.Equal(t, n, got, "%s: want one JSON document per curl on stdout:\n%s", what, out)
}

func runBlock(t *testing.T, p *larkProc, home, block string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LARK_URL=" + p.URL, "LARK_TOKEN=" + p.Token}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "block timed out after %v:\n%s\nstdout:\n%s\nstderr:\n%s", blockTimeout, block, stdout.Bytes(), stderr.Bytes())
	require.NoError(t, err, "block failed:\n%s\nstdout:\n%s\nstderr:\n%s", block, stdout.Bytes(), stderr.Bytes())
	t.Logf("block ran in %v:\n%s", time.Since(start).Round(time.Millisecond), stdout.Bytes())
	requireJSONStream(t, stdout.Bytes(), curlCount(block), "block\n"+block)
	return stdout.Bytes()
}

// readmeSyncResult is the sentence of the walkthrough that says what the synchronous run returns.
var readmeSyncResult = regexp.MustCompile("the record comes back with `\"result\": (\\{[^`]*\\})`")

// requireReadmeSyncResult checks that the first record the sync block printed has the result the
// walkthrough promises, number for number as the server renders it.
func requireReadmeSyncResult(t *testing.T, out []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, walkthroughDoc))
	require.NoError(t, err)
	m := readmeSyncResult.FindSubmatch(b)
	require.NotNil(t, m, "%s no longer says what the sync run returns", walkthroughDoc)
	var resp struct {
		Record struct {
			Result json.RawMessage `json:"result"`
		} `json:"record"`
	}
	require.NoError(t, json.NewDecoder(bytes.NewReader(out)).Decode(&resp))
	rec := resp.Record
	var want, got bytes.Buffer
	require.NoError(t, json.Compact(&want, m[1]))
	require.NoError(t, json.Compact(&got, rec.Result))
	require.Equal(t, want.String(), got.String(), "the walkthrough's sync result is not what the server returns")
}

// entrypointView is what the walkthrough checks of an entrypoint.
type entrypointView struct {
	ID           string `json:"id"`
	EntrypointID string `json:"entrypoint_id"`
	Status       string `json:"status"`
	Version      string `json:"version"`
	ReleaseNotes string `json:"release_notes"`
	CreatedAt    string `json:"created_at"`
	UpdatedAt    string `json:"updated_at"`
	ActivatedAt  string `json:"activated_at"`
}

// findEntrypoint returns the raw list item whose entrypoint_id is gtsID.
func findEntrypoint(t testing.TB, items []json.RawMessage, gtsID string) (json.RawMessage, bool) {
	t.Helper()
	for _, it := range items {
		var v entrypointView
		require.NoError(t, json.Unmarshal(it, &v))
		if v.EntrypointID == gtsID {
			return it, true
		}
	}
	return nil, false
}

func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the README walkthrough needs %s", tool)
	}
	blocks := walkthroughBlocks(t)
	data := t.TempDir()
	home := t.TempDir() // no ~/.curlrc or the like
	p := startLark(t, data)

	synced := false
	for i, b := range blocks {
		t.Logf("walkthrough block %d/%d", i+1, len(blocks))
		out := runBlock(t, p, home, b)
		if !synced && strings.Contains(b, `"mode": "sync"`) {
			requireReadmeSyncResult(t, out)
			synced = true
		}
	}
	require.True(t, synced, "the walkthrough has no sync invocation")

	// The state the walkthrough left behind.
	epPath := apiBase + "/entrypoints/" + taxGTSID
	got := p.do(http.MethodGet, epPath, p.Token, nil)
	var ep entrypointView
	requireJSON(t, got, http.StatusOK, &ep)
	require.Equal(t, taxGTSID, ep.EntrypointID)
	require.Equal(t, "active", ep.Status)
	require.Equal(t, "First release", ep.ReleaseNotes)
	require.Equal(t, "1.0.0", ep.Version)
	require.True(t, strings.HasPrefix(ep.ID, "ep_"), "opaque id %q", ep.ID)
	require.NotEmpty(t, ep.ActivatedAt)

	// The opaque id works as well and names the same entrypoint.
	requireJSON(t, p.do(http.MethodGet, apiBase+"/entrypoints/"+ep.ID, p.Token, nil), http.StatusOK, nil)
	require.Equal(t, string(got.Body), string(p.do(http.MethodGet, apiBase+"/entrypoints/"+ep.ID, p.Token, nil).Body))

	before, ok := findEntrypoint(t, p.listAll(apiBase+"/entrypoints", p.Token), taxGTSID)
	require.True(t, ok, "calculate_tax is not listed")
	withSource := p.do(http.MethodGet, epPath+"?include_source=true", p.Token, nil)
	requireJSON(t, withSource, http.StatusOK, nil)

	// Restart gracefully on the same data directory.
	p.Stop()
	q := startLark(t, data)
	require.Equal(t, p.Token, q.Token, "LARK_TOKEN must survive a restart (dev-credentials.json)")
	require.Equal(t, p.AdminToken, q.AdminToken, "LARK_ADMIN_TOKEN must survive a restart (dev-credentials.json)")
	credsPath := filepath.Join(data, "dev-credentials.json")
	fi, err := os.Stat(credsPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "dev-credentials.json holds secrets")
	var creds struct {
		TenantID   string `json:"tenant_id"`
		Token      string `json:"token"`
		AdminToken string `json:"admin_token"`
	}
	cb, err := os.ReadFile(credsPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(cb, &creds))
	require.Equal(t, "dev", creds.TenantID)
	require.Equal(t, q.Token, creds.Token)
	require.Equal(t, q.AdminToken, creds.AdminToken)

	after, ok := findEntrypoint(t, q.listAll(apiBase+"/entrypoints", q.Token), taxGTSID)
	require.True(t, ok, "calculate_tax is not listed after a restart")
	require.JSONEq(t, string(before), string(after))
	require.Equal(t, string(before), string(after), "the listed entrypoint changed across a restart")
	withSource2 := q.do(http.MethodGet, epPath+"?include_source=true", q.Token, nil)
	requireJSON(t, withSource2, http.StatusOK, nil)
	require.Equal(t, string(withSource.Body), string(withSource2.Body), "GET entrypoint changed across a restart")

	requireJSON(t, q.do(http.MethodGet, "/readyz", "", nil), http.StatusOK, nil)

	// The audit trail survived too.
	events := q.listAll(apiBase+"/audit-events", q.Token)
	seen := map[string]int{}
	for _, raw := range events {
		var e struct {
			Type         string `json:"type"`
			TenantID     string `json:"tenant_id"`
			ResourceType string `json:"resource_type"`
			ResourceID   string `json:"resource_id"`
		}
		require.NoError(t, json.Unmarshal(raw, &e))
		require.Equal(t, "dev", e.TenantID, "a tenant token sees only its tenant's events: %s", raw)
		if e.ResourceType == "entrypoint" && e.ResourceID == ep.ID {
			seen[e.Type]++
		}
	}
	require.Equal(t, 1, seen[auditBase+"entrypoint_created.v1~"], "entrypoint_created events for %s: %v", ep.ID, seen)
	require.Equal(t, 1, seen[auditBase+"entrypoint_activated.v1~"], "entrypoint_activated events for %s: %v", ep.ID, seen)

	// Activating again is a conflict, as the README shows.
	again := q.do(http.MethodPost, epPath+":status", q.Token, []byte(`{"action": "activate", "release_notes": "First release"}`))
	d := requireProblem(t, again, http.StatusConflict)
	require.Equal(t, "invalid_transition", d.Reason, "%s", again)
	require.Equal(t, "gts://gts.x.core.serverless.err.v1~x.core.serverless.err.conflict.v1~", d.Type, "%s", again)
	require.Equal(t, "Conflict", d.Title, "%s", again)
	require.Equal(t, fmt.Sprintf("action \"activate\" is not allowed while entrypoint %s is active", ep.ID), d.Detail, "%s", again)

	// ... and changed nothing.
	final := q.do(http.MethodGet, epPath+"?include_source=true", q.Token, nil)
	require.Equal(t, string(withSource.Body), string(final.Body))

	q.Stop()
}

// TestCrashDurability checks that acknowledged writes survive kill -9.
func TestCrashDurability(t *testing.T) {
	t.Parallel()
	const n = 20
	body := registerBody(t)
	data := t.TempDir()
	p := startLark(t, data)

	ids := make([]string, n)
	opaque := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ids[i] = strings.Replace(taxGTSID, ".calculate_tax.", fmt.Sprintf(".fn_%d.", i), 1)
		m := make(map[string]any, len(body))
		for k, v := range body {
			m[k] = v
		}
		m["entrypoint_id"] = ids[i]
		b, err := json.Marshal(m)
		require.NoError(t, err)
		wg.Go(func() {
			// No require in goroutines: collect and check after Wait.
			ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+apiBase+"/entrypoints", bytes.NewReader(b))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Authorization", "Bearer "+p.Token)
			req.Header.Set("Content-Type", "application/json")
			res, err := httpClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer res.Body.Close()
			rb, err := io.ReadAll(res.Body)
			if err != nil {
				errs[i] = err
				return
			}
			if res.StatusCode != http.StatusCreated {
				errs[i] = fmt.Errorf("POST %s: %d %s", ids[i], res.StatusCode, rb)
				return
			}
			var v entrypointView
			if err := json.Unmarshal(rb, &v); err != nil {
				errs[i] = fmt.Errorf("POST %s: %w: %s", ids[i], err, rb)
				return
			}
			if v.EntrypointID != ids[i] || v.Status != "draft" {
				errs[i] = fmt.Errorf("POST %s: answered %s", ids[i], rb)
				return
			}
			opaque[i] = v.ID
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	// Every write was acknowledged: crash at once.
	p.Kill()
	q := startLark(t, data)
	require.Equal(t, p.Token, q.Token)

	items := q.listAll(apiBase+"/entrypoints", q.Token)
	var missing []string
	for i, id := range ids {
		raw, ok := findEntrypoint(t, items, id)
		if !ok {
			missing = append(missing, id)
			continue
		}
		var v entrypointView
		require.NoError(t, json.Unmarshal(raw, &v))
		require.Equal(t, opaque[i], v.ID, "%s", id)
		require.Equal(t, "draft", v.Status, "%s", id)
	}
	require.Empty(t, missing, "acknowledged registrations lost after kill -9 (%d of %d)", len(missing), n)
	require.Len(t, items, n)
	requireJSON(t, q.do(http.MethodGet, "/readyz", "", nil), http.StatusOK, nil)
	q.Stop()
}

func TestHealth(t *testing.T) {
	t.Parallel()
	p := startLark(t, t.TempDir())

	var h struct {
		Status string `json:"status"`
	}
	requireJSON(t, p.do(http.MethodGet, "/healthz", "", nil), http.StatusOK, &h)
	require.Equal(t, "ok", h.Status)
	requireJSON(t, p.do(http.MethodGet, "/readyz", "", nil), http.StatusOK, &h)
	require.Equal(t, "ready", h.Status)

	// The banner names the web console, which is there.
	require.Contains(t, p.stdout.String(), "\nWeb console: "+p.URL+"/console/ (sign in with LARK_TOKEN)\n")
	page := p.do(http.MethodGet, "/console/", "", nil)
	require.Equal(t, http.StatusOK, page.Status, "%s", page)
	require.Contains(t, string(page.Body), "<title>Lark console</title>")

	for _, tc := range []struct{ name, method, path, token string }{
		{"no token, list", http.MethodGet, apiBase + "/entrypoints", ""},
		{"no token, get", http.MethodGet, apiBase + "/entrypoints/" + taxGTSID, ""},
		{"no token, audit", http.MethodGet, apiBase + "/audit-events", ""},
		{"no token, register", http.MethodPost, apiBase + "/entrypoints", ""},
		{"unknown token", http.MethodGet, apiBase + "/entrypoints", "lark_not-a-real-token"},
	} {
		var body []byte
		if tc.method == http.MethodPost {
			body = []byte(`{}`)
		}
		r := p.do(tc.method, tc.path, tc.token, body)
		t.Logf("%s: %s", tc.name, r)
		requireProblem(t, r, http.StatusUnauthorized)
		require.Contains(t, r.Header.Get("WWW-Authenticate"), "Bearer", "%s: %s", tc.name, r)
	}
	p.Stop()
}

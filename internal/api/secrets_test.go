package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/secrets"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

const secretsPath = base + "/secrets"

// testKeyring is a fresh master key.
func testKeyring(t testing.TB) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Generate()
	require.NoError(t, err)
	kr, err := keyring.Parse(k)
	require.NoError(t, err)
	return kr
}

func secretsEnv(t testing.TB, mod ...func(*server.Config)) *env {
	return newEnv(t, append([]func(*server.Config){func(c *server.Config) { c.Keyring = testKeyring(t) }}, mod...)...)
}

func TestSecretsCRUD(t *testing.T) {
	t.Parallel()
	e := secretsEnv(t)
	adm := e.tenant(t, "acme")
	dev := e.token(t, "acme", "dana", "developer")
	viewer := e.token(t, "acme", "vic", "viewer")
	const value = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"

	r := e.expect(t, http.StatusCreated, http.MethodPost, secretsPath, adm,
		obj{"name": "stripe_key", "value": value, "description": "Stripe test key", "allowed_hosts": []string{"api.stripe.com"}})
	require.Equal(t, secretsPath+"/stripe_key", r.Header.Get("Location"))
	require.NotContains(t, string(r.Raw), value, "write-only")
	require.Equal(t, "stripe_key", r.Body["name"])
	require.EqualValues(t, 1, r.Body["version"])
	require.Equal(t, []any{"api.stripe.com"}, r.Body["allowed_hosts"])
	require.Nil(t, r.Body["last_used_at"])

	// Developers read metadata; viewers and developers may not write; viewers may not read.
	g := e.expect(t, http.StatusOK, http.MethodGet, secretsPath+"/stripe_key", dev, nil)
	require.NotContains(t, string(g.Raw), value)
	require.Len(t, objects(g.Body["versions"]), 1)
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, secretsPath, viewer, nil)
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, secretsPath, dev,
		obj{"name": "x_key", "value": value, "allowed_hosts": []string{"a.example.com"}})
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPut, secretsPath+"/stripe_key", dev, obj{"value": "other-value"})
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodDelete, secretsPath+"/stripe_key", dev, nil)

	// Duplicate name: 409.
	e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, secretsPath, adm,
		obj{"name": "stripe_key", "value": value, "allowed_hosts": []string{"api.stripe.com"}})

	// A new value is a new version; the old one keeps its metadata only.
	const value2 = "sk_test_SECONDvalue000000000000"
	u := e.expect(t, http.StatusOK, http.MethodPut, secretsPath+"/stripe_key", adm, obj{"value": value2})
	require.NotContains(t, string(u.Raw), value2)
	require.EqualValues(t, 2, u.Body["version"])
	vs := objects(u.Body["versions"])
	require.Len(t, vs, 2)
	require.EqualValues(t, 2, vs[0]["version"])
	require.Equal(t, true, vs[0]["current"])
	require.Equal(t, false, vs[1]["current"])
	u = e.expect(t, http.StatusOK, http.MethodPut, secretsPath+"/stripe_key", adm,
		obj{"description": "new", "allowed_hosts": []string{"*.stripe.com"}})
	require.EqualValues(t, 2, u.Body["version"], "no value, no new version")
	require.Equal(t, "new", u.Body["description"])
	require.Equal(t, []any{"*.stripe.com"}, u.Body["allowed_hosts"])

	// Versions are bounded.
	for i := 0; i < secrets.DefaultMaxVersions+2; i++ {
		e.expect(t, http.StatusOK, http.MethodPut, secretsPath+"/stripe_key", adm, obj{"value": fmt.Sprintf("rotated-value-%02d", i)})
	}
	g = e.expect(t, http.StatusOK, http.MethodGet, secretsPath+"/stripe_key", adm, nil)
	require.Len(t, objects(g.Body["versions"]), secrets.DefaultMaxVersions)
	require.EqualValues(t, secrets.DefaultMaxVersions+4, g.Body["version"])

	// List (000's shape), with $filter and $orderby.
	e.expect(t, http.StatusCreated, http.MethodPost, secretsPath, adm, obj{"name": "a_token", "value": "tok-value", "allowed_hosts": []string{"a.example.com"}})
	l := e.expect(t, http.StatusOK, http.MethodGet, secretsPath, dev, nil)
	require.Equal(t, []string{"a_token", "stripe_key"}, names(l.items()))
	require.NotNil(t, l.Body["page_info"])
	l = e.expect(t, http.StatusOK, http.MethodGet, secretsPath+"?%24orderby=name+desc&limit=1", dev, nil)
	require.Equal(t, []string{"stripe_key"}, names(l.items()))
	l = e.expect(t, http.StatusOK, http.MethodGet, secretsPath+"?%24filter=startswith(name,'a_')", dev, nil)
	require.Equal(t, []string{"a_token"}, names(l.items()))
	for _, it := range l.items() {
		require.Nil(t, it["value"])
	}
	e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, secretsPath+"?%24filter=value+eq+'x'", dev, nil)
	e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, secretsPath+"?%24orderby=allowed_hosts", dev, nil)

	// Another tenant sees nothing of them: 404, an empty list.
	other := e.tenant(t, "globex")
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, secretsPath+"/stripe_key", other, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPut, secretsPath+"/stripe_key", other, obj{"value": "hijacked"})
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, secretsPath+"/stripe_key", other, nil)
	require.Empty(t, e.expect(t, http.StatusOK, http.MethodGet, secretsPath, other, nil).items())

	// Delete: 204, then 404.
	e.expect(t, http.StatusNoContent, http.MethodDelete, secretsPath+"/a_token", adm, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, secretsPath+"/a_token", adm, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, secretsPath+"/a_token", adm, nil)

	// Every change was audited, by name and version, never with a value.
	a := e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?limit=200", adm, nil)
	require.NotContains(t, string(a.Raw), value)
	require.NotContains(t, string(a.Raw), value2)
	require.NotContains(t, string(a.Raw), "rotated-value")
	types := map[string]int{}
	for _, it := range a.items() {
		types[it["type"].(string)]++
	}
	require.Equal(t, 2, types[secrets.AuditCreated])
	require.Equal(t, 2+secrets.DefaultMaxVersions+2, types[secrets.AuditUpdated])
	require.Equal(t, 1, types[secrets.AuditDeleted])
}

func names(items []obj) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it["name"].(string))
	}
	return out
}

func TestSecretsValidation(t *testing.T) {
	t.Parallel()
	e := secretsEnv(t)
	adm := e.tenant(t, "acme")
	ok := func(mods ...func(obj)) obj {
		b := obj{"name": "k", "value": "value-1234", "allowed_hosts": []any{"api.example.com"}}
		for _, m := range mods {
			m(b)
		}
		return b
	}
	for name, tc := range map[string]struct {
		body   obj
		status int
		path   string
	}{
		"bad name":        {ok(set("name", "1abc")), 422, "$.name"},
		"long name":       {ok(set("name", strings.Repeat("a", 65))), 422, "$.name"},
		"no value":        {ok(del("value")), 422, "$.value"},
		"short value":     {ok(set("value", "abc")), 422, "$.value"},
		"control char":    {ok(set("value", "abc\ndef")), 422, "$.value"},
		"no hosts":        {ok(del("allowed_hosts")), 422, "$.allowed_hosts"},
		"empty hosts":     {ok(set("allowed_hosts", []any{})), 422, "$.allowed_hosts"},
		"star host":       {ok(set("allowed_hosts", []any{"*"})), 422, "$.allowed_hosts[0]"},
		"bad host":        {ok(set("allowed_hosts", []any{"ok.example.com", "https://x.example.com/"})), 422, "$.allowed_hosts[1]"},
		"long desc":       {ok(set("description", strings.Repeat("d", secrets.MaxDescriptionBytes+1))), 422, "$.description"},
		"too many hosts":  {ok(set("allowed_hosts", manyHosts(secrets.MaxAllowedHosts+1))), 422, "$.allowed_hosts"},
		"value too large": {ok(set("value", strings.Repeat("v", secrets.MaxValueBytes+1))), 413, ""},
	} {
		r := e.do(t, http.MethodPost, secretsPath, adm, tc.body)
		require.Equal(t, tc.status, r.Status, "%s: %s", name, r)
		if tc.path != "" {
			require.NotNil(t, issueAt(r, tc.path), "%s: %s", name, r)
		}
		require.NotContains(t, string(r.Raw), "value-1234", name)
		require.NotContains(t, string(r.Raw), "abc\\ndef", name)
	}
	// At the bound exactly: accepted.
	e.expect(t, http.StatusCreated, http.MethodPost, secretsPath, adm, ok(set("value", strings.Repeat("v", secrets.MaxValueBytes))))
	// An update with nothing to change, an unknown field.
	e.expectProblem(t, 422, "validation", http.MethodPut, secretsPath+"/k", adm, obj{})
	e.expectProblem(t, 422, "validation", http.MethodPut, secretsPath+"/k", adm, obj{"valu": "x"})
	e.expectProblem(t, 422, "validation", http.MethodPut, secretsPath+"/k", adm, obj{"allowed_hosts": []any{}})
}

func manyHosts(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("h%d.example.com", i)
	}
	return out
}

func TestSecretsPerTenantBound(t *testing.T) {
	t.Parallel()
	e := secretsEnv(t)
	adm := e.tenant(t, "acme")
	for i := 0; i < secrets.DefaultMaxSecrets; i++ {
		e.expect(t, http.StatusCreated, http.MethodPost, secretsPath, adm,
			obj{"name": fmt.Sprintf("k%03d", i), "value": "value-1234", "allowed_hosts": []any{"api.example.com"}})
	}
	r := e.expectProblem(t, http.StatusTooManyRequests, "quota_exceeded", http.MethodPost, secretsPath, adm,
		obj{"name": "one_more", "value": "value-1234", "allowed_hosts": []any{"api.example.com"}})
	require.Equal(t, "max_secrets", r.Body["quota"])
	require.Equal(t, "60", r.Header.Get("Retry-After"))
	// Another tenant has its own bound.
	e.expect(t, http.StatusCreated, http.MethodPost, secretsPath, e.tenant(t, "globex"),
		obj{"name": "k000", "value": "value-1234", "allowed_hosts": []any{"api.example.com"}})
}

func TestSecretsWithoutMasterKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // no Keyring
	adm := e.tenant(t, "acme")
	for _, rq := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, secretsPath, obj{"name": "k", "value": "value-1234", "allowed_hosts": []any{"api.example.com"}}},
		{http.MethodGet, secretsPath, nil},
		{http.MethodGet, secretsPath + "/k", nil},
		{http.MethodPut, secretsPath + "/k", obj{"value": "value-1234"}},
		{http.MethodDelete, secretsPath + "/k", nil},
	} {
		r := e.expectProblem(t, http.StatusServiceUnavailable, "unavailable", rq.method, rq.path, adm, rq.body)
		require.Equal(t, "no_master_key", r.Body["reason"], "%s", r)
		require.Contains(t, r.Body["detail"], "LARK_MASTER_KEY")
		require.Contains(t, r.Body["detail"], "--master-key-file")
	}
}

// syncBuffer is a log sink for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecretNeverLeaks runs code that uses a secret against an echoing upstream, and logs, returns
// and raises what came back; then it looks for the value in everything Lark keeps or says: API
// answers, invocation records, timelines, audit events, logs, errors, and the raw bytes of the
// SQLite database and its WAL. The value must be found only where it was sent: at the upstream.
func TestSecretNeverLeaks(t *testing.T) {
	t.Parallel()
	const value = "LEAKCANARY-7f3a9c1e5b2d4068"
	var received []string
	var recvMu sync.Mutex
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		recvMu.Lock()
		received = append(received, auth)
		recvMu.Unlock()
		// A hostile upstream: it echoes the credential in a header and in the body, and redirects
		// to another host with it in the URL when asked.
		if r.URL.Path == "/bounce" {
			http.Redirect(w, r, "http://localhost"+strings.TrimPrefix(upstreamAddr(r), "127.0.0.1")+"/echo?k="+strings.TrimPrefix(auth, "Bearer "), http.StatusFound)
			return
		}
		w.Header().Set("X-Echo", auth)
		w.Header().Set("Content-Type", "application/json")
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"authorization":%q,"query":%q,"body":%q}`, auth, r.URL.RawQuery, b)
	}))
	t.Cleanup(upstream.Close)

	logs := &syncBuffer{}
	dataDir := t.TempDir()
	var storeURL string // "" (SQLite in dataDir) or the PostgreSQL schema's URL
	e := secretsEnv(t, func(c *server.Config) {
		c.UnsafeEgressAllowLoopback = true
		c.DataDir = dataDir
		storeURL = c.Store
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme", "127.0.0.1", "localhost")
	e.expect(t, http.StatusCreated, http.MethodPost, secretsPath, adm,
		obj{"name": "api_key", "value": value, "allowed_hosts": []any{"127.0.0.1"}})

	src := `def main(ctx, input):
    r = r_await(r_http_post_v1(input["url"] + "/echo", {"note": "{{secret:api_key}}"},
        headers={"Authorization": "Bearer {{secret:api_key}}"}, timeout_ms=5000))
    print("upstream said", r.response.body, r.response.headers)
    ctx.log("headers", echo=r.response.headers.get("X-Echo", ""))
    if input.get("raise"):
        fail("upstream said " + json.encode(r.response.body) + " " + str(r.response.headers))
    if input.get("exit"):
        r_exit({"id": "gts.x.core.serverless.err.v1~vendor.app.echo.v1~", "message": str(r.response.body), "category": "non_retryable", "details": r.response.headers})
    if input.get("bounce"):
        b = r_await(r_http_get_v1(input["url"] + "/bounce", headers={"Authorization": "Bearer {{secret:api_key}}"}, timeout_ms=5000))
        print("bounced", b.response.body)
    if input.get("elsewhere"):
        r_await(r_http_get_v1(input["other"], headers={"Authorization": "Bearer {{secret:api_key}}"}, timeout_ms=5000))
    return {"body": r.response.body, "headers": r.response.headers}
`
	id := idOf(e.registerActive(t, adm, invFn(t, "leak.echo.v1~", src)))
	url := upstream.URL
	other := "http://localhost" + strings.TrimPrefix(url, "http://127.0.0.1") + "/echo"

	var answers [][]byte
	var invIDs []string
	run := func(params obj, mode string) {
		status := http.StatusOK
		if mode == "async" {
			status = http.StatusAccepted
		}
		rec, r := invCall(t, e, adm, status, obj{"entrypoint_id": id, "mode": mode, "params": params}, nil)
		answers = append(answers, r.Raw)
		invIDs = append(invIDs, invID(rec))
	}
	run(obj{"url": url}, "sync")
	run(obj{"url": url, "raise": true}, "sync")
	run(obj{"url": url, "exit": true}, "sync")
	run(obj{"url": url, "bounce": true}, "sync")
	run(obj{"url": url, "elsewhere": true, "other": other}, "sync")
	run(obj{"url": url}, "async")
	invWait(t, e, adm, invIDs[len(invIDs)-1], "succeeded")

	// A workflow whose step uses it: the step's journaled output is what the sandbox saw.
	wf := e.registerActive(t, adm, wfBody(t, "leakflow.v1~", `
def call(ctx, input):
    r = r_await(r_http_get_v1(input + "/echo", headers={"Authorization": "Bearer {{secret:api_key}}"}, timeout_ms=5000))
    ctx.log("step saw", body=r.response.body)
    return {"echo": r.response.body, "headers": r.response.headers}

def main(ctx, input):
    return r_run_step_v1("call", call, input.url)
`))
	rec := invAsync(t, e, adm, wf["entrypoint_id"].(string), obj{"url": url}, nil)
	invIDs = append(invIDs, invID(rec))
	done := invWait(t, e, adm, invID(rec), wfTerminal...)
	require.Equal(t, "succeeded", done["status"], "%v", done)
	answers = append(answers, mustJSONBytes(t, done))
	require.Contains(t, string(answers[len(answers)-1]), egress.Redacted, "the step got the echo, scrubbed")

	// Positive control: the value did reach the upstream, substituted.
	recvMu.Lock()
	require.Contains(t, received, "Bearer "+value)
	for _, got := range received {
		require.True(t, got == "Bearer "+value || got == "", "upstream got %q", got)
	}
	recvMu.Unlock()

	// The first run returned the echo, scrubbed.
	first := string(answers[0])
	require.Contains(t, first, egress.Redacted)
	// The second and third failed with what they raised, scrubbed; the fifth with the envelope
	// naming the secret and the host.
	require.Contains(t, string(answers[4]), `secret \"api_key\" may not be sent to host localhost`)
	require.Contains(t, string(answers[4]), `"secret":"api_key"`)

	look := func(what string, b []byte) {
		t.Helper()
		require.False(t, bytes.Contains(b, []byte(value)), "the secret's value leaked into %s:\n%s", what, b)
	}
	for i, a := range answers {
		look(fmt.Sprintf("answer %d", i), a)
	}
	for _, inv := range invIDs {
		look("record "+inv, e.expect(t, http.StatusOK, http.MethodGet, invPath+"/"+inv, adm, nil).Raw)
		look("timeline "+inv, e.expect(t, http.StatusOK, http.MethodGet, invPath+"/"+inv+"/timeline?limit=200", adm, nil).Raw)
	}
	look("invocation list", e.expect(t, http.StatusOK, http.MethodGet, invPath+"?limit=200", adm, nil).Raw)
	look("audit events", e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?limit=200", adm, nil).Raw)
	look("events", e.expect(t, http.StatusOK, http.MethodGet, base+"/events?limit=200", adm, nil).Raw)
	look("secret", e.expect(t, http.StatusOK, http.MethodGet, secretsPath+"/api_key", adm, nil).Raw)

	// last_used_at was recorded, and one secret_accessed audit event (throttled).
	s := e.expect(t, http.StatusOK, http.MethodGet, secretsPath+"/api_key", adm, nil)
	require.NotNil(t, s.Body["last_used_at"])

	// The logs, then the raw database: on PostgreSQL every row of the server's schema (sealed values
	// as their raw bytes); on SQLite its files (the database, its WAL and anything else there).
	look("logs", []byte(logs.String()))
	if storeURL != "" {
		rows := pgtest.Contents(t, storeURL)
		for table, b := range rows {
			look("table "+table, b)
		}
		require.Contains(t, string(rows["secrets"]), "api_key", "the secrets were read")
		require.NotEmpty(t, rows["secret_versions"], "the sealed values were read")
		return
	}
	// Every file of the data directory, in its folders too (the blob store's).
	saw := map[string]bool{}
	err := filepath.WalkDir(dataDir, func(f string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		look(f, b)
		saw[filepath.Base(f)] = len(b) > 0
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, saw)
	require.True(t, saw["lark.db"] && saw["lark.db-wal"], "the database and its WAL were read: %v", saw)
}

func upstreamAddr(r *http.Request) string { return r.Host }

func mustJSONBytes(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

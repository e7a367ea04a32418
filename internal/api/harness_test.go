package api_test

// The harness of the HTTP API suite: a real server (SQLite in a temp dir, or PostgreSQL in a fresh
// schema when LARK_TEST_STORE=postgres: see testStore) behind httptest, a JSON
// client that checks every error answer is a well-formed problem document, and fixtures built from
// the README's calculate_tax registration body.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/api/apispec"
	"github.com/larkrun/lark/internal/bench"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

const (
	base     = "/api/serverless-runtime/v1"
	operator = "admin-secret"

	fnPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~"
	wfPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~"
	taxV1    = fnPrefix + "vendor.app.billing.calculate_tax.v1~"
	taxV11   = fnPrefix + "vendor.app.billing.calculate_tax.v1.1~"

	starlarkAdapter = "gts.x.core.serverless.adapter.starlark.v1~"
	compensationRef = "gts://gts.x.core.serverless.compensation_context.v1~"
	auditBase       = "gts.x.core.serverless.audit.v1~x.core.serverless.audit."
)

// calculateTax is the README's registration body (shared with the bench harness).
var calculateTax = string(bench.TaxDefinition(bench.TaxID))

// workflowTraits is the minimal traits.workflow a workflow registration needs.
const workflowTraits = `{"compensation":{"on_failure":null,"on_cancel":null},"checkpointing":{"strategy":"automatic"},"max_suspension_days":30}`

type obj = map[string]any

// env is one running server.
type env struct {
	srv    *server.Server
	ts     *httptest.Server
	client *http.Client
	spec   *apispec.Checker // checks the exchanges against the OpenAPI document (nil: unchecked)
}

// newEnv starts a real server with a fresh data directory; mod may adjust the config.
func newEnv(t testing.TB, mod ...func(*server.Config)) *env {
	t.Helper()
	// The suite fires up to 100 requests of one tenant at once (idempotency races); the per-tenant
	// in-flight cap has its own tests (transport_limits_test.go).
	cfg := server.Config{DataDir: t.TempDir(), Store: testStore(t), AdminToken: operator, MaxInFlight: 256}
	for _, m := range mod {
		m(&cfg)
	}
	srv, err := server.New(context.Background(), cfg)
	require.NoError(t, err)
	// Every exchange is checked against the OpenAPI document (openapi_test.go); the check reports
	// when the test ends, after the server has stopped.
	spec := newChecker(t)
	ts := httptest.NewServer(spec.Wrap(srv.Handler()))
	t.Cleanup(func() {
		ts.Close()
		require.NoError(t, srv.Close())
	})
	return &env{srv: srv, ts: ts, client: ts.Client(), spec: spec}
}

// storeEnv names the store the suite runs on: unset or "sqlite" (the default), or "postgres" (the
// database of LARK_TEST_POSTGRES_URL, one fresh schema per server, dropped when the test ends). CI
// runs the suite once on each.
const storeEnv = "LARK_TEST_STORE"

// testStore is server.Config.Store for a test's server: "" (SQLite in the data directory) or, under
// LARK_TEST_STORE=postgres, the URL of a fresh schema. A test that restarts its server calls it once
// and hands both servers the same value, as it does its data directory.
func testStore(t testing.TB) string {
	t.Helper()
	switch v := os.Getenv(storeEnv); v {
	case "", "sqlite":
		return ""
	case "postgres":
		if os.Getenv(pgtest.EnvURL) == "" {
			t.Fatalf("%s=postgres needs %s", storeEnv, pgtest.EnvURL)
		}
		return pgtest.Schema(t)
	default:
		t.Fatalf("%s: want sqlite or postgres, got %q", storeEnv, v)
		return ""
	}
}

// sqliteOnly skips a test that edits the SQLite file behind the server's back (rows written by
// older versions) when the suite runs on another store.
func sqliteOnly(t testing.TB) {
	t.Helper()
	if v := os.Getenv(storeEnv); v != "" && v != "sqlite" {
		t.Skipf("writes the SQLite database file directly; %s=%s", storeEnv, v)
	}
}

// resp is a decoded answer.
type resp struct {
	Status int
	Header http.Header
	Raw    []byte
	Body   obj // the JSON object of the body (nil when it is not an object)
}

func (r *resp) String() string {
	return fmt.Sprintf("HTTP %d %s", r.Status, strings.TrimSpace(string(r.Raw)))
}

// errors returns the problem document's errors[] as objects.
func (r *resp) errors() []obj { return objects(r.Body["errors"]) }

// items returns a list answer's items.
func (r *resp) items() []obj { return objects(r.Body["items"]) }

func objects(v any) []obj {
	list, _ := v.([]any)
	out := make([]obj, 0, len(list))
	for _, x := range list {
		m, _ := x.(obj)
		out = append(out, m)
	}
	return out
}

// request is a request with optional extra headers.
type request struct {
	method, path, token string
	body                any // nil: no body; string or []byte: sent as is; else JSON-encoded
	header              map[string]string
}

// send performs req. Every answer of 400 or more must be a problem document (checkProblem).
func (e *env) send(t testing.TB, req request) *resp {
	t.Helper()
	var rd io.Reader
	switch b := req.body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	hr, err := http.NewRequest(req.method, e.ts.URL+req.path, rd)
	require.NoError(t, err)
	if rd != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if req.token != "" {
		hr.Header.Set("Authorization", "Bearer "+req.token)
	}
	for k, v := range req.header {
		hr.Header.Set(k, v)
	}
	res, err := e.client.Do(hr)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	r := &resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
	if len(bytes.TrimSpace(raw)) > 0 {
		var v any
		require.NoError(t, json.Unmarshal(raw, &v), "%s %s answered non-JSON: %s", req.method, req.path, r)
		r.Body, _ = v.(obj)
	}
	if r.Status >= 400 {
		checkProblem(t, r, req)
	}
	return r
}

// do sends method path with token and body and returns the decoded answer.
func (e *env) do(t testing.TB, method, path, token string, body any) *resp {
	t.Helper()
	return e.send(t, request{method: method, path: path, token: token, body: body})
}

// expect sends the request and requires the status.
func (e *env) expect(t testing.TB, status int, method, path, token string, body any) *resp {
	t.Helper()
	r := e.do(t, method, path, token, body)
	require.Equal(t, status, r.Status, "%s %s: %s", method, path, r)
	return r
}

var problemTypeRE = regexp.MustCompile(`^gts\.x\.core\.serverless\.err\.v1~x\.core\.serverless\.err\.([a-z_]+)\.v1~$`)

// checkProblem asserts r is an RFC 9457 problem document with a GTS error type.
func checkProblem(t testing.TB, r *resp, req request) {
	t.Helper()
	where := req.method + " " + req.path
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), "%s: %s", where, r)
	require.NotNil(t, r.Body, "%s: problem body is not an object: %s", where, r)
	code, _ := r.Body["code"].(string)
	require.Regexp(t, problemTypeRE, code, "%s: code: %s", where, r)
	require.Equal(t, "gts://"+code, r.Body["type"], "%s: type must be gts:// + code: %s", where, r)
	require.EqualValues(t, r.Status, r.Body["status"], "%s: status member: %s", where, r)
	require.NotEmpty(t, r.Body["title"], "%s: title: %s", where, r)
	// 000's ValidationError: every issue has a type (error_type, rendered as code), a location
	// (a JSON path) and a message. Lark's issue codes are upper-case.
	for _, is := range r.errors() {
		path, _ := is["path"].(string)
		require.NotEmpty(t, path, "%s: issue without path: %s", where, r)
		require.NotEqual(t, "$.", path, "%s: malformed JSON path: %s", where, r)
		require.NotEmpty(t, is["message"], "%s: issue without message: %s", where, r)
		code, _ := is["code"].(string)
		require.NotEmpty(t, code, "%s: issue at %s has no code: %s", where, path, r)
		require.Equal(t, strings.ToUpper(code), code, "%s: issue codes are upper-case: %s", where, r)
	}
}

// problemKind returns the <kind> of a problem's GTS type.
func problemKind(r *resp) string {
	code, _ := r.Body["code"].(string)
	m := problemTypeRE.FindStringSubmatch(code)
	if m == nil {
		return ""
	}
	return m[1]
}

// expectProblem sends the request and requires a problem of the given status and kind.
func (e *env) expectProblem(t testing.TB, status int, kind, method, path, token string, body any) *resp {
	t.Helper()
	r := e.expect(t, status, method, path, token, body)
	require.Equal(t, kind, problemKind(r), "%s %s: %s", method, path, r)
	return r
}

// issue finds the errors[] entry at path (nil when there is none).
func issueAt(r *resp, path string) obj {
	for _, is := range r.errors() {
		if is["path"] == path {
			return is
		}
	}
	return nil
}

// requireIssue requires a 422 issue at path with the code (when code != "").
func requireIssue(t testing.TB, r *resp, path, code string) obj {
	t.Helper()
	is := issueAt(r, path)
	require.NotNil(t, is, "no issue at %s: %s", path, r)
	require.NotEmpty(t, is["message"], "issue at %s has no message: %s", path, r)
	if code != "" {
		require.Equal(t, code, is["code"], "issue at %s: %s", path, r)
	}
	return is
}

// --- tenants and tokens ---

func tenantPath(id string) string { return base + "/tenants/" + id + "/serverless-runtime" }

// enable enables a tenant as the operator, with an optional policy body.
func (e *env) enable(t testing.TB, tenantID string, body any) obj {
	t.Helper()
	return e.expect(t, http.StatusOK, http.MethodPost, tenantPath(tenantID)+":enable", operator, body).Body
}

// issue issues a token as the operator and returns the created-token object.
func (e *env) issue(t testing.TB, tenantID, subject string, roles ...string) obj {
	t.Helper()
	r := e.expect(t, http.StatusCreated, http.MethodPost, base+"/tokens", operator,
		obj{"tenant_id": tenantID, "subject_id": subject, "roles": roles})
	require.NotEmpty(t, r.Body["token"])
	require.NotEmpty(t, r.Body["id"])
	return r.Body
}

// token issues a token and returns its secret.
func (e *env) token(t testing.TB, tenantID, subject string, roles ...string) string {
	t.Helper()
	return e.issue(t, tenantID, subject, roles...)["token"].(string)
}

// tenant enables a tenant and returns the secret of an admin token for it (subject "admin").
func (e *env) tenant(t testing.TB, tenantID string) string {
	t.Helper()
	e.enable(t, tenantID, nil)
	return e.token(t, tenantID, "admin", "admin")
}

// --- entrypoint fixtures ---

// fn returns the calculate_tax body with entrypoint_id set to id (a full GTS id) and mods applied.
func fn(t testing.TB, id string, mods ...func(obj)) obj {
	t.Helper()
	var b obj
	require.NoError(t, json.Unmarshal([]byte(calculateTax), &b))
	b["entrypoint_id"] = id
	for _, m := range mods {
		m(b)
	}
	return b
}

// fnNamed is fn for fnPrefix + "vendor.app." + name.
func fnNamed(t testing.TB, name string, mods ...func(obj)) obj {
	return fn(t, fnPrefix+"vendor.app."+name, mods...)
}

// workflow returns a workflow body: the calculate_tax body with a workflow id and traits.workflow.
func workflow(t testing.TB, id string, mods ...func(obj)) obj {
	t.Helper()
	return fn(t, id, append([]func(obj){func(b obj) {
		var wt obj
		require.NoError(t, json.Unmarshal([]byte(workflowTraits), &wt))
		b["traits"].(obj)["workflow"] = wt
		b["title"] = "Process Order"
	}}, mods...)...)
}

// at returns the object at a dotted path inside b, creating nothing.
func at(b obj, path string) obj {
	cur := b
	for _, k := range strings.Split(path, ".") {
		cur = cur[k].(obj)
	}
	return cur
}

func set(path string, v any) func(obj) {
	return func(b obj) {
		i := strings.LastIndex(path, ".")
		if i < 0 {
			b[path] = v
			return
		}
		at(b, path[:i])[path[i+1:]] = v
	}
}

func del(path string) func(obj) {
	return func(b obj) {
		i := strings.LastIndex(path, ".")
		if i < 0 {
			delete(b, path)
			return
		}
		delete(at(b, path[:i]), path[i+1:])
	}
}

func source(src string) func(obj) { return set("implementation.code.source", src) }

func epPath(id string) string { return base + "/entrypoints/" + url.PathEscape(id) }

// register registers body with token and requires 201.
func (e *env) register(t testing.TB, token string, body obj) obj {
	t.Helper()
	return e.expect(t, http.StatusCreated, http.MethodPost, base+"/entrypoints", token, body).Body
}

// status applies a status action and requires 200.
func (e *env) status(t testing.TB, token, id, action string) obj {
	t.Helper()
	r := e.expect(t, http.StatusOK, http.MethodPost, epPath(id)+":status", token, obj{"action": action})
	return r.Body
}

// registerActive registers and activates body; it returns the activated entrypoint.
func (e *env) registerActive(t testing.TB, token string, body obj) obj {
	t.Helper()
	ep := e.register(t, token, body)
	return e.status(t, token, ep["id"].(string), "activate")
}

// listAll follows next_cursor from the first page of the list query and returns the ids seen.
func (e *env) listAll(t testing.TB, token string, q url.Values) []string {
	t.Helper()
	var ids []string
	for page := 0; ; page++ {
		require.Less(t, page, 100, "pagination does not end")
		r := e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints?"+q.Encode(), token, nil)
		for _, it := range r.items() {
			ids = append(ids, it["id"].(string))
		}
		pi := r.Body["page_info"].(obj)
		next, _ := pi["next_cursor"].(string)
		if next == "" {
			require.Equal(t, false, pi["has_more"], "no next_cursor but has_more: %s", r)
			return ids
		}
		require.Equal(t, true, pi["has_more"], "next_cursor but not has_more: %s", r)
		q = cloneValues(q)
		q.Set("cursor", next)
	}
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// query builds url.Values from key, value pairs.
func query(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return q
}

// ids returns the id member of each object.
func ids(list []obj) []string {
	out := make([]string, 0, len(list))
	for _, o := range list {
		s, _ := o["id"].(string)
		out = append(out, s)
	}
	return out
}

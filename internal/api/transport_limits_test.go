package api_test

// A slow or greedy client cannot hold the shared server: the body has a read deadline, a caller
// that may not write is refused before its body is read, one tenant's requests in flight are
// capped, and a sync call may still outlive the write timeout it lifts.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
)

// newServedEnv is newEnv behind the http.Server `lark serve` runs (its timeouts and limits).
func newServedEnv(t *testing.T, mod func(*server.Config)) *env {
	t.Helper()
	cfg := server.Config{DataDir: t.TempDir(), Store: testStore(t), AdminToken: operator}
	mod(&cfg)
	srv, err := server.New(context.Background(), cfg)
	require.NoError(t, err)
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Config = srv.HTTPServer()
	ts.Config.Handler = checked(t, ts.Config.Handler)
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		require.NoError(t, srv.Close())
	})
	return &env{srv: srv, ts: ts, client: ts.Client()}
}

// rawConn is a client connection that sends exactly what the test writes.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	rd   *bufio.Reader
}

// openRequest sends the request line and headers of method path with a body of bodyLen bytes
// announced, and the first bytes of that body (prefix), then stops writing.
func openRequest(t *testing.T, e *env, method, path, token string, bodyLen int, prefix string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: lark\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		method, path, token, bodyLen, prefix)
	_, err = io.WriteString(conn, head)
	require.NoError(t, err)
	return &rawConn{t: t, conn: conn, rd: bufio.NewReader(conn)}
}

// answer reads the response, failing unless it arrives within 5 s; it returns the response and
// its decoded problem document.
func (c *rawConn) answer() (*http.Response, obj) {
	c.t.Helper()
	const bound = 5 * time.Second
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(bound)))
	res, err := http.ReadResponse(c.rd, nil)
	require.NoError(c.t, err, "no answer within %v", bound)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(c.t, err)
	var doc obj
	require.NoError(c.t, json.Unmarshal(raw, &doc), "%s", raw)
	require.Equal(c.t, "application/problem+json", res.Header.Get("Content-Type"), "%s", raw)
	return res, doc
}

// closed requires the server to close the connection within bound.
func (c *rawConn) closed(bound time.Duration) {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(bound)))
	_, err := c.rd.ReadByte()
	require.True(c.t, errors.Is(err, io.EOF), "the server keeps the connection open: %v", err)
}

func TestSlowBodyIsCutOffAtTheReadTimeout(t *testing.T) {
	t.Parallel()
	const readTimeout = 300 * time.Millisecond
	e := newServedEnv(t, func(c *server.Config) { c.ReadTimeout = readTimeout })
	tok := invTenant(t, e, "acme")
	start := time.Now()
	c := openRequest(t, e, http.MethodPost, invPath, tok, 100, `{"entrypoint_id":`)
	res, doc := c.answer()
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "%v", doc)
	require.Contains(t, doc["detail"], "read timeout", "%v", doc)
	c.closed(5 * time.Second)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestRoleIsCheckedBeforeTheBodyIsRead(t *testing.T) {
	t.Parallel()
	// The read timeout is long: an answer well before it proves the body was never waited for.
	e := newServedEnv(t, func(c *server.Config) { c.ReadTimeout = time.Minute })
	e.tenant(t, "acme")
	viewer := e.token(t, "acme", "v", "viewer")
	adm := e.token(t, "acme", "a", "admin")
	for _, tc := range []struct {
		method, path, token string
		status              int
	}{
		{http.MethodPost, invPath, viewer, http.StatusForbidden},
		{http.MethodPost, invPath + "/inv_x:control", viewer, http.StatusForbidden},
		{http.MethodPost, base + "/events", viewer, http.StatusForbidden},
		{http.MethodPost, base + "/entrypoints", viewer, http.StatusForbidden},
		{http.MethodPut, base + "/entrypoints/ep_x", viewer, http.StatusForbidden},
		{http.MethodPost, base + "/entrypoints/ep_x:status", viewer, http.StatusForbidden},
		{http.MethodPost, base + "/schedules", viewer, http.StatusForbidden},
		{http.MethodPost, base + "/schedules/s_x:trigger", viewer, http.StatusForbidden},
		{http.MethodPost, base + "/backfills", viewer, http.StatusForbidden},
		{http.MethodPost, base + "/tokens", viewer, http.StatusForbidden},
		{http.MethodPatch, tenantPath("acme"), adm, http.StatusForbidden},
		{http.MethodPatch, tenantPath("other"), adm, http.StatusNotFound},
		{http.MethodPut, base + "/tenants/acme/runtime-policy", adm, http.StatusForbidden},
		{http.MethodPost, base + "/entrypoints", "not-a-token", http.StatusUnauthorized},
	} {
		c := openRequest(t, e, tc.method, tc.path, tc.token, 1000, `{"a":`)
		res, doc := c.answer()
		require.Equal(t, tc.status, res.StatusCode, "%s %s: %v", tc.method, tc.path, doc)
		c.closed(5 * time.Second)
	}
}

func TestInFlightCapPerTenant(t *testing.T) {
	t.Parallel()
	e := newServedEnv(t, func(c *server.Config) { c.MaxInFlight = 2; c.ReadTimeout = time.Minute })
	tok := invTenant(t, e, "acme")
	other := invTenant(t, e, "globex")
	// Two requests whose bodies never finish hold acme's two slots.
	held := []*rawConn{
		openRequest(t, e, http.MethodPost, invPath, tok, 1000, `{`),
		openRequest(t, e, http.MethodPost, invPath, tok, 1000, `{`),
	}
	var r *resp
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = e.do(t, http.MethodGet, invPath, tok, nil)
		if r.Status == http.StatusTooManyRequests || time.Now().After(deadline) {
			break
		}
		// A held request whose headers arrived while one of these GETs was in flight was refused
		// (429, connection closed): replace it, so that two requests hold the slots again.
		for i, h := range held {
			require.NoError(t, h.conn.SetReadDeadline(time.Now().Add(time.Millisecond)))
			if _, err := h.rd.Peek(1); err == nil {
				held[i] = openRequest(t, e, http.MethodPost, invPath, tok, 1000, `{`)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r)
	require.Equal(t, "rate_limited", problemKind(r), "%s", r)
	require.Equal(t, "1", r.Header.Get("Retry-After"))
	// Another tenant is not affected.
	e.expect(t, http.StatusOK, http.MethodGet, invPath, other, nil)
	// A slot comes back when a request ends.
	require.NoError(t, held[0].conn.Close())
	deadline = time.Now().Add(10 * time.Second)
	for {
		r = e.do(t, http.MethodGet, invPath, tok, nil)
		if r.Status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
}

func TestSyncCallOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	const writeTimeout = 300 * time.Millisecond
	e := newServedEnv(t, func(c *server.Config) { c.WriteTimeout = writeTimeout; c.ReadTimeout = writeTimeout })
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	id := e.registerActive(t, adm, wfBody(t, "sync_long.v1~", fmt.Sprintf(`
def main(ctx, input):
    ev = r_await(r_wait_event_v1(%q, timeout_ms=3600000))
    return {"payment": ev.value["payload"]["payment_id"]}
`, paymentType), set("traits.limits", obj{"timeout_seconds": 60, "memory_mb": 128, "cpu": 1.0, "max_concurrent": 100})))["entrypoint_id"].(string)
	start := time.Now()
	call := syncCall(t, e, adm, id, obj{})
	awaitSuspended(t, e, adm, id)
	// Both connection deadlines of the call have passed before it can end.
	for time.Since(start) < 3*writeTimeout {
		time.Sleep(10 * time.Millisecond)
	}
	notAnswered(t, call)
	publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": paymentType, "payload": obj{"payment_id": "PAY-1"}})
	r := answer(t, call)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	require.Equal(t, "succeeded", r.Body["record"].(obj)["status"], "%s", r)
	require.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"))
}

// TestBearerSchemeIsCaseInsensitive: RFC 9110 §11.1, the auth scheme is case-insensitive.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.tenant(t, "acme")
	for _, h := range []string{"bearer " + tok, "BEARER " + tok, "BeArEr  " + tok} {
		r := e.send(t, request{method: http.MethodGet, path: base + "/entrypoints", header: map[string]string{"Authorization": h}})
		require.Equal(t, http.StatusOK, r.Status, "%q: %s", h, r)
	}
	for _, h := range []string{"bearer", "bearerx " + tok, "Basic " + tok} {
		r := e.send(t, request{method: http.MethodGet, path: base + "/entrypoints", header: map[string]string{"Authorization": h}})
		require.Equal(t, http.StatusUnauthorized, r.Status, "%q: %s", h, r)
	}
}

// TestInFlightBytesCapPerTenant: a tenant's request bodies in flight are capped by their declared
// length: one body holding most of the budget leaves room for small requests and none for another
// large one (429 before its body is read), another tenant is not affected, and the bytes come back
// when the request ends.
func TestInFlightBytesCapPerTenant(t *testing.T) {
	t.Parallel()
	e := newServedEnv(t, func(c *server.Config) { c.MaxInFlightBytes = 1500; c.ReadTimeout = time.Minute })
	tok := invTenant(t, e, "acme")
	other := invTenant(t, e, "globex")
	// A whole body of 1,000 bytes: answered at once (it starts nothing) when admitted.
	full := `{"p":"` + strings.Repeat("x", 992) + `"}`
	status := func(token string) (int, obj) {
		c := openRequest(t, e, http.MethodPost, invPath, token, len(full), full)
		res, doc := c.answer()
		require.NoError(t, c.conn.Close())
		return res.StatusCode, doc
	}
	held := openRequest(t, e, http.MethodPost, invPath, tok, 1000, `{`) // never finishes its body
	deadline := time.Now().Add(10 * time.Second)
	code, doc := status(tok)
	for code != http.StatusTooManyRequests && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the held request's headers had not arrived yet
		code, doc = status(tok)
	}
	require.Equal(t, http.StatusTooManyRequests, code, "%v", doc)
	require.Contains(t, fmt.Sprint(doc["detail"]), "request bytes in flight")
	// Small requests still pass, and so does another tenant's large one.
	r := e.do(t, http.MethodGet, invPath, tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	code, doc = status(other)
	require.NotEqual(t, http.StatusTooManyRequests, code, "%v", doc)
	// The bytes come back when the held request ends.
	require.NoError(t, held.conn.Close())
	deadline = time.Now().Add(10 * time.Second)
	code, doc = status(tok)
	for code == http.StatusTooManyRequests && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		code, doc = status(tok)
	}
	require.NotEqual(t, http.StatusTooManyRequests, code, "%v", doc)
}

// TestBulkyRequestsOneAtATimePerTenant: a tenant's request with a body over BulkBytes waits for
// its tenant's bulky request in progress, and answers 429 rate_limited with Retry-After once it
// has waited BulkWait; the tenant's small requests and another tenant's bulky ones do not wait.
func TestBulkyRequestsOneAtATimePerTenant(t *testing.T) {
	t.Parallel()
	e := newServedEnv(t, func(c *server.Config) {
		c.BulkBytes, c.BulkWait, c.ReadTimeout = 1000, 300*time.Millisecond, time.Minute
	})
	tok := invTenant(t, e, "acme")
	other := invTenant(t, e, "globex")
	bulky := `{"p":"` + strings.Repeat("x", 1992) + `"}`
	openRequest(t, e, http.MethodPost, invPath, tok, 5000, `{`) // in acme's lane, its body never finishes
	deadline := time.Now().Add(10 * time.Second)
	var res *http.Response
	var doc obj
	for {
		c := openRequest(t, e, http.MethodPost, invPath, tok, len(bulky), bulky)
		res, doc = c.answer()
		if res.StatusCode == http.StatusTooManyRequests || time.Now().After(deadline) {
			break // else the held request's headers had not arrived yet
		}
	}
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "%v", doc)
	require.Contains(t, doc["type"], "rate_limited")
	require.Contains(t, doc["detail"], "large requests")
	require.Equal(t, "1", res.Header.Get("Retry-After"))
	// Small requests of acme's and globex's bulky one are served meanwhile.
	e.expect(t, http.StatusOK, http.MethodGet, invPath, tok, nil)
	c := openRequest(t, e, http.MethodPost, invPath, other, len(bulky), bulky)
	res, doc = c.answer()
	require.NotEqual(t, http.StatusTooManyRequests, res.StatusCode, "%v", doc)
}

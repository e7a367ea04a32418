package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
)

// TestTransport covers HTTP-level behaviour: malformed bodies, the body limit, unknown routes and
// methods, correlation ids and the health endpoints.
func TestTransport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.probesUnknownRoutes() // unknown routes and methods, on purpose
	adm := e.tenant(t, "acme")

	t.Run("malformed JSON is 400", func(t *testing.T) {
		cases := []struct{ method, path string }{
			{http.MethodPost, base + "/entrypoints"},
			{http.MethodPost, base + "/entrypoints:validate"},
			{http.MethodPost, base + "/tokens"},
		}
		for _, c := range cases {
			for _, body := range []string{`{"title": `, `{"a" 1}`, `{'single': 'quotes'}`} {
				e.expectProblem(t, http.StatusBadRequest, "bad_request", c.method, c.path, adm, body)
			}
		}
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPatch, tenantPath("acme"), operator, `{"quotas": `)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPost, tenantPath("acme")+":enable", operator, `{"quotas": `)
		ep := e.register(t, adm, fn(t, taxV1))
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPut, epPath(idOf(ep)), adm, `{"title": `)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPost, epPath(idOf(ep))+":status", adm, `{"action": `)
	})

	t.Run("body over the limit is 413", func(t *testing.T) {
		small := newEnv(t, func(c *server.Config) { c.MaxBody = 1024 })
		tok := small.tenant(t, "acme")
		big := fn(t, taxV1)
		require.Greater(t, len(calculateTax), 1024)
		small.expectProblem(t, http.StatusRequestEntityTooLarge, "payload_too_large", http.MethodPost, base+"/entrypoints", tok, big)
		small.expectProblem(t, http.StatusRequestEntityTooLarge, "payload_too_large", http.MethodPost, base+"/entrypoints:validate", tok, big)
		small.expectProblem(t, http.StatusRequestEntityTooLarge, "payload_too_large", http.MethodPatch, tenantPath("acme"), operator,
			`{"policies":{"allowed_outbound_domains":["`+strings.Repeat("a", 2000)+`.example.com"]}}`)

		// Without a Content-Length (chunked), the limit applies while reading.
		req, err := http.NewRequest(http.MethodPost, small.ts.URL+base+"/entrypoints", io.MultiReader(strings.NewReader(calculateTax)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		require.EqualValues(t, 0, req.ContentLength)
		res, err := small.client.Do(req)
		require.NoError(t, err)
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, "%s", raw)
		require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
		require.Contains(t, string(raw), "payload_too_large")

		// Small bodies still pass.
		small.expect(t, http.StatusCreated, http.MethodPost, base+"/tokens", tok, obj{"subject_id": "s", "roles": []string{"viewer"}})
	})

	t.Run("unknown route is a 404 problem", func(t *testing.T) {
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, "/nope", "", nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, "/api/serverless-runtime/v2/entrypoints", adm, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, base+"/nope", adm, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, base+"/entrypoints/a/b/c", adm, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, base+"/entrypoints/x:explode", adm, obj{})
	})

	t.Run("wrong method on a known route is a 405 problem", func(t *testing.T) {
		cases := []struct{ method, path string }{
			{http.MethodPatch, base + "/entrypoints"},
			{http.MethodDelete, base + "/entrypoints"},
			{http.MethodPut, base + "/tokens"},
			{http.MethodGet, base + "/entrypoints:validate"},
			{http.MethodPost, "/healthz"},
		}
		for _, c := range cases {
			e.expectProblem(t, http.StatusMethodNotAllowed, "method_not_allowed", c.method, c.path, adm, nil)
		}
	})

	t.Run("405 answers list the allowed methods", func(t *testing.T) {
		// RFC 9110 §15.5.6: a 405 response MUST carry an Allow header.
		r := e.expect(t, http.StatusMethodNotAllowed, http.MethodPatch, base+"/entrypoints", adm, nil)
		allow := r.Header.Get("Allow")
		require.Contains(t, allow, "GET", "Allow: %q", allow)
		require.Contains(t, allow, "POST", "Allow: %q", allow)
	})

	t.Run("HEAD is served wherever GET is", func(t *testing.T) {
		// RFC 9110 §9.1: general-purpose servers MUST support GET and HEAD (load balancers probe
		// health endpoints with HEAD).
		for _, c := range []struct{ path, token string }{
			{"/healthz", ""},
			{"/readyz", ""},
			{base + "/entrypoints", adm},
		} {
			req, err := http.NewRequest(http.MethodHead, e.ts.URL+c.path, nil)
			require.NoError(t, err)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			res, err := e.client.Do(req)
			require.NoError(t, err)
			res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode, "HEAD %s", c.path)
		}
	})

	t.Run("X-Correlation-Id is echoed; trace_id is the W3C trace id", func(t *testing.T) {
		h := map[string]string{"X-Correlation-Id": "corr-test-123"}
		r := e.send(t, request{method: http.MethodGet, path: base + "/entrypoints", token: adm, header: h})
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "corr-test-123", r.Header.Get("X-Correlation-Id"))
		for _, req := range []request{
			{method: http.MethodGet, path: epPath("ep_missing"), token: adm, header: h},
			{method: http.MethodGet, path: base + "/entrypoints", header: h},
			{method: http.MethodGet, path: "/nowhere", header: h},
			{method: http.MethodPost, path: base + "/entrypoints", token: adm, body: fn(t, taxV1, del("title")), header: h},
		} {
			r := e.send(t, req)
			require.GreaterOrEqual(t, r.Status, 400)
			require.Equal(t, "corr-test-123", r.Header.Get("X-Correlation-Id"), "%s %s", req.method, req.path)
			require.Regexp(t, "^[0-9a-f]{32}$", r.Body["trace_id"], "%s %s: %s", req.method, req.path, r)
			require.NotEqual(t, "corr-test-123", r.Body["trace_id"])
		}
		// A caller's traceparent gives the trace id (tracing on or off).
		trace := "4bf92f3577b34da6a3ce929d0e0e4736"
		r = e.send(t, request{method: http.MethodGet, path: epPath("ep_missing"), token: adm,
			header: map[string]string{"Traceparent": "00-" + trace + "-00f067aa0ba902b7-01"}})
		require.Equal(t, trace, r.Body["trace_id"])
		// An over-long one is replaced.
		long := strings.Repeat("x", 200)
		r = e.send(t, request{method: http.MethodGet, path: "/healthz", header: map[string]string{"X-Correlation-Id": long}})
		require.NotEmpty(t, r.Header.Get("X-Correlation-Id"))
		require.NotEqual(t, long, r.Header.Get("X-Correlation-Id"))
		// Without one the server makes one up; each request has a trace of its own.
		r = e.do(t, http.MethodGet, epPath("ep_missing"), adm, nil)
		id := r.Header.Get("X-Correlation-Id")
		require.NotEmpty(t, id)
		r2 := e.do(t, http.MethodGet, epPath("ep_missing"), adm, nil)
		require.NotEqual(t, id, r2.Header.Get("X-Correlation-Id"))
		require.NotEqual(t, r.Body["trace_id"], r2.Body["trace_id"])
	})

	t.Run("problem instance is the request path", func(t *testing.T) {
		r := e.expect(t, http.StatusNotFound, http.MethodGet, epPath("ep_missing"), adm, nil)
		require.Equal(t, base+"/entrypoints/ep_missing", r.Body["instance"])
	})

	t.Run("health endpoints", func(t *testing.T) {
		r := e.expect(t, http.StatusOK, http.MethodGet, "/healthz", "", nil)
		require.Equal(t, "ok", r.Body["status"])
		r = e.expect(t, http.StatusOK, http.MethodGet, "/readyz", "", nil)
		require.Equal(t, "ready", r.Body["status"])
	})
}

// TestAudit covers GET /audit-events: registry changes are recorded and each tenant reads only its own.
func TestAudit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acme := e.tenant(t, "acme")
	globex := e.tenant(t, "globex")
	dev := e.token(t, "acme", "dana", "developer")
	audits := base + "/audit-events"

	r := e.send(t, request{method: http.MethodPost, path: base + "/entrypoints", token: acme, body: fn(t, taxV1),
		header: map[string]string{"X-Correlation-Id": "corr-audit-1"}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	ep := r.Body
	e.status(t, acme, idOf(ep), "activate")
	created, activated := auditBase+"entrypoint_created.v1~", auditBase+"entrypoint_activated.v1~"

	t.Run("tenant admin lists its tenant's events", func(t *testing.T) {
		r := e.expect(t, http.StatusOK, http.MethodGet, audits+"?limit=200", acme, nil)
		byType := map[string]obj{}
		for _, ev := range r.items() {
			require.Equal(t, "acme", ev["tenant_id"], "acme sees only acme's events: %v", ev)
			if ev["resource_id"] == idOf(ep) {
				byType[ev["type"].(string)] = ev
			}
		}
		require.Contains(t, byType, created, "%s", r)
		require.Contains(t, byType, activated, "%s", r)
		c := byType[created]
		require.Equal(t, "entrypoint", c["resource_type"])
		require.Equal(t, "admin", c["actor_id"])
		require.Equal(t, "corr-audit-1", c["correlation_id"])
		require.NotEmpty(t, c["timestamp"])
		require.NotEmpty(t, c["id"])
		require.Equal(t, taxV1, c["details"].(obj)["entrypoint_id"])

		r = e.expect(t, http.StatusOK, http.MethodGet, audits+"?"+query("$filter", "resource_id eq '"+idOf(ep)+"'", "$orderby", "timestamp").Encode(), acme, nil)
		var types []string
		for _, ev := range r.items() {
			types = append(types, ev["type"].(string))
		}
		require.Equal(t, []string{created, activated}, types)
	})

	t.Run("another tenant sees none of them", func(t *testing.T) {
		r := e.expect(t, http.StatusOK, http.MethodGet, audits+"?limit=200", globex, nil)
		for _, ev := range r.items() {
			require.Equal(t, "globex", ev["tenant_id"], "globex sees %v", ev)
			require.NotEqual(t, idOf(ep), ev["resource_id"])
		}
		r = e.expect(t, http.StatusOK, http.MethodGet, audits+"?"+query("$filter", "resource_id eq '"+idOf(ep)+"'").Encode(), globex, nil)
		require.Empty(t, r.items())
	})

	t.Run("operator sees every tenant", func(t *testing.T) {
		r := e.expect(t, http.StatusOK, http.MethodGet, audits+"?"+query("$filter", "resource_id eq '"+idOf(ep)+"'").Encode(), operator, nil)
		require.Len(t, r.items(), 2)
	})

	t.Run("developer is 403", func(t *testing.T) {
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, audits, dev, nil)
	})

	t.Run("bad list parameters are 400", func(t *testing.T) {
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, audits+"?"+query("$filter", "colour eq 'red'").Encode(), acme, nil)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, audits+"?limit=0", acme, nil)
	})
}

package api_test

// The request body's media type: a body declared as anything but JSON answers 415 with the
// unsupported_media_type problem on every JSON endpoint, before any member is read; JSON, a +json
// type and an undeclared body are read as JSON.

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNonJSONBodyIs415(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.tenant(t, "acme")
	targets := []struct{ method, path, token string }{
		{http.MethodPatch, tenantPath("acme"), operator},
		{http.MethodPost, base + "/tokens", operator},
		{http.MethodPost, base + "/entrypoints", tok},
		{http.MethodPost, base + "/invocations", tok},
		{http.MethodPost, base + "/events", tok},
		{http.MethodPost, base + "/schedules", tok},
	}
	types := []string{"text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
		"application/xml", "multipart/form-data; boundary=x", "not a media type"}
	for _, tg := range targets {
		for _, ct := range types {
			// A body that would be valid JSON: the declared type alone decides.
			r := e.send(t, request{method: tg.method, path: tg.path, token: tg.token, body: `{}`,
				header: map[string]string{"Content-Type": ct}})
			require.Equal(t, http.StatusUnsupportedMediaType, r.Status, "%s %s as %s: %s", tg.method, tg.path, ct, r)
			require.Equal(t, "unsupported_media_type", problemKind(r), "%s", r)
			require.Equal(t, "Unsupported Media Type", r.Body["title"], "%s", r)
			require.Contains(t, r.Body["detail"], "application/json", "%s", r)
			require.Equal(t, []any{"application/json", "application/*+json"}, r.Body["accepted_media_types"], "%s", r)
		}
	}
}

func TestJSONMediaTypesAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant(t, "acme")
	body := `{"policies":{"allowed_outbound_domains":["api.example.com"]}}`
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON",
		"application/merge-patch+json", ""} {
		req := request{method: http.MethodPatch, path: tenantPath("acme"), token: operator, body: body,
			header: map[string]string{"Content-Type": ct}}
		if ct == "" {
			req.header = map[string]string{"Content-Type": ""}
		}
		r := e.send(t, req)
		require.Equal(t, http.StatusOK, r.Status, "Content-Type %q: %s", ct, r)
	}
}

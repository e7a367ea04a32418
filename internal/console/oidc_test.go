package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOIDCConfig: without an issuer the public configuration is empty and the CSP the strict one;
// with one, /console/config.json names it and the client id (never cached), and the CSP lets the
// page reach the issuer's origin and nothing else.
func TestOIDCConfig(t *testing.T) {
	t.Parallel()
	get := func(h *Handler, p string) *http.Response {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		return rec.Result()
	}
	plain, err := New()
	require.NoError(t, err)
	res := get(plain, ConfigPath)
	b, _ := io.ReadAll(res.Body)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.JSONEq(t, `{}`, string(b))
	require.Equal(t, CSP, res.Header.Get("Content-Security-Policy"))

	h, err := NewWith(Options{OIDC: &OIDC{Issuer: "https://login.example.com/realms/lark/", ClientID: "lark-console"}})
	require.NoError(t, err)
	res = get(h, ConfigPath)
	b, _ = io.ReadAll(res.Body)
	require.JSONEq(t, `{"oidc":{"issuer":"https://login.example.com/realms/lark/","client_id":"lark-console"}}`, string(b))
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	for _, p := range []string{ConfigPath, "/console/login", "/console/oidc/callback?code=x&state=y"} {
		csp := get(h, p).Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "connect-src 'self' https://login.example.com;", p)
		require.Contains(t, csp, "script-src 'self';", p)
	}
	require.Equal(t, CSP, get(plain, "/console/login").Header.Get("Content-Security-Policy"), "the configured handler shares no state with the plain one")
}

// TestOIDCOptionsRefused: an issuer that is not an https URL (http only on loopback), or a
// missing or malformed client id, is refused when the console is built.
func TestOIDCOptionsRefused(t *testing.T) {
	t.Parallel()
	for _, o := range []OIDC{
		{Issuer: "http://login.example.com", ClientID: "c"},
		{Issuer: "login.example.com", ClientID: "c"},
		{Issuer: "https://login.example.com?x=1", ClientID: "c"},
		{Issuer: "https://u:p@login.example.com", ClientID: "c"},
		{Issuer: "https://login.example.com", ClientID: ""},
		{Issuer: "https://login.example.com", ClientID: "a b"},
		{Issuer: "javascript:alert(1)", ClientID: "c"},
	} {
		_, err := NewWith(Options{OIDC: &o})
		require.Error(t, err, "%+v", o)
	}
	_, err := NewWith(Options{OIDC: &OIDC{Issuer: "http://127.0.0.1:5556/dex", ClientID: "lark-console"}})
	require.NoError(t, err, "http on loopback, for development")
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/oidctest"
	"github.com/larkrun/lark/internal/server"
)

const apiBase = "/api/serverless-runtime/v1"

// runOIDC runs a command whose OIDC calls trust the test issuer's certificate.
func runOIDC(t *testing.T, iss *oidctest.Issuer, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut syncBuffer
	g := &globals{now: time.Now, poll: 20 * time.Millisecond, httpClient: iss.Client()}
	return runWith(ctx, g, &out, &errOut, args...)
}

// oidcServer is a test server trusting iss, with iss registered as a platform issuer whose
// "lark-devs" group is developer in the tenant named by the "tenant" claim.
func oidcServer(t *testing.T, iss *oidctest.Issuer) testServer {
	t.Helper()
	srv := startServer(t, func(c *server.Config) { c.IdentityClient, c.IdentityTenantClient = iss.Client(), iss.Client() })
	body, err := json.Marshal(map[string]any{"issuer": iss.URL, "audiences": []string{"lark"},
		"claims":       map[string]any{"subject": "sub", "tenant": "tenant", "roles": "groups"},
		"role_mapping": map[string]any{"lark-devs": "developer"}})
	require.NoError(t, err)
	code, _ := call(t, srv, http.MethodPost, "/identity-providers", operatorToken, body)
	require.Equal(t, http.StatusCreated, code)
	return srv
}

// call makes one API request and decodes the JSON answer.
func call(t *testing.T, srv testServer, method, path, token string, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+apiBase+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func clearLarkEnv(t *testing.T) string {
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	t.Setenv("LARK_CONFIG", cfgPath)
	for _, k := range []string{"LARK_SERVER", "LARK_URL", "LARK_TOKEN", "LARK_PROFILE", "LARK_OIDC_TOKEN"} {
		t.Setenv(k, "")
	}
	return cfgPath
}

// TestLoginOIDC: `lark login --oidc` signs in with the device grant (waiting out
// authorization_pending), saves the token with mode 0600, and later commands act as the mapped
// user; an expired token is refreshed before the request, once; a refresh token the issuer
// refuses says to sign in again.
func TestLoginOIDC(t *testing.T) {
	iss := oidctest.New(t)
	srv := oidcServer(t, iss)
	cfgPath := clearLarkEnv(t)
	iss.SetDeviceUser("alice@dev", map[string]any{"tenant": srv.TenantID, "groups": []string{"lark-devs"}})

	r := runOIDC(t, iss, "login", "--server", srv.URL, "--oidc", iss.URL, "--profile", "sso")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "open "+iss.URL+"/activate and enter the code WDJB-MJHT")
	require.Contains(t, r.stdout, `as profile "sso"`)
	require.EqualValues(t, 2, iss.DeviceTokenRequests(), "one authorization_pending, then the token")
	st, err := os.Stat(cfgPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	cfg, _, err := loadConfig()
	require.NoError(t, err)
	p := cfg.Profiles["sso"]
	require.Equal(t, iss.URL, p.Issuer)
	require.NotEmpty(t, p.RefreshToken)
	require.True(t, p.Expiry.After(time.Now().Add(50*time.Minute)), "the ID token's expiry: %v", p.Expiry)
	code, who := call(t, srv, http.MethodGet, "/whoami", p.Token, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "alice@dev", who["subject_id"])
	require.Equal(t, []any{"developer"}, who["roles"])
	r = runOIDC(t, iss, "invocations", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "INVOCATION")
	require.Zero(t, iss.RefreshRequests(), "a fresh token is not refreshed")

	// The stored token has expired: the next command refreshes it first, and saves the new one.
	expired := iss.Sign(iss.Claims("alice@dev", "lark", map[string]any{"tenant": srv.TenantID, "groups": "lark-devs",
		"exp": time.Now().Add(-time.Minute).Unix()}))
	p.Token, p.Expiry = expired, time.Now().Add(-time.Minute)
	cfg.Profiles["sso"] = p
	require.NoError(t, saveConfig(cfgPath, cfg))
	r = runOIDC(t, iss, "invocations", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.EqualValues(t, 1, iss.RefreshRequests())
	cfg, _, err = loadConfig()
	require.NoError(t, err)
	require.NotEqual(t, expired, cfg.Profiles["sso"].Token)
	require.NotEqual(t, p.RefreshToken, cfg.Profiles["sso"].RefreshToken, "the rotated refresh token is kept")
	require.True(t, cfg.Profiles["sso"].Expiry.After(time.Now()))
	require.Equal(t, 0, runOIDC(t, iss, "invocations", "list").code)
	require.EqualValues(t, 1, iss.RefreshRequests(), "refreshed once")

	// A refresh token the issuer no longer knows: the command says to sign in again.
	p = cfg.Profiles["sso"]
	p.RefreshToken, p.Expiry = "revoked", time.Now().Add(-time.Minute)
	cfg.Profiles["sso"] = p
	require.NoError(t, saveConfig(cfgPath, cfg))
	r = runOIDC(t, iss, "invocations", "list")
	require.Equal(t, ExitAPI, r.code)
	require.Contains(t, r.stderr, "lark login --oidc "+iss.URL)
}

// TestLoginOIDCErrors: bad combinations and issuers are clear errors, and nothing is saved.
func TestLoginOIDCErrors(t *testing.T) {
	iss := oidctest.New(t)
	cfgPath := clearLarkEnv(t)
	r := runOIDC(t, iss, "login", "--oidc", iss.URL)
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, "needs --server")
	r = runOIDC(t, iss, "login", "--server", "http://127.0.0.1:1", "--token", "x", "--oidc", iss.URL)
	require.Equal(t, ExitUsage, r.code)
	r = runOIDC(t, iss, "login", "--server", "http://127.0.0.1:1", "--oidc", "https://127.0.0.1:1")
	require.Equal(t, ExitAPI, r.code)
	require.Contains(t, r.stderr, "discovering the OIDC issuer")
	_, err := os.Stat(cfgPath)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestOIDCTokenFromEnv: LARK_OIDC_TOKEN is the bearer as-is, for CI.
func TestOIDCTokenFromEnv(t *testing.T) {
	iss := oidctest.New(t)
	srv := oidcServer(t, iss)
	clearLarkEnv(t)
	t.Setenv("LARK_SERVER", srv.URL)
	t.Setenv("LARK_OIDC_TOKEN", iss.Sign(iss.Claims("ci-bot", "lark", map[string]any{"tenant": srv.TenantID, "groups": "lark-devs"})))
	r := run(t, "invocations", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "INVOCATION")
	t.Setenv("LARK_OIDC_TOKEN", iss.Sign(iss.Claims("ci-bot", "other-audience", map[string]any{"tenant": srv.TenantID})))
	r = run(t, "invocations", "list")
	require.Equal(t, ExitAPI, r.code)
	require.Contains(t, r.stderr, "401")
}

package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/security"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/oidctest"
	"github.com/larkrun/lark/internal/server"
)

// TestConsoleOIDCSignIn: with an issuer configured for the console, the login page offers
// "Sign in with <issuer>"; the authorization code flow with PKCE runs in the browser (the test
// issuer approves bob of tenant acme), the ID token becomes the bearer, and the header and the
// entrypoints page show the tenant's identity and entrypoints. A callback whose state does not
// match the one the tab stored is refused.
func TestConsoleOIDCSignIn(t *testing.T) {
	b := newBrowser(t)
	iss := oidctest.New(t)
	iss.AutoApprove("lark-console", "bob", map[string]any{"tenant": tenantID, "groups": []string{"devs"}})
	url, epID := startOIDCLark(t, iss.URL, iss.Client(), "devs")
	// The test issuer's certificate is its own; the browser is told to accept it.
	_, err := chromedp.Call(b.ctx, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true})
	require.NoError(t, err, "accepting the test issuer's certificate")

	b.do(t, "sign in with the issuer",
		chromedp.Navigate(url+"/console/entrypoints"),
		chromedp.WaitVisible(chromedp.ID("oidc-signin")),
		chromedp.WaitVisible(chromedp.ID("token")))
	require.Equal(t, "Sign in with "+iss.URL, eval[string](t, b, `document.getElementById('oidc-signin').textContent`))
	b.do(t, "sign in with the issuer",
		chromedp.Click(chromedp.ID("oidc-signin")),
		chromedp.WaitVisible(chromedp.ID("whoami")),
		chromedp.WaitVisible(chromedp.CSS(`#main a[href="/console/entrypoints/`+epID+`"]`)))
	require.Equal(t, "/console/entrypoints", eval[string](t, b, `location.pathname`), "back to the page asked for")
	require.Equal(t, 1, iss.CodeExchanges())
	require.Equal(t, "Nightly report", eval[string](t, b, `document.querySelector('#main a[href="/console/entrypoints/`+epID+`"]').textContent`))
	require.Equal(t, "bob", eval[string](t, b, `document.getElementById('whoami').dataset.subject`))
	require.Equal(t, tenantID, eval[string](t, b, `document.getElementById('whoami').dataset.tenant`))
	require.Nil(t, eval[any](t, b, `sessionStorage.getItem('lark.console.oidc')`), "the verifier is gone after the exchange")
	b.screenshot(t, "oidc-signin")

	b.do(t, "log out and replay a callback this tab did not start",
		chromedp.Click(chromedp.CSS(`#who button`)),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.Navigate(url+"/console/oidc/callback?code=stolen&state=forged"),
		chromedp.WaitVisible(chromedp.ID("signin-error")))
	require.Contains(t, eval[string](t, b, `document.getElementById('signin-error').textContent`), "state mismatch")
	require.Equal(t, 1, iss.CodeExchanges(), "no exchange without the tab's state")
}

// TestConsoleOIDCSignInAgainstProvider: the console's code flow with PKCE against the real OIDC
// provider CI runs (.ci/oidc-server): the browser goes to the provider's login page, alice signs
// in with her password, and comes back to the console signed in as alice of tenant acme.
func TestConsoleOIDCSignInAgainstProvider(t *testing.T) {
	p := oidctest.CIProvider(t)
	b := newBrowser(t)
	url, epID := startOIDCLark(t, p.URL, p.Client(), "lark-devs")
	// The provider's certificate comes from its own CA; the browser is told to accept it.
	_, err := chromedp.Call(b.ctx, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true})
	require.NoError(t, err, "accepting the provider's certificate")

	b.do(t, "go to the provider's login page",
		chromedp.Navigate(url+"/console/entrypoints"),
		chromedp.WaitVisible(chromedp.ID("oidc-signin")),
		chromedp.Click(chromedp.ID("oidc-signin")),
		chromedp.WaitVisible(chromedp.ID("username")))
	require.True(t, strings.HasPrefix(eval[string](t, b, `location.href`), p.URL+"/login/"), "on the provider's page")
	b.do(t, "sign in as alice at the provider",
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), "alice-password"),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("whoami")),
		chromedp.WaitVisible(chromedp.CSS(`#main a[href="/console/entrypoints/`+epID+`"]`)))
	require.Equal(t, "/console/entrypoints", eval[string](t, b, `location.pathname`), "back to the page asked for")
	require.Equal(t, "alice", eval[string](t, b, `document.getElementById('whoami').dataset.subject`))
	require.Equal(t, tenantID, eval[string](t, b, `document.getElementById('whoami').dataset.tenant`))
	b.screenshot(t, "oidc-provider-signin")
}

// startOIDCLark starts a server whose console signs in with the issuer at issuerURL (client id
// lark-console, fetched through client), registered as a platform identity provider mapping the
// tenant claim and group devGroup to developer, tenant acme enabled and one function registered,
// whose id it answers with the server's URL; it stops with the test.
func startOIDCLark(t *testing.T, issuerURL string, client *http.Client, devGroup string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Config{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: opToken,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), IdentityClient: client, IdentityTenantClient: client,
		ConsoleOIDCIssuer: issuerURL, ConsoleOIDCClientID: "lark-console"})
	require.NoError(t, err)
	ln, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("server did not stop within 30 s")
		}
		_ = os.RemoveAll(dir)
	})
	l := &lark{url: "http://" + ln.Addr().String()}
	call(t, l.url, opToken, "POST", "/tenants/"+tenantID+"/serverless-runtime:enable", map[string]any{}, 200)
	call(t, l.url, opToken, "POST", "/identity-providers", map[string]any{"issuer": issuerURL, "audiences": []string{"lark-console"},
		"claims": map[string]any{"subject": "sub", "tenant": "tenant", "roles": "groups"}, "role_mapping": map[string]any{devGroup: "developer"}}, 201)
	tok := call(t, l.url, opToken, "POST", "/tokens", map[string]any{"tenant_id": tenantID, "subject_id": "seed", "roles": []string{"admin"}}, 201)
	l.token = tok["token"].(string)
	register(t, l, map[string]any{
		"entrypoint_id": fnID, "title": "Nightly report", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{"invocation": map[string]any{"supported": []string{"sync", "async"}, "default": "async"},
			"retry": map[string]any{"max_attempts": 1}},
		"implementation": starlark("def main(ctx, input):\n    return {\"rows\": 3}\n"),
	})
	return l.url, call(t, l.url, l.token, "GET", "/entrypoints/"+fnID, nil, 200)["id"].(string)
}

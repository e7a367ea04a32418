package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Environment variables .ci/oidc-server exports for the real OIDC provider CI runs
// (.ci/oidcprovider: ZITADEL's OIDC library's provider).
const (
	// EnvProviderURL is the provider's issuer URL (https).
	EnvProviderURL = "LARK_TEST_OIDC_URL"
	// EnvProviderCA is the PEM file of the CA that signed the provider's certificate.
	EnvProviderCA = "LARK_TEST_OIDC_CA"
)

// Provider is the real OIDC provider CI starts: its users (alice, vic, ada of tenant acme; eve of
// globex; root of group platform-ops; each with password "<user>-password"), its public clients
// (lark-cli with the device grant, lark-console with the code flow and PKCE, other-app) and its
// key rotation.
type Provider struct {
	// URL is the issuer.
	URL string
	// CAFile is the PEM file of its certificate's CA (SSL_CERT_FILE for a lark process).
	CAFile string
	client *http.Client
}

// Tokens is a token endpoint's answer.
type Tokens struct {
	IDToken      string `json:"id_token"`
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

// CIProvider returns the provider of EnvProviderURL, or skips the test, saying so, when it is unset.
func CIProvider(t testing.TB) *Provider {
	t.Helper()
	u := os.Getenv(EnvProviderURL)
	if u == "" {
		t.Skipf("%s is unset: no OIDC provider to sign in against (.ci/run starts one with .ci/oidc-server)", EnvProviderURL)
	}
	ca := os.Getenv(EnvProviderCA)
	pemBytes, err := os.ReadFile(ca)
	if err != nil {
		t.Fatalf("%s: %v", EnvProviderCA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("%s: no certificate in %s", EnvProviderCA, ca)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return &Provider{URL: strings.TrimSuffix(u, "/"), CAFile: ca, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Client trusts the provider's certificate.
func (p *Provider) Client() *http.Client { return p.client }

// DeviceLogin signs user in to clientID with the device authorization grant, approving the code
// as the user would in a browser, and returns the tokens.
func (p *Provider) DeviceLogin(t testing.TB, clientID, user string) Tokens {
	t.Helper()
	var da struct {
		DeviceCode string `json:"device_code"`
		UserCode   string `json:"user_code"`
	}
	p.post(t, "/device_authorization", url.Values{"client_id": {clientID}, "scope": {"openid offline_access"}}, &da)
	p.ApproveDevice(t, da.UserCode, user)
	var tok Tokens
	p.post(t, "/oauth/token", url.Values{"client_id": {clientID}, "device_code": {da.DeviceCode},
		"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}}, &tok)
	return tok
}

// ApproveDevice enters userCode on the provider's device page, signs in as user and allows it.
func (p *Provider) ApproveDevice(t testing.TB, userCode, user string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Transport: p.client.Transport, Jar: jar, Timeout: p.client.Timeout}
	form := url.Values{"user_code": {userCode}, "username": {user}, "password": {user + "-password"}}
	if body := p.form(t, browser, "/device/login", form); !strings.Contains(body, "Confirm") {
		t.Fatalf("signing in as %s on the device page: %s", user, body)
	}
	if body := p.form(t, browser, "/device/confirm", url.Values{"action": {"allowed"}}); !strings.Contains(body, "allowed") {
		t.Fatalf("allowing the device: %s", body)
	}
}

// Rotate makes the provider sign with a new key from now on and returns its kid.
func (p *Provider) Rotate(t testing.TB) string {
	t.Helper()
	var r struct {
		KID string `json:"kid"`
	}
	p.post(t, "/admin/rotate", nil, &r)
	return r.KID
}

// SignHS256WithPublicKey signs claims with HMAC-SHA256 keyed by the PEM of the provider's
// current public key, under its kid: the RS/HS algorithm-confusion attack.
func (p *Provider) SignHS256WithPublicKey(t testing.TB, claims map[string]any) string {
	t.Helper()
	resp, err := p.client.Get(p.URL + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("reading the provider's keys: %v", err)
	}
	der, err := x509.MarshalPKIXPublicKey(set.Keys[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return sign(jose.SigningKey{Algorithm: jose.HS256, Key: secret}, set.Keys[0].KeyID, claims)
}

// SignWithUnknownKey signs claims with a new RSA key under a kid the provider never published.
func SignWithUnknownKey(claims map[string]any) string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return sign(jose.SigningKey{Algorithm: jose.RS256, Key: k}, "not-a-published-kid", claims)
}

// ClaimsOf returns a JWT's claims, unverified.
func ClaimsOf(t testing.TB, token string) map[string]any { return part(t, token, 1) }

// KeyIDOf returns the kid of a JWT's header.
func KeyIDOf(t testing.TB, token string) string {
	kid, _ := part(t, token, 0)["kid"].(string)
	return kid
}

// part decodes the JSON object of a JWT's header (0) or payload (1).
func part(t testing.TB, token string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// post sends a form and decodes the JSON answer into out, failing the test on a non-200.
func (p *Provider) post(t testing.TB, path string, form url.Values, out any) {
	t.Helper()
	resp, err := p.client.PostForm(p.URL+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("POST %s: %v: %s", path, err, b)
	}
}

// form posts a form as a browser would and returns the page it ends on.
func (p *Provider) form(t testing.TB, c *http.Client, path string, form url.Values) string {
	t.Helper()
	resp, err := c.PostForm(p.URL+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

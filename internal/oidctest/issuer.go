// Package oidctest runs an OpenID Connect issuer in-process for tests: a TLS server with a
// discovery document, a JWKS endpoint, device authorization and token endpoints (device.go), RSA and EC signing keys that can be added, switched to
// and withdrawn while it runs (key rotation), and helpers that sign good and hostile tokens.
// provider.go drives the real OIDC provider CI starts (CIProvider: its users' sign-in, its key
// rotation), for the tests that run against it.
package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Issuer is an in-process OIDC issuer.
type Issuer struct {
	srv *httptest.Server
	// URL is the issuer identifier (the server's https base URL).
	URL string
	// JWKSHits counts requests to the JWKS endpoint.
	JWKSHits atomic.Int64
	// DiscoveryHits counts requests to the discovery document.
	DiscoveryHits atomic.Int64

	mu        sync.Mutex
	keys      map[string]key // every key made, by kid
	published []string       // kids served in the JWKS, in order
	signing   string         // kid tokens are signed with
	cacheCtl  string
	n         int
	dev       deviceGrant // the device and refresh grants (device.go)
	authCode  authCodeState
}

type key struct {
	priv crypto.Signer
	alg  jose.SignatureAlgorithm
}

// New starts an issuer with one published RSA key it signs with; it stops with the test.
func New(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{keys: map[string]key{}, cacheCtl: "max-age=300"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", i.discovery)
	mux.HandleFunc("GET /keys", i.jwks)
	i.routeDevice(mux)
	i.routeAuthCode(mux)
	i.srv = httptest.NewTLSServer(mux)
	t.Cleanup(i.srv.Close)
	i.URL = i.srv.URL
	i.UseKey(i.AddKey("RSA"))
	return i
}

// Client trusts the issuer's TLS certificate.
func (i *Issuer) Client() *http.Client { return i.srv.Client() }

// SetCacheControl sets the Cache-Control header of the JWKS answers.
func (i *Issuer) SetCacheControl(v string) {
	i.mu.Lock()
	i.cacheCtl = v
	i.mu.Unlock()
}

func (i *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	i.DiscoveryHits.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*") // browsers (the console) read it too
	write(w, map[string]any{
		"issuer": i.URL, "jwks_uri": i.URL + "/keys", "authorization_endpoint": i.URL + "/auth",
		"token_endpoint": i.URL + "/token", "device_authorization_endpoint": i.URL + "/device",
		"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
	})
}

func (i *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	i.JWKSHits.Add(1)
	i.mu.Lock()
	set := jose.JSONWebKeySet{}
	for _, kid := range i.published {
		k := i.keys[kid]
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: kid, Algorithm: string(k.alg), Use: "sig"})
	}
	cc := i.cacheCtl
	i.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", cc)
	write(w, set)
}

// AddKey makes a key ("RSA" or "EC"), publishes it in the JWKS, and returns its kid. Tokens are
// still signed with the current key until UseKey.
func (i *Issuer) AddKey(kind string) string {
	kid := i.NewKey(kind)
	i.mu.Lock()
	i.published = append(i.published, kid)
	i.mu.Unlock()
	return kid
}

// NewKey makes a key that is not published (a token signed with it has an unknown kid).
func (i *Issuer) NewKey(kind string) string {
	var k key
	switch kind {
	case "EC":
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		k = key{priv: priv, alg: jose.ES256}
	default:
		priv, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		k = key{priv: priv, alg: jose.RS256}
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.n++
	kid := fmt.Sprintf("key-%d", i.n)
	i.keys[kid] = k
	return kid
}

// UseKey signs the next tokens with kid.
func (i *Issuer) UseKey(kid string) {
	i.mu.Lock()
	i.signing = kid
	i.mu.Unlock()
}

// RemoveKey withdraws kid from the JWKS.
func (i *Issuer) RemoveKey(kid string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for j, k := range i.published {
		if k == kid {
			i.published = append(i.published[:j:j], i.published[j+1:]...)
			return
		}
	}
}

// Claims returns standard claims for sub and aud, valid for an hour from now, plus extra.
func (i *Issuer) Claims(sub, aud string, extra map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": i.URL, "sub": sub, "aud": aud, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// Sign signs claims with the current key.
func (i *Issuer) Sign(claims map[string]any) string {
	i.mu.Lock()
	kid := i.signing
	i.mu.Unlock()
	return i.SignWith(kid, claims)
}

// SignWith signs claims with the key kid.
func (i *Issuer) SignWith(kid string, claims map[string]any) string {
	i.mu.Lock()
	k := i.keys[kid]
	i.mu.Unlock()
	return sign(jose.SigningKey{Algorithm: k.alg, Key: k.priv}, kid, claims)
}

// SignHS256WithPublicKey signs claims with HMAC-SHA256 keyed by the PEM of the current key's
// public half: the RS/HS algorithm-confusion attack.
func (i *Issuer) SignHS256WithPublicKey(claims map[string]any) string {
	i.mu.Lock()
	kid := i.signing
	k := i.keys[kid]
	i.mu.Unlock()
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		panic(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return sign(jose.SigningKey{Algorithm: jose.HS256, Key: secret}, kid, claims)
}

// Unsigned returns claims as a JWT with alg "none" and an empty signature.
func Unsigned(claims map[string]any) string {
	return b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64(mustJSON(claims)) + "."
}

// Tamper replaces the claims of a signed token, keeping its header and signature.
func Tamper(token string, claims map[string]any) string {
	parts := strings.SplitN(token, ".", 3)
	if len(parts) != 3 {
		return token
	}
	return parts[0] + "." + b64(mustJSON(claims)) + "." + parts[2]
}

// write answers v as JSON, or 500 when it does not encode.
func write(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(b)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// mustJSON encodes a test's claims (plain JSON values: it cannot fail unless a test passes a value
// JSON cannot hold, a bug of that test).
func mustJSON(v map[string]any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func sign(sk jose.SigningKey, kid string, claims map[string]any) string {
	signer, err := jose.NewSigner(sk, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		panic(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		panic(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return out
}

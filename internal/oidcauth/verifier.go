// Package oidcauth verifies JWTs of the identity providers (OIDC issuers) an operator or a tenant
// registered, and maps their claims to an auth.SecurityContext. Discovery, signature and claim
// checks are go-oidc's and go-jose's; the key set is Lark's own so that it follows the provider's
// cache headers and bounds the refreshes an unknown kid can cause.
package oidcauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// Source finds the provider registered for an issuer (store.ErrNotFound when none is), and the
// policy of the tenant of a provider a tenant admin registered (store.ErrNotFound when the tenant
// has none). store.Store implements it.
type Source interface {
	IdentityProviderByIssuer(ctx context.Context, issuer string) (identity.Provider, error)
	Tenant(ctx context.Context, id string) (tenant.Policy, error)
}

// Options configure a Verifier.
type Options struct {
	// Client fetches the discovery documents and keys of platform issuers (nil: http.DefaultClient).
	Client *http.Client
	// TenantClient does so for tenant-owned issuers (nil: PublicClient(), which refuses private
	// and loopback addresses, since a tenant chooses the URL the server fetches).
	TenantClient *http.Client
	Clock        clock.Clock
	// ProviderCacheTTL bounds how long a provider read from the Source, and the policy of its
	// tenant, are reused (default 5s): a deletion on another node, or a tenant policy that stops
	// allowing tenant identity providers (for the issuers its admins registered), takes effect
	// within it.
	ProviderCacheTTL time.Duration
}

// Verifier verifies JWT bearer tokens.
type Verifier struct {
	src  Source
	opts Options

	mu      sync.Mutex
	remotes map[remoteKey]*remote // by provider id and issuer
	cache   map[string]cached     // by issuer
	seen    *verifiedCache
}

// remoteKey names a provider's key set: a provider deleted and registered again with the same
// issuer gets a new id, hence a fresh discovery.
type remoteKey struct{ id, issuer string }

// cached is a provider read from the Source; allowed is false for a provider a tenant admin
// registered whose tenant's policy, read at the same time, does not allow tenant identity
// providers.
type cached struct {
	p       identity.Provider
	allowed bool
	fetched time.Time
}

// remote is a provider's discovered key set; a failed discovery is retried after FailedRefreshRetry.
type remote struct {
	mu     sync.Mutex
	keys   *keySet
	err    error
	failed time.Time
}

// New returns a Verifier reading providers from src.
func New(src Source, o Options) *Verifier {
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.TenantClient == nil {
		o.TenantClient = PublicClient()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.ProviderCacheTTL <= 0 {
		o.ProviderCacheTTL = 5 * time.Second
	}
	return &Verifier{src: src, opts: o, remotes: map[remoteKey]*remote{}, cache: map[string]cached{}, seen: newVerifiedCache()}
}

// Authenticate verifies raw and returns its caller. Every refusal is a 401 problem that says what
// failed and never repeats the token; an issuer whose keys cannot be fetched is 503.
func (v *Verifier) Authenticate(ctx context.Context, raw string) (auth.SecurityContext, error) {
	if sc, ok := v.recall(ctx, raw); ok {
		return sc, nil
	}
	iss, err := unverifiedIssuer(raw)
	if err != nil {
		return auth.SecurityContext{}, problem.Unauthorized("invalid bearer token: %v", err)
	}
	p, allowed, err := v.provider(ctx, iss)
	if errors.Is(err, store.ErrNotFound) {
		return auth.SecurityContext{}, problem.Unauthorized("invalid bearer token: its issuer is not a registered identity provider")
	}
	if err != nil {
		return auth.SecurityContext{}, problem.Internal(err)
	}
	if !allowed {
		return auth.SecurityContext{}, problem.Unauthorized("invalid bearer token: the tenant's policy no longer allows its own identity providers (policies.allow_tenant_identity_providers)")
	}
	keys, err := v.keys(ctx, p)
	if err != nil {
		pe := problem.New(problem.TypeUnavailable, "the identity provider's keys could not be fetched; retry later")
		pe.RetryAfter = int(FailedRefreshRetry.Seconds())
		return auth.SecurityContext{}, pe
	}
	sc, exp, err := v.verify(ctx, p, keys, raw)
	if err != nil {
		return auth.SecurityContext{}, problem.Unauthorized("invalid bearer token: %v", err)
	}
	v.remember(raw, iss, p, keys, sc, exp)
	return sc, nil
}

// verify checks signature, issuer, audience, exp and nbf, then maps the claims; it answers the
// token's expiry too.
func (v *Verifier) verify(ctx context.Context, p identity.Provider, keys *keySet, raw string) (auth.SecurityContext, time.Time, error) {
	cfg := &oidc.Config{SkipClientIDCheck: true, SkipExpiryCheck: true, SupportedSigningAlgs: p.Algorithms, Now: v.opts.Clock.Now}
	tok, err := oidc.NewVerifier(p.Issuer, keys, cfg).Verify(ctx, raw)
	if err != nil {
		return auth.SecurityContext{}, time.Time{}, errors.New(sanitize(err))
	}
	if !slices.ContainsFunc(tok.Audience, func(a string) bool { return slices.Contains(p.Audiences, a) }) {
		return auth.SecurityContext{}, time.Time{}, errors.New("the token's audience is not one the identity provider is registered for")
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return auth.SecurityContext{}, time.Time{}, errors.New("the token's claims are not a JSON object")
	}
	if err := checkTimes(claims, v.opts.Clock.Now(), p.Skew()); err != nil {
		return auth.SecurityContext{}, time.Time{}, err
	}
	sc, err := p.Grant(stringClaim(claims, p.Claims.Subject), stringClaim(claims, p.Claims.Tenant), listClaim(claims, p.Claims.Roles))
	return sc, tok.Expiry, err
}

// sanitize turns a go-oidc error into a message that names the failed check only (its texts can
// carry claim values, never the token; kept short all the same).
func sanitize(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "signature"), strings.Contains(msg, "malformed"), strings.Contains(msg, "JWS"):
		return "the token's signature does not verify with the identity provider's keys or algorithms"
	case strings.Contains(msg, "issued by a different provider"):
		return "the token's issuer does not match the identity provider"
	}
	return "the token could not be verified"
}

// checkTimes requires exp in the future and nbf, when present, in the past, both within skew.
func checkTimes(claims map[string]any, now time.Time, skew time.Duration) error {
	exp, ok := claims["exp"].(float64)
	if !ok {
		return errors.New("the token has no exp claim")
	}
	if !now.Add(-skew).Before(time.Unix(int64(exp), 0)) {
		return errors.New("the token has expired")
	}
	if nbf, ok := claims["nbf"].(float64); ok && now.Add(skew).Before(time.Unix(int64(nbf), 0)) {
		return errors.New("the token is not valid yet (nbf)")
	}
	return nil
}

func stringClaim(claims map[string]any, name string) string {
	if name == "" {
		return ""
	}
	s, _ := claims[name].(string)
	return s
}

// listClaim reads a claim holding a string or an array of strings.
func listClaim(claims map[string]any, name string) []string {
	switch c := claims[name].(type) {
	case string:
		return []string{c}
	case []any:
		out := make([]string, 0, len(c))
		for _, x := range c {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// unverifiedIssuer reads the iss claim of a JWT without verifying it: only to choose the provider
// whose keys will verify it.
func unverifiedIssuer(raw string) (string, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", errors.New("the JWT's payload is not base64url")
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.Iss == "" {
		return "", errors.New("the JWT has no issuer")
	}
	return c.Iss, nil
}

// provider reads the provider of iss and whether its tenant's policy allows it (always, for a
// platform issuer or one the operator registered for a tenant), both cached for ProviderCacheTTL. An issuer no longer registered (deleted on
// another node) is forgotten: its key sets are dropped.
func (v *Verifier) provider(ctx context.Context, iss string) (identity.Provider, bool, error) {
	now := v.opts.Clock.Now()
	v.mu.Lock()
	c, ok := v.cache[iss]
	v.mu.Unlock()
	if ok && now.Sub(c.fetched) < v.opts.ProviderCacheTTL && !now.Before(c.fetched) {
		return c.p, c.allowed, nil
	}
	p, err := v.src.IdentityProviderByIssuer(ctx, iss)
	if errors.Is(err, store.ErrNotFound) {
		v.Forget(iss)
	}
	if err != nil {
		return p, false, err
	}
	allowed, err := v.allowed(ctx, p)
	if err != nil {
		return p, false, err
	}
	v.mu.Lock()
	if len(v.cache) >= 10000 {
		v.cache = map[string]cached{}
	}
	v.cache[iss] = cached{p: p, allowed: allowed, fetched: now}
	v.mu.Unlock()
	return p, allowed, nil
}

// allowed reports whether p may sign callers in. A provider a tenant admin registered (or a
// tenant-owned one of unknown registrar, stored before identity.Provider.RegisteredBy existed)
// may while its tenant's policy sets allow_tenant_identity_providers (a tenant without a policy
// record has it off); platform issuers and the issuers the platform operator registered for a
// tenant always may, without reading the policy (identity.Provider.FollowsTenantPolicy).
func (v *Verifier) allowed(ctx context.Context, p identity.Provider) (bool, error) {
	if !p.FollowsTenantPolicy() {
		return true, nil
	}
	pol, err := v.src.Tenant(ctx, p.TenantID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return pol.Policies.AllowTenantIdentityProviders, nil
}

// Forget drops what the verifier holds about an issuer: its cached provider and the key sets of
// every provider registered with it (after its provider is deleted here, or found gone).
func (v *Verifier) Forget(issuer string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.cache, issuer)
	for k := range v.remotes {
		if k.issuer == issuer {
			delete(v.remotes, k)
		}
	}
}

// keys returns p's key set, discovering it on first use.
func (v *Verifier) keys(ctx context.Context, p identity.Provider) (*keySet, error) {
	key := remoteKey{id: p.ID, issuer: p.Issuer}
	v.mu.Lock()
	r, ok := v.remotes[key]
	if !ok {
		r = &remote{}
		v.remotes[key] = r
	}
	v.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys != nil {
		return r.keys, nil
	}
	now := v.opts.Clock.Now()
	if r.err != nil && now.Sub(r.failed) < FailedRefreshRetry {
		return nil, r.err
	}
	client := v.opts.Client
	if p.TenantID != "" {
		client = v.opts.TenantClient
	}
	jwksURL, err := discover(ctx, client, p.Issuer)
	if err != nil {
		r.err, r.failed = err, now
		return nil, err
	}
	r.keys, r.err = newKeySet(jwksURL, client, v.opts.Clock), nil
	return r.keys, nil
}

// discover reads the issuer's discovery document (go-oidc checks that it names the same issuer)
// and returns its jwks_uri, which must be https as the issuer is.
func discover(ctx context.Context, client *http.Client, issuer string) (string, error) {
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, client), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, issuer)
	if err != nil {
		return "", fmt.Errorf("discovery of %s: %w", issuer, err)
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := p.Claims(&doc); err != nil {
		return "", fmt.Errorf("discovery of %s: %w", issuer, err)
	}
	if !strings.HasPrefix(doc.JWKSURI, "https://") {
		return "", fmt.Errorf("discovery of %s: jwks_uri must be an https URL", issuer)
	}
	return doc.JWKSURI, nil
}

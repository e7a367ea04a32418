package oidcauth_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/oidcauth"
	"github.com/larkrun/lark/internal/oidctest"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// source serves fixed providers; every tenant's policy allows its own issuers.
type source map[string]identity.Provider

func (s source) IdentityProviderByIssuer(_ context.Context, iss string) (identity.Provider, error) {
	p, ok := s[iss]
	if !ok {
		return p, store.ErrNotFound
	}
	return p, nil
}

func (s source) Tenant(_ context.Context, id string) (tenant.Policy, error) {
	var pol tenant.Policy
	pol.TenantID = id
	pol.Policies.AllowTenantIdentityProviders = true
	return pol, nil
}

func platformProvider(iss *oidctest.Issuer) identity.Provider {
	p := identity.Provider{ID: "idp_1", Issuer: iss.URL, Audiences: []string{"lark"},
		Claims:         identity.Claims{Subject: "sub", Tenant: "tenant", Roles: "groups"},
		RoleMapping:    map[string]auth.Role{"devs": auth.RoleDeveloper, "ops": auth.RoleOperator, "lark-admins": auth.RoleAdmin},
		OperatorGroups: []string{"platform-ops"}}
	p.Normalize()
	return p
}

func newVerifier(t *testing.T, iss *oidctest.Issuer, ps ...identity.Provider) *oidcauth.Verifier {
	t.Helper()
	src := source{}
	for _, p := range ps {
		src[p.Issuer] = p
	}
	return oidcauth.New(src, oidcauth.Options{Client: iss.Client(), TenantClient: iss.Client()})
}

func TestGroupsMapToTenantAndRoles(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	v := newVerifier(t, iss, platformProvider(iss))
	tok := iss.Sign(iss.Claims("alice", "lark", map[string]any{"tenant": "acme", "groups": []string{"ops", "devs", "unrelated"}}))
	sc, err := v.Authenticate(t.Context(), tok)
	require.NoError(t, err)
	require.Equal(t, auth.SecurityContext{TenantID: "acme", SubjectID: "alice", Roles: []auth.Role{auth.RoleOperator, auth.RoleDeveloper}}, sc)
	require.True(t, auth.LooksLikeJWT(tok))

	iss.UseKey(iss.AddKey("EC")) // ES256 works as well
	sc, err = v.Authenticate(t.Context(), iss.Sign(iss.Claims("bob", "lark", map[string]any{"tenant": "acme", "groups": "lark-admins"})))
	require.NoError(t, err)
	require.Equal(t, []auth.Role{auth.RoleAdmin}, sc.Roles)

	sc, err = v.Authenticate(t.Context(), iss.Sign(iss.Claims("root", "lark", map[string]any{"groups": []string{"platform-ops"}})))
	require.NoError(t, err)
	require.True(t, sc.Operator)
	require.Empty(t, sc.TenantID)
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	other := oidctest.New(t)
	p := platformProvider(iss)
	v := newVerifier(t, iss, p)
	good := map[string]any{"tenant": "acme", "groups": []string{"devs"}}
	claims := func(mod func(map[string]any)) map[string]any {
		c := iss.Claims("alice", "lark", good)
		mod(c)
		return c
	}
	now := time.Now()
	cases := map[string]struct {
		token string
		want  string
	}{
		"wrong audience":  {iss.Sign(claims(func(c map[string]any) { c["aud"] = "someone-else" })), "audience"},
		"expired":         {iss.Sign(claims(func(c map[string]any) { c["exp"] = now.Add(-2 * time.Minute).Unix() })), "expired"},
		"no exp":          {iss.Sign(claims(func(c map[string]any) { delete(c, "exp") })), "exp"},
		"not yet valid":   {iss.Sign(claims(func(c map[string]any) { c["nbf"] = now.Add(5 * time.Minute).Unix() })), "not valid yet"},
		"unknown issuer":  {other.Sign(other.Claims("alice", "lark", good)), "not a registered identity provider"},
		"forged issuer":   {other.Sign(claims(func(map[string]any) {})), "signature"},
		"alg none":        {oidctest.Unsigned(claims(func(map[string]any) {})), "signature"},
		"HS256 confusion": {iss.SignHS256WithPublicKey(claims(func(map[string]any) {})), "signature"},
		"unknown kid":     {iss.SignWith(iss.NewKey("RSA"), claims(func(map[string]any) {})), "signature"},
		"tampered":        {oidctest.Tamper(iss.Sign(claims(func(map[string]any) {})), claims(func(c map[string]any) { c["groups"] = []string{"lark-admins"} })), "signature"},
		"no role":         {iss.Sign(claims(func(c map[string]any) { c["groups"] = []string{"unrelated"} })), "maps to a role"},
		"no tenant":       {iss.Sign(claims(func(c map[string]any) { delete(c, "tenant") })), "tenant"},
		"not a JWT":       {"a.b.c", "invalid bearer token"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := v.Authenticate(t.Context(), c.token)
			requireUnauthorized(t, err, c.token, c.want)
		})
	}
}

func requireUnauthorized(t *testing.T, err error, token, want string) {
	t.Helper()
	var pe *problem.Error
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, http.StatusUnauthorized, pe.Status, pe.Detail)
	require.Contains(t, pe.Detail, want)
	for _, part := range strings.Split(token, ".") {
		if len(part) > 8 {
			require.NotContains(t, pe.Detail, part, "the token is echoed")
		}
	}
}

func TestTenantOwnedIssuerCannotNameAnotherTenant(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	p := identity.Provider{ID: "idp_t", TenantID: "acme", Issuer: iss.URL, Audiences: []string{"lark"},
		Claims: identity.Claims{Tenant: "tenant", Roles: "groups"}, RoleMapping: map[string]auth.Role{"devs": auth.RoleDeveloper}}
	p.Normalize()
	v := newVerifier(t, iss, p)
	sc, err := v.Authenticate(t.Context(), iss.Sign(iss.Claims("carol", "lark", map[string]any{"groups": "devs"})))
	require.NoError(t, err)
	require.Equal(t, "acme", sc.TenantID)

	tok := iss.Sign(iss.Claims("carol", "lark", map[string]any{"tenant": "globex", "groups": "devs"}))
	_, err = v.Authenticate(t.Context(), tok)
	requireUnauthorized(t, err, tok, "another tenant")

	// Operator groups are ignored for a tenant-owned issuer even if they were stored.
	p.OperatorGroups = []string{"devs"}
	v = newVerifier(t, iss, p)
	sc, err = v.Authenticate(t.Context(), iss.Sign(iss.Claims("carol", "lark", map[string]any{"groups": "devs"})))
	require.NoError(t, err)
	require.False(t, sc.Operator)
	require.Equal(t, "acme", sc.TenantID)
}

// TestKeyRotationWithoutFailures rotates the signing key while requests run: the new key is
// published, then used, then the old one withdrawn; no request fails.
func TestKeyRotationWithoutFailures(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	v := newVerifier(t, iss, platformProvider(iss))
	claims := iss.Claims("alice", "lark", map[string]any{"tenant": "acme", "groups": "devs"})
	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := v.Authenticate(context.Background(), iss.Sign(claims)); err != nil {
					failed.Add(1)
					t.Error(err)
				} else {
					ok.Add(1)
				}
			}
		})
	}
	waitFor := func(n int64) {
		deadline := time.Now().Add(10 * time.Second)
		for start := ok.Load(); ok.Load() < start+n; {
			require.True(t, time.Now().Before(deadline), "requests stalled")
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(20)
	old := "key-1"
	for _, kind := range []string{"EC", "RSA"} {
		next := iss.AddKey(kind)
		iss.UseKey(next)
		waitFor(20)
		iss.RemoveKey(old)
		waitFor(20)
		old = next
	}
	close(stop)
	wg.Wait()
	require.Zero(t, failed.Load())
	require.LessOrEqual(t, iss.JWKSHits.Load(), int64(1+oidcauth.UnknownKidBurst), "refreshes beyond the rotations")
}

// TestUnknownKidRefreshesAreBounded: a flood of tokens with made-up kids costs the issuer a few
// JWKS requests, not one each.
func TestUnknownKidRefreshesAreBounded(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	v := newVerifier(t, iss, platformProvider(iss))
	claims := iss.Claims("alice", "lark", map[string]any{"tenant": "acme", "groups": "devs"})
	for range 30 {
		_, err := v.Authenticate(t.Context(), iss.SignWith(iss.NewKey("EC"), claims))
		require.Error(t, err)
	}
	require.LessOrEqual(t, iss.JWKSHits.Load(), int64(1+oidcauth.UnknownKidBurst))
	_, err := v.Authenticate(t.Context(), iss.Sign(claims))
	require.NoError(t, err, "the known key still verifies")
	require.Equal(t, int64(1), iss.DiscoveryHits.Load(), "discovery is done once")
}

func TestUnreachableIssuerIsUnavailable(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	p := platformProvider(iss)
	v := oidcauth.New(source{p.Issuer: p}, oidcauth.Options{}) // the default client does not trust the test CA
	_, err := v.Authenticate(t.Context(), iss.Sign(iss.Claims("alice", "lark", map[string]any{"tenant": "acme", "groups": "devs"})))
	var pe *problem.Error
	require.True(t, errors.As(err, &pe))
	require.Equal(t, http.StatusServiceUnavailable, pe.Status)
}

func TestPublicClientRefusesLoopback(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	p := platformProvider(iss)
	p.TenantID = "acme"
	v := oidcauth.New(source{p.Issuer: p}, oidcauth.Options{Client: iss.Client()}) // tenant issuers: public only
	_, err := v.Authenticate(t.Context(), iss.Sign(iss.Claims("alice", "lark", map[string]any{"groups": "devs"})))
	var pe *problem.Error
	require.True(t, errors.As(err, &pe))
	require.Equal(t, http.StatusServiceUnavailable, pe.Status)
	require.Zero(t, iss.DiscoveryHits.Load())
}

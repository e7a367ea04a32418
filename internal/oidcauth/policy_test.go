package oidcauth_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/oidcauth"
	"github.com/larkrun/lark/internal/oidctest"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// policySource serves fixed providers and tenant policies the test changes, counting the policy
// reads.
type policySource struct {
	source
	mu      sync.Mutex
	allow   map[string]bool // tenant -> allow_tenant_identity_providers; absent: no policy record
	tenantN int
}

func (s *policySource) Tenant(_ context.Context, id string) (tenant.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenantN++
	allow, ok := s.allow[id]
	if !ok {
		return tenant.Policy{}, store.ErrNotFound
	}
	var pol tenant.Policy
	pol.TenantID = id
	pol.Policies.AllowTenantIdentityProviders = allow
	return pol, nil
}

func (s *policySource) set(id string, allow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allow[id] = allow
}

func (s *policySource) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tenantN
}

// tenantProvider is a provider of tenantID's that by registered ("": stored before RegisteredBy
// existed).
func tenantProvider(iss *oidctest.Issuer, tenantID string, by identity.Registrar) identity.Provider {
	p := identity.Provider{ID: "idp_" + tenantID, TenantID: tenantID, Issuer: iss.URL, Audiences: []string{"lark"},
		Claims: identity.Claims{Roles: "groups"}, RoleMapping: map[string]auth.Role{"devs": auth.RoleDeveloper},
		RegisteredBy: by}
	p.Normalize()
	return p
}

// TestTenantPolicyOffRefusesTenantIssuers: once the operator turns the tenant's
// allow_tenant_identity_providers off, the tokens of the issuer its admin registered are 401 within
// the provider cache TTL; a platform issuer is unaffected; turning it back on makes the same token work again. The
// policy is read with the provider, once per TTL.
func TestTenantPolicyOffRefusesTenantIssuers(t *testing.T) {
	t.Parallel()
	platform, own := oidctest.New(t), oidctest.New(t)
	src := &policySource{source: source{}, allow: map[string]bool{"acme": true}}
	src.source[platform.URL] = platformProvider(platform)
	src.source[own.URL] = tenantProvider(own, "acme", identity.RegisteredByTenantAdmin)
	clk := clock.NewFake(time.Now())
	v := oidcauth.New(src, oidcauth.Options{Client: platform.Client(), TenantClient: own.Client(), Clock: clk})
	ownTok := own.Sign(own.Claims("carol", "lark", map[string]any{"groups": "devs"}))
	platTok := platform.Sign(platform.Claims("alice", "lark", map[string]any{"tenant": "acme", "groups": "devs"}))
	works := func(tok string) {
		t.Helper()
		sc, err := v.Authenticate(t.Context(), tok)
		require.NoError(t, err)
		require.Equal(t, "acme", sc.TenantID)
	}

	works(ownTok)
	works(platTok)
	src.set("acme", false)
	works(ownTok) // cached with the provider until the TTL passes
	require.Equal(t, 1, src.reads(), "the policy is read with the provider, not on every request")

	clk.Advance(5 * time.Second)
	_, err := v.Authenticate(t.Context(), ownTok)
	requireUnauthorized(t, err, ownTok, "the tenant's policy no longer allows its own identity providers")
	works(platTok)
	require.Equal(t, 2, src.reads(), "a platform issuer reads no tenant policy")

	src.set("acme", true)
	clk.Advance(5 * time.Second)
	works(ownTok)
}

// TestTenantIssuerWithoutPolicyIsRefused: an issuer a tenant admin registered, or a tenant-owned
// one stored before RegisteredBy existed (read as a tenant admin's), signs no one in while its
// tenant has no policy record (the flag's default, off).
func TestTenantIssuerWithoutPolicyIsRefused(t *testing.T) {
	t.Parallel()
	for _, by := range []identity.Registrar{identity.RegisteredByTenantAdmin, ""} {
		name := string(by)
		if name == "" {
			name = "unrecorded"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			own := oidctest.New(t)
			src := &policySource{source: source{}, allow: map[string]bool{}}
			src.source[own.URL] = tenantProvider(own, "acme", by)
			v := oidcauth.New(src, oidcauth.Options{TenantClient: own.Client()})
			tok := own.Sign(own.Claims("carol", "lark", map[string]any{"groups": "devs"}))
			_, err := v.Authenticate(t.Context(), tok)
			requireUnauthorized(t, err, tok, "no longer allows")
			require.Zero(t, own.DiscoveryHits.Load(), "a refused issuer's keys are not fetched")
		})
	}
}

// TestOperatorTenantIssuerIgnoresPolicy: an issuer the platform operator registered for a tenant
// signs the tenant's users in whatever the tenant's flag says (off, or no policy record), and its
// tenant's policy is never read.
func TestOperatorTenantIssuerIgnoresPolicy(t *testing.T) {
	t.Parallel()
	acme, globex := oidctest.New(t), oidctest.New(t)
	src := &policySource{source: source{}, allow: map[string]bool{"acme": false}}
	src.source[acme.URL] = tenantProvider(acme, "acme", identity.RegisteredByOperator)
	src.source[globex.URL] = tenantProvider(globex, "globex", identity.RegisteredByOperator) // no policy record
	clk := clock.NewFake(time.Now())
	for _, c := range []struct {
		iss    *oidctest.Issuer
		tenant string
	}{{acme, "acme"}, {globex, "globex"}} {
		v := oidcauth.New(src, oidcauth.Options{TenantClient: c.iss.Client(), Clock: clk})
		sc, err := v.Authenticate(t.Context(), c.iss.Sign(c.iss.Claims("carol", "lark", map[string]any{"groups": "devs"})))
		require.NoError(t, err)
		require.Equal(t, c.tenant, sc.TenantID)
		require.Equal(t, []auth.Role{auth.RoleDeveloper}, sc.Roles)
	}
	require.Zero(t, src.reads(), "an operator-registered issuer reads no tenant policy")
}

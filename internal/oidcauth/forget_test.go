package oidcauth

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/oidctest"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// mutableSource serves providers the test deletes, as another node would.
type mutableSource struct {
	mu sync.Mutex
	ps map[string]identity.Provider
}

func (s *mutableSource) IdentityProviderByIssuer(_ context.Context, iss string) (identity.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.ps[iss]
	if !ok {
		return p, store.ErrNotFound
	}
	return p, nil
}

func (s *mutableSource) Tenant(context.Context, string) (tenant.Policy, error) {
	return tenant.Policy{}, store.ErrNotFound
}

func (s *mutableSource) delete(iss string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ps, iss)
}

func testProvider(id string, iss *oidctest.Issuer) identity.Provider {
	p := identity.Provider{ID: id, Issuer: iss.URL, Audiences: []string{"lark"},
		Claims:      identity.Claims{Tenant: "tenant", Roles: "groups"},
		RoleMapping: map[string]auth.Role{"devs": auth.RoleDeveloper}}
	p.Normalize()
	return p
}

// issuers lists the issuers the verifier holds key sets of.
func (v *Verifier) issuers() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for k := range v.remotes {
		out = append(out, k.issuer)
	}
	return out
}

// TestDeletedProvidersKeySetsAreFreed: Forget (a delete on this node) and a lookup that finds the
// issuer gone (a delete on another node) both drop the issuer's key sets, and only its.
func TestDeletedProvidersKeySetsAreFreed(t *testing.T) {
	t.Parallel()
	a, b := oidctest.New(t), oidctest.New(t)
	src := &mutableSource{ps: map[string]identity.Provider{a.URL: testProvider("idp_a", a), b.URL: testProvider("idp_b", b)}}
	clk := clock.NewFake(time.Now())
	v := New(src, Options{Client: a.Client(), Clock: clk}) // httptest servers share one certificate
	claims := map[string]any{"tenant": "acme", "groups": "devs"}
	signIn := func(iss *oidctest.Issuer) error {
		_, err := v.Authenticate(t.Context(), iss.Sign(iss.Claims("alice", "lark", claims)))
		return err
	}
	require.NoError(t, signIn(a))
	require.NoError(t, signIn(b))
	require.ElementsMatch(t, []string{a.URL, b.URL}, v.issuers())

	v.Forget(a.URL)
	require.Equal(t, []string{b.URL}, v.issuers(), "Forget drops the issuer's key sets")
	v.mu.Lock()
	require.NotContains(t, v.cache, a.URL)
	v.mu.Unlock()

	src.delete(b.URL) // deleted on another node: this one still has it cached, then finds it gone
	require.NoError(t, signIn(b))
	clk.Advance(5 * time.Second)
	require.ErrorContains(t, signIn(b), "not a registered identity provider")
	require.Empty(t, v.issuers(), "a not-found lookup drops the issuer's key sets")
}

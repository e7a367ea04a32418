package api_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/oidctest"
	"github.com/larkrun/lark/internal/server"
)

// These tests sign in against the real OIDC provider CI starts (.ci/oidc-server: ZITADEL's OIDC
// library's provider); they skip, saying so, without LARK_TEST_OIDC_URL.

// providerEnv is a server that trusts the CI provider's certificate, on a fake clock set to now
// (the refusals move it past a token's exp and before its nbf).
func providerEnv(t *testing.T, p *oidctest.Provider) (*env, *clock.Fake) {
	clk := clock.NewFake(time.Now())
	return newEnv(t, func(c *server.Config) {
		c.IdentityClient, c.IdentityTenantClient, c.Clock = p.Client(), p.Client(), clk
	}), clk
}

// providerRegistration registers the CI provider as a platform issuer for Lark's CLI and console
// clients, with its groups mapped to roles and platform-ops to the operator.
func providerRegistration(p *oidctest.Provider) obj {
	return obj{"issuer": p.URL, "audiences": []string{"lark-cli", "lark-console"},
		"claims":          obj{"subject": "sub", "tenant": "tenant", "roles": "groups"},
		"role_mapping":    obj{"lark-devs": "developer", "lark-viewers": "viewer", "lark-admins": "admin"},
		"operator_groups": []string{"platform-ops"}}
}

// TestCIProviderSignIn: users signed in at a real provider (device grant) act for the tenant of
// their tenant claim with the roles of their groups, through the same RBAC and audit as Lark's
// own tokens; the provider's platform-ops group is the platform operator.
func TestCIProviderSignIn(t *testing.T) {
	t.Parallel()
	p := oidctest.CIProvider(t)
	e, _ := providerEnv(t, p)
	adm := e.tenant(t, "acme")
	e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", operator, providerRegistration(p))

	alice := p.DeviceLogin(t, "lark-cli", "alice")
	who := e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", alice.IDToken, nil).Body
	require.Equal(t, "acme", who["tenant_id"])
	require.Equal(t, "alice", who["subject_id"])
	require.Equal(t, []any{"developer"}, who["roles"], "lark-devs maps to developer; staff maps to nothing")
	e.expect(t, http.StatusCreated, http.MethodPost, base+"/entrypoints", alice.AccessToken, fnNamed(t, "ciprovider.made.v1~"))
	audit := e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?"+
		query("$filter", "actor_id eq 'alice'").Encode(), adm, nil).items()
	require.NotEmpty(t, audit, "the provider's subject is the actor of its changes")

	vic := p.DeviceLogin(t, "lark-cli", "vic").IDToken
	require.Equal(t, []any{"viewer"}, e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", vic, nil).Body["roles"])
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, base+"/entrypoints", vic, fnNamed(t, "ciprovider.denied.v1~"))
	e.expect(t, http.StatusOK, http.MethodGet, base+"/entrypoints", vic, nil)

	root := p.DeviceLogin(t, "lark-cli", "root").IDToken
	require.Equal(t, true, e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", root, nil).Body["platform_operator"])
	// eve's tenant, globex, is not enabled: refused as a Lark token for it would be.
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, base+"/entrypoints", p.DeviceLogin(t, "lark-cli", "eve").IDToken, nil)
	e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", adm, nil)
}

// TestCIProviderRefusals: every bad token built from the provider's real ones is a 401 problem
// that does not repeat the token.
func TestCIProviderRefusals(t *testing.T) {
	t.Parallel()
	p := oidctest.CIProvider(t)
	e, clk := providerEnv(t, p)
	e.enable(t, "acme", nil)
	e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", operator, providerRegistration(p))
	good := p.DeviceLogin(t, "lark-cli", "alice")
	e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", good.IDToken, nil)
	claims := oidctest.ClaimsOf(t, good.IDToken)
	tampered := oidctest.ClaimsOf(t, good.IDToken)
	tampered["groups"] = []string{"platform-ops"}
	stranger := oidctest.New(t)
	// refused requires a 401 for tok, whose detail names why, and that never repeats the token.
	refused := func(t *testing.T, tok, why string) {
		r := e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, base+"/whoami", tok, nil)
		require.Contains(t, r.Body["detail"], why)
		for _, part := range strings.Split(tok, ".") {
			if len(part) > 8 {
				require.NotContains(t, string(r.Raw), part, "the answer repeats the token")
			}
		}
	}
	const badSignature = "signature does not verify"
	for name, c := range map[string]struct{ tok, why string }{
		"wrong audience":  {p.DeviceLogin(t, "other-app", "alice").IDToken, "audience"},
		"wrong issuer":    {stranger.Sign(stranger.Claims("alice", "lark-cli", obj{"tenant": "acme", "groups": "lark-devs"})), "not a registered identity provider"},
		"alg none":        {oidctest.Unsigned(claims), badSignature},
		"HS256 confusion": {p.SignHS256WithPublicKey(t, claims), badSignature},
		"unknown kid":     {oidctest.SignWithUnknownKey(claims), badSignature},
		"tampered":        {oidctest.Tamper(good.IDToken, tampered), badSignature},
	} {
		t.Run(name, func(t *testing.T) { refused(t, c.tok, c.why) })
	}
	// The clock moves only after the subtests above (they run before this line returns).
	now := clk.Now()
	clk.Set(now.Add(2 * time.Hour))
	t.Run("expired", func(t *testing.T) { refused(t, good.IDToken, "expired") })
	clk.Set(now.Add(-10 * time.Minute))
	require.Contains(t, oidctest.ClaimsOf(t, good.AccessToken), "nbf")
	t.Run("not yet valid", func(t *testing.T) { refused(t, good.AccessToken, "not valid yet") })
	clk.Set(now)
	e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", good.AccessToken, nil)
}

// TestCIProviderKeyRotation: the provider rotates its signing key twice while clients keep
// calling with tokens of the old and the new keys; not one request fails.
func TestCIProviderKeyRotation(t *testing.T) {
	t.Parallel()
	p := oidctest.CIProvider(t)
	e, _ := providerEnv(t, p)
	e.enable(t, "acme", nil)
	e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", operator, providerRegistration(p))
	var current atomic.Value
	current.Store(p.DeviceLogin(t, "lark-cli", "alice").IDToken)
	old := current.Load().(string)
	var calls, failed atomic.Int64
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
				r := e.do(t, http.MethodGet, base+"/whoami", current.Load().(string), nil)
				calls.Add(1)
				if r.Status != http.StatusOK {
					failed.Add(1)
					t.Errorf("whoami during the rotation: %d %s", r.Status, r.Raw)
				}
			}
		})
	}
	for range 2 {
		kid := p.Rotate(t)
		tok := p.DeviceLogin(t, "lark-cli", "alice").IDToken
		require.Equal(t, kid, oidctest.KeyIDOf(t, tok), "the provider signs with its new key")
		current.Store(tok)
		before := calls.Load()
		require.Eventually(t, func() bool { return calls.Load() > before+20 }, 10*time.Second, 5*time.Millisecond)
	}
	close(stop)
	wg.Wait()
	require.Zero(t, failed.Load(), "requests failed during the rotation (of %d)", calls.Load())
	e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", old, nil)
}

// TestCIProviderTenantOwned: a tenant admin registers the provider as the tenant's own issuer;
// registering it for another tenant is refused, and a token whose tenant claim names another
// tenant is refused.
func TestCIProviderTenantOwned(t *testing.T) {
	t.Parallel()
	p := oidctest.CIProvider(t)
	e, _ := providerEnv(t, p)
	adm := e.tenant(t, "acme")
	e.enable(t, "globex", nil)
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"policies": obj{"allow_tenant_identity_providers": true}})
	body := obj{"issuer": p.URL, "audiences": []string{"lark-cli"}, "claims": obj{"tenant": "tenant", "roles": "groups"},
		"role_mapping": obj{"lark-devs": "developer"}}
	other := obj{"tenant_id": "globex"}
	for k, v := range body {
		other[k] = v
	}
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, base+"/identity-providers", adm, other)
	require.Equal(t, "acme", e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", adm, body).Body["tenant_id"])

	who := e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", p.DeviceLogin(t, "lark-cli", "alice").IDToken, nil).Body
	require.Equal(t, "acme", who["tenant_id"])
	r := e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, base+"/whoami", p.DeviceLogin(t, "lark-cli", "eve").IDToken, nil)
	require.Contains(t, r.Body["detail"], "another tenant")
}

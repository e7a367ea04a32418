package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/oidctest"
	"github.com/larkrun/lark/internal/server"
)

// oidcEnv is a server that trusts the in-process issuer's certificate for platform and tenant
// issuers alike (the default tenant client refuses loopback addresses).
func oidcEnv(t *testing.T, iss *oidctest.Issuer) *env {
	return newEnv(t, func(c *server.Config) {
		c.IdentityClient, c.IdentityTenantClient = iss.Client(), iss.Client()
	})
}

func platformIssuer(iss *oidctest.Issuer) obj {
	return obj{"issuer": iss.URL, "audiences": []string{"lark"},
		"claims":          obj{"subject": "sub", "tenant": "tenant", "roles": "groups"},
		"role_mapping":    obj{"lark-devs": "developer", "lark-viewers": "viewer"},
		"operator_groups": []string{"platform-ops"}}
}

// TestOIDCSignIn: a platform issuer's user token, with group claims, acts for its tenant with the
// mapped roles, through the same RBAC and audit as a Lark token; Lark's tokens keep working.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	e := oidcEnv(t, iss)
	adm := e.tenant(t, "acme")
	created := e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", operator, platformIssuer(iss)).Body
	require.Equal(t, iss.URL, created["issuer"])
	require.Equal(t, []any{"RS256", "ES256"}, created["algorithms"])

	dev := iss.Sign(iss.Claims("alice@acme", "lark", obj{"tenant": "acme", "groups": []string{"lark-devs", "other"}}))
	who := e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", dev, nil).Body
	require.Equal(t, "acme", who["tenant_id"])
	require.Equal(t, "alice@acme", who["subject_id"])
	require.Equal(t, []any{"developer"}, who["roles"])

	e.expect(t, http.StatusCreated, http.MethodPost, base+"/entrypoints", dev, fnNamed(t, "oidc.made.v1~"))
	audit := e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?"+
		query("$filter", "actor_id eq 'alice@acme'").Encode(), adm, nil).items()
	require.NotEmpty(t, audit, "the OIDC subject is the actor of its changes")

	viewer := iss.Sign(iss.Claims("vic", "lark", obj{"tenant": "acme", "groups": "lark-viewers"}))
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, base+"/entrypoints", viewer, fnNamed(t, "oidc.denied.v1~"))

	op := iss.Sign(iss.Claims("root", "lark", obj{"groups": []string{"platform-ops"}}))
	who = e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", op, nil).Body
	require.Equal(t, true, who["platform_operator"])

	// A token for a tenant that is not enabled is refused like a Lark token would be.
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, base+"/entrypoints", iss.Sign(iss.Claims("zed", "lark", obj{"tenant": "initech", "groups": "lark-devs"})), nil)
	// Lark's own tokens keep working beside it.
	e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", adm, nil)
}

// TestOIDCRefusals: every bad JWT is a 401 problem that does not repeat the token.
func TestOIDCRefusals(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	e := oidcEnv(t, iss)
	e.enable(t, "acme", nil)
	e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", operator, platformIssuer(iss))
	good := obj{"tenant": "acme", "groups": "lark-devs"}
	with := func(k string, v any) map[string]any {
		c := iss.Claims("alice", "lark", good)
		c[k] = v
		return c
	}
	stranger := oidctest.New(t)
	for name, tok := range map[string]string{
		"wrong audience":  iss.Sign(with("aud", "other")),
		"expired":         iss.Sign(with("exp", time.Now().Add(-5*time.Minute).Unix())),
		"not yet valid":   iss.Sign(with("nbf", time.Now().Add(10*time.Minute).Unix())),
		"wrong issuer":    stranger.Sign(stranger.Claims("alice", "lark", good)),
		"alg none":        oidctest.Unsigned(iss.Claims("alice", "lark", good)),
		"HS256 confusion": iss.SignHS256WithPublicKey(iss.Claims("alice", "lark", good)),
		"unknown kid":     iss.SignWith(iss.NewKey("RSA"), iss.Claims("alice", "lark", good)),
		"tampered":        oidctest.Tamper(iss.Sign(iss.Claims("alice", "lark", good)), with("groups", "platform-ops")),
	} {
		t.Run(name, func(t *testing.T) {
			r := e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, base+"/whoami", tok, nil)
			require.NotEmpty(t, r.Header.Get("WWW-Authenticate"))
			for _, part := range strings.Split(tok, ".") {
				if len(part) > 8 {
					require.NotContains(t, string(r.Raw), part, "the answer repeats the token")
				}
			}
		})
	}
}

// TestTenantOwnedIssuer: a tenant admin registers its own issuer only when the operator allowed it
// (registered_by tenant_admin, whatever the body says), and that issuer's tokens never speak for
// another tenant.
func TestTenantOwnedIssuer(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	e := oidcEnv(t, iss)
	adm := e.tenant(t, "acme")
	e.enable(t, "globex", nil)
	body := obj{"issuer": iss.URL, "audiences": []string{"lark"}, "claims": obj{"tenant": "org", "roles": "groups"},
		"role_mapping": obj{"devs": "developer"}}
	r := e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, base+"/identity-providers", adm, body)
	require.Contains(t, r.Body["detail"], "allow_tenant_identity_providers")
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"policies": obj{"allow_tenant_identity_providers": true}})
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, base+"/identity-providers", adm,
		obj{"tenant_id": "globex", "issuer": iss.URL, "audiences": []string{"lark"}, "claims": obj{}})
	withOps := obj{"issuer": iss.URL, "audiences": []string{"lark"}, "claims": obj{"roles": "groups"}, "operator_groups": []string{"devs"}}
	requireIssue(t, e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/identity-providers", adm, withOps), "$.operator_groups", "INVALID_VALUE")
	body["registered_by"] = "platform_operator" // read-only: accepted and ignored
	created := e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", adm, body).Body
	require.Equal(t, "acme", created["tenant_id"])
	require.Equal(t, "tenant_admin", created["registered_by"])

	who := e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", iss.Sign(iss.Claims("carol", "lark", obj{"groups": "devs"})), nil).Body
	require.Equal(t, "acme", who["tenant_id"])
	r = e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, base+"/whoami",
		iss.Sign(iss.Claims("carol", "lark", obj{"org": "globex", "groups": "devs"})), nil)
	require.Contains(t, r.Body["detail"], "another tenant")

	// globex's admin neither sees nor deletes it; acme's admin does.
	globex := e.token(t, "globex", "admin", "admin")
	require.Empty(t, e.expect(t, http.StatusOK, http.MethodGet, base+"/identity-providers", globex, nil).items())
	path := base + "/identity-providers/" + created["id"].(string)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, path, globex, nil)
	require.Len(t, e.expect(t, http.StatusOK, http.MethodGet, base+"/identity-providers", adm, nil).items(), 1)
	require.Equal(t, "tenant_admin", e.expect(t, http.StatusOK, http.MethodGet, path, adm, nil).Body["registered_by"])
	e.expect(t, http.StatusNoContent, http.MethodDelete, path, adm, nil)
	e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, base+"/whoami", iss.Sign(iss.Claims("carol", "lark", obj{"groups": "devs"})), nil)
	events := e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?"+
		query("$filter", "resource_type eq 'identity_provider'").Encode(), adm, nil).items()
	require.Len(t, events, 2, "created and deleted are audited")
}

// TestTenantIssuerFollowsPolicy: the operator turning the tenant's
// allow_tenant_identity_providers off stops the tokens of the issuer the tenant's admin registered
// (401) once the verifier's provider cache (5 s) has passed, while a platform issuer keeps working;
// turning it on again makes the same token work, the provider having stayed registered.
func TestTenantIssuerFollowsPolicy(t *testing.T) {
	t.Parallel()
	own, platform := oidctest.New(t), oidctest.New(t)
	clk := clock.NewFake(time.Now())
	e := newEnv(t, func(c *server.Config) {
		c.IdentityClient, c.IdentityTenantClient, c.Clock = platform.Client(), own.Client(), clk
	})
	adm := e.tenant(t, "acme")
	require.Equal(t, "platform_operator", e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", operator,
		platformIssuer(platform)).Body["registered_by"])
	setAllow := func(on bool) {
		e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"policies": obj{"allow_tenant_identity_providers": on}})
	}
	setAllow(true)
	created := e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", adm,
		obj{"issuer": own.URL, "audiences": []string{"lark"}, "claims": obj{"roles": "groups"}, "role_mapping": obj{"devs": "developer"}}).Body
	require.Equal(t, "tenant_admin", created["registered_by"])
	tok := own.Sign(own.Claims("carol", "lark", obj{"groups": "devs"}))
	platTok := platform.Sign(platform.Claims("alice", "lark", obj{"tenant": "acme", "groups": "lark-devs"}))
	require.Equal(t, "acme", e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", tok, nil).Body["tenant_id"])
	e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", platTok, nil)

	setAllow(false)
	clk.Advance(5 * time.Second)
	r := e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, base+"/whoami", tok, nil)
	require.Contains(t, r.Body["detail"], "the tenant's policy no longer allows its own identity providers")
	e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", platTok, nil)
	require.Len(t, e.expect(t, http.StatusOK, http.MethodGet, base+"/identity-providers", adm, nil).items(), 1, "the provider stays registered")

	setAllow(true)
	clk.Advance(5 * time.Second)
	require.Equal(t, "carol", e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", tok, nil).Body["subject_id"])
}

// TestOperatorTenantIssuerIgnoresPolicy: an issuer the platform operator registers with tenant_id
// for a tenant whose allow_tenant_identity_providers is off (never set, then turned on and off
// again) signs that tenant's users in: registered_by is platform_operator, and the flag is about
// tenant admins' self-service only.
func TestOperatorTenantIssuerIgnoresPolicy(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	clk := clock.NewFake(time.Now())
	e := newEnv(t, func(c *server.Config) {
		c.IdentityClient, c.IdentityTenantClient, c.Clock = iss.Client(), iss.Client(), clk
	})
	adm := e.tenant(t, "acme")
	created := e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", operator,
		obj{"tenant_id": "acme", "issuer": iss.URL, "audiences": []string{"lark"}, "claims": obj{"roles": "groups"},
			"role_mapping": obj{"devs": "developer"}, "registered_by": "tenant_admin"}).Body
	require.Equal(t, "acme", created["tenant_id"])
	require.Equal(t, "platform_operator", created["registered_by"], "set by the server, not the body")
	path := base + "/identity-providers/" + created["id"].(string)
	require.Equal(t, "platform_operator", e.expect(t, http.StatusOK, http.MethodGet, path, adm, nil).Body["registered_by"])

	tok := iss.Sign(iss.Claims("carol", "lark", obj{"groups": "devs"}))
	signsIn := func() {
		t.Helper()
		who := e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", tok, nil).Body
		require.Equal(t, "acme", who["tenant_id"])
		require.Equal(t, "carol", who["subject_id"])
	}
	signsIn() // the flag was never set: off
	for _, on := range []bool{true, false} {
		e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"policies": obj{"allow_tenant_identity_providers": on}})
		clk.Advance(5 * time.Second)
		signsIn()
	}
	// The tenant's admin sees it but may not delete it; the operator may.
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodDelete, path, adm, nil)
	e.expect(t, http.StatusOK, http.MethodGet, path, adm, nil)
	e.expect(t, http.StatusNoContent, http.MethodDelete, path, operator, nil)
}

// TestIdentityProviderValidation: every issue of a bad registration, with its JSON path; one
// provider per issuer; viewers may not read them.
func TestIdentityProviderValidation(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	e := oidcEnv(t, iss)
	e.enable(t, "acme", nil)
	r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/identity-providers", operator,
		obj{"issuer": "http://sso.example.com", "audiences": []string{}, "algorithms": []string{"HS256", "none"},
			"clock_skew_seconds": 9999, "claims": obj{}, "role_mapping": obj{"g": "root"}})
	for _, p := range []string{"$.issuer", "$.audiences", "$.algorithms[0]", "$.algorithms[1]", "$.clock_skew_seconds", "$.claims.tenant", "$.claims.roles", "$.role_mapping.g"} {
		requireIssue(t, r, p, "INVALID_VALUE")
	}
	requireIssue(t, e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/identity-providers", operator,
		obj{"issuer": iss.URL, "audiences": []string{"lark"}, "claims": obj{"tenant": "t"}, "surprise": true}), "$.surprise", "UNKNOWN_FIELD")
	e.expect(t, http.StatusCreated, http.MethodPost, base+"/identity-providers", operator, platformIssuer(iss))
	e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, base+"/identity-providers", operator, platformIssuer(iss))
	viewer := e.token(t, "acme", "vic", "viewer")
	e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, base+"/identity-providers", viewer, nil)
	list := e.expect(t, http.StatusOK, http.MethodGet, base+"/identity-providers?"+
		query("$filter", "issuer eq '"+iss.URL+"'").Encode(), operator, nil).items()
	require.Len(t, list, 1)
}

// TestIdentityProvidersFile: an issuer declared in the operator's file signs users in from the
// first request; a server whose file is invalid does not start.
func TestIdentityProvidersFile(t *testing.T) {
	t.Parallel()
	iss := oidctest.New(t)
	file := filepath.Join(t.TempDir(), "idp.json")
	raw, err := json.Marshal(obj{"identity_providers": []obj{platformIssuer(iss)}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	e := newEnv(t, func(c *server.Config) { c.IdentityClient, c.IdentityProvidersFile = iss.Client(), file })
	e.enable(t, "acme", nil)
	who := e.expect(t, http.StatusOK, http.MethodGet, base+"/whoami", iss.Sign(iss.Claims("alice", "lark", obj{"tenant": "acme", "groups": "lark-devs"})), nil).Body
	require.Equal(t, "alice", who["subject_id"])

	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"identity_providers": [{"issuer": "http://x", "audiences": ["a"], "claims": {"tenant": "t"}}]}`), 0o600))
	_, err = server.New(context.Background(), server.Config{DataDir: t.TempDir(), Store: testStore(t), IdentityProvidersFile: bad})
	require.ErrorContains(t, err, "$.identity_providers[0].issuer")
}

package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAuth covers authentication: bearer tokens, revocation, expiry, the operator token and tenant
// enablement gating every tenant token.
func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")
	list := base + "/entrypoints"

	t.Run("no token is 401 with WWW-Authenticate", func(t *testing.T) {
		r := e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, list, "", nil)
		require.True(t, strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer"), "WWW-Authenticate: %q", r.Header.Get("WWW-Authenticate"))
	})

	t.Run("bad tokens are 401", func(t *testing.T) {
		for name, h := range map[string]string{
			"unknown secret": "Bearer lark_not-a-real-token",
			"basic scheme":   "Basic " + operator,
			"empty bearer":   "Bearer ",
			"no scheme":      operator,
		} {
			t.Run(name, func(t *testing.T) {
				r := e.send(t, request{method: http.MethodGet, path: list, header: map[string]string{"Authorization": h}})
				require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r)
				require.Equal(t, "unauthorized", problemKind(r))
				require.NotEmpty(t, r.Header.Get("WWW-Authenticate"))
			})
		}
	})

	t.Run("revoked token is 401", func(t *testing.T) {
		tk := e.issue(t, "acme", "carol", "viewer")
		secret := tk["token"].(string)
		e.expect(t, http.StatusOK, http.MethodGet, list, secret, nil)
		e.expect(t, http.StatusNoContent, http.MethodDelete, base+"/tokens/"+tk["id"].(string), operator, nil)
		e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, list, secret, nil)
	})

	t.Run("expires_at in the past is rejected at creation", func(t *testing.T) {
		for _, tok := range []string{operator, adm} {
			r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/tokens", tok,
				obj{"tenant_id": "acme", "subject_id": "dave", "roles": []string{"viewer"},
					"expires_at": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)})
			requireIssue(t, r, "$.expires_at", "")
		}
	})

	t.Run("invalid token requests are 422 with every issue", func(t *testing.T) {
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/tokens", operator,
			obj{"tenant_id": "Bad!", "subject_id": "", "roles": []string{"viewer"}})
		requireIssue(t, r, "$.tenant_id", "")
		requireIssue(t, r, "$.subject_id", "")
		require.Len(t, r.errors(), 2, "%s", r)
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/tokens", operator,
			obj{"tenant_id": "acme", "subject_id": "x", "roles": []string{}})
		requireIssue(t, r, "$.roles", "")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/tokens", operator,
			obj{"tenant_id": "acme", "subject_id": "x", "roles": "admin"})
		requireIssue(t, r, "$.roles", "SCHEMA_MISMATCH")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/tokens", operator,
			obj{"tenant_id": "acme", "subject_id": "x", "roles": []string{"viewer"}, "scopes": []string{"all"}})
		requireIssue(t, r, "$.scopes", "UNKNOWN_FIELD")
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/tokens", operator,
			obj{"tenant_id": "acme", "subject_id": "x", "roles": []string{"viewer"}, "expires_at": "tomorrow"})
		require.NotEmpty(t, r.errors())
		e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/tokens", operator,
			obj{"tenant_id": "platform", "subject_id": "x", "roles": []string{"viewer"}})
	})

	t.Run("unknown role is 422", func(t *testing.T) {
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/tokens", operator,
			obj{"tenant_id": "acme", "subject_id": "x", "roles": []string{"viewer", "superuser"}})
		requireIssue(t, r, "$.roles[1]", "")
	})

	t.Run("token stops working when it expires", func(t *testing.T) {
		exp := time.Now().Add(1500 * time.Millisecond)
		r := e.expect(t, http.StatusCreated, http.MethodPost, base+"/tokens", operator,
			obj{"tenant_id": "acme", "subject_id": "erin", "roles": []string{"viewer"}, "expires_at": exp.UTC().Format(time.RFC3339Nano)})
		secret := r.Body["token"].(string)
		e.expect(t, http.StatusOK, http.MethodGet, list, secret, nil)
		time.Sleep(time.Until(exp) + 200*time.Millisecond)
		e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, list, secret, nil)
	})

	t.Run("operator token works", func(t *testing.T) {
		e.expect(t, http.StatusOK, http.MethodGet, list, operator, nil)
		e.expect(t, http.StatusOK, http.MethodGet, base+"/tokens", operator, nil)
	})

	t.Run("token of a tenant never enabled is 403", func(t *testing.T) {
		tok := e.token(t, "ghost", "gina", "admin")
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, list, tok, nil)
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, list, tok, fn(t, taxV1))
	})

	t.Run("disable then re-enable", func(t *testing.T) {
		tok := e.tenant(t, "flaky")
		ep := e.register(t, tok, fn(t, taxV1))
		p := e.expect(t, http.StatusOK, http.MethodPost, tenantPath("flaky")+":disable", operator, nil).Body
		require.Equal(t, false, p["enabled"])
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, list, tok, nil)
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, epPath(ep["id"].(string)), tok, nil)
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, list, tok, fnNamed(t, "x.y.v1~"))
		p = e.enable(t, "flaky", nil)
		require.Equal(t, true, p["enabled"])
		e.expect(t, http.StatusOK, http.MethodGet, list, tok, nil)
		got := e.expect(t, http.StatusOK, http.MethodGet, epPath(ep["id"].(string)), tok, nil).Body
		require.Equal(t, ep["id"], got["id"], "definitions survive disable/enable")
	})
}

// TestRoles covers the role ladder viewer < operator < developer < admin and tenant scoping of tokens
// and tenant policies.
func TestRoles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := e.tenant(t, "acme")
	otherAdm := e.tenant(t, "globex")
	viewer := e.token(t, "acme", "vera", "viewer")
	opr := e.token(t, "acme", "oscar", "operator")
	dev := e.token(t, "acme", "dan", "developer")
	eps := base + "/entrypoints"

	// A tenant-owned entrypoint every acme token can see.
	shared := e.register(t, adm, fn(t, taxV1))
	sharedID := shared["id"].(string)

	t.Run("read roles can read but not register or change", func(t *testing.T) {
		for name, tok := range map[string]string{"viewer": viewer, "operator": opr} {
			t.Run(name, func(t *testing.T) {
				e.expect(t, http.StatusOK, http.MethodGet, eps, tok, nil)
				e.expect(t, http.StatusOK, http.MethodGet, epPath(sharedID), tok, nil)
				e.expect(t, http.StatusOK, http.MethodGet, epPath(sharedID)+"/versions", tok, nil)
				e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, eps, tok, fnNamed(t, "roles."+name+"_f.v1~"))
				e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, eps+":validate", tok, fn(t, taxV1))
				e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPut, epPath(sharedID), tok, fn(t, taxV1))
				e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, epPath(sharedID)+":status", tok, obj{"action": "activate"})
				e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodDelete, epPath(sharedID), tok, nil)
				e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, base+"/tokens", tok,
					obj{"subject_id": "x", "roles": []string{"viewer"}})
			})
		}
	})

	t.Run("developer registers, updates, changes status and deletes but cannot manage tokens", func(t *testing.T) {
		ep := e.register(t, dev, fnNamed(t, "roles.dev_f.v1~"))
		id := ep["id"].(string)
		upd := e.expect(t, http.StatusOK, http.MethodPut, epPath(id), dev, fnNamed(t, "roles.dev_f.v1~", set("title", "Dev v2"))).Body
		require.Equal(t, "Dev v2", upd["title"])
		e.expect(t, http.StatusOK, http.MethodPost, eps+":validate", dev, fn(t, taxV1))
		e.status(t, dev, id, "activate")
		e.status(t, dev, id, "disable")
		r := e.expect(t, http.StatusOK, http.MethodDelete, epPath(id), dev, nil)
		require.Equal(t, "archived", r.Body["status"])
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, base+"/tokens", dev,
			obj{"tenant_id": "acme", "subject_id": "x", "roles": []string{"viewer"}})
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, base+"/tokens", dev, nil)
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodDelete, base+"/tokens/tok_whatever", dev, nil)
	})

	t.Run("admin manages tokens of its own tenant only", func(t *testing.T) {
		// Issue for its own tenant, explicitly and implicitly.
		r := e.expect(t, http.StatusCreated, http.MethodPost, base+"/tokens", adm,
			obj{"tenant_id": "acme", "subject_id": "newbie", "roles": []string{"viewer"}})
		require.Equal(t, "acme", r.Body["tenant_id"])
		require.True(t, strings.HasPrefix(r.Header.Get("Location"), base+"/tokens/"), "Location: %q", r.Header.Get("Location"))
		mine := r.Body
		r = e.expect(t, http.StatusCreated, http.MethodPost, base+"/tokens", adm,
			obj{"subject_id": "implicit", "roles": []string{"developer"}})
		require.Equal(t, "acme", r.Body["tenant_id"])
		e.expect(t, http.StatusOK, http.MethodGet, eps, r.Body["token"].(string), nil)

		// Not for another tenant.
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, base+"/tokens", adm,
			obj{"tenant_id": "globex", "subject_id": "spy", "roles": []string{"admin"}})

		// Listing shows only acme's tokens.
		theirs := e.issue(t, "globex", "gus", "viewer")
		r = e.expect(t, http.StatusOK, http.MethodGet, base+"/tokens?limit=200", adm, nil)
		require.NotEmpty(t, r.items())
		for _, it := range r.items() {
			require.Equal(t, "acme", it["tenant_id"], "acme's admin lists %v", it)
		}
		require.Contains(t, ids(r.items()), mine["id"])
		require.NotContains(t, ids(r.items()), theirs["id"])

		// Revoking another tenant's token: 404, and the token keeps working.
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, base+"/tokens/"+theirs["id"].(string), adm, nil)
		e.expect(t, http.StatusOK, http.MethodGet, eps, theirs["token"].(string), nil)

		// Revoking its own.
		e.expect(t, http.StatusNoContent, http.MethodDelete, base+"/tokens/"+mine["id"].(string), adm, nil)
		e.expectProblem(t, http.StatusUnauthorized, "unauthorized", http.MethodGet, eps, mine["token"].(string), nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, base+"/tokens/tok_does_not_exist", adm, nil)
	})

	t.Run("token lists never show secrets or hashes", func(t *testing.T) {
		secrets := []string{adm, otherAdm, viewer, opr, dev}
		for _, tok := range []string{adm, operator} {
			r := e.expect(t, http.StatusOK, http.MethodGet, base+"/tokens?limit=200", tok, nil)
			require.NotEmpty(t, r.items())
			for _, it := range r.items() {
				for _, k := range []string{"token", "hash", "secret", "token_hash"} {
					require.NotContains(t, it, k, "token list item has %q: %v", k, it)
				}
			}
			for _, s := range secrets {
				require.NotContains(t, string(r.Raw), s, "a token secret appears in the list")
			}
			require.NotContains(t, string(r.Raw), "lark_", "something that looks like a secret appears in the list")
		}
	})

	t.Run("tenant tokens cannot enable, disable or patch tenants", func(t *testing.T) {
		type call struct{ method, suffix string }
		calls := []call{
			{http.MethodPost, ":enable"},
			{http.MethodPost, ":disable"},
			{http.MethodPatch, ""},
		}
		for _, c := range calls {
			body := any(nil)
			if c.method == http.MethodPatch {
				body = obj{"quotas": obj{"max_definitions": 1000}}
			}
			e.expectProblem(t, http.StatusForbidden, "forbidden", c.method, tenantPath("acme")+c.suffix, adm, body)
			e.expectProblem(t, http.StatusNotFound, "not_found", c.method, tenantPath("globex")+c.suffix, adm, body)
			e.expectProblem(t, http.StatusNotFound, "not_found", c.method, tenantPath("nowhere")+c.suffix, adm, body)
		}
		// Nothing changed: acme is still enabled.
		e.expect(t, http.StatusOK, http.MethodGet, eps, adm, nil)
		e.expect(t, http.StatusOK, http.MethodGet, eps, otherAdm, nil)
	})

	t.Run("tenant policy is readable by its own admin only", func(t *testing.T) {
		p := e.expect(t, http.StatusOK, http.MethodGet, tenantPath("acme"), adm, nil).Body
		require.Equal(t, "acme", p["tenant_id"])
		require.Equal(t, true, p["enabled"])
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, tenantPath("acme"), dev, nil)
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, tenantPath("acme"), viewer, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, tenantPath("globex"), adm, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, tenantPath("globex"), dev, nil)
		e.expect(t, http.StatusOK, http.MethodGet, tenantPath("globex"), operator, nil)
	})
}

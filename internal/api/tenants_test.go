package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// body001 is 001's tenant enablement body (with a small max_definitions and a GTS adapter id).
const body001 = `{"quotas":{"max_definitions":2,"max_concurrent_executions":50,"max_memory_mb_per_execution":256},` +
	`"governance":{"allowed_runtimes":["gts.x.core.serverless.adapter.starlark.v1~"],"allowed_outbound_domains":["*.example.com"]}}`

func decode(t testing.TB, s string) obj {
	t.Helper()
	var m obj
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return m
}

// TestTenants covers tenant enablement and policy (001 folded into 000's TenantRuntimePolicy) and
// the quotas and governance it enforces at registration.
func TestTenants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	enable001 := func(t *testing.T, id string) (obj, string) {
		p := e.enable(t, id, decode(t, body001))
		return p, e.token(t, id, "admin", "admin")
	}

	t.Run("enable with 001 body answers with 000 names", func(t *testing.T) {
		p, adm := enable001(t, "t001")
		check := func(p obj) {
			require.Equal(t, "t001", p["tenant_id"])
			require.Equal(t, true, p["enabled"])
			require.NotNil(t, p["enabled_at"])
			q := p["quotas"].(obj)
			require.EqualValues(t, 256, q["max_memory_per_execution_mb"])
			require.EqualValues(t, 2, q["max_definitions"])
			require.EqualValues(t, 50, q["max_concurrent_executions"])
			require.NotContains(t, q, "max_memory_mb_per_execution", "001's name must be mapped onto 000's")
			require.NotContains(t, p, "governance", "001's governance lives under 000's policies")
			pol := p["policies"].(obj)
			require.Equal(t, []any{"*.example.com"}, pol["allowed_outbound_domains"])
			require.Equal(t, []any{starlarkAdapter}, pol["allowed_runtimes"])
			require.Contains(t, p, "retention")
		}
		check(p)
		check(e.expect(t, http.StatusOK, http.MethodGet, tenantPath("t001"), operator, nil).Body)
		check(e.expect(t, http.StatusOK, http.MethodGet, tenantPath("t001"), adm, nil).Body)

		// 001's short runtime name stands for the adapter's GTS type id.
		p = e.enable(t, "short", obj{"governance": obj{"allowed_runtimes": []string{"starlark"}}})
		require.Equal(t, []any{starlarkAdapter}, p["policies"].(obj)["allowed_runtimes"])
		e.register(t, e.token(t, "short", "admin", "admin"), fn(t, taxV1))

		// Both the 001 alias and the 000 name at once is ambiguous.
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPatch, tenantPath("short"), operator,
			obj{"governance": obj{"require_approval_for_publish": true}, "policies": obj{"require_approval_for_publish": false}})
		require.NotEmpty(t, r.errors())
	})

	t.Run("PATCH is a JSON merge patch", func(t *testing.T) {
		enable001(t, "patchy")
		p := e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("patchy"), operator,
			obj{"quotas": obj{"max_definitions": nil, "max_concurrent_executions": 100}}).Body
		q := p["quotas"].(obj)
		require.NotContains(t, q, "max_definitions", "null removes a quota")
		require.EqualValues(t, 100, q["max_concurrent_executions"])
		require.EqualValues(t, 256, q["max_memory_per_execution_mb"], "members not in the patch stay")
		require.Equal(t, []any{"*.example.com"}, p["policies"].(obj)["allowed_outbound_domains"])
		require.Equal(t, true, p["enabled"])

		p = e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("patchy"), operator,
			obj{"governance": obj{"require_approval_for_publish": true}}).Body
		pol := p["policies"].(obj)
		require.Equal(t, true, pol["require_approval_for_publish"])
		require.Equal(t, []any{"*.example.com"}, pol["allowed_outbound_domains"])

		got := e.expect(t, http.StatusOK, http.MethodGet, tenantPath("patchy"), operator, nil).Body
		require.NotContains(t, got["quotas"].(obj), "max_definitions")
		require.EqualValues(t, 100, got["quotas"].(obj)["max_concurrent_executions"])

		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPatch, tenantPath("never-enabled"), operator,
			obj{"quotas": obj{"max_definitions": 3}})
	})

	t.Run("unknown fields are 422", func(t *testing.T) {
		e.enable(t, "strict", nil)
		cases := []struct {
			name string
			body obj
			path string
		}{
			{"top level", obj{"bogus": 1}, "$.bogus"},
			{"in quotas", obj{"quotas": obj{"max_bogus": 1}}, "$.quotas.max_bogus"},
			{"in policies", obj{"policies": obj{"allow_everything": true}}, "$.policies.allow_everything"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				for _, m := range []string{":enable", ""} {
					method := http.MethodPost
					if m == "" {
						method = http.MethodPatch
					}
					r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", method, tenantPath("strict")+m, operator, c.body)
					requireIssue(t, r, c.path, "")
				}
			})
		}
	})

	t.Run("bad values are 422 with paths and change nothing", func(t *testing.T) {
		e.enable(t, "picky", nil)
		before := e.expect(t, http.StatusOK, http.MethodGet, tenantPath("picky"), operator, nil).Body
		cases := []struct {
			name  string
			body  obj
			paths []string
		}{
			{"dedup window 10", obj{"idempotency": obj{"deduplication_window_seconds": 10}}, []string{"$.idempotency.deduplication_window_seconds"}},
			{"upper-case domain with scheme", obj{"policies": obj{"allowed_outbound_domains": []string{"ok.example.com", "HTTP://x"}}},
				[]string{"$.policies.allowed_outbound_domains[1]"}},
			{"outbound entries that are neither host names nor addresses", obj{"policies": obj{"allowed_outbound_domains": []string{
				"93.184.216.34", "1.2.3", "10.0.0.0/8", "exa mple.com", "2606:4700::1111", "fe80::1%eth0"}}},
				[]string{"$.policies.allowed_outbound_domains[1]", "$.policies.allowed_outbound_domains[2]",
					"$.policies.allowed_outbound_domains[3]", "$.policies.allowed_outbound_domains[5]"}},
			{"runtime that is not an adapter id", obj{"policies": obj{"allowed_runtimes": []string{"python"}}}, []string{"$.policies.allowed_runtimes[0]"}},
			{"max_definitions 0", obj{"quotas": obj{"max_definitions": 0}}, []string{"$.quotas.max_definitions"}},
			{"max_definitions of the wrong type", obj{"quotas": obj{"max_definitions": "ten"}}, []string{"$.quotas.max_definitions"}},
			{"several at once", obj{"quotas": obj{"max_memory_per_execution_mb": 0}, "idempotency": obj{"deduplication_window_seconds": 10}},
				[]string{"$.quotas.max_memory_per_execution_mb", "$.idempotency.deduplication_window_seconds"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPatch, tenantPath("picky"), operator, c.body)
				for _, p := range c.paths {
					requireIssue(t, r, p, "")
				}
				require.Len(t, r.errors(), len(c.paths), "%s", r)
			})
		}
		t.Run("an outbound entry's issue names it", func(t *testing.T) {
			for entry, why := range map[string]string{"1.2.3": "host name", "10.0.0.0/8": "CIDR", "exa mple.com": "host name"} {
				r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPatch, tenantPath("picky"), operator,
					obj{"policies": obj{"allowed_outbound_domains": []string{entry}}})
				msg, _ := requireIssue(t, r, "$.policies.allowed_outbound_domains[0]", "INVALID_VALUE")["message"].(string)
				require.Contains(t, msg, `"`+entry+`"`, "%s", r)
				require.Contains(t, msg, why, "%s", r)
			}
		})
		after := e.expect(t, http.StatusOK, http.MethodGet, tenantPath("picky"), operator, nil).Body
		require.Equal(t, before, after)
	})

	t.Run("enable, disable and re-enable keep the policy", func(t *testing.T) {
		enable001(t, "cycle")
		e.expect(t, http.StatusOK, http.MethodPost, tenantPath("cycle")+":disable", operator, nil)
		p := e.expect(t, http.StatusOK, http.MethodGet, tenantPath("cycle"), operator, nil).Body
		require.Equal(t, false, p["enabled"])
		require.NotNil(t, p["disabled_at"])
		p = e.enable(t, "cycle", nil)
		require.Equal(t, true, p["enabled"])
		require.Nil(t, p["disabled_at"])
		require.EqualValues(t, 2, p["quotas"].(obj)["max_definitions"])
		require.Equal(t, []any{"*.example.com"}, p["policies"].(obj)["allowed_outbound_domains"])
	})

	t.Run("unknown tenants are 404 and failed enables create nothing", func(t *testing.T) {
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, tenantPath("never")+":disable", operator, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, tenantPath("never"), operator, nil)
		e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, tenantPath("halfway")+":enable", operator, obj{"bogus": true})
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, tenantPath("halfway"), operator, nil)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPatch, tenantPath("cycle"), operator, "")
	})

	t.Run("invalid tenant ids are 422", func(t *testing.T) {
		for _, id := range []string{"Bad!", "platform", "-dash", "UPPER"} {
			e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, tenantPath(id)+":enable", operator, nil)
		}
	})

	t.Run("max_definitions quota", func(t *testing.T) {
		_, adm := enable001(t, "quota")
		e.register(t, adm, fnNamed(t, "quota.one.v1~"))
		second := e.register(t, adm, fnNamed(t, "quota.two.v1~"))
		r := e.expectProblem(t, http.StatusTooManyRequests, "quota_exceeded", http.MethodPost, base+"/entrypoints", adm, fnNamed(t, "quota.three.v1~"))
		require.Contains(t, r.Body["detail"], "2")
		require.Equal(t, "max_definitions", r.Body["quota"])
		require.NotEmpty(t, r.Header.Get("Retry-After"), "429 carries Retry-After")
		require.Equal(t, r.Header.Get("Retry-After"), fmt.Sprint(r.Body["retry_after_seconds"]))
		// Hard-deleting a draft frees a slot, and so does archiving.
		e.expect(t, http.StatusNoContent, http.MethodDelete, epPath(second["id"].(string)), adm, nil)
		third := e.registerActive(t, adm, fnNamed(t, "quota.three.v1~"))
		e.expectProblem(t, http.StatusTooManyRequests, "quota_exceeded", http.MethodPost, base+"/entrypoints", adm, fnNamed(t, "quota.four.v1~"))
		e.expect(t, http.StatusOK, http.MethodDelete, epPath(third["id"].(string)), adm, nil)
		e.register(t, adm, fnNamed(t, "quota.four.v1~"))
		// Raising the quota makes room.
		e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("quota"), operator, obj{"quotas": obj{"max_definitions": 3}})
		e.register(t, adm, fnNamed(t, "quota.five.v1~"))
	})

	t.Run("memory_mb above the tenant quota", func(t *testing.T) {
		_, adm := enable001(t, "memq")
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", adm,
			fn(t, taxV1, set("traits.limits.memory_mb", 384)))
		requireIssue(t, r, "$.traits.limits.memory_mb", "QUOTA_EXCEEDED")
		ep := e.register(t, adm, fn(t, taxV1, set("traits.limits.memory_mb", 256)))
		id := ep["id"].(string)
		// PUT is held to the same quota.
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPut, epPath(id), adm,
			fn(t, taxV1, set("traits.limits.memory_mb", 384)))
		requireIssue(t, r, "$.traits.limits.memory_mb", "QUOTA_EXCEEDED")
		// Lowering the quota under a stored draft blocks its activation.
		e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("memq"), operator, obj{"quotas": obj{"max_memory_mb_per_execution": 128}})
		r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, epPath(id)+":status", adm, obj{"action": "activate"})
		requireIssue(t, r, "$.traits.limits.memory_mb", "QUOTA_EXCEEDED")
	})

	t.Run("require_approval_for_publish makes activation admin-only", func(t *testing.T) {
		e.enable(t, "approvals", obj{"governance": obj{"require_approval_for_publish": true}})
		adm := e.token(t, "approvals", "admin", "admin")
		dev := e.token(t, "approvals", "dana", "developer")
		ep := e.register(t, dev, fn(t, taxV1))
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, epPath(ep["id"].(string))+":status", dev, obj{"action": "activate"})
		require.Equal(t, "active", e.status(t, adm, ep["id"].(string), "activate")["status"])
	})

	t.Run("policy changes apply to stored drafts", func(t *testing.T) {
		adm := e.tenant(t, "shifting")
		ep := e.register(t, adm, fn(t, taxV1))
		id := ep["id"].(string)
		e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("shifting"), operator,
			obj{"policies": obj{"allowed_runtimes": []string{"gts.x.core.serverless.adapter.lambda.v1~"}}})
		v := e.expect(t, http.StatusOK, http.MethodPost, epPath(id)+":validate", adm, nil).Body
		require.Equal(t, false, v["valid"], "%v", v)
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, epPath(id)+":status", adm, obj{"action": "activate"})
		requireIssue(t, r, "$.implementation.adapter", "")
		require.Equal(t, "draft", e.expect(t, http.StatusOK, http.MethodGet, epPath(id), adm, nil).Body["status"])
	})

	t.Run("adapter not in allowed_runtimes", func(t *testing.T) {
		e.enable(t, "lambdaonly", obj{"policies": obj{"allowed_runtimes": []string{"gts.x.core.serverless.adapter.lambda.v1~"}}})
		adm := e.token(t, "lambdaonly", "admin", "admin")
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, base+"/entrypoints", adm, fn(t, taxV1))
		requireIssue(t, r, "$.implementation.adapter", "POLICY_VIOLATION")
	})
}

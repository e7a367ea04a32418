package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func policyPath(id string) string { return base + "/tenants/" + id + "/runtime-policy" }

// TestRuntimePolicy covers 000's Tenant Runtime Policy API: GET for the tenant's admin and the
// operator, PUT (a whole policy; the operator only), validation, and that a PUT is enforced.
func TestRuntimePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	full := func(id string, enabled bool) obj {
		return obj{"tenant_id": id, "enabled": enabled,
			"quotas":    obj{"max_concurrent_executions": 5, "max_definitions": 1, "max_memory_per_execution_mb": 256},
			"retention": obj{"execution_history_days": 3, "audit_log_days": 30},
			"policies":  obj{"allowed_runtimes": []string{starlarkAdapter}, "allowed_outbound_domains": []string{"api.example.com"}},
			"fairness":  obj{"weight": 2.5}}
	}

	t.Run("PUT provisions and replaces; GET reads it", func(t *testing.T) {
		p := e.expect(t, http.StatusOK, http.MethodPut, policyPath("pol"), operator, full("pol", true)).Body
		require.Equal(t, true, p["enabled"])
		require.NotNil(t, p["enabled_at"])
		require.EqualValues(t, 5, p["quotas"].(obj)["max_concurrent_executions"])
		require.EqualValues(t, 3, p["retention"].(obj)["execution_history_days"])
		require.EqualValues(t, 2.5, p["fairness"].(obj)["weight"])
		require.EqualValues(t, 86400, p["idempotency"].(obj)["deduplication_window_seconds"], "sections left out take their defaults")
		require.EqualValues(t, 30, p["defaults"].(obj)["timeout_seconds"])

		adm := e.token(t, "pol", "admin", "admin")
		got := e.expect(t, http.StatusOK, http.MethodGet, policyPath("pol"), adm, nil).Body
		require.Equal(t, p, got, "the tenant's admin reads its own policy")
		require.Equal(t, p, e.expect(t, http.StatusOK, http.MethodGet, tenantPath("pol"), operator, nil).Body)

		// Replace: what the body leaves out goes back to its default (a quota left out is no limit).
		body := full("pol", true)
		body["quotas"] = obj{"max_definitions": 2}
		delete(body, "fairness")
		body["created_at"] = "1999-01-01T00:00:00Z" // read-only: ignored
		p = e.expect(t, http.StatusOK, http.MethodPut, policyPath("pol"), operator, body).Body
		require.Equal(t, obj{"max_definitions": float64(2)}, p["quotas"])
		require.EqualValues(t, 1, p["fairness"].(obj)["weight"])
		require.Equal(t, got["created_at"], p["created_at"])
		require.Equal(t, got["enabled_at"], p["enabled_at"], "still enabled: enabled_at unchanged")

		// enabled false disables (definitions are kept, 403 on use).
		p = e.expect(t, http.StatusOK, http.MethodPut, policyPath("pol"), operator, full("pol", false)).Body
		require.Equal(t, false, p["enabled"])
		require.NotNil(t, p["disabled_at"])
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, base+"/entrypoints", adm, fn(t, taxV1))
		e.expect(t, http.StatusOK, http.MethodPut, policyPath("pol"), operator, full("pol", true))
		e.register(t, adm, fn(t, taxV1))
		// The PUT's quotas bite: max_definitions 1.
		e.expectProblem(t, http.StatusTooManyRequests, "quota_exceeded", http.MethodPost, base+"/entrypoints", adm, fnNamed(t, "pol.two.v1~"))
	})

	t.Run("only the operator writes; other tenants see 404", func(t *testing.T) {
		e.expect(t, http.StatusOK, http.MethodPut, policyPath("mine"), operator, full("mine", true))
		e.expect(t, http.StatusOK, http.MethodPut, policyPath("theirs"), operator, full("theirs", true))
		adm := e.token(t, "mine", "admin", "admin")
		dev := e.token(t, "mine", "dev", "developer")
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPut, policyPath("mine"), adm, full("mine", true))
		e.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodGet, policyPath("mine"), dev, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, policyPath("theirs"), adm, nil)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPut, policyPath("theirs"), adm, full("theirs", true))
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, policyPath("nobody"), operator, nil)
	})

	t.Run("invalid policies are 422 naming each field and change nothing", func(t *testing.T) {
		before := e.expect(t, http.StatusOK, http.MethodPut, policyPath("strict"), operator, full("strict", true)).Body
		missing := full("strict", true)
		delete(missing, "quotas")
		delete(missing, "retention")
		cases := []struct {
			name  string
			body  obj
			paths []string
		}{
			{"required members", missing, []string{"$.quotas", "$.retention"}},
			{"another tenant's id", full("other", true), []string{"$.tenant_id"}},
			{"bad values", func() obj {
				b := full("strict", true)
				b["quotas"] = obj{"max_concurrent_executions": 0, "max_schedules": -1}
				b["retention"] = obj{"execution_history_days": 0, "audit_log_days": 90}
				b["fairness"] = obj{"weight": 0}
				return b
			}(), []string{"$.quotas.max_concurrent_executions", "$.quotas.max_schedules", "$.retention.execution_history_days", "$.fairness.weight"}},
			{"unknown member", func() obj { b := full("strict", true); b["bogus"] = 1; return b }(), []string{"$.bogus"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPut, policyPath("strict"), operator, c.body)
				for _, p := range c.paths {
					requireIssue(t, r, p, "")
				}
				require.Len(t, r.errors(), len(c.paths), "%s", r)
			})
		}
		require.Equal(t, before, e.expect(t, http.StatusOK, http.MethodGet, policyPath("strict"), operator, nil).Body)
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodPut, policyPath("strict"), operator, "[1]")
	})
}

package api_test

// Hostile request bodies: every endpoint decodes through one gate that refuses trailing data,
// invalid UTF-8 (raw bytes and escaped lone surrogates), nesting deeper than api.MaxJSONDepth and
// a member named twice; and the audit log never poisons GET /audit-events.

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/server"
)

// bodyCase is one hostile body and the answer it must get.
type bodyCase struct {
	name   string
	body   string
	status int
	kind   string
}

func hostileBodies() []bodyCase {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	return []bodyCase{
		{"two values", `{}{}`, http.StatusBadRequest, "bad_request"},
		{"closing brace after", `{}}`, http.StatusBadRequest, "bad_request"},
		{"closing bracket after", `{} ]`, http.StatusBadRequest, "bad_request"},
		{"garbage after", `{} x`, http.StatusBadRequest, "bad_request"},
		{"invalid utf-8", "{\"quotas\":{\"x\":\"\xff\xfe\"}}", http.StatusBadRequest, "bad_request"},
		{"lone surrogate", `{"quotas":{"x":"\ud800"}}`, http.StatusBadRequest, "bad_request"},
		{"too deep", `{"quotas":` + deep(api.MaxJSONDepth) + `}`, http.StatusBadRequest, "bad_request"},
		{"a thousand deep", deep(1000), http.StatusBadRequest, "bad_request"},
		{"duplicate member", `{"quotas":{},"quotas":{}}`, http.StatusUnprocessableEntity, "validation"},
	}
}

func TestHostileBodiesRefusedEverywhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.tenant(t, "acme")
	targets := []struct {
		method, path, token string
	}{
		{http.MethodPatch, tenantPath("acme"), operator},
		{http.MethodPost, tenantPath("acme") + ":enable", operator},
		{http.MethodPut, base + "/tenants/acme/runtime-policy", operator},
		{http.MethodPost, base + "/tokens", operator},
		{http.MethodPost, base + "/entrypoints", tok},
		{http.MethodPost, base + "/entrypoints:validate", tok},
		{http.MethodPost, base + "/invocations", tok},
		{http.MethodPost, base + "/events", tok},
		{http.MethodPost, base + "/schedules", tok},
		{http.MethodPost, base + "/backfills", tok},
	}
	for _, c := range hostileBodies() {
		for _, tg := range targets {
			r := e.do(t, tg.method, tg.path, tg.token, c.body)
			require.Equal(t, c.status, r.Status, "%s: %s %s: %s", c.name, tg.method, tg.path, r)
			require.Equal(t, c.kind, problemKind(r), "%s: %s %s: %s", c.name, tg.method, tg.path, r)
		}
	}
	// Nothing was recorded: the audit log still renders and holds only the setup's events.
	r := e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?limit=200", operator, nil)
	for _, it := range r.items() {
		require.NotContains(t, it["type"], "tenant_policy_updated", "a refused body changed the policy: %v", it)
	}
}

func TestDepthLimitIsInclusive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant(t, "acme")
	// MaxJSONDepth levels in all (the top-level object included) pass the gate: the answer is the
	// policy's own validation, not the depth refusal.
	inner := strings.Repeat("[", api.MaxJSONDepth-1) + strings.Repeat("]", api.MaxJSONDepth-1)
	r := e.do(t, http.MethodPatch, tenantPath("acme"), operator, `{"quotas":`+inner+`}`)
	require.NotContains(t, r.String(), "nested deeper", r.String())
	r = e.do(t, http.MethodPatch, tenantPath("acme"), operator, `{"quotas":[`+inner+`]}`)
	require.Equal(t, http.StatusBadRequest, r.Status, r.String())
	require.Contains(t, r.String(), "nested deeper", r.String())
}

func TestValidEscapedReplacementCharacterIsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant(t, "acme")
	// U+FFFD written literally or as an escape is a valid character, not an encoding error.
	r := e.do(t, http.MethodPatch, tenantPath("acme"), operator, `{"policies":{"allowed_outbound_domains":["\ufffd.example.com"]}}`)
	require.NotEqual(t, http.StatusBadRequest, r.Status, r.String())
}

// TestAuditPoisonedRowStillRenders: a row whose details are not JSON (written before the writer
// validated) is rendered as a JSON string; the rest of the page is unaffected.
func TestAuditPoisonedRowStillRenders(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	dir := t.TempDir()
	e := newEnv(t, func(c *server.Config) { c.DataDir = dir })
	e.tenant(t, "acme")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "lark.db")+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(context.Background(), `INSERT INTO audit_events (id, tenant_id, type, actor_id, resource_type, resource_id, correlation_id, at, details)
		SELECT 'aud_poison', tenant_id, type, actor_id, resource_type, resource_id, correlation_id, at, '{}{}' FROM audit_events LIMIT 1`)
	require.NoError(t, err)
	r := e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?limit=200", operator, nil)
	found := false
	for _, it := range r.items() {
		if it["id"] == "aud_poison" {
			found = true
			require.Equal(t, "{}{}", it["details"], "the raw details as a JSON string")
		}
	}
	require.True(t, found, "the poisoned row is listed: %s", r)
}

// TestUsageHistoryFarEnd: an end whose bucket ends past the year 9999 is a 422 naming $.end, not a
// 500 (the range is bounded before anything is read or rendered).
func TestUsageHistoryFarEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.tenant(t, "acme")
	for _, q := range []string{"end=9999-12-31T23:59:59Z", "granularity=weekly&end=9999-12-30T00:00:00Z", "granularity=hourly&end=9999-12-31T23:00:01Z"} {
		r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodGet, base+"/tenants/acme/usage/history?"+q, tok, nil)
		requireIssue(t, r, "$.end", "INVALID_VALUE")
	}
	e.expect(t, http.StatusOK, http.MethodGet, base+"/tenants/acme/usage/history?granularity=hourly&end=9999-12-31T22:00:00Z&start=9999-12-31T00:00:00Z", tok, nil)
}

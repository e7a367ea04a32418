package api_test

// Retention through the API, on an injected clock: what a tenant sees after the retention job ran.

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/server"
)

func TestRetentionAPI(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.Clock = clk })
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	other := invTenant(t, e, "globex")
	const day = 24 * time.Hour
	// Keys deduplicate for 30 days, longer than the 7 days of history they point into.
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator,
		obj{"retention": obj{"execution_history_days": 7, "audit_log_days": 30}, "idempotency": obj{"deduplication_window_seconds": 30 * 86400}})
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("globex"), operator, obj{"retention": obj{"execution_history_days": 30}})
	fnID := e.registerActive(t, adm, invFn(t, "retention.echo.v1~", "def main(ctx, input):\n    return {\"ok\": True}\n"))["entrypoint_id"].(string)
	e.registerActive(t, other, invFn(t, "retention.echo.v1~", "def main(ctx, input):\n    return {\"ok\": True}\n"))
	wfID := e.registerActive(t, adm, wfBody(t, "retention_nap.v1~", "def main(ctx, input):\n    r_sleep(30 * 86400 * 1000)\n    return {}\n"))["entrypoint_id"].(string)

	key := map[string]string{"Idempotency-Key": "order-1"}
	done := invID(invSync(t, e, adm, fnID, obj{}, key))
	otherDone := invID(invSync(t, e, other, fnID, obj{}, nil))
	sleeping := invID(invAsync(t, e, adm, wfID, obj{}, nil))
	invWait(t, e, adm, sleeping, "suspended")
	publish(t, e, adm, http.StatusAccepted, obj{"event_id": "evt-day0", "event_type_id": paymentType})
	run := func() {
		t.Helper()
		_, err := e.srv.Retention.RunOnce(context.Background())
		require.NoError(t, err)
	}

	historyMB := func() any {
		return e.expect(t, http.StatusOK, http.MethodGet, base+"/tenants/acme/usage", adm, nil).Body["current"].(obj)["execution_history_mb"]
	}
	require.EqualValues(t, 0, historyMB(), "not measured yet")
	run()
	require.Equal(t, "succeeded", invGet(t, e, adm, done)["status"], "day 0: nothing is old")
	require.EqualValues(t, 1, historyMB(), "the finished invocation, measured by the job (a few KiB, rounded up)")

	clk.Advance(8 * day)
	run()
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/"+done, adm, nil)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/"+done+"/timeline", adm, nil)
	require.NotContains(t, invList(t, e, adm, nil), done)
	require.Equal(t, "suspended", invGet(t, e, adm, sleeping)["status"], "a workflow asleep for 30 days is in flight: kept")
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, eventsPath+"/evt-day0", adm, nil)
	require.Equal(t, "succeeded", invGet(t, e, other, otherDone)["status"], "globex keeps 30 days of history")
	// The key outlives the purged invocation it pointed at: it goes with it, and the same key
	// starts a fresh invocation instead of replaying one that is gone.
	r := invStart(t, e, adm, obj{"entrypoint_id": fnID, "mode": "sync", "params": obj{}}, key)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	require.Empty(t, r.Header.Get("Idempotency-Replayed"), "%s", r)
	require.NotEqual(t, done, invID(r.Body["record"].(obj)))

	// Audit: 30 days for acme. A change on day 8 outlives the day-0 ones.
	e.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"defaults": obj{"timeout_seconds": 20}})
	audits := func(tok string) []string {
		var types []string
		for _, ev := range e.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?limit=200", tok, nil).items() {
			types = append(types, ev["type"].(string))
		}
		return types
	}
	require.Len(t, audits(adm), 8, "enable, token, 2 patches, 2 × (register, activate)")
	clk.Advance(23 * day) // day 31
	run()
	require.Equal(t, []string{auditBase + "tenant_policy_updated.v1~"}, audits(adm), "day-0 audit events are past 30 days; day 8's is not")
	require.Len(t, audits(other), 5, "globex keeps 90 days: enable, token, patch, register, activate")
}

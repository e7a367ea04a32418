package api_test

// A schedule on one's own private entrypoint with execution_context system (the default): its runs
// could not see the entrypoint, and the refusal says so at $.execution_context instead of a bare
// 404; whoever cannot see the entrypoint still gets the 404.

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScheduleOnPrivateEntrypointSaysExecutionContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.enable(t, "acme", obj{})
	dana := e.token(t, "acme", "dana", "developer")
	erin := e.token(t, "acme", "erin", "developer")
	ep := e.registerActive(t, dana, fn(t, taxV1, del("traits.rate_limit"), del("owner")))
	require.Equal(t, "user", at(ep, "owner")["owner_type"])

	// 000's Schedule example (its read-only members are ignored).
	body := func() obj {
		return obj{"schedule_id": "sch_001", "tenant_id": "t_123", "entrypoint_id": taxV1, "name": "Daily Tax Calculation",
			"timezone": "UTC", "expression": obj{"kind": "cron", "value": "0 * * * *"}, "input_overrides": obj{"region": "EU", "invoice_id": "i", "amount": 1},
			"missed_policy": "skip", "status": "active"}
	}
	r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, schPath, dana, body())
	is := requireIssue(t, r, "$.execution_context", "ENTRYPOINT_NOT_VISIBLE")
	require.Contains(t, is["message"], `execution_context is "system"`)
	require.Contains(t, is["message"], "private to its owner")
	require.Contains(t, r.Body["detail"], `set execution_context to "user"`)
	require.Equal(t, "system", r.Body["execution_context"])

	// Another developer, who cannot see the entrypoint, learns nothing more than before.
	r = e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, schPath, erin, body())
	require.NotContains(t, r.String(), "execution_context")

	// The way out the message names works.
	b := body()
	b["execution_context"] = "user"
	e.expect(t, http.StatusCreated, http.MethodPost, schPath, dana, b)
	// And a change back to system is refused the same way.
	r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPatch, schPath+"/sch_001", dana, obj{"execution_context": "system"})
	requireIssue(t, r, "$.execution_context", "ENTRYPOINT_NOT_VISIBLE")
}

func TestTriggersOnPrivateEntrypointSayExecutionContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.enable(t, "acme", obj{})
	dana := e.token(t, "acme", "dana", "developer")
	erin := e.token(t, "acme", "erin", "developer")
	private := echoFn(t, "ctx.private.v1~")
	delete(private, "owner")
	ep := e.registerActive(t, dana, private)["entrypoint_id"].(string)

	trg := obj{"trigger_id": "t1", "event_type_id": orderType, "entrypoint_id": ep}
	r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, trgPath, dana, trg)
	is := requireIssue(t, r, "$.execution_context", "ENTRYPOINT_NOT_VISIBLE")
	require.Contains(t, is["message"], "trigger:t1")
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, trgPath, erin, trg)

	whk := obj{"webhook_trigger_id": "w1", "entrypoint_id": ep, "authentication": obj{"type": "none"}}
	r = e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, dana, whk)
	is = requireIssue(t, r, "$.execution_context", "ENTRYPOINT_NOT_VISIBLE")
	require.Contains(t, is["message"], `set execution_context to "user"`)
	e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, whkPath, erin, whk)
	whk["execution_context"] = "user"
	e.expect(t, http.StatusCreated, http.MethodPost, whkPath, dana, whk)
}

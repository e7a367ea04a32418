package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// privacySrc echoes its params, and fails when they ask for it (for :control retry).
const privacySrc = "def main(ctx, input):\n  if input.get(\"fail\"):\n    fail(\"asked to fail\")\n  return {\"secret\": input.get(\"secret\")}\n"

// TestInvocationPrivacy: invocations of a user-owned entrypoint are its owner's and their starter's
// business. Another developer or operator of the tenant gets 404 for them everywhere (get, list,
// timeline, every control action); the tenant admin sees and controls all of them; invocations of
// a shared entrypoint are visible to the subject that started them and to the owner.
func TestInvocationPrivacy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	alice := e.token(t, "acme", "alice", "developer")
	bob := e.token(t, "acme", "bob", "developer")
	olga := e.token(t, "acme", "olga", "operator")

	private := e.registerActive(t, alice, invFn(t, "privacy.secret.v1~", privacySrc, del("owner")))
	require.Equal(t, "user", private["owner"].(obj)["owner_type"])
	privID := private["entrypoint_id"].(string)
	ok := invSync(t, e, alice, privID, obj{"secret": "s3cret"}, nil)
	require.Equal(t, "succeeded", ok["status"], "%v", ok)
	failed := invSync(t, e, alice, privID, obj{"fail": true}, nil)
	require.Contains(t, []string{"failed", "dead_lettered"}, failed["status"], "%v", failed)
	queued := invAsync(t, e, alice, privID, obj{"secret": "later"}, nil) // no dispatcher: stays queued
	mine := []string{invID(ok), invID(failed), invID(queued)}

	all := query("limit", "200")
	for name, tok := range map[string]string{"another developer": bob, "an operator": olga} {
		t.Run(name+" cannot see or control them", func(t *testing.T) {
			for _, id := range mine {
				e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/"+id, tok, nil)
				e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/"+id+"/timeline", tok, nil)
			}
			list := invList(t, e, tok, all)
			for _, id := range mine {
				require.NotContains(t, list, id)
			}
			filtered := invList(t, e, tok, query("$filter", "entrypoint_id eq '"+privID+"'"))
			require.Empty(t, filtered, "a filter does not widen the list")
			for _, c := range []struct{ id, action string }{{invID(ok), "replay"}, {invID(failed), "retry"}, {invID(queued), "cancel"}} {
				r := invControl(t, e, tok, c.id, c.action)
				require.Equal(t, http.StatusNotFound, r.Status, "%s %s: %s", c.action, c.id, r)
				require.Equal(t, "not_found", problemKind(r), "%s", r)
			}
			require.Equal(t, "queued", invGet(t, e, alice, invID(queued))["status"], "the cancel did nothing")
			require.Len(t, invList(t, e, alice, all), 3, "the replay created nothing")
		})
	}

	t.Run("the owner sees them", func(t *testing.T) {
		require.Equal(t, "s3cret", invGet(t, e, alice, invID(ok))["result"].(obj)["secret"])
		items, _ := invTimeline(t, e, alice, invID(ok))
		require.NotEmpty(t, items)
		require.ElementsMatch(t, mine, invList(t, e, alice, all))
	})

	t.Run("the tenant admin sees and controls them", func(t *testing.T) {
		require.Equal(t, obj{"secret": "s3cret"}, invGet(t, e, adm, invID(ok))["params"])
		items, _ := invTimeline(t, e, adm, invID(ok))
		require.NotEmpty(t, items)
		require.Subset(t, invList(t, e, adm, all), mine)
		r := invControl(t, e, adm, invID(ok), "replay")
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
		replay := invID(r.Body)
		require.Equal(t, obj{"secret": "s3cret"}, invGet(t, e, alice, replay)["params"], "the owner sees the admin's replay of her invocation")
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/"+replay, bob, nil)
		r = invControl(t, e, adm, invID(failed), "retry")
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		r = invControl(t, e, adm, invID(queued), "cancel")
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		require.Equal(t, "canceled", r.Body["status"])
	})

	t.Run("the owner controls them", func(t *testing.T) {
		r := invControl(t, e, alice, invID(ok), "replay")
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
		r = invControl(t, e, alice, invID(r.Body), "cancel")
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
	})

	t.Run("shared entrypoint: each caller sees its own invocations, the owner all", func(t *testing.T) {
		shared := e.registerActive(t, alice, invFn(t, "privacy.shared.v1~", privacySrc, del("owner"), set("shared", true)))
		id := shared["entrypoint_id"].(string)
		byAlice := invSync(t, e, alice, id, obj{"secret": "alice's"}, nil)
		byBob := invSync(t, e, bob, id, obj{"secret": "bob's"}, nil)
		require.Equal(t, "bob's", invGet(t, e, bob, invID(byBob))["result"].(obj)["secret"])
		items, _ := invTimeline(t, e, bob, invID(byBob))
		require.NotEmpty(t, items)
		e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/"+invID(byAlice), bob, nil)
		r := invControl(t, e, bob, invID(byAlice), "replay")
		require.Equal(t, http.StatusNotFound, r.Status, "%s", r)
		onShared := query("$filter", "entrypoint_id eq '"+id+"'")
		require.Equal(t, []string{invID(byBob)}, invList(t, e, bob, onShared))
		require.ElementsMatch(t, []string{invID(byAlice), invID(byBob)}, invList(t, e, alice, onShared))
		require.ElementsMatch(t, []string{invID(byAlice), invID(byBob)}, invList(t, e, adm, onShared))
		require.Empty(t, invList(t, e, olga, onShared))
	})

	t.Run("tenant-owned entrypoint: everyone in the tenant sees its invocations", func(t *testing.T) {
		team := e.registerActive(t, adm, invFn(t, "privacy.team.v1~", privacySrc))
		rec := invSync(t, e, bob, team["entrypoint_id"].(string), obj{"secret": "team"}, nil)
		require.Equal(t, "team", invGet(t, e, alice, invID(rec))["result"].(obj)["secret"])
		require.Contains(t, invList(t, e, olga, all), invID(rec))
	})
}

// TestSchedulePrivacy: a schedule whose runs have its creator's identity (execution_context user)
// is its creator's: others get 404 when it targets the creator's private entrypoint (they may not
// know it exists) and 403 otherwise, for trigger, patch, put, pause, resume and delete; the tenant
// admin may do everything.
func TestSchedulePrivacy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	alice := e.token(t, "acme", "alice", "developer")
	bob := e.token(t, "acme", "bob", "developer")
	olga := e.token(t, "acme", "olga", "operator")
	private := e.registerActive(t, alice, invFn(t, "privacy.sched_secret.v1~", privacySrc, del("owner")))
	team := e.registerActive(t, adm, invFn(t, "privacy.sched_team.v1~", privacySrc))
	mk := func(id, ep string) {
		e.expect(t, http.StatusCreated, http.MethodPost, schPath, alice, obj{"schedule_id": id, "entrypoint_id": ep,
			"expression": obj{"kind": "cron", "value": "0 2 * * *"}, "execution_context": "user",
			"input_overrides": obj{"secret": "nightly"}})
	}
	mk("alice-private", private["entrypoint_id"].(string))
	mk("alice-team", team["entrypoint_id"].(string))

	scheduleIDs := func(tok string) []string {
		out := []string{}
		for _, it := range e.expect(t, http.StatusOK, http.MethodGet, schPath+"?limit=200", tok, nil).items() {
			out = append(out, it["schedule_id"].(string))
		}
		return out
	}
	type call struct {
		method, path string
		body         any
	}
	allCalls := func(id string) []call {
		return []call{
			{http.MethodPost, schPath + "/" + id + ":trigger", obj{"params_override": obj{"secret": "mine now"}}},
			{http.MethodPatch, schPath + "/" + id, obj{"input_overrides": obj{"secret": "changed"}}},
			{http.MethodPut, schPath + "/" + id, obj{"entrypoint_id": team["entrypoint_id"], "expression": obj{"kind": "cron", "value": "0 3 * * *"}, "execution_context": "user"}},
			{http.MethodPost, schPath + "/" + id + ":pause", nil},
			{http.MethodPost, schPath + "/" + id + ":resume", nil},
			{http.MethodDelete, schPath + "/" + id, nil},
		}
	}
	calls := allCalls
	for name, tok := range map[string]string{"another developer": bob, "an operator": olga} {
		t.Run(name, func(t *testing.T) {
			calls := calls
			if tok == olga {
				calls = func(id string) []call { return allCalls(id)[:1] } // an operator may only trigger (the rest needs developer)
			}
			// On alice's private entrypoint: the schedule does not exist for them.
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, schPath+"/alice-private", tok, nil)
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, schPath+"/alice-private/history", tok, nil)
			require.NotContains(t, scheduleIDs(tok), "alice-private")
			require.Contains(t, scheduleIDs(tok), "alice-team")
			for _, c := range calls("alice-private") {
				e.expectProblem(t, http.StatusNotFound, "not_found", c.method, c.path, tok, c.body)
			}
			// On a tenant entrypoint: visible, not theirs to run or change.
			e.expect(t, http.StatusOK, http.MethodGet, schPath+"/alice-team", tok, nil)
			for _, c := range calls("alice-team") {
				e.expectProblem(t, http.StatusForbidden, "forbidden", c.method, c.path, tok, c.body)
			}
		})
	}
	// Nothing ran and nothing changed.
	require.Empty(t, invList(t, e, adm, query("limit", "200")))
	got := e.expect(t, http.StatusOK, http.MethodGet, schPath+"/alice-team", alice, nil).Body
	require.Equal(t, obj{"secret": "nightly"}, got["input_overrides"])
	require.Equal(t, "active", got["status"])

	t.Run("the creator and the admin", func(t *testing.T) {
		for _, tok := range []string{alice, adm} {
			tr := e.expect(t, http.StatusAccepted, http.MethodPost, schPath+"/alice-private:trigger", tok, obj{"params_override": obj{"secret": "now"}}).Body
			run := tr["invocation"].(obj)["invocation_id"].(string)
			require.Equal(t, obj{"secret": "now"}, invGet(t, e, alice, run)["params"], "a trigger runs as the schedule's creator")
			e.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, invPath+"/"+run, bob, nil)
		}
		e.expect(t, http.StatusOK, http.MethodGet, schPath+"/alice-private", adm, nil)
		require.Contains(t, scheduleIDs(adm), "alice-private")
		e.expect(t, http.StatusOK, http.MethodPatch, schPath+"/alice-team", adm, obj{"input_overrides": obj{"secret": "admin's"}})
		e.expect(t, http.StatusOK, http.MethodPost, schPath+"/alice-private:pause", alice, nil)
		e.expect(t, http.StatusOK, http.MethodDelete, schPath+"/alice-private", adm, nil)
		e.expect(t, http.StatusOK, http.MethodDelete, schPath+"/alice-team", adm, nil)
	})
}

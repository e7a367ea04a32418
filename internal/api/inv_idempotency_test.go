package api_test

// An Idempotency-Key stands for one request (entrypoint id, mode, canonical params): a cached
// result is served only to that request, and the same key with another request is 422
// IDEMPOTENCY_KEY_REUSED whether or not the entrypoint caches its results.

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIdempotencyKeyBindsTheRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	src := "def main(ctx, input):\n  return {\"x\": input.x, \"inv\": ctx.invocation_id}\n"
	cachedFn := e.registerActive(t, adm, invFn(t, "idem.cached.v1~", src,
		set("traits.is_idempotent", true), set("traits.caching", obj{"max_age_seconds": 60})))["entrypoint_id"].(string)
	plainFn := e.registerActive(t, adm, invFn(t, "idem.plain.v1~", src))["entrypoint_id"].(string)
	body := func(id string, x int) obj { return obj{"entrypoint_id": id, "mode": "sync", "params": obj{"x": x}} }
	reused := func(t *testing.T, r *resp) {
		t.Helper()
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r)
		require.Equal(t, "validation", problemKind(r), "%s", r)
		requireIssue(t, r, "$", "IDEMPOTENCY_KEY_REUSED")
	}

	t.Run("caching on", func(t *testing.T) {
		key := map[string]string{"Idempotency-Key": "idem-cached"}
		first, r := invCall(t, e, adm, http.StatusOK, body(cachedFn, 1), key)
		require.Equal(t, false, r.Body["cached"])
		require.Equal(t, "succeeded", first["status"], "%v", first)
		require.Equal(t, obj{"x": 1.0, "inv": invID(first)}, first["result"])

		// Another request with the key is refused, not handed the first one's cached result.
		reused(t, invStart(t, e, adm, body(cachedFn, 2), key))
		reused(t, invStart(t, e, adm, obj{"entrypoint_id": cachedFn, "mode": "async", "params": obj{"x": 1}}, key))

		again, r := invCall(t, e, adm, http.StatusOK, body(cachedFn, 1), key)
		require.Equal(t, true, r.Body["cached"], "%s", r)
		require.Equal(t, first, again, "the same request gets the cached result")
		require.Len(t, invList(t, e, adm, query("$filter", "entrypoint_id eq '"+cachedFn+"'")), 1)
	})

	t.Run("caching off", func(t *testing.T) {
		key := map[string]string{"Idempotency-Key": "idem-plain"}
		first, r := invCall(t, e, adm, http.StatusOK, body(plainFn, 1), key)
		require.Equal(t, false, r.Body["cached"])
		require.Equal(t, "succeeded", first["status"], "%v", first)

		reused(t, invStart(t, e, adm, body(plainFn, 2), key))

		again, r := invCall(t, e, adm, http.StatusOK, body(plainFn, 1), key)
		require.Equal(t, false, r.Body["cached"], "%s", r)
		require.Equal(t, "true", r.Header.Get("Idempotency-Replayed"), "%s", r)
		require.Equal(t, invID(first), invID(again), "the same invocation is replayed")
		require.Equal(t, first["result"], again["result"])
		require.Len(t, invList(t, e, adm, query("$filter", "entrypoint_id eq '"+plainFn+"'")), 1)
	})
}

package api_test

// 002's webhook-trigger request as written (only the README's definition_id → entrypoint_id
// mapping applied): its trigger_id, enabled and authentication.secret_ref are aliases of Lark's
// webhook_trigger_id, status and secret (docs/webhooks.md, "002's member names").

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// spec002Webhook is 002's "Create Webhook Trigger" request with definition_id mapped.
func spec002Webhook() obj {
	return obj{
		"trigger_id":      "github-push-handler",
		"entrypoint_id":   hookFn,
		"authentication":  obj{"type": "hmac_sha256", "secret_ref": "github_webhook_secret"},
		"allowed_sources": []any{"192.30.252.0/22", "185.199.108.0/22", "127.0.0.1/32", "::1/128"},
		"enabled":         true,
	}
}

func TestWebhook002MemberNames(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	invDispatcher(t, w.env)
	const value = "gh-shared-secret-0123456789abcdef"
	w.expect(t, http.StatusCreated, http.MethodPost, base+"/secrets", w.adm,
		obj{"name": "github_webhook_secret", "value": value, "allowed_hosts": []any{"github.com"}})

	created := w.expect(t, http.StatusCreated, http.MethodPost, whkPath, w.adm, spec002Webhook()).Body
	require.Equal(t, "github-push-handler", created["webhook_trigger_id"], "%v", created)
	require.Equal(t, "active", created["status"])
	require.Equal(t, "X-Hub-Signature-256", at(created, "authentication")["header"])
	require.NotContains(t, created, "secret", "a tenant secret's value is never shown back")
	require.NotContains(t, string(w.expect(t, http.StatusOK, http.MethodGet, whkPath+"/github-push-handler", w.adm, nil).Raw), value)

	// The trigger verifies with the tenant secret's value.
	body := `{"ref":"refs/heads/main"}`
	r := w.deliver(t, "github-push-handler", body, github(value, body))
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	r = w.deliver(t, "github-push-handler", body, github("not-the-secret-0123456789", body))
	require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r)

	// enabled is status on PATCH and PUT too.
	p := w.expect(t, http.StatusOK, http.MethodPatch, whkPath+"/github-push-handler", w.adm, obj{"enabled": false}).Body
	require.Equal(t, "disabled", p["status"], "%v", p)
	put := spec002Webhook()
	delete(put, "trigger_id")
	delete(at(put, "authentication"), "secret_ref")
	put["enabled"] = true
	p = w.expect(t, http.StatusOK, http.MethodPut, whkPath+"/github-push-handler", w.adm, put).Body
	require.Equal(t, "active", p["status"], "%v", p)
}

func TestWebhook002MemberNamesRefused(t *testing.T) {
	t.Parallel()
	w := newWhkEnv(t)
	w.expect(t, http.StatusCreated, http.MethodPost, base+"/secrets", w.adm,
		obj{"name": "short", "value": "abcd", "allowed_hosts": []any{"github.com"}})
	cases := []struct {
		name, path string
		mod        func(obj)
	}{
		{"no such secret", "$.authentication.secret_ref", func(b obj) { at(b, "authentication")["secret_ref"] = "missing" }},
		{"value too short for a webhook secret", "$.authentication.secret_ref", func(b obj) { at(b, "authentication")["secret_ref"] = "short" }},
		{"secret and secret_ref", "$.authentication.secret_ref", func(b obj) { b["secret"] = "whsec_0123456789abcdef0123" }},
		{"trigger_id disagrees", "$.trigger_id", func(b obj) { b["webhook_trigger_id"] = "other" }},
		{"enabled disagrees", "$.enabled", func(b obj) { b["status"] = "active"; b["enabled"] = false }},
	}
	for _, c := range cases {
		b := spec002Webhook()
		c.mod(b)
		r := w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, whkPath, w.adm, b)
		require.NotNil(t, issueAt(r, c.path), "%s: %s", c.name, r)
	}
	// secret_ref is read on create only.
	b := spec002Webhook()
	delete(at(b, "authentication"), "secret_ref")
	w.expect(t, http.StatusCreated, http.MethodPost, whkPath, w.adm, b)
	at(b, "authentication")["secret_ref"] = "short"
	r := w.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPut, whkPath+"/github-push-handler", w.adm, b)
	require.NotNil(t, issueAt(r, "$.authentication.secret_ref"), "%s", r)
}

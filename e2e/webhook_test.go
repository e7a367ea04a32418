package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	approvalWorkflowID = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.ci.pr_approval.v1~"
	approvalEventType  = "gts.x.core.events.event.v1~vendor.app.ci.pr_approved.v1~"
)

// approvalWorkflow is a workflow started by a GitHub pull-request webhook: it waits for the
// approval event of its pull request and returns what it saw.
func approvalWorkflow(t testing.TB) []byte {
	t.Helper()
	src := fmt.Sprintf(`def main(ctx, input):
    pr = input["body"]["pull_request"]["number"]
    ev = r_await(r_wait_event_v1(%q, event_filter_query="payload.pr == " + str(pr), timeout_ms=600000))
    return {"pr": pr, "approved_by": ev.value["payload"]["by"], "github_event": input["headers"]["x-github-event"]}
`, approvalEventType)
	return mustJSON(t, map[string]any{
		"entrypoint_id": approvalWorkflowID, "title": "PR approval", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []any{"async"}, "default": "async"},
			"limits":     map[string]any{"timeout_seconds": 10},
			"retry":      map[string]any{"max_attempts": 1},
			"workflow": map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
				"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 1},
		},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
			"code": map[string]any{"language": "starlark", "source": src}},
	})
}

// deliver posts body to a webhook receiver path with headers, as a sender would (no bearer token).
func (p *larkProc) deliver(t *testing.T, path, body string, headers map[string]string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+path, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := httpClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

func githubSignature(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// TestWebhookStartsWorkflowThatWaitsForApproval is issue 17's end-to-end case against the real
// binary: a GitHub-style HMAC webhook starts a workflow that waits for an approval event, which
// arrives through POST /events and completes it. A forged signature, a replayed delivery and a
// sender outside the trigger's CIDR list are refused and start nothing.
func TestWebhookStartsWorkflowThatWaitsForApproval(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server; skipped with -short")
	}
	// The loopback is a trusted proxy, so X-Forwarded-For stands for the sender's address.
	p := startLark(t, t.TempDir(), "--trusted-proxies", "127.0.0.0/8")
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, approvalWorkflow(t)), http.StatusCreated, nil)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints/"+approvalWorkflowID+":status", p.Token, []byte(`{"action":"activate"}`)), http.StatusOK, nil)

	var hook struct {
		ID     string `json:"webhook_trigger_id"`
		URL    string `json:"webhook_url"`
		Secret string `json:"secret"`
	}
	requireJSON(t, p.do(http.MethodPost, apiBase+"/webhook-triggers", p.Token, mustJSON(t, map[string]any{
		"webhook_trigger_id": "github-pr", "entrypoint_id": approvalWorkflowID,
		"authentication":  map[string]any{"type": "hmac_sha256", "format": "github"},
		"allowed_sources": []string{"192.30.252.0/22"},
		"forward_headers": []string{"X-GitHub-Event", "X-GitHub-Delivery"},
	})), http.StatusCreated, &hook)
	require.NotEmpty(t, hook.Secret, "the secret is shown once, at creation")
	require.NotEmpty(t, hook.URL)

	body := `{"action":"opened","pull_request":{"number":42}}`
	github := func(sig, from string) map[string]string {
		return map[string]string{"X-Hub-Signature-256": sig, "X-GitHub-Event": "pull_request", "X-Forwarded-For": from}
	}
	forged := p.deliver(t, hook.URL, body, github(githubSignature("whsec_not-the-secret", body), "192.30.252.10"))
	require.Equal(t, http.StatusUnauthorized, forged.Status, "a forged signature: %s", forged)
	outside := p.deliver(t, hook.URL, body, github(githubSignature(hook.Secret, body), "203.0.113.9"))
	require.Equal(t, http.StatusForbidden, outside.Status, "a sender outside the CIDR list: %s", outside)
	tampered := p.deliver(t, hook.URL, `{"action":"opened","pull_request":{"number":43}}`, github(githubSignature(hook.Secret, body), "192.30.252.10"))
	require.Equal(t, http.StatusUnauthorized, tampered.Status, "a body that is not the signed one: %s", tampered)

	var accepted struct {
		InvocationID string `json:"invocation_id"`
		DeliveryID   string `json:"delivery_id"`
	}
	requireJSON(t, p.deliver(t, hook.URL, body, github(githubSignature(hook.Secret, body), "192.30.252.10")), http.StatusAccepted, &accepted)
	require.NotEmpty(t, accepted.InvocationID)
	replay := p.deliver(t, hook.URL, body, github(githubSignature(hook.Secret, body), "192.30.252.10"))
	require.Equal(t, http.StatusUnauthorized, replay.Status, "the same signed delivery again is a replay: %s", replay)

	// Only the accepted delivery started anything.
	var list struct {
		Items []invocationRecord `json:"items"`
	}
	requireJSON(t, p.do(http.MethodGet, apiBase+"/invocations?limit=200", p.Token, nil), http.StatusOK, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, accepted.InvocationID, list.Items[0].ID)

	// The workflow parks on its wait; the approval arrives through /events.
	waitStatus(t, p, accepted.InvocationID, "suspended")
	requireJSON(t, p.do(http.MethodPost, apiBase+"/events", p.Token, mustJSON(t, map[string]any{
		"event_id": "approve-41", "event_type_id": approvalEventType, "payload": map[string]any{"pr": 41, "by": "mallory"}})), http.StatusAccepted, nil)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/events", p.Token, mustJSON(t, map[string]any{
		"event_id": "approve-42", "event_type_id": approvalEventType, "payload": map[string]any{"pr": 42, "by": "alice"}})), http.StatusAccepted, nil)
	rec := waitStatus(t, p, accepted.InvocationID, "succeeded", "failed", "canceled", "timed_out")
	require.Equal(t, "succeeded", rec.Status, "%+v", rec)
	require.JSONEq(t, `{"pr":42,"approved_by":"alice","github_event":"pull_request"}`, string(rec.Result))

	// A Stripe-style trigger signs a timestamp: a delivery signed 10 minutes ago (outside the
	// 5-minute tolerance) is a replayed timestamp and refused; the same body signed now is accepted.
	var stripe struct {
		URL    string `json:"webhook_url"`
		Secret string `json:"secret"`
	}
	requireJSON(t, p.do(http.MethodPost, apiBase+"/webhook-triggers", p.Token, mustJSON(t, map[string]any{
		"webhook_trigger_id": "stripe-pr", "entrypoint_id": approvalWorkflowID,
		"authentication": map[string]any{"type": "hmac_sha256", "format": "stripe"},
	})), http.StatusCreated, &stripe)
	stripeSig := func(at time.Time) map[string]string {
		ts := fmt.Sprint(at.Unix())
		m := hmac.New(sha256.New, []byte(stripe.Secret))
		m.Write([]byte(ts + "." + body))
		return map[string]string{"Stripe-Signature": "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))}
	}
	stale := p.deliver(t, stripe.URL, body, stripeSig(time.Now().Add(-10*time.Minute)))
	require.Equal(t, http.StatusUnauthorized, stale.Status, "a replayed (stale) timestamp: %s", stale)
	requireJSON(t, p.deliver(t, stripe.URL, body, stripeSig(time.Now())), http.StatusAccepted, nil)

	var deliveries struct {
		Items []map[string]any `json:"items"`
	}
	requireJSON(t, p.do(http.MethodGet, apiBase+"/webhook-triggers/github-pr/deliveries", p.Token, nil), http.StatusOK, &deliveries)
	require.NotEmpty(t, deliveries.Items, "deliveries are recorded for debugging")
	raw, err := json.Marshal(deliveries)
	require.NoError(t, err)
	require.NotContains(t, string(raw), hook.Secret, "deliveries never show the secret")
}

// waitStatus polls an invocation until its status is one of want (deadline startTimeout).
func waitStatus(t *testing.T, p *larkProc, id string, want ...string) invocationRecord {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		var rec invocationRecord
		requireJSON(t, p.do(http.MethodGet, apiBase+"/invocations/"+id, p.Token, nil), http.StatusOK, &rec)
		for _, w := range want {
			if rec.Status == w {
				return rec
			}
		}
		require.True(t, time.Now().Before(deadline), "invocation %s is %s, want one of %v", id, rec.Status, want)
		time.Sleep(20 * time.Millisecond)
	}
}

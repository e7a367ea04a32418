package larkclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/pkg/larkclient"
)

// keyedServer starts a server with a master key (secrets and webhooks need one) and returns a
// client of the dev tenant's admin.
func keyedServer(t *testing.T) *larkclient.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	keyFile, err := server.LoadOrCreateDevMasterKey(dir)
	require.NoError(t, err)
	kr, err := server.LoadMasterKey("", keyFile)
	require.NoError(t, err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(ctx, server.Config{DataDir: dir, AdminToken: "op", Logger: quiet, Keyring: kr})
	require.NoError(t, err)
	creds, err := server.LoadOrCreateDevAdmin(dir)
	require.NoError(t, err)
	require.NoError(t, srv.ProvisionDev(ctx, &creds))
	ts := httptest.NewServer(specChecker.Wrap(srv.Handler()))
	done := make(chan struct{})
	go func() { defer close(done); srv.RunDispatcher(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		ts.Close()
		require.NoError(t, srv.Close())
	})
	c, err := larkclient.New(ts.URL, creds.Token)
	require.NoError(t, err)
	return c
}

// TestSecretsTokensAudit: secrets are created, listed and changed without a value ever coming
// back; a token is issued (its secret once), listed and revoked; each change is in the audit log.
func TestSecretsTokensAudit(t *testing.T) {
	t.Parallel()
	c := keyedServer(t)
	ctx := t.Context()

	s, err := c.CreateSecret(ctx, larkclient.SecretInput{Name: "stripe_key", Value: "sk_test_123456", AllowedHosts: []string{"api.stripe.com"}})
	require.NoError(t, err)
	require.Equal(t, 1, s.Version)
	require.NotContains(t, string(s.JSON), "sk_test_123456")
	desc := "rotated"
	s, err = c.UpdateSecret(ctx, "stripe_key", larkclient.SecretInput{Value: "sk_test_654321", Description: &desc})
	require.NoError(t, err)
	require.Equal(t, 2, s.Version)
	var names []string
	for s, err := range c.AllSecrets(ctx, larkclient.ListOptions{}) {
		require.NoError(t, err)
		require.NotContains(t, string(s.JSON), "sk_test_")
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"stripe_key"}, names)
	require.NoError(t, c.DeleteSecret(ctx, "stripe_key"))
	_, err = c.GetSecret(ctx, "stripe_key")
	var p *larkclient.Problem
	require.True(t, errors.As(err, &p) && p.NotFound(), "%v", err)

	tok, err := c.CreateToken(ctx, larkclient.CreateTokenInput{SubjectID: "ci", Roles: []string{"viewer"}, Description: "CI"})
	require.NoError(t, err)
	require.Regexp(t, `^lark_`, tok.Secret)
	page, err := c.ListTokens(ctx, larkclient.ListOptions{Filter: "subject_id eq 'ci'"})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Empty(t, page.Items[0].Secret, "a list never holds a secret")
	require.NoError(t, c.RevokeToken(ctx, tok.ID))
	page, err = c.ListTokens(ctx, larkclient.ListOptions{Filter: "subject_id eq 'ci'"})
	require.NoError(t, err)
	require.NotNil(t, page.Items[0].RevokedAt)

	var types []string
	for e, err := range c.AllAuditEvents(ctx, larkclient.ListOptions{Filter: "resource_type eq 'token' and resource_id eq '" + tok.ID + "'"}) {
		require.NoError(t, err)
		types = append(types, e.Type[len(e.Type)-len("token_revoked.v1~"):])
	}
	require.Equal(t, []string{"token_created.v1~", "token_revoked.v1~"}, types)
}

// TestEventTypesTriggersDeadLetters: an event type is registered and read back; a trigger on an
// always-failing function is disabled and enabled; its invocation's dead letter is listed,
// redriven (a new invocation), and the next one purged; a webhook is created, listed with its
// (empty) deliveries, disabled and deleted.
func TestEventTypesTriggersDeadLetters(t *testing.T) {
	t.Parallel()
	c := keyedServer(t)
	ctx := t.Context()
	const typeID = "gts.x.core.events.event.v1~acme.shop.orders.paid.v1~"
	et, err := c.CreateEventType(ctx, json.RawMessage(`{"event_type_id":"`+typeID+`","schema":{"type":"object"}}`))
	require.NoError(t, err)
	require.Equal(t, "tenant", et.Scope)
	got, err := c.GetEventType(ctx, typeID)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"object"}`, string(got.Schema))

	boom := json.RawMessage(`{"entrypoint_id": "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.demo.util.boom.v1~",
	  "title": "Boom", "owner": {"owner_type": "tenant"}, "schema": {},
	  "traits": {"invocation": {"supported": ["sync", "async"], "default": "async"}, "retry": {"max_attempts": 1}},
	  "implementation": {"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
	    "code": {"language": "starlark", "source": "def main(ctx, input):\n    fail(\"boom\")\n"}}}`)
	ep, err := c.RegisterEntrypoint(ctx, boom)
	require.NoError(t, err)
	_, err = c.ActivateEntrypoint(ctx, ep.ID, "")
	require.NoError(t, err)
	tr, err := c.CreateTrigger(ctx, json.RawMessage(`{"trigger_id":"on-paid","event_type_id":"`+typeID+`","entrypoint_id":"`+ep.EntrypointID+`"}`))
	require.NoError(t, err)
	tr, err = c.DisableTrigger(ctx, tr.TriggerID)
	require.NoError(t, err)
	require.Equal(t, "disabled", tr.Status)
	tr, err = c.EnableTrigger(ctx, tr.TriggerID)
	require.NoError(t, err)
	require.Equal(t, "active", tr.Status)

	_, err = c.PublishEvent(ctx, larkclient.PublishEvent{EventTypeID: typeID, EventID: "p1"})
	require.NoError(t, err)
	letter := waitDeadLetters(t, c, "on-paid", 1)[0]
	require.Equal(t, []string{"p1"}, letter.EventIDs)
	require.Contains(t, letter.Error.Message, "boom")
	redriven, err := c.RedriveDeadLetter(ctx, "on-paid", letter.DeadLetterID)
	require.NoError(t, err)
	require.Len(t, redriven, 1)
	require.NotEqual(t, letter.InvocationID, redriven[0].RedrivenAs)
	waitDeadLetters(t, c, "on-paid", 1) // the redriven run fails again
	n, err := c.PurgeDeadLetters(ctx, "on-paid")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	all, err := c.RedriveDeadLetters(ctx, "on-paid")
	require.NoError(t, err)
	require.Empty(t, all)

	wh, err := c.CreateWebhook(ctx, json.RawMessage(`{"webhook_trigger_id":"gh","entrypoint_id":"`+ep.EntrypointID+`","authentication":{"type":"none"}}`))
	require.NoError(t, err)
	d, err := c.ListDeliveries(ctx, wh.WebhookTriggerID, larkclient.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, d.Items)
	wh, err = c.DisableWebhook(ctx, "gh")
	require.NoError(t, err)
	require.Equal(t, "disabled", wh.Status)
	wh, err = c.EnableWebhook(ctx, "gh")
	require.NoError(t, err)
	require.Equal(t, "active", wh.Status)
	require.NoError(t, c.DeleteWebhook(ctx, "gh"))
	require.NoError(t, c.DeleteEventType(ctx, typeID))
}

// waitDeadLetters waits (10 s at most) until the trigger has n dead letters, and returns them.
func waitDeadLetters(t *testing.T, c *larkclient.Client, trigger string, n int) []larkclient.DeadLetter {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := c.ListDeadLetters(t.Context(), trigger, larkclient.ListOptions{})
		require.NoError(t, err)
		if len(p.Items) >= n {
			return p.Items
		}
		require.True(t, time.Now().Before(deadline), "no %d dead letters on %s", n, trigger)
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

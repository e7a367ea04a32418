package api_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/natsbridge"
	"github.com/larkrun/lark/internal/natsfeed"
	"github.com/larkrun/lark/internal/server"
)

// TestNATSSubjectNeedsTheBridge: a trigger fed by a subject is refused by a server without --nats.
func TestNATSSubjectNeedsTheBridge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	ep := e.registerActive(t, adm, echoFn(t, "orders.from_nats.v1~"))["entrypoint_id"].(string)
	r := e.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, trgPath, adm,
		obj{"event_type_id": orderType, "entrypoint_id": ep, "nats_subject": "orders.created"})
	requireIssue(t, r, "$.nats_subject", "NOT_AVAILABLE")
}

// TestNATSBridge runs against the real NATS server (LARK_TEST_NATS_URL): a trigger fed by an
// external subject starts its entrypoint once per message (also for a non-JSON body), reports its
// subscription's status, keeps the backlog while disabled and delivers it when enabled, and its
// durable consumer goes with it; events published through the API are mirrored to their subject,
// and events that came from NATS are not mirrored back.
func TestNATSBridge(t *testing.T) {
	t.Parallel()
	url := os.Getenv("LARK_TEST_NATS_URL")
	if url == "" {
		t.Skip("LARK_TEST_NATS_URL is not set: no NATS server with JetStream to test against (CI sets nats://127.0.0.1:4222)")
	}
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	u := hex.EncodeToString(b)
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ext, larkStream, prefix := "EXT_"+u, "LARK_T_"+u, "lark.t"+u
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: ext, Subjects: []string{"ext." + u + ".>"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, s := range []string{ext, larkStream} {
			if err := js.DeleteStream(context.Background(), s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("delete stream %s: %v", s, err)
			}
		}
	})

	e := newEnv(t, func(c *server.Config) {
		c.NATS = natsbridge.Config{URL: url, StreamName: larkStream, SubjectPrefix: prefix}
	})
	invDispatcher(t, e)
	require.NoError(t, e.srv.StartNATSFeed(ctx))
	adm := invTenant(t, e, "acme")
	ep := e.registerActive(t, adm, echoFn(t, "orders.from_nats.v1~"))["entrypoint_id"].(string)
	subject := "ext." + u + ".orders"
	created := e.expect(t, http.StatusCreated, http.MethodPost, trgPath, adm,
		obj{"trigger_id": "from-nats", "event_type_id": orderType, "entrypoint_id": ep, "nats_subject": subject})
	require.Equal(t, "active", created.Body["connection_status"], "the create answers once the subscription is up")
	requireConnected(t, created.Body, url)
	status := func() string {
		return e.expect(t, http.StatusOK, http.MethodGet, trgPath+"/from-nats", adm, nil).Body["connection_status"].(string)
	}
	require.Equal(t, "active", status())

	// The first message carries a W3C traceparent: its invocation continues the publisher's trace.
	const publisherTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	traced := nats.NewMsg(subject)
	traced.Data = []byte(`{"order_id":"n-1","total":5}`)
	traced.Header.Set("traceparent", "00-"+publisherTrace+"-00f067aa0ba902b7-01")
	_, err = js.PublishMsg(ctx, traced)
	require.NoError(t, err)
	_, err = js.Publish(ctx, subject, []byte(`plain text`))
	require.NoError(t, err)
	started := awaitInvocations(t, e, adm, ep, 2)
	var texts []any
	for _, rec := range started {
		got := invGet(t, e, adm, invID(rec))
		ev := got["params"].(obj)["event"].(obj)
		require.True(t, strings.HasPrefix(ev["event_id"].(string), "nats:"+ext+":"), "%v", ev)
		require.Equal(t, "nats://"+subject, ev["source"])
		texts = append(texts, ev["payload"])
		if ev["payload"] == "plain text" {
			require.NotEqual(t, publisherTrace, got["observability"].(obj)["trace_id"])
		} else {
			require.Equal(t, publisherTrace, got["observability"].(obj)["trace_id"], "the message's trace continues")
		}
	}
	require.ElementsMatch(t, []any{obj{"order_id": "n-1", "total": 5.0}, "plain text"}, texts)

	// Disabled: paused, and the backlog waits in the consumer until it is enabled again.
	disabled := e.expect(t, http.StatusOK, http.MethodPost, trgPath+"/from-nats:disable", adm, nil)
	require.Equal(t, "paused", disabled.Body["connection_status"])
	requireConnected(t, disabled.Body, url)
	require.Equal(t, "paused", status())
	_, err = js.Publish(ctx, subject, []byte(`{"order_id":"n-2","total":7}`))
	require.NoError(t, err)
	enabled := e.expect(t, http.StatusOK, http.MethodPost, trgPath+"/from-nats:enable", adm, nil)
	require.Equal(t, "active", enabled.Body["connection_status"], ":enable answers once the subscription has resumed")
	awaitInvocations(t, e, adm, ep, 3)
	listed := e.expect(t, http.StatusOK, http.MethodGet, trgPath, adm, nil).items()
	require.Len(t, listed, 1)
	requireConnected(t, listed[0], url)

	// Mirroring: an event published through the API appears on its subject; the NATS-fed ones do not.
	const apiTrace = "8bf92f3577b34da6a3ce929d0e0e473a"
	r := e.send(t, request{method: http.MethodPost, path: eventsPath, token: adm, header: map[string]string{"Traceparent": "00-" + apiTrace + "-40f067aa0ba902bb-01"},
		body: obj{"event_id": "api-1", "event_type_id": orderType, "payload": obj{"order_id": "a-1"}}})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
	mirrored, err := natsbridge.EventSubject(prefix, "acme", orderType)
	require.NoError(t, err)
	stream, err := js.Stream(ctx, larkStream)
	require.NoError(t, err)
	var msg *jetstream.RawStreamMsg
	waitUntil(t, func() bool {
		msg, err = stream.GetLastMsgForSubject(ctx, mirrored)
		return err == nil
	}, "the API event is mirrored")
	require.Contains(t, string(msg.Data), `"api-1"`)
	require.Regexp(t, "^00-"+apiTrace+"-[0-9a-f]{16}-0[01]$", msg.Header.Get(natsbridge.HeaderTraceParent), "the message continues the publishing request's trace")
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(mirrored))
	require.NoError(t, err)
	require.EqualValues(t, 1, info.State.Subjects[mirrored], "events that came from NATS are not mirrored back")

	// Deleted: the durable consumer goes with the trigger.
	e.expect(t, http.StatusNoContent, http.MethodDelete, trgPath+"/from-nats", adm, nil)
	waitUntil(t, func() bool {
		_, err := js.Consumer(ctx, ext, natsfeed.ConsumerName("acme", "from-nats"))
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	}, "the consumer is deleted")
}

// requireConnected checks 002's connection_details of a NATS-fed trigger whose bridge is
// connected: the broker connected, no outage under way, and no address or credential shown.
func requireConnected(t *testing.T, trg obj, url string) {
	t.Helper()
	d, ok := trg["connection_details"].(obj)
	require.True(t, ok, "connection_details: %v", trg)
	require.Equal(t, "connected", d["event_broker"])
	require.EqualValues(t, 0, d["reconnect_attempts"])
	last, err := time.Parse(time.RFC3339Nano, d["last_connected_at"].(string))
	require.NoError(t, err)
	require.False(t, last.After(time.Now()), "last_connected_at is in the past: %v", last)
	require.NotContains(t, d, "next_reconnect_at", "no reconnect is due while connected")
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	require.NotContains(t, string(raw), strings.TrimPrefix(url, "nats://"), "no server address")
}

// waitUntil polls cond until it holds (deadline 20 s).
func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting: %s", what)
		time.Sleep(20 * time.Millisecond)
	}
}

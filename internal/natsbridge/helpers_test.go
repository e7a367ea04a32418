package natsbridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/larkrun/lark/internal/cutproxy"
	"github.com/larkrun/lark/internal/events"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// discard drops the logs of the bridges under test.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitFor is how long a test waits for a condition that should hold promptly.
const waitFor = 15 * time.Second

// serverURL is the real NATS server's URL, or skips the test.
func serverURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("LARK_TEST_NATS_URL")
	if u == "" {
		t.Skip("LARK_TEST_NATS_URL is not set: no NATS server with JetStream to test against (CI sets nats://127.0.0.1:4222)")
	}
	return u
}

// unique returns a fresh name suffix, so that parallel tests use streams and subjects of their own.
func unique(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// direct is a plain JetStream client on the real server, for setting up and checking.
func direct(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(serverURL(t))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// deleteStreamAtEnd deletes stream when the test ends (after the bridge closed: cleanups run last
// registered first).
func deleteStreamAtEnd(t *testing.T, js jetstream.JetStream, stream string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("delete stream %s: %v", stream, err)
		}
	})
}

// testBridge opens a bridge on a stream and prefix of the test's own, against url (the real server
// or a proxy in front of it); edit adjusts the config.
func testBridge(t *testing.T, url string, edit func(*Config)) (*Bridge, jetstream.JetStream) {
	t.Helper()
	js := direct(t)
	id := unique(t)
	cfg := Config{URL: url, StreamName: "LARKTEST_" + id, SubjectPrefix: "larktest." + id,
		Logger: discard, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		DedupWindow: time.Minute, MaxAge: time.Hour}
	if edit != nil {
		edit(&cfg)
	}
	deleteStreamAtEnd(t, js, cfg.StreamName)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b, js
}

// event is a valid event of tenant acme.
func event(id string) events.Event {
	return events.Event{ID: id, TenantID: "acme", TypeID: "gts.x.shop.orders.placed.v1~",
		Payload: json.RawMessage(`{"order":"` + id + `"}`), ReceivedAt: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
}

// streamMsgs returns how many messages stream holds.
func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	return info.State.Msgs
}

// consumerInfo returns the state of a durable consumer.
func consumerInfo(t *testing.T, js jetstream.JetStream, stream, name string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := js.Consumer(ctx, stream, name)
	require.NoError(t, err)
	ci, err := info.Info(ctx)
	require.NoError(t, err)
	return ci
}

// newProxy is a cutproxy.Proxy to the NATS server at natsURL: Cut and Restore take the connection
// down and give it back without touching the shared server.
func newProxy(t *testing.T, natsURL string) *cutproxy.Proxy {
	t.Helper()
	u, err := url.Parse(natsURL)
	require.NoError(t, err)
	return cutproxy.New(t, u.Host)
}

// proxyURL is p's nats:// URL.
func proxyURL(p *cutproxy.Proxy) string { return "nats://" + p.Addr() }

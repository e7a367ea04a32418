package api_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store"
)

// A write that the store's writer does not start within the write-wait bound (here: the writer is
// held by another write that does not end) answers 503 with Retry-After, within the bound rather
// than when the writer frees up, and is not applied; once the writer is free the same request is
// accepted. On SQLite the bound is the writer (one connection) being held; on PostgreSQL the
// committer's batch.
func TestStoreWriteWaitAnswers503(t *testing.T) {
	t.Parallel()
	const bound = 300 * time.Millisecond
	e, sink, _ := loggedEnv(t, func(c *server.Config) { c.StoreWriteWait = bound })
	adm := e.tenant(t, "acme")
	e.registerActive(t, adm, fn(t, taxV1))
	body := obj{"entrypoint_id": taxV1, "mode": "async", "params": obj{"invoice_id": "inv_1", "amount": 100}}
	hdr := map[string]string{"Idempotency-Key": "bp-1"}

	// Hold the writer: a write that waits until released.
	running, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- e.srv.Store.Update(context.Background(), func(store.Tx) error {
			close(running)
			<-release
			return nil
		})
	}()
	select {
	case <-running:
	case <-time.After(20 * time.Second):
		t.Fatal("the holding write never ran")
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	start := time.Now()
	r := invStart(t, e, adm, body, hdr)
	took := time.Since(start)
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r)
	require.Equal(t, "unavailable", problemKind(r), "%s", r)
	require.Equal(t, strconv.Itoa(api.UnavailableRetryAfter), r.Header.Get("Retry-After"))
	require.GreaterOrEqual(t, took, bound)
	require.Less(t, took, bound+10*time.Second, "answered within the bound, not when the writer frees up")
	// The operator's log says so as a warning with the status, not as an internal error.
	require.Len(t, sink.lines(t, "request refused: store unavailable"), 1)
	for _, l := range sink.lines(t, "request refused: store unavailable") {
		require.Equal(t, "WARN", l["level"])
		require.EqualValues(t, 503, l["status"])
	}
	require.Empty(t, sink.lines(t, "request failed"))

	close(release)
	released = true
	select {
	case err := <-held:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the holding write never finished")
	}
	// Nothing was applied by the refused request: the same key now starts a new invocation (202,
	// not a replay of an earlier one).
	r = invStart(t, e, adm, body, hdr)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	require.Empty(t, r.Header.Get("Idempotency-Replayed"), "%s", r)
}

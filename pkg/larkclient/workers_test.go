package larkclient_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/workerclient"
	"github.com/larkrun/lark/internal/workerproto"
	"github.com/larkrun/lark/pkg/larkclient"
)

// TestListWorkers: a worker that polls is listed, once its node recorded it, online, with its key
// and node; the status filter reaches the server.
func TestListWorkers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	ks, err := workerproto.ParseKeys([]string{"wk1:worker-secret-0123456789"})
	require.NoError(t, err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(ctx, server.Config{DataDir: t.TempDir(), AdminToken: "op", Logger: quiet, WorkerKeys: ks, NodeID: "node-a"})
	require.NoError(t, err)
	ts := httptest.NewServer(specChecker.Wrap(srv.Handler()))
	done := make(chan error, 1)
	go func() {
		done <- workerclient.New(workerclient.Config{Server: ts.URL, Keys: ks, WorkerID: "w-1", PollWait: 100 * time.Millisecond, Logger: quiet}).Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		srv.WorkerHub.Close()
		ts.Close()
		require.NoError(t, srv.Close())
	})
	c, err := larkclient.New(ts.URL, "op")
	require.NoError(t, err)

	var page *larkclient.Page[larkclient.Worker]
	require.Eventually(t, func() bool {
		require.NoError(t, srv.WorkerHub.Record(ctx))
		page, err = c.ListWorkers(ctx, larkclient.ListOptions{Filter: "status eq 'online'"})
		require.NoError(t, err)
		return len(page.Items) == 1
	}, 10*time.Second, 10*time.Millisecond, "the worker is recorded once it has polled")
	w := page.Items[0]
	require.Equal(t, "w-1", w.WorkerID)
	require.Equal(t, "node-a", w.Node)
	require.Equal(t, "wk1", w.KeyID)
	require.Equal(t, "online", w.Status)
	require.Empty(t, w.Tenants)
	require.False(t, w.LastSeenAt.Before(w.FirstSeenAt))
	page, err = c.ListWorkers(ctx, larkclient.ListOptions{Filter: "status eq 'offline'"})
	require.NoError(t, err)
	require.Empty(t, page.Items)
}

package server

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeAndShutdown: the server answers, and cancelling its context stops it cleanly and closes
// the store.
func TestServeAndShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	srv, err := New(ctx, Config{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: "op"})
	require.NoError(t, err)
	ln, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/readyz")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, string(b))

	creds, err := LoadOrCreateDevAdmin(dir)
	require.NoError(t, err)
	require.NoError(t, srv.ProvisionDev(ctx, &creds))
	first := creds.Token
	require.NoError(t, srv.ProvisionDev(ctx, &creds))
	require.Equal(t, first, creds.Token, "a live dev token is kept")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not stop")
	}
	require.Error(t, srv.Store.Ping(context.Background()), "the store is closed after shutdown")
}

func TestRejectsUnknownStore(t *testing.T) {
	_, err := New(context.Background(), Config{DataDir: t.TempDir(), Store: "mysql://x"})
	require.ErrorContains(t, err, "--store")
	_, err = New(context.Background(), Config{DataDir: t.TempDir(), Store: "postgres://localhost/x"})
	require.ErrorContains(t, err, "PostgreSQL")
}

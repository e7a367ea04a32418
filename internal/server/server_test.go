package server

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/tokens"
)

// TestServeAndShutdown: the server answers, and cancelling its context stops it cleanly and closes
// the store.
func TestServeAndShutdown(t *testing.T) {
	t.Parallel()
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

// TestServeRunsRetention: Serve runs the retention job every RetentionInterval, judging age on the
// injected clock: once the clock is past a tenant's audit_log_days, its audit events go.
func TestServeRunsRetention(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clock.NewFake(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	srv, err := New(ctx, Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), AdminToken: "op", Clock: clk, RetentionInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	ln, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	op := auth.SecurityContext{SubjectID: tokens.OperatorSubject, Operator: true}
	_, err = srv.Tenants.Enable(ctx, op, "acme", []byte(`{"retention":{"audit_log_days":10}}`))
	require.NoError(t, err)
	audited := func() int {
		page, err := srv.Store.ListAudit(ctx, "acme", store.ListQuery{})
		require.NoError(t, err)
		return len(page.Items)
	}
	require.Equal(t, 1, audited())
	clk.Advance(11 * 24 * time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for audited() > 0 {
		require.True(t, time.Now().Before(deadline), "the retention job did not purge the 11-day-old audit event")
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not stop")
	}
}

func TestRejectsUnknownStore(t *testing.T) {
	t.Parallel()
	_, err := New(context.Background(), Config{DataDir: t.TempDir(), Store: "mysql://x"})
	require.ErrorContains(t, err, "--store")
	// A postgres:// URL opens the PostgreSQL store: one nobody listens at fails the start clearly.
	_, err = New(context.Background(), Config{DataDir: t.TempDir(), Store: "postgres://127.0.0.1:1/x?connect_timeout=5"})
	require.ErrorContains(t, err, "--store")
}

// TestPostgresStore: --store postgres://... opens the PostgreSQL store, migrated and answering.
func TestPostgresStore(t *testing.T) {
	t.Parallel()
	st, err := OpenStore(context.Background(), Config{Store: pgtest.Schema(t), PGMaxConns: 3, PGStatementTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer st.Close()
	require.IsType(t, &pgstore.Store{}, st)
	require.False(t, st.Exclusive())
	require.NoError(t, st.Ping(context.Background()))
}

// TestSQLiteSynchronous: Config.SQLiteSynchronous reaches the store's writer connection (PRAGMA
// synchronous reads 1 for NORMAL, 2 for FULL), FULL by default; any other value stops the start.
func TestSQLiteSynchronous(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for setting, want := range map[string]int{"": 2, "full": 2, "FULL": 2, "normal": 1, "Normal": 1} {
		srv, err := New(ctx, Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), SQLiteSynchronous: setting})
		require.NoError(t, err, setting)
		st, ok := srv.Store.(*sqlstore.Store)
		require.True(t, ok, "the SQLite store")
		got, err := st.Synchronous(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got, "synchronous %q", setting)
		require.NoError(t, srv.Close())
	}
	_, err := New(ctx, Config{DataDir: t.TempDir(), SQLiteSynchronous: "off"})
	require.ErrorContains(t, err, "synchronous must be FULL or NORMAL")
}

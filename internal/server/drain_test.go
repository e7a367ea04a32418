package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serving starts a server with cfg adjusted by mod and a dev tenant; it returns the listener's
// address, the admin token of the dev tenant, the cancel of Serve's context and Serve's result.
func serving(t *testing.T, mod func(*Config)) (addr, token string, stop context.CancelFunc, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), AdminToken: "op"}
	mod(&cfg)
	srv, err := New(ctx, cfg)
	require.NoError(t, err)
	creds, err := LoadOrCreateDevAdmin(cfg.DataDir)
	require.NoError(t, err)
	require.NoError(t, srv.ProvisionDev(ctx, &creds))
	ln, err := srv.Listen()
	require.NoError(t, err)
	ch := make(chan error, 1)
	go func() { ch <- srv.Serve(ctx, ln) }()
	return ln.Addr().String(), creds.Token, cancel, ch
}

// halfRequest sends the headers of a POST /invocations announcing a 2-byte body and its first byte.
func halfRequest(t *testing.T, addr, token string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /api/serverless-runtime/v1/invocations HTTP/1.1\r\nHost: lark\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{", token)
	require.NoError(t, err)
	return conn
}

// awaitInFlight waits (at most 10 s) until the half request *conn holds its tenant's only in-flight
// slot (MaxInFlight 1): a GET of the same tenant answers 429. The request is then in its handler. A
// half request that arrived while a probe held the slot was refused (answered, closed): it is sent
// again, and *conn replaced.
func awaitInFlight(t *testing.T, addr, token string, conn *net.Conn) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api/serverless-runtime/v1/invocations", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		if res.StatusCode == http.StatusTooManyRequests {
			return
		}
		require.False(t, time.Now().After(deadline), "the half request never held the in-flight slot")
		require.NoError(t, (*conn).SetReadDeadline(time.Now().Add(time.Millisecond)))
		if n, _ := (*conn).Read(make([]byte, 1)); n > 0 {
			*conn = halfRequest(t, addr, token)
		}
		require.NoError(t, (*conn).SetReadDeadline(time.Time{}))
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitClosedListener waits (at most 10 s) until addr refuses connections: shutdown has begun.
func awaitClosedListener(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
		require.False(t, time.Now().After(deadline), "the listener is still open")
		time.Sleep(5 * time.Millisecond)
	}
}

func result(t *testing.T, done <-chan error, bound time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		require.FailNow(t, "Serve did not return", "within %v", bound)
		return nil
	}
}

// TestCleanDrainReturnsNil: a request in flight at SIGTERM that ends within the drain timeout is
// answered, and Serve returns nil (lark exits 0).
func TestCleanDrainReturnsNil(t *testing.T) {
	t.Parallel()
	addr, tok, stop, done := serving(t, func(c *Config) { c.DrainTimeout = 30 * time.Second; c.ReadTimeout = time.Minute; c.MaxInFlight = 1 })
	conn := halfRequest(t, addr, tok)
	awaitInFlight(t, addr, tok, &conn)
	stop()
	awaitClosedListener(t, addr)
	_, err := io.WriteString(conn, "}")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "the in-flight request is answered during the drain")
	res.Body.Close()
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.NoError(t, result(t, done, 10*time.Second))
}

// TestDrainTimeoutIsAnError: a request still in flight at the drain timeout is cut off and Serve
// returns ErrDrainTimeout (lark exits 1).
func TestDrainTimeoutIsAnError(t *testing.T) {
	t.Parallel()
	const drain = 200 * time.Millisecond
	addr, tok, stop, done := serving(t, func(c *Config) { c.DrainTimeout = drain; c.ReadTimeout = time.Minute; c.MaxInFlight = 1 })
	conn := halfRequest(t, addr, tok)
	awaitInFlight(t, addr, tok, &conn)
	stop()
	err := result(t, done, 10*time.Second)
	require.True(t, errors.Is(err, ErrDrainTimeout), "%v", err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	require.Error(t, err, "the cut-off connection is closed")
}

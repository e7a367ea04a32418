package bench

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseServingAddr(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"lark serve", `{"time":"2026-11-21T10:00:00.1Z","level":"INFO","msg":"lark serving","addr":"127.0.0.1:41234","store":"sqlite"}`, "127.0.0.1:41234"},
		{"bench-echo", `{"time":"2026-11-21T10:00:00.1Z","level":"INFO","msg":"lark bench-echo serving","addr":"127.0.0.1:5"}`, "127.0.0.1:5"},
		{"IPv6 and surrounding space", "  {\"msg\":\"lark serving\",\"addr\":\"[::1]:8080\"}\r", "[::1]:8080"},
		{"another message with an addr", `{"msg":"shutting down","addr":"127.0.0.1:1"}`, ""},
		{"no addr", `{"msg":"lark serving"}`, ""},
		{"empty addr", `{"msg":"lark serving","addr":""}`, ""},
		{"text log handler", `time=2026-11-21T10:00:00Z level=INFO msg="lark serving" addr=127.0.0.1:1`, ""},
		{"a warning", `{"level":"WARN","msg":"LARK_ADMIN_TOKEN is not set: operator endpoints (tenants, tokens for any tenant) are unavailable"}`, ""},
		{"broken JSON", `{"msg":"lark serving","addr":"127.0.0.1:1"`, ""},
		{"addr of the wrong type", `{"msg":"lark serving","addr":8080}`, ""},
		{"empty", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseServingAddr([]byte(tc.line))
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.want != "", ok)
		})
	}
}

func TestStderrTailAnnouncesOnceAcrossWrites(t *testing.T) {
	s := &stderrTail{addr: make(chan string, 1)}
	line := `{"level":"INFO","msg":"lark serving","addr":"127.0.0.1:9999"}` + "\n"
	// The line arrives in pieces, after an unrelated line, and is repeated later.
	for _, chunk := range []string{"{\"msg\":\"starting\"}\n", line[:10], line[10:30], line[30:], line} {
		n, err := s.Write([]byte(chunk))
		require.NoError(t, err)
		require.Equal(t, len(chunk), n)
	}
	require.Equal(t, "127.0.0.1:9999", <-s.addr)
	select {
	case a := <-s.addr:
		t.Fatalf("announced twice (%s)", a)
	default:
	}
	for i := range 100 {
		_, _ = s.Write([]byte(strings.Repeat("x", i%5) + "line\n"))
	}
	_, _ = s.Write([]byte("partial"))
	out := s.String()
	require.Equal(t, tailLines+1, strings.Count(out, "\n")+1, "the last lines and the partial one")
	require.True(t, strings.HasSuffix(out, "\npartial"))
}

func TestEchoHandler(t *testing.T) {
	ts := httptest.NewServer(EchoHandler())
	defer ts.Close()
	res, err := http.Post(ts.URL+"/anything", "application/json", bytes.NewReader(TaxSyncRequest))
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	require.Equal(t, EchoDocument, body)
	require.NoError(t, checkSucceeded(body), "the document looks like a succeeded sync answer")

	res, err = http.Post(ts.URL, "application/json", strings.NewReader(`{"not json`))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)

	res, err = http.Get(ts.URL)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
}

// TestDurableEcho: each answered call is on disk, its row and its three events, written by
// concurrent calls through one committer; a body that is not JSON writes nothing.
func TestDurableEcho(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	de, err := OpenDurableEcho(dir)
	require.NoError(t, err)
	ts := httptest.NewServer(de.Handler())
	const calls = 20
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			res, err := http.Post(ts.URL, "application/json", bytes.NewReader(TaxSyncRequest))
			if !assert.NoError(t, err) {
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			assert.Equal(t, http.StatusOK, res.StatusCode)
			assert.Equal(t, EchoDocument, body)
		})
	}
	wg.Wait()
	res, err := http.Post(ts.URL, "application/json", strings.NewReader(`{"not json`))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	ts.Close()
	require.NoError(t, de.Close())

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "durable-echo.db"))
	require.NoError(t, err)
	defer db.Close()
	var rows, events, created int
	require.NoError(t, db.QueryRow(`SELECT (SELECT count(*) FROM invocations), (SELECT count(*) FROM invocation_events),
		(SELECT count(*) FROM invocation_events WHERE type = 'created' AND data = ?)`, string(TaxSyncRequest)).Scan(&rows, &events, &created))
	require.Equal(t, []int{calls, 3 * calls, calls}, []int{rows, events, created})
}

func TestServeEchoAnnouncesAndStops(t *testing.T) {
	s := &stderrTail{addr: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeEcho(ctx, "127.0.0.1:0", "", slog.New(slog.NewJSONHandler(s, nil))) }()
	var addr string
	select {
	case addr = <-s.addr:
	case err := <-done:
		t.Fatalf("ServeEcho returned early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no address announced")
	}
	api := &API{URL: "http://" + addr, Client: NewHTTPClient(1)}
	_, b, err := api.Call(ctx, http.MethodPost, "/invocations", "tok", TaxSyncRequest, http.StatusOK)
	require.NoError(t, err)
	require.Equal(t, EchoDocument, b)
	api.Client.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("ServeEcho did not stop")
	}
}

func TestAPICallReportsUnexpectedStatus(t *testing.T) {
	var gotAuth, gotPath string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.RequestURI()
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"status":429}`))
	}))
	defer ts.Close()
	api := &API{URL: ts.URL, Client: NewHTTPClient(1)}
	_, b, err := api.Call(context.Background(), http.MethodGet, "/invocations?limit=1", "secret", nil, http.StatusOK)
	require.Equal(t, "Bearer secret", gotAuth)
	require.Equal(t, APIBase+"/invocations?limit=1", gotPath)
	require.Equal(t, `{"status":429}`, string(b))
	var se *statusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusTooManyRequests, se.Status)
	require.Contains(t, err.Error(), "HTTP 429 (want 200)")
}

func TestInvocationIDAndStatus(t *testing.T) {
	id, err := invocationID([]byte(`{"record":{"invocation_id":"inv_1","status":"queued"},"dry_run":false}`))
	require.NoError(t, err)
	require.Equal(t, "inv_1", id)
	_, err = invocationID([]byte(`{"record":{}}`))
	require.Error(t, err)
	st, err := statusOf([]byte(`{"invocation_id":"inv_1","status":"running"}`))
	require.NoError(t, err)
	require.Equal(t, "running", st)
}

package console_test

// The harness of the browser tests: one in-process Lark server seeded through the public API, one
// headless Chromium (chromedp) with a tab per test, and helpers to drive a tab and screenshot it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/workerproto"
)

const (
	apiBase   = "/api/serverless-runtime/v1"
	opToken   = "console-test-operator"
	tenantID  = "acme"
	wfID      = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.orders.checkout.v1~"
	fnID      = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.reports.nightly.v1~"
	orderType = "gts.x.core.events.event.v1~vendor.app.commerce.order_placed.v1~"
	napID     = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.orders.nap.v1~"
)

// checkout reserves, then fails to charge (one retry); the failure compensates the reservation.
const checkoutSource = `def reserve(ctx, input):
    return {"reservation_id": "rsv-" + input.order_id}

def release(ctx, step_input, step_output):
    print("released", step_output.reservation_id)

def charge(ctx, input):
    fail("card declined for " + input["order_id"])

def main(ctx, input):
    rsv = r_run_step_v1("reserve", r_step_v1("reserve", reserve, release), input)
    r_run_step_v1("charge", charge, {"order_id": input.order_id, "reservation_id": rsv.value.reservation_id})
    return {"ok": True}
`

// nap runs a step, sleeps on a durable timer, then runs another step.
const napSource = `def main(ctx, input):
    r_run_step_v1("before", lambda ctx, i: {"at": "before"}, input)
    r_sleep(input.ms)
    r_run_step_v1("after", lambda ctx, i: {"at": "after"}, input)
    return {"slept_ms": input.ms}
`

// lark is one running server with a seeded tenant.
type lark struct {
	url, token string
	invocation string // the failed, compensated checkout
	// srv is the server (its worker service records the workers on demand); workerKeys sign the
	// worker requests it takes (node "node-a").
	srv        *server.Server
	workerKeys *workerproto.Keyset
}

// shared is the server the browser tests share: the first of them starts and seeds it
// (sharedLark), TestMain stops it. Tests that change it change different resources.
var shared struct {
	once sync.Once
	l    *lark
	stop func() error
}

// sharedLark answers a copy of the shared server's description, starting it on first use.
func sharedLark(t *testing.T) *lark {
	t.Helper()
	shared.once.Do(func() { shared.l = startLark(t, &shared.stop) })
	if shared.l == nil {
		t.Fatal("the shared server failed to start or to be seeded (see the first browser test's failure)")
	}
	c := *shared.l
	return &c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if chrome.close != nil {
		chrome.close()
	}
	if shared.stop != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the shared server:", err)
			code = max(code, 1)
		}
	}
	os.Exit(code)
}

// startLark starts a real server (SQLite in a temporary directory) on a loopback port, sets *stop
// to what stops it, and seeds it through the API: tenant acme and an admin token, the checkout
// workflow run once, a nightly function with two schedules and a backfill, an event trigger and
// one event.
func startLark(t *testing.T, stop *func() error) *lark {
	t.Helper()
	began := time.Now()
	defer func() { t.Logf("server started and seeded in %s", time.Since(began).Round(time.Millisecond)) }()
	dir, err := os.MkdirTemp("", "lark-console-test-")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	// A master key, so that secrets and webhook secrets can be stored.
	kr, err := keyring.New(bytes.Repeat([]byte{7}, keyring.KeySize))
	require.NoError(t, err)
	// A worker key, so that remote workers can poll it (functions still run in the server).
	wks, err := workerproto.ParseKeys([]string{"wk1:console-worker-secret-0123456789"})
	require.NoError(t, err)
	srv, err := server.New(ctx, server.Config{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: opToken, Keyring: kr,
		WorkerKeys: wks, NodeID: "node-a", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ln, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	*stop = func() error {
		cancel()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			err = errors.New("server did not stop within 30 s")
		}
		return errors.Join(err, os.RemoveAll(dir))
	}
	l := &lark{url: "http://" + ln.Addr().String(), srv: srv, workerKeys: wks}
	call(t, l.url, opToken, "POST", "/tenants/"+tenantID+"/serverless-runtime:enable", map[string]any{}, 200)
	tok := call(t, l.url, opToken, "POST", "/tokens", map[string]any{"tenant_id": tenantID, "subject_id": "alice", "roles": []string{"admin"}}, 201)
	l.token = tok["token"].(string)

	register(t, l, map[string]any{
		"entrypoint_id": wfID, "title": "Checkout", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []string{"sync", "async"}, "default": "async"},
			"retry":      map[string]any{"max_attempts": 2, "initial_delay_ms": 10, "max_delay_ms": 10, "backoff_multiplier": 1.0},
			"limits":     map[string]any{"timeout_seconds": 20},
			"workflow": map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
				"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 1},
		},
		"implementation": starlark(checkoutSource),
	})
	res := call(t, l.url, l.token, "POST", "/invocations", map[string]any{"entrypoint_id": wfID, "mode": "sync",
		"params": map[string]any{"order_id": "o-42"}}, 200)
	rec := res["record"].(map[string]any)
	require.Equal(t, "dead_lettered", rec["status"], "the checkout fails for good and is compensated: %v", rec)
	l.invocation = rec["invocation_id"].(string)

	register(t, l, map[string]any{
		"entrypoint_id": napID, "title": "Nap", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []string{"sync", "async"}, "default": "async"},
			"retry":      map[string]any{"max_attempts": 1},
			"workflow": map[string]any{"compensation": map[string]any{"on_failure": nil, "on_cancel": nil},
				"checkpointing": map[string]any{"strategy": "automatic"}, "max_suspension_days": 1},
		},
		"implementation": starlark(napSource),
	})
	register(t, l, map[string]any{
		"entrypoint_id": fnID, "title": "Nightly report", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{"invocation": map[string]any{"supported": []string{"sync", "async"}, "default": "async"},
			"retry": map[string]any{"max_attempts": 1}},
		"implementation": starlark("def main(ctx, input):\n    return {\"rows\": 3}\n"),
	})
	call(t, l.url, l.token, "POST", "/schedules", map[string]any{"schedule_id": "nightly", "name": "Nightly report",
		"entrypoint_id": fnID, "expression": map[string]any{"kind": "cron", "value": "0 3 * * *"}}, 201)
	call(t, l.url, l.token, "POST", "/schedules", map[string]any{"schedule_id": "hourly", "name": "Hourly report",
		"entrypoint_id": fnID, "expression": map[string]any{"kind": "cron", "value": "0 * * * *"}}, 201)
	call(t, l.url, l.token, "POST", "/backfills", map[string]any{"backfill_id": "nightly-2025", "schedule_id": "nightly",
		"start": "2025-01-01T00:00:00Z", "end": "2025-01-04T00:00:00Z"}, 201)
	call(t, l.url, l.token, "POST", "/triggers", map[string]any{"trigger_id": "on-order", "event_type_id": orderType, "entrypoint_id": fnID}, 201)
	call(t, l.url, l.token, "POST", "/events", map[string]any{"event_type_id": orderType, "payload": map[string]any{"order_id": "o-7"}}, 202)
	return l
}

func starlark(src string) map[string]any {
	return map[string]any{"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
		"code": map[string]any{"language": "starlark", "source": src}}
}

// register registers and activates an entrypoint.
func register(t *testing.T, l *lark, body map[string]any) {
	t.Helper()
	ep := call(t, l.url, l.token, "POST", "/entrypoints", body, 201)
	call(t, l.url, l.token, "POST", "/entrypoints/"+ep["id"].(string)+":status", map[string]any{"action": "activate"}, 200)
}

// call sends one API request and requires the status; it answers the decoded object.
func call(t *testing.T, url, token, method, path string, body any, want int) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url+apiBase+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, want, res.StatusCode, "%s %s: %s", method, path, raw)
	var out map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), "%s %s: %s", method, path, raw)
	}
	return out
}

// chromiumPath finds a Chromium or Chrome binary (LARK_TEST_CHROMIUM first).
func chromiumPath() string {
	if p := os.Getenv("LARK_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one tab of the shared headless Chromium, with the page errors it saw.
type browser struct {
	ctx     context.Context
	mu      sync.Mutex
	errors  []string
	allowed []string // substrings of errors a test expects
}

// allow makes errors containing s expected (a refused request the test provokes).
func (b *browser) allow(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allowed = append(b.allowed, s)
}

// chrome is the headless Chromium the browser tests share (a fresh profile for the run); each test
// opens its own tab, so each has its own sessionStorage and logs in itself. TestMain closes it.
var chrome struct {
	once  sync.Once
	ctx   context.Context // the browser's; tabs derive from it
	close func()
	dir   string
}

// newBrowser opens a tab of the shared headless Chromium (started on first use) with the cache
// off (so that page weights are what a first visit transfers), and records the page's uncaught
// exceptions, console errors and the errors the browser logs (CSP violations, failed requests).
// The test fails if there were any.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromiumPath()
	if exe == "" {
		t.Skip("no chromium binary found (install Debian's chromium, or set LARK_TEST_CHROMIUM): the console's browser tests are skipped")
	}
	chrome.once.Do(func() {
		dir, err := os.MkdirTemp("", "lark-console-chromium-")
		require.NoError(t, err)
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
			chromedp.Flag("no-default-browser-check", true), chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.UserDataDir(dir), chromedp.WindowSize(1280, 900),
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		chrome.ctx, chrome.dir = bctx, dir
		chrome.close = func() {
			cancelBrowser()
			cancelAlloc()
			if err := os.RemoveAll(dir); err != nil {
				fmt.Fprintln(os.Stderr, "removing the browser profile:", err)
			}
		}
		// Start the browser now, with a first tab that stays open (closing a browser's first tab
		// closes the browser).
		_, err = chromedp.Call(bctx, runtime.Enable, struct{}{})
		require.NoError(t, err, "starting chromium at %s", exe)
	})
	if chrome.ctx == nil || chrome.ctx.Err() != nil {
		t.Fatal("the shared chromium did not start (see the first browser test's failure)")
	}
	tab, cancelTab := chromedp.NewContext(chrome.ctx)
	ctx, cancelTimeout := context.WithTimeout(tab, 45*time.Second)
	b := &browser{ctx: ctx}
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
	})
	_, err := chromedp.Call(ctx, runtime.Enable, struct{}{})
	require.NoError(t, err, "starting chromium at %s", exe)
	_, err = chromedp.Call(ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
	require.NoError(t, err)
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, a.Description+string(a.Value))
				}
				msg = "console.error: " + strings.Join(parts, " ")
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				msg = fmt.Sprintf("browser log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
			}
		}
		if msg != "" {
			b.mu.Lock()
			if !slices.ContainsFunc(b.allowed, func(a string) bool { return strings.Contains(msg, a) }) {
				b.errors = append(b.errors, msg)
			}
			b.mu.Unlock()
		}
	}))
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		require.Empty(t, b.errors, "the page reported errors")
	})
	return b
}

// do runs actions, failing the test with what it was doing.
func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(b.ctx, actions...), what)
}

// eval evaluates a JavaScript expression.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, "evaluating %s", expr)
	return v
}

// screenshot saves a full-page PNG and logs its path.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := os.Getenv("LARK_TEST_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	p := filepath.Join(dir, name+".png")
	require.NoError(t, os.WriteFile(p, png, 0o644))
	t.Logf("screenshot: %s", p)
}

// login opens the console, which sends a visitor without a token to the login page, and logs in.
func (b *browser) login(t *testing.T, l *lark) {
	t.Helper()
	b.do(t, "log in",
		chromedp.Navigate(l.url+"/console/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), l.token),
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("whoami")))
}

package console_test

// The console in a real browser: a headless Chromium (chromedp) against an in-process Lark server
// seeded through the public API. Each test saves a PNG screenshot of the page it checks, to
// LARK_TEST_SCREENSHOTS when set, else to its temporary directory (the path is logged).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/console"
	"github.com/larkrun/lark/internal/server"
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
	srv, err := server.New(ctx, server.Config{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: opToken,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	l := &lark{url: "http://" + ln.Addr().String()}
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

// TestConsoleInvocationTimeline: log in (the header shows the tenant and subject GET /whoami
// answered), find the compensated checkout in the invocation list, open it, and read its Gantt
// chart: the reserve step, then the failed charge step (retried once), then the compensation of
// reserve, in that order; the step's input and output open from the steps list.
func TestConsoleInvocationTimeline(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	b.login(t, l)
	who, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.ID("whoami")))
	require.NoError(t, err)
	require.Contains(t, who, "alice")
	require.Contains(t, who, "tenant acme")
	require.Equal(t, "alice", eval[string](t, b, `sessionStorage.length > 0 && JSON.parse(sessionStorage.getItem('lark.console.whoami')).subject_id`))

	link := chromedp.CSS(`#invocation-list a[href="/console/invocations/` + l.invocation + `"]`)
	// The status filter: the invocation is listed under dead_lettered, not under succeeded.
	for status, listed := range map[string]bool{"dead_lettered": true, "succeeded": false} {
		b.do(t, "filter by "+status,
			chromedp.Navigate(l.url+"/console/invocations"),
			chromedp.WaitVisible(link),
			chromedp.SetValue(chromedp.CSS(`form.filters select[name="status"]`), status),
			chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#invocation-list[aria-busy="false"]`)))
		require.Equal(t, "status="+status, eval[string](t, b, `location.search.slice(1)`))
		require.Equal(t, listed, eval[bool](t, b, `!!document.querySelector('#invocation-list a[href="/console/invocations/`+l.invocation+`"]')`), status)
	}

	b.do(t, "find the invocation in the list",
		chromedp.Click(chromedp.CSS(`#nav a[href="/console/invocations"]`)),
		chromedp.WaitVisible(link),
		chromedp.Click(link),
		chromedp.WaitVisible(chromedp.CSS(`svg.gantt [data-row="comp:reserve"]`)))
	require.Equal(t, "/console/invocations/"+l.invocation, eval[string](t, b, `location.pathname`))

	rows := eval[[]string](t, b, `[...document.querySelectorAll('svg.gantt [data-row]')].map(e => e.dataset.row)`)
	order := func(row string) int {
		i := slices.Index(rows, row)
		require.GreaterOrEqual(t, i, 0, "no %s row in %v", row, rows)
		return i
	}
	require.Less(t, order("step:reserve"), order("step:charge"), "rows: %v", rows)
	require.Less(t, order("step:charge"), order("comp:reserve"), "rows: %v", rows)
	require.Equal(t, "invocation", rows[0])
	// The charge step failed after two attempts: a retried bar, then a failed one.
	bars := eval[[]string](t, b, `[...document.querySelectorAll('[data-row="step:charge"] .bar')].map(e => e.getAttribute('class'))`)
	require.Equal(t, []string{"bar bar-retry", "bar bar-fail"}, bars)
	require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll('[data-row="comp:reserve"] .bar-comp').length`), "the compensation completed")
	require.Contains(t, eval[string](t, b, `document.querySelector('#inv-head h1').textContent`), "dead_lettered")

	// The reserve step's input and output, opened with the keyboard-reachable button of the steps list.
	b.do(t, "open the reserve step",
		chromedp.Click(chromedp.CSS(`#steps li[data-step="step:reserve"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#entry-detail pre[aria-label="Step output"]`)))
	out := eval[string](t, b, `[...document.querySelectorAll('#entry-detail pre[aria-label="Step output"]')].map(e => e.textContent).join('\n')`)
	require.Contains(t, out, "rsv-o-42")
	in := eval[string](t, b, `[...document.querySelectorAll('#entry-detail pre[aria-label="Step input"]')].map(e => e.textContent).join('\n')`)
	require.Contains(t, in, "o-42")
	// Control actions follow the status: a dead-lettered invocation can be retried or replayed, not canceled.
	require.Equal(t, []bool{true, false, false},
		eval[[]bool](t, b, `['cancel','retry','replay'].map(a => document.querySelector('[data-action="'+a+'"]').disabled)`))
	// The chart works from the keyboard: Enter on the failed charge attempt opens its entries.
	b.do(t, "open the failed charge attempt with the keyboard",
		chromedp.SendKeys(chromedp.CSS(`[data-row="step:charge"] .bar-fail`), kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#entry-detail article[data-seq]`)))
	require.Equal(t, "charge: failed", eval[string](t, b, `document.querySelector('#entry-detail h3').textContent`))
	require.Contains(t, eval[string](t, b, `document.getElementById('entry-detail').textContent`), "card declined for o-42")
	b.screenshot(t, "invocation")
	// The panel has the focus; closing it gives the focus back to the bar.
	require.Equal(t, "entry-detail", eval[string](t, b, `document.activeElement.id`))
	b.do(t, "close the panel with the keyboard",
		chromedp.SendKeys(chromedp.CSS(`#entry-detail > button`), kb.Enter),
		chromedp.WaitNotVisible(chromedp.ID("entry-detail")))
	require.Equal(t, "bar bar-fail", eval[string](t, b, `document.activeElement.getAttribute('class')`))

	// Replay starts a new invocation of the same version and opens it.
	b.do(t, "replay",
		chromedp.Click(chromedp.CSS(`button[data-action="replay"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#main a[href="/console/invocations/`+l.invocation+`"]`)))
	replay := strings.TrimPrefix(eval[string](t, b, `location.pathname`), "/console/invocations/")
	require.NotEqual(t, l.invocation, replay)
	require.Equal(t, l.invocation, call(t, l.url, l.token, "GET", "/invocations/"+replay, nil, 200)["replay_of"])
}

// TestConsoleLive: the invocation list shows an invocation started after the page was loaded, and
// the invocation page follows a workflow while it runs (a step, a durable timer, a step) to its
// end, without a reload.
func TestConsoleLive(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	b.login(t, l)
	b.do(t, "the invocation list", chromedp.Navigate(l.url+"/console/invocations"),
		chromedp.WaitVisible(chromedp.CSS(`#invocation-list[aria-busy="false"]`)))
	res := call(t, l.url, l.token, "POST", "/invocations", map[string]any{"entrypoint_id": fnID}, 202)
	id := res["record"].(map[string]any)["invocation_id"].(string)
	b.do(t, "the new invocation appears", chromedp.WaitVisible(chromedp.CSS(`#invocation-list a[href="/console/invocations/`+id+`"]`)))

	res = call(t, l.url, l.token, "POST", "/invocations", map[string]any{"entrypoint_id": napID, "params": map[string]any{"ms": 2000}}, 202)
	id = res["record"].(map[string]any)["invocation_id"].(string)
	b.do(t, "open the napping workflow", chromedp.Navigate(l.url+"/console/invocations/"+id), chromedp.WaitVisible(chromedp.CSS(`#inv-head h1`)))
	require.NotContains(t, eval[string](t, b, `document.querySelector('#inv-head h1').textContent`), "succeeded", "the workflow sleeps 2 s")
	b.do(t, "the page follows the workflow to its end",
		chromedp.WaitVisible(chromedp.CSS(`svg.gantt [data-row="step:after"] .bar-ok`)))
	require.Contains(t, eval[string](t, b, `document.querySelector('#inv-head h1').textContent`), "succeeded")
	rows := eval[[]string](t, b, `[...document.querySelectorAll('svg.gantt [data-row]')].map(e => e.dataset.row)`)
	require.Equal(t, []string{"invocation", "step:before", "suspended", "step:after"}, rows)
	b.screenshot(t, "live")
}

// TestConsolePauseSchedule: pausing a schedule in the console pauses it (read back through the API).
func TestConsolePauseSchedule(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	b.login(t, l)
	link := chromedp.CSS(`a[href="/console/schedules/nightly"]`)
	b.do(t, "pause the schedule",
		chromedp.Click(chromedp.CSS(`#nav a[href="/console/schedules"]`)),
		chromedp.WaitVisible(link),
		chromedp.Click(link),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="pause"]`)),
		chromedp.Click(chromedp.CSS(`button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="resume"]`)))
	require.Equal(t, "paused", call(t, l.url, l.token, "GET", "/schedules/nightly", nil, 200)["status"])
	require.Contains(t, eval[string](t, b, `document.getElementById('schedule-status').textContent`), "paused")
	b.screenshot(t, "schedule-paused")
}

// TestConsolePageWeight: every page, loaded from scratch with the browser cache off, transfers
// under 200 KB: the document, scripts, styles and the page's API answers (the Resource Timing
// transfer sizes, headers included).
func TestConsolePageWeight(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	b.login(t, l)
	epID := call(t, l.url, l.token, "GET", "/entrypoints/"+wfID, nil, 200)["id"].(string)
	pages := []struct{ path, ready string }{
		{"/console/login", "#token"},
		{"/console/entrypoints", "table"},
		{"/console/entrypoints/" + epID, "pre.code .tok-helper"},
		{"/console/invocations", "#invocation-list table"},
		{"/console/invocations/" + l.invocation, `svg.gantt [data-row="comp:reserve"]`},
		{"/console/schedules", "table"},
		{"/console/schedules/nightly", "#history"},
		{"/console/backfills", "#backfill-list table"},
		{"/console/backfills/nightly-2025", "#backfill progress"},
		{"/console/triggers", "table"},
		{"/console/usage", "svg.chart"},
	}
	for _, p := range pages {
		b.do(t, "load "+p.path, chromedp.Navigate(l.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		// Resource Timing entries are complete once the page's requests have ended.
		weight := eval[float64](t, b, `(() => {
			const all = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')];
			return all.reduce((n, e) => n + e.transferSize, 0);
		})()`)
		t.Logf("%s: %.1f KB transferred", p.path, weight/1024)
		require.Less(t, weight, 200.0*1024, "%s transfers %.0f bytes", p.path, weight)
		require.Greater(t, weight, 1000.0, "%s: no transfer measured", p.path)
		b.screenshot(t, "page-"+strings.NewReplacer("/console/", "", "/", "-").Replace(p.path))
	}
	// The source of the entrypoint is highlighted: the runtime helpers and keywords have their classes.
	b.do(t, "entrypoint page", chromedp.Navigate(l.url+"/console/entrypoints/"+epID), chromedp.WaitVisible(chromedp.CSS("pre.code")))
	helpers := eval[[]string](t, b, `[...document.querySelectorAll('pre.code .tok-helper')].map(e => e.textContent)`)
	require.Contains(t, helpers, "r_run_step_v1")
	require.Contains(t, eval[[]string](t, b, `[...document.querySelectorAll('pre.code .tok-keyword')].map(e => e.textContent)`), "def")
	b.do(t, "validate", chromedp.Click(chromedp.ID("validate")), chromedp.WaitVisible(chromedp.CSS("#validation .report")))
	require.Contains(t, eval[string](t, b, `document.querySelector('#validation .report h2').textContent`), "Valid")
	b.screenshot(t, "entrypoint")
	if errors.Is(b.ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the browser ran out of time")
	}
}

// TestConsoleModules runs the console's own modules in the browser on made-up data: the Gantt
// model of a workflow still in flight and of a retried function, and the Starlark tokenizer.
func TestConsoleModules(t *testing.T) {
	b := newBrowser(t)
	h, err := console.Wrap(http.NotFoundHandler())
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	b.do(t, "load the console", chromedp.Navigate(ts.URL+"/console/login"), chromedp.WaitVisible(chromedp.ID("token")))
	load := func(module, expr string) string {
		t.Helper()
		js := `(async () => {
			const base = document.querySelector('script[type=module]').src.replace(/main\.js$/, '');
			const m = await import(base + '` + module + `');
			return JSON.stringify(` + expr + `);
		})()`
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		return v
	}
	type row struct {
		Key   string   `json:"key"`
		Bars  []string `json:"bars"`
		Marks []string `json:"marks"`
	}
	rowsOf := func(items string) []row {
		t.Helper()
		var rows []row
		require.NoError(t, json.Unmarshal([]byte(load("gantt.js", `m.model(`+items+`).rows.map(r => ({key: r.key,
			bars: r.bars.map(b => b.cls + (b.open ? '*' : '')), marks: r.marks.map(k => k.cls)}))`)), &rows))
		return rows
	}
	at := func(i int) string { return fmt.Sprintf("2026-11-25T10:00:%02dZ", i) }
	entry := func(i int, typ, status, step string, details string) string {
		s := "null"
		if step != "" {
			s = `"` + step + `"`
		}
		return fmt.Sprintf(`{"seq":%d,"at":"%s","event_type":"%s","status":"%s","step_name":%s,"details":%s}`, i, at(i), typ, status, s, details)
	}
	inFlight := "[" + strings.Join([]string{
		entry(1, "created", "queued", "", "{}"), entry(2, "started", "running", "", "{}"),
		entry(3, "step_started", "running", "a", `{"attempt":1}`), entry(4, "step_completed", "running", "a", `{"input":{},"result":{"ok":true}}`),
		entry(5, "journal", "running", "", "{}"), entry(6, "suspended", "suspended", "", "{}"),
		entry(7, "resumed", "running", "", `{"reason":"timer"}`), entry(8, "signal_received", "running", "", `{"event_id":"e1"}`),
		entry(9, "step_started", "running", "b", `{"attempt":1}`), entry(10, "http_call", "running", "", `{"method":"GET","host":"x"}`),
	}, ",") + "]"
	require.Equal(t, []row{
		{Key: "invocation", Bars: []string{"run*"}, Marks: []string{"info", "info"}},
		{Key: "step:a", Bars: []string{"ok"}, Marks: []string{}},
		{Key: "suspended", Bars: []string{"susp"}, Marks: []string{}},
		{Key: "events", Bars: []string{}, Marks: []string{"signal"}},
		{Key: "step:b", Bars: []string{"step*"}, Marks: []string{"http"}},
	}, rowsOf(inFlight))

	retried := "[" + strings.Join([]string{
		entry(1, "created", "queued", "", "{}"), entry(2, "started", "running", "", "{}"),
		entry(3, "step_retried", "queued", "", `{"error":{"message":"boom"}}`), entry(4, "started", "running", "", "{}"),
		entry(5, "succeeded", "succeeded", "", "{}"),
	}, ",") + "]"
	require.Equal(t, []row{{Key: "invocation", Bars: []string{"run-ok"}, Marks: []string{"info", "retry", "info", "ok"}}}, rowsOf(retried))

	var toks [][2]string
	require.NoError(t, json.Unmarshal([]byte(load("highlight.js",
		`m.tokens('def main(ctx, input):\n  # hi\n  return r_now_v1() + "a\\"b" + len(x) + 1.5 + None').filter(([k]) => k !== 'space')`)), &toks))
	require.Equal(t, [][2]string{{"keyword", "def"}, {"def", "main"}, {"op", "("}, {"name", "ctx"}, {"op", ","}, {"name", "input"},
		{"op", ")"}, {"op", ":"}, {"comment", "# hi"}, {"keyword", "return"}, {"helper", "r_now_v1"}, {"op", "("}, {"op", ")"}, {"op", "+"},
		{"string", `"a\"b"`}, {"op", "+"}, {"builtin", "len"}, {"op", "("}, {"name", "x"}, {"op", ")"}, {"op", "+"},
		{"number", "1.5"}, {"op", "+"}, {"constant", "None"}}, toks)
	b.screenshot(t, "login")
}

// TestConsoleViewer: a viewer's token logs in and reads, but what it may not do fails with the
// API's answer shown in the page: the usage page (admin only) and pausing a schedule (developer).
func TestConsoleViewer(t *testing.T) {
	b := newBrowser(t)
	l := sharedLark(t)
	viewer := call(t, l.url, opToken, "POST", "/tokens", map[string]any{"tenant_id": tenantID, "subject_id": "vic", "roles": []string{"viewer"}}, 201)
	l.token = viewer["token"].(string)
	b.allow("the server responded with a status of 403")
	b.login(t, l)
	require.Contains(t, eval[string](t, b, `document.getElementById('whoami').textContent`), "vic · tenant acme · viewer")

	b.do(t, "usage", chromedp.Navigate(l.url+"/console/usage"), chromedp.WaitVisible(chromedp.CSS(`#main .page-error`)))
	require.Contains(t, eval[string](t, b, `document.getElementById('flash').textContent`), "403")
	require.Contains(t, eval[string](t, b, `document.querySelector(".page-error").textContent`), "needs the admin role")

	b.do(t, "pause as a viewer",
		chromedp.Navigate(l.url+"/console/schedules/hourly"),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="pause"]`)),
		chromedp.Click(chromedp.CSS(`button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash .msg.error`)))
	require.Contains(t, eval[string](t, b, `document.getElementById('flash').textContent`), "developer role")
	require.Equal(t, "active", call(t, l.url, l.token, "GET", "/schedules/hourly", nil, 200)["status"])
	b.screenshot(t, "viewer-pause-refused")

	// A revoked token ends the session: the next call's 401 sends the user back to the log-in page.
	call(t, l.url, opToken, "DELETE", "/tokens/"+viewer["id"].(string), nil, 204)
	b.allow("the server responded with a status of 401")
	b.do(t, "the token is revoked",
		chromedp.Navigate(l.url+"/console/entrypoints"),
		chromedp.WaitVisible(chromedp.ID("token")))
	require.Contains(t, eval[string](t, b, `document.getElementById('flash').textContent`), "session ended")
	require.Equal(t, 0, eval[int](t, b, `sessionStorage.length`))
	require.Equal(t, "/console/login", eval[string](t, b, `location.pathname`))
}

package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestNowAndRand(t *testing.T) {
	src := fn(
		`  return [r_now_v1(), r_rand_v1(), r_rand_v1(), r_rand_v1("a"), r_rand_v1(label="a"), r_rand_v1(None)]`,
	)
	res1, rerr := exec(t, src, nil, Limits{}, nil)
	require.Nil(t, rerr, "%v", rerr)
	res2, rerr := exec(t, src, nil, Limits{}, nil)
	require.Nil(t, rerr)
	require.Equal(t, res1.Output, res2.Output, "deterministic for one invocation id")

	sum := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:])
	}
	require.Equal(t, []any{
		"2025-03-04T04:06:07.890Z",
		sum("inv-1||0"), sum("inv-1||1"), sum("inv-1|a|0"), sum("inv-1|a|1"), sum("inv-1||2"),
	}, res1.Output)

	prog, err := Compile("t.star", src)
	require.NoError(t, err)
	res3, rerr := Run(context.Background(), Request{Program: prog, Info: Info{InvocationID: "inv-2"}, Host: &fakeHost{}})
	require.Nil(t, rerr)
	require.NotEqual(t, res1.Output.([]any)[1], res3.Output.([]any)[1], "depends on the invocation id")

	for _, body := range []string{`  r_now_v1(1)`, `  r_rand_v1(1)`, `  r_rand_v1(label=1, x=2)`} {
		_, rerr := exec(t, fn(body), nil, Limits{}, nil)
		require.NotNil(t, rerr, body)
		require.Equal(t, ErrValidation, rerr.TypeID, body)
		require.Equal(t, CategoryNonRetryable, rerr.Category, body, "a helper misuse fails the same way every time")
	}
}

func TestExit(t *testing.T) {
	custom := "gts.x.core.serverless.err.v1~acme.billing.err.card_declined.v1~"
	tests := []struct {
		name string
		body string
		want *Error
	}{
		{"dict", `  r_exit({"id": "` + custom + `", "message": "declined", "category": "non_retryable", "details": {"code": 51}})`,
			&Error{TypeID: custom, Category: "non_retryable", Message: "declined", Details: map[string]any{"code": json.Number("51")}}},
		{"struct", `  r_exit(struct(id="` + custom + `", message="try later", category="retryable"))`,
			&Error{TypeID: custom, Category: "retryable", Message: "try later"}},
		{"object from input", `  r_exit(input.err)`,
			&Error{TypeID: custom, Category: "timeout", Message: "from input"}},
		{"default category", `  r_exit({"id": "` + custom + `", "message": "m"})`,
			&Error{TypeID: custom, Category: "non_retryable", Message: "m"}},
		{"missing id", `  r_exit({"message": "m"})`,
			&Error{TypeID: ErrRuntime, Category: "non_retryable", Message: "m"}},
		{"not a gts id", `  r_exit({"id": "card_declined", "message": "m", "category": "resource_limit"})`,
			&Error{TypeID: ErrRuntime, Category: "resource_limit", Message: "m"}},
		{"string", `  r_exit("plain message")`,
			&Error{TypeID: ErrRuntime, Category: "non_retryable", Message: "plain message"}},
		{"scalar details", `  r_exit({"id": "` + custom + `", "details": [1]})`,
			&Error{TypeID: custom, Category: "non_retryable", Details: map[string]any{"value": []any{json.Number("1")}}}},
		{"nested call", "  f()\ndef f():\n  r_exit({\"id\": \"" + custom + "\"})",
			&Error{TypeID: custom, Category: "non_retryable"}},
	}
	input := jsonInput(t, `{"err": {"id": "`+custom+`", "message": "from input", "category": "timeout"}}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rerr := exec(t, fn(tt.body, "  return 1"), input, Limits{}, nil)
			require.NotNil(t, rerr)
			// Like fail(), r_exit adds where the run ended (line, column, backtrace).
			require.IsType(t, 0, rerr.Details["line"])
			require.IsType(t, 0, rerr.Details["column"])
			require.Contains(t, rerr.Details["backtrace"], "in r_exit")
			for _, k := range []string{"line", "column", "backtrace"} {
				delete(rerr.Details, k)
			}
			if len(rerr.Details) == 0 {
				rerr.Details = nil
			}
			require.Equal(t, tt.want, rerr)
		})
	}

	// Malformed envelopes are runtime errors of the call.
	for _, body := range []string{
		`  r_exit({"id": "` + custom + `", "category": "fatal"})`,
		`  r_exit({"details": {"f": main}})`,
		`  r_exit(1)`,
		`  r_exit()`,
	} {
		_, rerr := exec(t, fn(body), nil, Limits{}, nil)
		require.NotNil(t, rerr, body)
		require.Equal(t, ErrValidation, rerr.TypeID, body)
		require.Equal(t, CategoryNonRetryable, rerr.Category, body)
		require.Contains(t, rerr.Message, "r_exit", body)
	}
}

// httpHost answers with a fixed response, recording requests.
func httpHost(status int, body string, headers map[string]string) *fakeHost {
	return &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		return HTTPResponse{StatusCode: status, Headers: headers, Body: []byte(body)}, nil
	}}
}

func TestHTTPSuccess(t *testing.T) {
	h := httpHost(200, `{"items": [{"amount": 2}, {"amount": 3}], "odd-key": null}`, map[string]string{"Content-Type": "application/json"})
	src := fn(
		`  res = r_await(r_http_get_v1("https://api.example.com/items?token=secret", headers={"X-A": "1"}, timeout_ms=1500))`,
		`  total = 0`,
		`  for item in res.response.body.get("items", []):`,
		`    total += item["amount"]`,
		`  p = r_await(r_http_post_v1("https://api.example.com/orders", {"n": total, "l": [1.5, None]}))`,
		`  return {"ok": res.ok, "status": res.response.status_code, "ct": res.response.headers["content-type"],`,
		`          "total": total, "odd": res.response.body["odd-key"], "post_ok": p.ok}`,
	)
	res, rerr := exec(t, src, nil, Limits{}, h)
	require.Nil(t, rerr, "%v", rerr)
	require.Equal(t, map[string]any{"ok": true, "status": json.Number("200"), "ct": "application/json",
		"total": json.Number("5"), "odd": nil, "post_ok": true}, res.Output)
	reqs := h.requests()
	require.Len(t, reqs, 2)
	require.Equal(t, "GET", reqs[0].Method)
	require.Equal(t, "https://api.example.com/items?token=secret", reqs[0].URL)
	require.Equal(t, map[string]string{"X-A": "1"}, reqs[0].Headers)
	require.Greater(t, reqs[0].Timeout, time.Second)
	require.LessOrEqual(t, reqs[0].Timeout, 1500*time.Millisecond)
	require.Equal(t, "POST", reqs[1].Method)
	require.JSONEq(t, `{"n": 5, "l": [1.5, null]}`, string(reqs[1].Body))
	require.Equal(t, "application/json", reqs[1].Headers["Content-Type"])
	require.LessOrEqual(t, reqs[1].Timeout, DefaultHelperTimeout)

	// A body that is not JSON is {}; a JSON scalar is itself.
	for body, want := range map[string]any{"<html>": json.Number("0"), "": json.Number("0"), `"s"`: "s", `[1]`: []any{json.Number("1")}} {
		h := httpHost(200, body, nil)
		res, rerr := exec(t, fn(`  b = r_await(r_http_get_v1("http://h")).response.body`, `  return len(b) if type(b) == "object" else b`), nil, Limits{}, h)
		require.Nil(t, rerr, "%v", rerr)
		require.Equal(t, want, res.Output, body)
	}

	// Argument errors.
	for _, body := range []string{
		`  r_http_get_v1("ftp://h")`,
		`  r_http_get_v1("/relative")`,
		`  r_http_get_v1(1)`,
		`  r_http_get_v1("http://h", headers={"a": 1})`,
		`  r_http_get_v1("http://h", timeout_ms=0)`,
		`  r_http_get_v1("http://h", retry={"max_attempts": 0})`,
		`  r_http_get_v1("http://h", retry={"tries": 2})`,
		`  r_http_get_v1("http://h", exit_on_http_error=1)`,
		`  r_http_post_v1("http://h")`,
		`  r_http_post_v1("http://h", set([1]))`,
		`  r_http_get_v1("http://h", timeout=5)`,
		`  r_await(1)`,
		`  r_await_all([1])`,
		`  r_await_all("ab")`,
	} {
		_, rerr := exec(t, fn(body), nil, Limits{}, &fakeHost{})
		require.NotNil(t, rerr, body)
		require.Equal(t, ErrValidation, rerr.TypeID, body)
		require.Equal(t, CategoryNonRetryable, rerr.Category, body, "a helper misuse fails the same way every time")
	}
}

func TestHTTPNon2xx(t *testing.T) {
	for _, tt := range []struct {
		status   int
		category string
	}{{404, CategoryNonRetryable}, {400, CategoryNonRetryable}, {429, CategoryRetryable}, {503, CategoryRetryable}} {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			h := httpHost(tt.status, `{"error": "nope"}`, map[string]string{"X-Secret": "hdr"})
			src := fn(
				`  p = r_http_get_v1("https://api.example.com/v1/x?api_key=secret")`,
				`  return r_await(p)`,
			)
			_, rerr := exec(t, src, nil, Limits{}, h)
			require.NotNil(t, rerr)
			require.Equal(t, ErrHTTP, rerr.TypeID)
			require.Equal(t, tt.category, rerr.Category)
			require.Equal(t, tt.status, rerr.Details["status_code"])
			require.Equal(t, "api.example.com", rerr.Details["host"])
			require.Equal(t, 3, rerr.Details["line"])
			data, err := json.Marshal(rerr)
			require.NoError(t, err)
			require.NotContains(t, string(data), "secret")
			require.NotContains(t, string(data), "/v1/x")
			require.NotContains(t, string(data), "hdr")

			// exit_on_http_error=False: the program sees the error.
			src = fn(
				`  res = r_await(r_http_get_v1("https://api.example.com/x?q=1", exit_on_http_error=False))`,
				`  return [res.ok, res.error.id, res.error.category, res.error.details.status_code, res.response.status_code, res.response.body.error]`,
			)
			res, rerr := exec(t, src, nil, Limits{}, h)
			require.Nil(t, rerr, "%v", rerr)
			require.Equal(t, []any{false, ErrHTTP, tt.category, json.Number(fmt.Sprint(tt.status)), json.Number(fmt.Sprint(tt.status)), "nope"}, res.Output)
		})
	}
}

func TestHTTPTransportError(t *testing.T) {
	h := &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		// A careless host error that contains the URL.
		return HTTPResponse{}, fmt.Errorf("dial %s: connection refused", req.URL)
	}}
	_, rerr := exec(t, fn(`  return r_await(r_http_get_v1("https://db.internal/x?password=secret"))`), nil, Limits{}, h)
	require.NotNil(t, rerr)
	require.Equal(t, ErrHTTPTransport, rerr.TypeID)
	require.Equal(t, CategoryRetryable, rerr.Category)
	require.Equal(t, "db.internal", rerr.Details["host"])
	data, err := json.Marshal(rerr)
	require.NoError(t, err)
	require.NotContains(t, string(data), "secret")

	// A typed host error is kept.
	h.http = func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		return HTTPResponse{}, &Error{TypeID: ErrHTTPTransport, Category: CategoryNonRetryable, Message: "domain not allowed",
			Details: map[string]any{"kind": "forbidden_domain"}}
	}
	src := fn(`  res = r_await(r_http_get_v1("https://evil.example/", exit_on_http_error=False))`,
		`  return [res.ok, res.error.id, res.error.category, res.error.message, res.error.details.kind, res.error.details.host]`)
	res, rerr := exec(t, src, nil, Limits{}, h)
	require.Nil(t, rerr, "%v", rerr)
	require.Equal(t, []any{false, ErrHTTPTransport, CategoryNonRetryable, "domain not allowed", "forbidden_domain", "evil.example"}, res.Output)
}

func TestHTTPRetry(t *testing.T) {
	var calls atomic.Int32
	flaky := func(failures int) *fakeHost {
		calls.Store(0)
		return &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
			switch n := calls.Add(1); {
			case int(n) > failures:
				return HTTPResponse{StatusCode: 200, Body: []byte(`{"n": ` + fmt.Sprint(n) + `}`)}, nil
			case n%2 == 1:
				return HTTPResponse{StatusCode: 503}, nil
			default:
				return HTTPResponse{}, &Error{TypeID: ErrHTTPTransport, Category: CategoryRetryable, Message: "reset"}
			}
		}}
	}
	retry := `retry={"max_attempts": 3, "initial_delay_ms": 10, "max_delay_ms": 20, "backoff_multiplier": 2.0}`

	start := time.Now()
	res, rerr := exec(t, fn(`  return r_await(r_http_get_v1("http://h/", `+retry+`)).response.body.n`), nil, Limits{}, flaky(2))
	require.Nil(t, rerr, "%v", rerr)
	require.Equal(t, json.Number("3"), res.Output)
	require.EqualValues(t, 3, calls.Load())
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "backoff 10ms then 20ms")

	// Not enough attempts: the last failure is the result.
	_, rerr = exec(t, fn(`  return r_await(r_http_get_v1("http://h/", retry={"max_attempts": 2, "initial_delay_ms": 1}))`), nil, Limits{}, flaky(3))
	require.NotNil(t, rerr)
	require.Equal(t, ErrHTTPTransport, rerr.TypeID)
	require.EqualValues(t, 2, rerr.Details["attempts"])
	require.EqualValues(t, 2, calls.Load())

	// Without retry, one attempt.
	_, rerr = exec(t, fn(`  return r_await(r_http_get_v1("http://h/"))`), nil, Limits{}, flaky(2))
	require.NotNil(t, rerr)
	require.Equal(t, ErrHTTP, rerr.TypeID)
	require.EqualValues(t, 1, calls.Load())

	// 4xx other than 429 are not retried.
	calls.Store(0)
	h := &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		calls.Add(1)
		return HTTPResponse{StatusCode: 404}, nil
	}}
	_, rerr = exec(t, fn(`  return r_await(r_http_get_v1("http://h/", `+retry+`))`), nil, Limits{}, h)
	require.Equal(t, ErrHTTP, rerr.TypeID)
	require.EqualValues(t, 1, calls.Load())

	// Retries stop at the deadline: a backoff longer than the time left is not waited.
	calls.Store(0)
	h = &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		calls.Add(1)
		return HTTPResponse{StatusCode: 500}, nil
	}}
	start = time.Now()
	_, rerr = exec(t, fn(`  return r_await(r_http_get_v1("http://h/", retry={"max_attempts": 5, "initial_delay_ms": 5000}))`),
		nil, Limits{Timeout: time.Second}, h)
	require.Equal(t, ErrHTTP, rerr.TypeID)
	require.EqualValues(t, 1, calls.Load())
	require.Less(t, time.Since(start), 900*time.Millisecond)
}

func TestAwaitAllRunsConcurrently(t *testing.T) {
	const n = 8
	var inFlight, maxInFlight atomic.Int32
	arrived := make(chan struct{}, 64)
	all := make(chan struct{})
	go func() {
		for range n {
			<-arrived
		}
		close(all)
	}()
	h := &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if cur <= m || maxInFlight.CompareAndSwap(m, cur) {
				break
			}
		}
		arrived <- struct{}{}
		select {
		case <-all: // every request of the first batch is in flight
		case <-time.After(5 * time.Second):
			return HTTPResponse{StatusCode: 504}, nil
		case <-ctx.Done():
			return HTTPResponse{}, ctx.Err()
		}
		return HTTPResponse{StatusCode: 200, Body: []byte(`{"url": "` + req.URL + `"}`)}, nil
	}}
	src := fn(
		fmt.Sprintf(`  ps = [r_http_get_v1("http://h/%%d" %% i) for i in range(%d)]`, n+4),
		`  return [r.response.body.url for r in r_await_all(ps)]`,
	)
	start := time.Now()
	res, rerr := exec(t, src, nil, Limits{Timeout: 10 * time.Second}, h)
	require.Nil(t, rerr, "%v", rerr)
	require.Less(t, time.Since(start), 4*time.Second)
	out := res.Output.([]any)
	require.Len(t, out, n+4)
	for i, u := range out {
		require.Equal(t, fmt.Sprintf("http://h/%d", i), u)
	}
	require.EqualValues(t, maxHostCalls, maxInFlight.Load(), "at most 8 host calls at a time")

	// r_await_all of a tuple, and awaiting twice returns the same value.
	res, rerr = exec(t, fn(`  p = r_http_get_v1("http://h/")`, `  a = r_await_all((p, p))`, `  return [a[0] == a[1], r_await(p) == a[0]]`), nil, Limits{}, &fakeHost{})
	require.Nil(t, rerr)
	require.Equal(t, []any{true, true}, res.Output)
}

func TestUnawaitedPromises(t *testing.T) {
	// An unawaited call completes before the execution ends...
	var done atomic.Bool
	h := &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		time.Sleep(50 * time.Millisecond)
		done.Store(ctx.Err() == nil)
		return HTTPResponse{StatusCode: 202}, nil
	}}
	_, rerr := exec(t, fn(`  r_http_post_v1("http://h/", {"fire": "forget"})`, `  return 1`), nil, Limits{}, h)
	require.Nil(t, rerr)
	require.True(t, done.Load())

	// ...and its failure with exit_on_http_error fails the execution.
	_, rerr = exec(t, fn(`  r_http_post_v1("http://h/", {})`, `  return 1`), nil, Limits{}, httpHost(500, "", nil))
	require.NotNil(t, rerr)
	require.Equal(t, ErrHTTP, rerr.TypeID)
	_, rerr = exec(t, fn(`  r_http_post_v1("http://h/", {}, exit_on_http_error=False)`, `  return 1`), nil, Limits{}, httpHost(500, "", nil))
	require.Nil(t, rerr)
}

func TestInvoke(t *testing.T) {
	h := &fakeHost{}
	var got InvokeRequest
	h.invoke = func(ctx context.Context, req InvokeRequest) (InvokeResult, error) {
		got = req
		switch req.EntrypointID {
		case "ok":
			return InvokeResult{OK: true, Value: jsonInput(t, `{"total": 42, "odd-key": [1]}`)}, nil
		case "fails":
			return InvokeResult{Error: &Error{TypeID: ErrTimeout, Category: CategoryTimeout, Message: "child timed out"}}, nil
		default:
			return InvokeResult{}, errors.New("no such entrypoint")
		}
	}
	src := fn(
		`  a = r_await(r_invoke_v1("ok", {"x": [1, 2]}, timeout_ms=2000))`,
		`  b = r_await(r_invoke_v1("fails"))`,
		`  c = r_await(r_invoke_v1(entrypoint_id="missing", params=None))`,
		`  return [a.ok, a.value.total, a.value["odd-key"], b.ok, b.error.id, b.error.message, c.ok, c.error.id]`,
	)
	res, rerr := exec(t, src, nil, Limits{}, h)
	require.Nil(t, rerr, "%v", rerr)
	require.Equal(t, []any{true, json.Number("42"), []any{json.Number("1")}, false, ErrTimeout, "child timed out", false, ErrRuntime}, res.Output)
	require.Equal(t, "missing", got.EntrypointID)
	require.Nil(t, got.Params)

	var first InvokeRequest
	h.invoke = func(ctx context.Context, req InvokeRequest) (InvokeResult, error) {
		first = req
		return InvokeResult{OK: true}, nil
	}
	_, rerr = exec(t, fn(`  r_await(r_invoke_v1("e", {"x": [1, 2]}, timeout_ms=2000))`), nil, Limits{}, h)
	require.Nil(t, rerr)
	require.Equal(t, map[string]any{"x": []any{json.Number("1"), json.Number("2")}}, first.Params)
	require.LessOrEqual(t, first.Timeout, 2*time.Second)
	require.Greater(t, first.Timeout, time.Second)

	_, rerr = exec(t, fn(`  r_await(r_invoke_v1("e"))`), nil, Limits{}, h)
	require.Nil(t, rerr)
	require.Equal(t, map[string]any{}, first.Params, "params default to {}")
}

func TestTimeoutWithBlockedHostCall(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var canceled atomic.Bool
	h := &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		<-ctx.Done()
		canceled.Store(true)
		return HTTPResponse{}, &Error{TypeID: ErrTimeout, Category: CategoryTimeout, Message: "deadline"}
	}}
	start := time.Now()
	res, rerr := exec(t, fn(`  return r_await(r_http_get_v1("http://h/"))`), nil, Limits{Timeout: 200 * time.Millisecond}, h)
	elapsed := time.Since(start)
	require.NotNil(t, rerr)
	require.Equal(t, ErrTimeout, rerr.TypeID)
	require.Equal(t, CategoryTimeout, rerr.Category)
	require.EqualValues(t, 200, rerr.Details["timeout_ms"])
	require.Equal(t, 2, rerr.Details["line"])
	require.True(t, canceled.Load(), "the host call's context is canceled before Run returns")
	require.GreaterOrEqual(t, elapsed, 200*time.Millisecond)
	require.Less(t, elapsed, 2*time.Second)
	require.Less(t, res.Steps, uint64(1000))

	// The caller's deadline counts too.
	prog, err := Compile("t.star", fn(`  return r_await(r_http_get_v1("http://h/"))`))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, rerr = Run(ctx, Request{Program: prog, Host: h, Limits: Limits{Timeout: time.Hour}})
	require.NotNil(t, rerr)
	require.Equal(t, ErrTimeout, rerr.TypeID)

	// A busy loop is interrupted at the deadline too.
	_, rerr = exec(t, fn(`  while True:`, `    x = 1 + 2`), nil, Limits{Timeout: 200 * time.Millisecond, CPU: 1}, nil)
	require.NotNil(t, rerr)
	require.Contains(t, []string{ErrTimeout, ErrCPULimit}, rerr.TypeID)
}

func TestCanceled(t *testing.T) {
	h := &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		<-ctx.Done()
		return HTTPResponse{}, &Error{TypeID: ErrCanceled, Category: CategoryCanceled, Message: "canceled"}
	}}
	prog, err := Compile("t.star", fn(`  return r_await(r_http_get_v1("http://h/"))`))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, rerr := Run(ctx, Request{Program: prog, Host: h})
	require.NotNil(t, rerr)
	require.Equal(t, ErrCanceled, rerr.TypeID)
	require.Equal(t, CategoryCanceled, rerr.Category)

	// Canceled before the start.
	_, rerr = Run(ctx, Request{Program: prog, Host: h})
	require.Equal(t, ErrCanceled, rerr.TypeID)

	// A busy loop is canceled too.
	prog, err = Compile("t.star", fn(`  while True: pass`))
	require.NoError(t, err)
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, rerr = Run(ctx, Request{Program: prog, Host: h})
	require.Equal(t, ErrCanceled, rerr.TypeID)
}

// panicHost panics in the method named by what.
type panicHost struct {
	fakeHost
	what string
}

func (h *panicHost) HTTP(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
	if h.what == "http" {
		panic("host bug at /src/host.go:12")
	}
	return h.fakeHost.HTTP(ctx, req)
}

func (h *panicHost) Invoke(ctx context.Context, req InvokeRequest) (InvokeResult, error) {
	if h.what == "invoke" {
		panic(errors.New("host bug"))
	}
	return h.fakeHost.Invoke(ctx, req)
}

func (h *panicHost) Log(ctx context.Context, msg string, fields map[string]any) {
	if h.what == "log" {
		panic("log bug")
	}
}

func (h *panicHost) Now() time.Time {
	if h.what == "now" {
		panic("clock bug")
	}
	return h.fakeHost.Now()
}

func TestHostPanicRecovered(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tt := range []struct{ what, body string }{
		{"http", `  return r_await(r_http_get_v1("http://h/"))`},
		{"invoke", "  r = r_await(r_invoke_v1(\"e\"))\n  fail(r.error.message)"},
		{"log", `  print("x")`},
		{"now", `  r_now_v1()`},
	} {
		t.Run(tt.what, func(t *testing.T) {
			_, rerr := exec(t, fn(tt.body), nil, Limits{}, &panicHost{what: tt.what})
			require.NotNil(t, rerr)
			require.Equal(t, ErrRuntime, rerr.TypeID)
			require.Equal(t, CategoryRetryable, rerr.Category)
			require.Contains(t, rerr.Message, "internal")
			require.NotContains(t, rerr.Message, ".go:")
			require.NotContains(t, rerr.Message, "bug")
			require.NotContains(t, fmt.Sprint(rerr.Details), "goroutine")
		})
	}
}

func TestPrintAndLogBounded(t *testing.T) {
	h := &fakeHost{}
	_, rerr := exec(t, fn(`  l = ["x" * 1000] * 100000`, `  print(l)`), nil, Limits{MemoryMB: 16}, h)
	require.NotNil(t, rerr)
	require.Equal(t, ErrMemoryLimit, rerr.TypeID)
	require.Empty(t, h.logs)
	_, rerr = exec(t, fn(`  l = ["x" * 1000] * 100000`, `  ctx.log(l)`), nil, Limits{MemoryMB: 16}, h)
	require.Equal(t, ErrMemoryLimit, rerr.TypeID)
	require.Empty(t, h.logs)
}

func TestErrorString(t *testing.T) {
	require.Equal(t, "timeout: x", (&Error{TypeID: ErrTimeout, Message: "x"}).Error())
	require.Equal(t, "memory_limit: x", (&Error{TypeID: ErrMemoryLimit, Message: "x"}).Error())
	require.Equal(t, "gts.a~b~: x", (&Error{TypeID: "gts.a~b~", Message: "x"}).Error())
	long := strings.Repeat("é", maxMessageBytes)
	require.LessOrEqual(t, len(newError(ErrRuntime, CategoryRetryable, "%s", long).Message), maxMessageBytes)
	var wg sync.WaitGroup
	wg.Wait()
}

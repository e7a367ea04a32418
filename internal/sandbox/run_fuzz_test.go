package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fuzzHost answers at once.
type fuzzHost struct{ fakeHost }

func (h *fuzzHost) HTTP(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
	switch {
	case strings.Contains(req.URL, "fail"):
		return HTTPResponse{}, &Error{TypeID: ErrHTTPTransport, Category: CategoryRetryable, Message: "refused"}
	case strings.Contains(req.URL, "500"):
		return HTTPResponse{StatusCode: 500, Body: []byte("oops")}, nil
	}
	return HTTPResponse{StatusCode: 200, Body: []byte(`{"a": [1, 2.5, "x", null, {"b": true}]}`)}, nil
}

func (h *fuzzHost) Log(context.Context, string, map[string]any) {}

var knownErrorTypes = map[string]bool{
	ErrTimeout: true, ErrCPULimit: true, ErrMemoryLimit: true, ErrRuntime: true, ErrCanceled: true,
	ErrHTTP: true, ErrHTTPTransport: true, ErrValidation: true, ErrPayloadTooLarge: true,
}

// FuzzRun runs arbitrary programs on arbitrary JSON input with tight
// limits: Run must never panic or report an internal error, must return
// within a bound, and must return a JSON-ready output or a well-formed error.
func FuzzRun(f *testing.F) {
	seeds := []string{
		calculateTax,
		fn(`  return input`),
		fn(`  return [k for k in input] if type(input) == "object" else input`),
		fn(`  while True: pass`),
		fn(`  s = "x"`, `  for i in range(64): s += s`),
		fn(`  return [0] * (1 << 28)`),
		fn(`  return list(range(1 << 30))`),
		fn(`  return ",".join(["x" * 1000] * 1000000)`),
		fn(`  return {i: i for i in range(10000000)}`),
		fn(`  def f(n): return f(n + 1)`, `  return f(0)`),
		fn(`  l = []`, `  for i in range(100000): l = [l]`, `  return l`),
		fn(`  return json.encode(input) + str(input) + repr(ctx)`),
		fn(`  return json.decode("[" * 100000)`),
		fn(`  return r_await(r_http_get_v1("http://h/x", retry={"max_attempts": 3, "initial_delay_ms": 1}))`),
		fn(`  return r_await_all([r_http_get_v1("http://h/500", exit_on_http_error=False), r_http_get_v1("http://h/fail", exit_on_http_error=False)])`),
		fn(`  return r_await(r_invoke_v1("e", input))`),
		fn(`  r_exit({"id": "gts.x~", "details": input})`),
		fn(`  return [r_now_v1(), r_rand_v1(), struct(a=input)]`),
		fn(`  x = 7`, `  for i in range(30): x = x * x`),
		fn(`  return "%s %d %r" % ("a", 1, [input])`),
		fn(`  return sorted([3, 1, 2], key=lambda x: -x)`),
		fn(`  fail(input)`),
		"def main(ctx, input):\n  return 1 +\n",
	}
	inputs := []string{`{"amount": 100}`, `null`, `[1, [2, [3]]]`, `{"odd-key": {"get": 1}, "items": []}`, `12345678901234567890123`, `1.5e300`, `"s"`}
	for i, s := range seeds {
		f.Add(s, inputs[i%len(inputs)])
	}
	host := &fuzzHost{}
	f.Fuzz(func(t *testing.T, src, inputJSON string) {
		var input any
		dec := json.NewDecoder(strings.NewReader(inputJSON))
		dec.UseNumber()
		if dec.Decode(&input) != nil {
			input = inputJSON
		}
		prog, err := Compile("fuzz.star", src)
		if err != nil {
			var e *Error
			require.True(t, errors.As(err, &e), "%T", err)
			require.Equal(t, ErrValidation, e.TypeID)
			require.NotContains(t, e.Message, "internal")
			return
		}
		type outcome struct {
			res  Result
			rerr *Error
		}
		done := make(chan outcome, 1)
		go func() {
			res, rerr := Run(context.Background(), Request{Program: prog, Input: input, Info: testInfo, Host: host,
				Limits: Limits{Timeout: 200 * time.Millisecond, CPU: 0.1, MemoryMB: 4}})
			done <- outcome{res, rerr}
		}()
		select {
		case o := <-done:
			if o.rerr != nil {
				require.True(t, knownErrorTypes[o.rerr.TypeID] || strings.HasPrefix(o.rerr.TypeID, "gts."), "%+v", o.rerr)
				require.True(t, validCategory(o.rerr.Category), "%+v", o.rerr)
				require.NotContains(t, o.rerr.Message, "internal interpreter error", "src %q", src)
				_, err := json.Marshal(o.rerr)
				require.NoError(t, err)
			} else {
				_, err := json.Marshal(o.res.Output)
				require.NoError(t, err, "output must be JSON-ready")
			}
			require.LessOrEqual(t, o.res.MaxMemoryBytes, int64(4<<20))
		case <-time.After(5 * time.Second):
			t.Fatalf("Run did not return: %q", src)
		}
	})
}

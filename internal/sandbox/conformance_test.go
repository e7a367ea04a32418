package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/eventfilter"
)

// TestHelperTableAgreesWithRuntime walks the helper table: every helper Check accepts in a kind of
// program exists when such a program runs, and every helper Check refuses does not.
func TestHelperTableAgreesWithRuntime(t *testing.T) {
	for _, h := range Helpers() {
		args := make([]string, h.MinArgs)
		for i := range args {
			args[i] = "None"
		}
		call := "  " + h.Name + "(" + strings.Join(args, ", ") + ")"
		if h.IO {
			call = "  " + h.Name + "(" + strings.Join(append(args, "timeout_ms=1000"), ", ") + ")"
			if h.Name == "r_wait_event_v1" || h.Name == "r_http_get_v1" || h.Name == "r_http_post_v1" || h.Name == "r_invoke_v1" {
				call = strings.Replace(call, "(None", `("x~"`, 1)
			}
		}
		for _, workflow := range []bool{false, true} {
			src := fn(call)
			if workflow && strings.HasPrefix(h.Name, "r_http_") {
				// Called from main itself it is refused (HELPER_OUTSIDE_STEP): from a function
				// (which may be a step's), it is allowed.
				src = "def f():\n" + call + "\n\n" + fn("  f()")
			}
			rep := Check("t.star", src, workflow)
			compile := Compile
			if workflow {
				compile = CompileWorkflow
			}
			_, err := compile("t.star", src)
			accepted := rep.Valid()
			require.Equal(t, accepted, err == nil, "%s (workflow %v): Check says %v, Compile says %v", h.Name, workflow, rep.Errors, err)
			switch {
			case h.Unavailable != "":
				require.False(t, accepted, h.Name)
				require.Equal(t, CodeUnavailableHelper, rep.Errors[0].Code)
				require.Contains(t, rep.Errors[0].Message, h.Unavailable)
			case h.WorkflowOnly && !workflow:
				require.False(t, accepted, h.Name)
				require.Equal(t, CodeWorkflowOnlyHelper, rep.Errors[0].Code)
			default:
				require.True(t, accepted, "%s (workflow %v): %v", h.Name, workflow, rep.Errors)
			}
		}
	}
}

// TestADRRetryDict: the ADR's own retry shape works on the HTTP helpers.
func TestADRRetryDict(t *testing.T) {
	prog, err := Compile("t.star", fn(`  return r_await(r_http_get_v1("https://h.example/x", timeout_ms=5000, retry=input, exit_on_http_error=False)).ok`))
	require.NoError(t, err)
	p, perr := parseRetry("r_http_get_v1", mustStarlark(t, map[string]any{"max_attempts": 3, "backoff_ms": 200}))
	require.NoError(t, perr)
	require.Equal(t, 3, p.maxAttempts)
	for n := 1; n < 3; n++ {
		require.Equal(t, 200*time.Millisecond, p.delay(n), "a constant delay between attempts")
	}

	host := &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		return HTTPResponse{StatusCode: 503, Body: []byte(`{}`)}, nil
	}}
	res, rerr := Run(context.Background(), Request{Program: prog, Input: map[string]any{"max_attempts": 3, "backoff_ms": 1}, Info: testInfo, Host: host})
	require.Nil(t, rerr)
	require.Equal(t, false, res.Output)
	require.Len(t, host.requests(), 3, "max_attempts is the number of attempts in total")

	// A computed dict with an unknown key or a wrong type is a non-retryable validation error.
	for _, input := range []map[string]any{
		{"max_attempts": 3, "backof_ms": 200},
		{"max_attempts": "3"},
		{"backoff_ms": -1},
		{"backoff_ms": 10, "initial_delay_ms": 10},
	} {
		_, rerr := Run(context.Background(), Request{Program: prog, Input: input, Info: testInfo, Host: &fakeHost{}})
		require.NotNil(t, rerr, "%v", input)
		require.Equal(t, ErrValidation, rerr.TypeID, "%v", input)
		require.Equal(t, CategoryNonRetryable, rerr.Category, "%v", input)
		require.Contains(t, rerr.Message, "retry", "%v", input)
	}
}

func mustStarlark(t *testing.T, v any) starlark.Value {
	t.Helper()
	sv, err := toStarlark(&starlark.Thread{}, v)
	require.NoError(t, err)
	return sv
}

// TestCheckLiteralArguments: a literal retry dict and a literal event filter are checked at
// registration, where the runtime would refuse them.
func TestCheckLiteralArguments(t *testing.T) {
	opts := CheckOptions{Filter: func(expr string) error { _, err := eventfilter.Compile(expr); return err }}
	for _, tc := range []struct {
		name, src string
		workflow  bool
		want      []at
		message   string
	}{
		{name: "ADR retry", src: fn(`  r_http_get_v1("https://h", timeout_ms=1, retry={"max_attempts": 3, "backoff_ms": 200})`)},
		{name: "Lark retry", src: fn(`  r_http_get_v1("https://h", timeout_ms=1, retry={"max_attempts": 3, "initial_delay_ms": 100, "backoff_multiplier": 1.5})`)},
		{name: "computed retry", src: fn(`  r_http_get_v1("https://h", timeout_ms=1, retry=input.retry)`)},
		{name: "unknown key", src: fn(`  r_http_get_v1("https://h", timeout_ms=1, retry={"max_attempts": 3, "backof_ms": 200})`),
			want: []at{{CodeInvalidArgument, 2, 70}}, message: `retry has no key "backof_ms"`},
		{name: "wrong type", src: fn(`  r_http_post_v1("https://h", {}, None, 1, {"max_attempts": "3"})`),
			want: []at{{CodeInvalidArgument, 2, 61}}, message: "retry.max_attempts must be an int in 1..10"},
		{name: "out of range and mixed", src: fn(`  r_http_get_v1("https://h", timeout_ms=1, retry={"backoff_ms": -5, "max_delay_ms": 10})`),
			want: []at{{CodeInvalidArgument, 2, 50}, {CodeInvalidArgument, 2, 65}}, message: "cannot be combined"},
		{name: "retry None", src: fn(`  r_http_get_v1("https://h", timeout_ms=1, retry=None)`)},
		{name: "retry an int", src: fn(`  r_http_get_v1("https://h", timeout_ms=1, retry=5)`),
			want: []at{{CodeInvalidArgument, 2, 50}}, message: "r_http_get_v1: retry must be None or a dict such as {\"max_attempts\": 3}, not int"},
		{name: "retry a positional list", src: fn(`  r_http_post_v1("https://h", {}, None, 1, [3])`),
			want: []at{{CodeInvalidArgument, 2, 44}}, message: "not list"},
		{name: "HTTP in a workflow's main", workflow: true, src: fn(`  r_http_get_v1("https://h", timeout_ms=1)`),
			want: []at{{CodeHelperOutsideStep, 2, 3}}, message: "r_http_get_v1 is called in main, outside a step"},
		{name: "HTTP in a workflow's step", workflow: true,
			src: "def get(ctx, url):\n  return r_await(r_http_get_v1(url, timeout_ms=1))\n\n" +
				"def main(ctx, input):\n  r_run_step_v1(\"get\", get, \"https://h\")\n  r_run_step_v1(\"l\", lambda c, u: r_http_post_v1(u, {}, timeout_ms=1), \"https://h\")\n"},
		{name: "HTTP in a function's main", src: fn(`  r_http_post_v1("https://h", {}, timeout_ms=1)`)},
		{name: "filter ok", workflow: true, src: fn(`  r_wait_event_v1("t~", event_filter_query="payload.amount > 1", timeout_ms=1)`)},
		{name: "filter syntax error", workflow: true, src: fn(`  r_wait_event_v1("t~", event_filter_query="payload.amount >", timeout_ms=1)`),
			want: []at{{CodeInvalidFilter, 2, 61}}, message: "event_filter_query"},
		{name: "filter on a later line", workflow: true, src: fn("  r_wait_event_v1(\"t~\", \"\"\"payload.amount > 1 &&\n    payload.x ==\"\"\", 1)"),
			want: []at{{CodeInvalidFilter, 3, 17}}, message: "Syntax error"},
		{name: "computed filter", workflow: true, src: fn(`  r_wait_event_v1("t~", "payload.id == '" + input.id + "'", 1)`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts.Workflow = tc.workflow
			r := CheckWith("t.star", tc.src, opts)
			if tc.want == nil {
				tc.want = []at{}
			}
			require.Equal(t, tc.want, positions(r.Errors), "%v", r.Errors)
			if tc.message != "" {
				var msgs []string
				for _, d := range r.Errors {
					msgs = append(msgs, d.Message)
				}
				require.Contains(t, strings.Join(msgs, "\n"), tc.message)
			}
		})
	}
}

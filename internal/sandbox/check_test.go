package sandbox

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const calculateTax = "def main(ctx, input):\n  return {\"tax\": input.amount * 0.1, \"total\": input.amount * 1.1}\n"

// at is a diagnostic reduced to what the tables compare.
type at struct {
	Code      string
	Line, Col int
}

func positions(ds []Diagnostic) []at {
	out := []at{}
	for _, d := range ds {
		out = append(out, at{d.Code, d.Line, d.Column})
	}
	return out
}

// fn wraps body lines into a valid main; body lines start at line 2.
func fn(body ...string) string {
	return "def main(ctx, input):\n" + strings.Join(body, "\n") + "\n"
}

func TestCheckCalculateTax(t *testing.T) {
	for _, workflow := range []bool{false, true} {
		r := Check("calculate_tax.star", calculateTax, workflow)
		require.True(t, r.Valid())
		require.Empty(t, r.Errors)
		require.Empty(t, r.Warnings)
		require.Empty(t, r.Features)
		require.False(t, r.UsesWorkflowPrimitives)
	}
}

func TestCheckDiagnostics(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		workflow bool
		errors   []at
		warnings []at
	}{
		// SOURCE_TOO_LARGE
		{
			name:   "source too large",
			src:    calculateTax + strings.Repeat("#", MaxSourceBytes),
			errors: []at{{CodeSourceTooLarge, 0, 0}},
		},
		{
			name: "source exactly at the limit",
			src:  calculateTax + "#" + strings.Repeat("x", MaxSourceBytes-len(calculateTax)-1),
		},

		// SYNTAX_ERROR
		{
			name:   "incomplete expression",
			src:    "def main(ctx, input):\n  return {\"tax\": input.invoice_total * }\n",
			errors: []at{{CodeSyntaxError, 2, 40}},
		},
		{
			name:   "unterminated string",
			src:    "def main(ctx, input):\n  x = \"abc\n  return x\n",
			errors: []at{{CodeSyntaxError, 2, 7}},
		},
		{
			name:   "bad indentation",
			src:    "def main(ctx, input):\n    x = 1\n  return x\n",
			errors: []at{{CodeSyntaxError, 3, 3}},
		},
		{
			name:   "python-only syntax",
			src:    "def main(ctx, input):\n  try:\n    pass\n",
			errors: []at{{CodeSyntaxError, 2, 3}},
		},
		{
			name:   "resolver error: reassigned global",
			src:    "LIMIT = 1\nLIMIT = 2\n" + calculateTax,
			errors: []at{{CodeSyntaxError, 2, 1}},
		},
		{
			name:   "resolver error: break outside loop",
			src:    fn("  break"),
			errors: []at{{CodeSyntaxError, 2, 3}},
		},
		{
			name:   "resolver error: main defined twice",
			src:    calculateTax + calculateTax,
			errors: []at{{CodeSyntaxError, 3, 5}},
		},

		// LOAD_NOT_ALLOWED
		{
			name:   "load",
			src:    "load(\"lib.star\", \"helper\")\n" + fn("  return helper(input)"),
			errors: []at{{CodeForbiddenBuiltin, 1, 1}},
		},
		{
			name:   "two loads of the same name",
			src:    "load(\"a.star\", \"x\")\nload(\"b.star\", \"x\")\n" + fn("  return x"),
			errors: []at{{CodeForbiddenBuiltin, 1, 1}, {CodeForbiddenBuiltin, 2, 1}},
		},

		// UNDEFINED_NAME
		{
			name:   "undefined name",
			src:    fn("  return foo + input.x"),
			errors: []at{{CodeUndefinedName, 2, 10}},
		},
		{
			name:   "forbidden builtins (001: FORBIDDEN_BUILTIN)",
			src:    fn("  exec(\"1\")", "  return open(\"/etc/passwd\")"),
			errors: []at{{CodeForbiddenBuiltin, 2, 3}, {CodeForbiddenBuiltin, 3, 10}},
		},
		{
			name:   "undefined at top level and in a nested function",
			src:    "X = y\n" + fn("  def inner():", "    return z", "  return inner()"),
			errors: []at{{CodeUndefinedName, 1, 5}, {CodeUndefinedName, 4, 12}},
		},
		{
			name: "globals defined after use, comprehensions and lambdas resolve",
			src: fn("  f = lambda v: v * RATE", "  return [f(i) for i in range(3) if i > 0]") +
				"RATE = 2\n",
		},

		// MISSING_MAIN
		{
			name:   "no main",
			src:    "def handler(ctx, input):\n  return 1\n",
			errors: []at{{CodeMissingMain, 0, 0}},
		},
		{
			name:   "empty source",
			src:    "",
			errors: []at{{CodeMissingMain, 0, 0}},
		},
		{
			name:   "main as a lambda",
			src:    "main = lambda ctx, input: 1\n",
			errors: []at{{CodeMissingMain, 0, 0}},
		},
		{
			name:   "main nested in a function is not top-level",
			src:    "def outer():\n  def main(ctx, input):\n    return 1\n  return main\n",
			errors: []at{{CodeMissingMain, 0, 0}},
		},
		{
			name:   "main inside a top-level if is not top-level",
			src:    "if True:\n  def main(ctx, input):\n    return 1\n",
			errors: []at{{CodeMissingMain, 0, 0}},
		},

		// BAD_MAIN_SIGNATURE
		{
			name:   "one parameter",
			src:    "# comment\ndef main(ctx):\n  return 1\n",
			errors: []at{{CodeBadMainSignature, 2, 1}},
		},
		{
			name:   "no parameters",
			src:    "def main():\n  return 1\n",
			errors: []at{{CodeBadMainSignature, 1, 1}},
		},
		{
			name:   "three parameters",
			src:    "def main(ctx, input, extra):\n  return 1\n",
			errors: []at{{CodeBadMainSignature, 1, 1}},
		},
		{
			name:   "default value",
			src:    "def main(ctx, input=None):\n  return 1\n",
			errors: []at{{CodeBadMainSignature, 1, 1}},
		},
		{
			name:   "varargs",
			src:    "def main(ctx, *args):\n  return 1\n",
			errors: []at{{CodeBadMainSignature, 1, 1}},
		},
		{
			name:   "kwargs",
			src:    "def main(ctx, **kwargs):\n  return 1\n",
			errors: []at{{CodeBadMainSignature, 1, 1}},
		},
		{
			name:   "keyword-only",
			src:    "def main(*, ctx, input):\n  return 1\n",
			errors: []at{{CodeBadMainSignature, 1, 1}},
		},
		{
			name: "other parameter names are accepted",
			src:  "def main(context, params):\n  return params\n",
		},

		// UNKNOWN_HELPER
		{
			name:   "unknown helper version",
			src:    fn("  return r_http_get_v2(\"https://x\", timeout_ms=5)"),
			errors: []at{{CodeUnknownHelper, 2, 10}},
		},
		{
			name:   "unknown helper referenced as a value",
			src:    fn("  f = r_foo_v9", "  return f"),
			errors: []at{{CodeUnknownHelper, 2, 7}},
		},
		{
			name: "user-defined r_ names are fine",
			src:  "def r_double(x):\n  return 2 * x\n" + "def main(ctx, input):\n  r_local = 1\n  return r_double(r_local)\n",
		},

		// HELPER_ARITY
		{
			name:   "too many positional",
			src:    fn("  return r_now_v1(1, 2)"),
			errors: []at{{CodeHelperArity, 2, 19}},
		},
		{
			name:   "missing required",
			src:    fn("  return r_http_post_v1(\"https://x\", timeout_ms=5)"),
			errors: []at{{CodeHelperArity, 2, 10}},
		},
		{
			name:   "no arguments at all",
			src:    fn("  return r_await()"),
			errors: []at{{CodeHelperArity, 2, 10}},
		},
		{
			name:   "unknown keyword",
			src:    fn("  return r_http_get_v1(\"https://x\", timeout=5)"),
			errors: []at{{CodeHelperArity, 2, 37}},
			// timeout is not timeout_ms, so the default applies
			warnings: []at{{CodeMissingTimeout, 2, 10}},
		},
		{
			name:   "keyword duplicates a positional",
			src:    fn("  return r_exit(\"boom\", error=\"boom\")"),
			errors: []at{{CodeHelperArity, 2, 25}},
		},
		{
			name:   "repeated keyword is reported once, as HELPER_ARITY",
			src:    fn("  return r_rand_v1(label=\"a\", label=\"b\")"),
			errors: []at{{CodeHelperArity, 2, 31}},
		},
		{
			name: "required given by keyword",
			src: fn("  s = r_step_v1(fn=main, name=\"s\")",
				"  return r_run_step_v1(\"s\", main, input=input, exit_on_error=False)"),
			workflow: true,
		},
		{
			name:   "missing several required",
			src:    fn("  return r_run_step_v1(\"s\")"),
			errors: []at{{CodeHelperArity, 2, 10}},
			// workflow-only, but we are in a workflow
			workflow: true,
		},
		{
			name: "varargs and kwargs defer the check to run time",
			src: fn("  a = [\"https://x\"]", "  kw = {\"timeout_ms\": 5}",
				"  r_http_get_v1(*a)", "  r_http_get_v1(**kw)", "  return None"),
		},
		{
			name:   "explicit positionals are still counted with varargs",
			src:    fn("  return r_now_v1(1, *[])"),
			errors: []at{{CodeHelperArity, 2, 19}},
		},
		{
			name: "helper passed as a value is not a call",
			src:  fn("  f = r_now_v1", "  return [f(), r_await, r_exit]"),
		},
		{
			name: "method named like a helper is not a helper",
			src:  fn("  return ctx.r_now_v1(1, 2, 3)"),
		},
		{
			name: "shadowing a helper makes it the user's function",
			src:  "def r_sleep(ms):\n  return ms\n" + fn("  return r_sleep(1, 2)"),
		},
		{
			name: "local shadowing a helper",
			src:  fn("  r_now_v1 = lambda *a: 1", "  return r_now_v1(1, 2)"),
		},

		// WORKFLOW_ONLY_HELPER
		{
			name:   "workflow-only helper in a function",
			src:    fn("  r_await(r_sleep(1000))", "  return None"),
			errors: []at{{CodeWorkflowOnlyHelper, 2, 11}},
		},
		{
			name:     "workflow-only helper in a workflow",
			src:      fn("  r_await(r_sleep(1000))", "  return None"),
			workflow: true,
		},
		{
			name: "every workflow-only helper, as calls and as values",
			src: fn("  r_sleep_v1(1)", "  r_snapshot_v1()", "  r_step_v1(\"a\", main)",
				"  r_run_step_v1(\"a\", main, input)", "  f = r_wait_event_v1", "  return f"),
			errors: []at{
				{CodeWorkflowOnlyHelper, 2, 3}, {CodeWorkflowOnlyHelper, 3, 3}, {CodeWorkflowOnlyHelper, 4, 3},
				{CodeWorkflowOnlyHelper, 5, 3}, {CodeWorkflowOnlyHelper, 6, 7},
			},
		},
		{
			name:   "workflow-only helper outside main",
			src:    "def helper():\n  return r_snapshot_v1(\"x\")\n" + calculateTax,
			errors: []at{{CodeWorkflowOnlyHelper, 2, 10}},
		},

		// MISSING_TIMEOUT
		{
			name:     "http get without timeout",
			src:      fn("  return r_await(r_http_get_v1(\"https://x\"))"),
			warnings: []at{{CodeMissingTimeout, 2, 18}},
		},
		{
			name: "timeouts by keyword and by position",
			src: fn("  a = r_http_get_v1(\"https://x\", timeout_ms=1000)",
				"  b = r_http_get_v1(\"https://x\", None, 1000)",
				"  c = r_http_post_v1(\"https://x\", {}, None, 1000)",
				"  d = r_invoke_v1(\"id~\", {}, 500)",
				"  return r_await_all([a, b, c, d])"),
		},
		{
			name: "every I/O helper without timeout",
			src: fn("  a = r_http_post_v1(\"https://x\", {})",
				"  b = r_invoke_v1(\"id~\")",
				"  c = r_wait_event_v1(\"ev~\", \"true\")",
				"  return r_await_all([a, b, c])"),
			workflow: true,
			errors:   []at{{CodeHelperOutsideStep, 2, 7}}, // a workflow's HTTP call in main fails at run time
			warnings: []at{{CodeMissingTimeout, 2, 7}, {CodeMissingTimeout, 3, 7}, {CodeMissingTimeout, 4, 7}},
		},
		{
			name:     "timeout_ms=None still counts as given",
			src:      fn("  return r_http_get_v1(\"https://x\", timeout_ms=None)"),
			warnings: []at{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check("main.star", tt.src, tt.workflow)
			want := tt.errors
			if want == nil {
				want = []at{}
			}
			require.Equal(t, want, positions(r.Errors), "errors: %+v", r.Errors)
			wantW := tt.warnings
			if wantW == nil {
				wantW = []at{}
			}
			require.Equal(t, wantW, positions(r.Warnings), "warnings: %+v", r.Warnings)
			require.Equal(t, len(want) == 0, r.Valid())
			for _, d := range append(r.Errors, r.Warnings...) {
				require.NotEmpty(t, d.Message)
				require.NotContains(t, d.Message, internalErrorPrefix)
				if d.Line > 0 {
					require.Equal(t, strings.Split(tt.src, "\n")[d.Line-1], d.Snippet)
				} else {
					require.Empty(t, d.Snippet)
				}
			}
		})
	}
}

func TestCheckMessages(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		workflow bool
		want     Diagnostic
	}{
		{
			name: "syntax error",
			src:  "def main(ctx, input):\n  return {\"tax\": input.invoice_total * }\n",
			want: Diagnostic{
				Code: CodeSyntaxError, Line: 2, Column: 40,
				Message: "Starlark syntax error: got '}', want primary expression",
				Snippet: "  return {\"tax\": input.invoice_total * }",
			},
		},
		{
			name: "source too large",
			src:  strings.Repeat(" ", MaxSourceBytes+1),
			want: Diagnostic{Code: CodeSourceTooLarge, Message: "source is 262145 bytes; the limit is 262144 bytes"},
		},
		{
			name: "load",
			src:  "load(\"lib.star\", \"x\")\n" + calculateTax,
			want: Diagnostic{
				Code: CodeForbiddenBuiltin, Line: 1, Column: 1,
				Message: "Built-in 'load' is not allowed: code runs with the predeclared names only (load of \"lib.star\")",
				Snippet: "load(\"lib.star\", \"x\")",
			},
		},
		{
			name: "undefined with a predeclared suggestion",
			src:  fn("  return lenn(input)"),
			want: Diagnostic{
				Code: CodeUndefinedName, Line: 2, Column: 10,
				Message: "undefined name 'lenn' (did you mean len?)", Snippet: "  return lenn(input)",
			},
		},
		{
			name: "undefined with a local suggestion",
			src:  fn("  total = 1", "  return totl"),
			want: Diagnostic{
				Code: CodeUndefinedName, Line: 3, Column: 10,
				Message: "undefined name 'totl' (did you mean total?)", Snippet: "  return totl",
			},
		},
		{
			name: "undefined without suggestion",
			src:  fn("  return qqqq"),
			want: Diagnostic{
				Code: CodeUndefinedName, Line: 2, Column: 10,
				Message: "undefined name 'qqqq'", Snippet: "  return qqqq",
			},
		},
		{
			name: "missing main",
			src:  "x = 1\n",
			want: Diagnostic{Code: CodeMissingMain, Message: "no top-level main function: define def main(ctx, input)"},
		},
		{
			name: "bad main signature",
			src:  "def main(ctx, input=None, *args, **kwargs):\n  pass\n",
			want: Diagnostic{
				Code: CodeBadMainSignature, Line: 1, Column: 1,
				Message: "main must take exactly two plain positional parameters, main(ctx, input); " +
					"got main(ctx, input=..., *args, **kwargs)",
				Snippet: "def main(ctx, input=None, *args, **kwargs):",
			},
		},
		{
			name: "unknown helper, wrong version",
			src:  fn("  return r_now_v2()"),
			want: Diagnostic{
				Code: CodeUnknownHelper, Line: 2, Column: 10,
				Message: "unknown runtime helper 'r_now_v2' (did you mean r_now_v1?); known: " +
					strings.Join(HelperNames(), ", "),
				Snippet: "  return r_now_v2()",
			},
		},
		{
			name: "unknown helper, no version",
			src:  fn("  return r_http_get(\"u\")"),
			want: Diagnostic{
				Code: CodeUnknownHelper, Line: 2, Column: 10,
				Message: "unknown runtime helper 'r_http_get' (did you mean r_http_get_v1?); known: " +
					strings.Join(HelperNames(), ", "),
				Snippet: "  return r_http_get(\"u\")",
			},
		},
		{
			name: "unknown helper, versioned unversioned helper",
			src:  fn("  r_exit_v1(\"e\")"),
			want: Diagnostic{
				Code: CodeUnknownHelper, Line: 2, Column: 3,
				Message: "unknown runtime helper 'r_exit_v1' (did you mean r_exit?); known: " +
					strings.Join(HelperNames(), ", "),
				Snippet: "  r_exit_v1(\"e\")",
			},
		},
		{
			name: "unknown helper, no suggestion",
			src:  fn("  r_teleport_v1()"),
			want: Diagnostic{
				Code: CodeUnknownHelper, Line: 2, Column: 3,
				Message: "unknown runtime helper 'r_teleport_v1'; known: " + strings.Join(HelperNames(), ", "),
				Snippet: "  r_teleport_v1()",
			},
		},
		{
			name: "too many positional",
			src:  fn("  r_now_v1(1)"),
			want: Diagnostic{
				Code: CodeHelperArity, Line: 2, Column: 12,
				Message: "r_now_v1() takes at most 0 positional arguments but 1 were given; signature: r_now_v1()",
				Snippet: "  r_now_v1(1)",
			},
		},
		{
			name: "missing required",
			src:  fn("  r_http_post_v1(timeout_ms=1)"),
			want: Diagnostic{
				Code: CodeHelperArity, Line: 2, Column: 3,
				Message: "r_http_post_v1() missing required arguments 'url', 'body'; " +
					"signature: r_http_post_v1(url, body, headers=None, timeout_ms=None, retry=None, exit_on_http_error=True)",
				Snippet: "  r_http_post_v1(timeout_ms=1)",
			},
		},
		{
			name: "unknown keyword with suggestion",
			src:  fn("  r_http_get_v1(\"u\", timeout=1)"),
			want: Diagnostic{
				Code: CodeHelperArity, Line: 2, Column: 22,
				Message: "r_http_get_v1() has no parameter named 'timeout' (did you mean timeout_ms?); " +
					"signature: r_http_get_v1(url, headers=None, timeout_ms=None, retry=None, exit_on_http_error=True)",
				Snippet: "  r_http_get_v1(\"u\", timeout=1)",
			},
		},
		{
			name: "multiple values",
			src:  fn("  r_await(1, promise=2)"),
			want: Diagnostic{
				Code: CodeHelperArity, Line: 2, Column: 14,
				Message: "r_await() got multiple values for parameter 'promise'; signature: r_await(promise)",
				Snippet: "  r_await(1, promise=2)",
			},
		},
		{
			name: "repeated keyword",
			src:  fn("  r_invoke_v1(\"e~\", params=1, params=2)"),
			want: Diagnostic{
				Code: CodeHelperArity, Line: 2, Column: 31,
				Message: "r_invoke_v1() got keyword argument 'params' more than once; " +
					"signature: r_invoke_v1(entrypoint_id, params={}, timeout_ms=None)",
				Snippet: "  r_invoke_v1(\"e~\", params=1, params=2)",
			},
		},
		{
			name: "workflow-only",
			src:  fn("  r_wait_event_v1(\"ev~\", timeout_ms=10)"),
			want: Diagnostic{
				Code: CodeWorkflowOnlyHelper, Line: 2, Column: 3,
				Message: "r_wait_event_v1 may only be used in workflows, not in functions",
				Snippet: "  r_wait_event_v1(\"ev~\", timeout_ms=10)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check("main.star", tt.src, tt.workflow)
			require.Len(t, r.Errors, 1, "%+v", r.Errors)
			require.Equal(t, tt.want, r.Errors[0])
		})
	}
}

func TestCheckMissingTimeoutMessage(t *testing.T) {
	src := "# fetch a rate\n\n\n\n\ndef main(ctx, input):\n  res = r_await(r_http_get_v1(\"https://rates.example/eur\"))\n  return res.response.body\n"
	r := Check("main.star", src, false)
	require.Empty(t, r.Errors)
	require.Equal(t, []Diagnostic{{
		Code: CodeMissingTimeout, Line: 7, Column: 17,
		Message: "r_http_get_v1 at line 7 has no timeout_ms; the default 30 s applies",
		Snippet: "  res = r_await(r_http_get_v1(\"https://rates.example/eur\"))",
	}}, r.Warnings)
	require.True(t, r.Valid(), "warnings do not invalidate")
	require.Equal(t, []string{"await", "http_client"}, r.Features)
}

const orderWorkflow = `# Order fulfilment workflow.
INVENTORY = "https://inventory.example"

def reserve(ctx, step_input):
    resp = r_await(r_http_post_v1(INVENTORY + "/reserve", {"sku": step_input.sku}, timeout_ms=5000))
    return resp.response.body

def release(ctx, step_input, step_output):
    r_await(r_http_post_v1(INVENTORY + "/release", step_output, timeout_ms=5000))

def main(ctx, input):
    started = r_now_v1()
    reserve_step = r_step_v1("reserve", reserve, compensate_fn=release)
    reserved = r_run_step_v1("reserve", reserve_step, input)
    if not reserved.ok:
        r_exit(reserved.error)
    r_await(r_sleep_v1(1000))
    paid = r_await(r_wait_event_v1("gts.x.payments.paid.v1~", event_filter_query="payload.order_id == '1'", timeout_ms=60000))
    child = r_await(r_invoke_v1("gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.shop.ship.v1~", {"order": input.order_id}))
    print("gts.x.shop.order_done.v1~", {"id": r_rand_v1("id"), "child": child.ok})
    r_snapshot_v1(label="done")
    return struct(started = started, paid = paid.ok, items = json.decode("[]"), root = math.sqrt(4))
`

func TestCheckRealisticWorkflow(t *testing.T) {
	r := Check("order.star", orderWorkflow, true)
	require.Empty(t, r.Errors)
	require.Equal(t, []at{{CodeMissingTimeout, 19, 21}}, positions(r.Warnings))
	require.Equal(t, []string{
		"await", "clock", "durable_timer", "event_wait", "exit", "http_client",
		"internal_invoke", "randomness", "snapshot", "steps", "workflow_primitives",
	}, r.Features)
	require.True(t, r.UsesWorkflowPrimitives)
	require.True(t, r.Valid())

	// The same source registered as a function.
	r = Check("order.star", orderWorkflow, false)
	require.Equal(t, []at{
		{CodeWorkflowOnlyHelper, 13, 20}, {CodeWorkflowOnlyHelper, 14, 16}, {CodeWorkflowOnlyHelper, 17, 13},
		{CodeWorkflowOnlyHelper, 18, 20}, {CodeWorkflowOnlyHelper, 21, 5},
	}, positions(r.Errors))
	require.False(t, r.Valid())
}

const enrichFunction = `def fetch(url):
    res = r_await(r_http_get_v1(url, headers={"accept": "application/json"}, timeout_ms=2000, exit_on_http_error=False))
    if not res.ok:
        r_exit(res.error)
    return res.response.body

def main(ctx, input):
    customer = fetch("https://crm.example/customers/" + input.customer_id)
    total = 0
    for line in input.lines:
        total += line.amount
    while total > 1000:
        total = total // 2
    return {"customer": customer.get("name", ""), "total": total, "at": r_now_v1(), "sorted": sorted(set([1, 2]))}
`

func TestCheckRealisticFunction(t *testing.T) {
	r := Check("enrich.star", enrichFunction, false)
	require.Empty(t, r.Errors)
	require.Empty(t, r.Warnings)
	require.Equal(t, []string{"await", "clock", "exit", "http_client"}, r.Features)
	require.False(t, r.UsesWorkflowPrimitives)
}

func TestCheckReportsEverythingTogether(t *testing.T) {
	src := `load("util.star", "fmt_money")
def main(ctx):
    rate = r_http_get_v1()
    r_sleep(1000)
    r_now_v1(1)
    x = undefined_thing + r_money_v1(2)
    return fmt_money(x)
`
	r := Check("multi.star", src, false)
	require.Equal(t, []at{
		{CodeForbiddenBuiltin, 1, 1},
		{CodeBadMainSignature, 2, 1},
		{CodeHelperArity, 3, 12},
		{CodeWorkflowOnlyHelper, 4, 5},
		{CodeHelperArity, 5, 14},
		{CodeUndefinedName, 6, 9},
		{CodeUnknownHelper, 6, 27},
	}, positions(r.Errors))
	require.Equal(t, []at{{CodeMissingTimeout, 3, 12}}, positions(r.Warnings))
	require.Equal(t, []string{"clock", "durable_timer", "http_client", "workflow_primitives"}, r.Features)
	require.True(t, r.UsesWorkflowPrimitives)

	// Deterministic.
	for range 5 {
		require.Equal(t, r, Check("multi.star", src, false))
	}
}

func TestCheckOrdering(t *testing.T) {
	// Two problems at one position are ordered by code.
	src := fn("  return r_sleep()")
	r := Check("main.star", src, false)
	require.Equal(t, []at{{CodeHelperArity, 2, 10}, {CodeWorkflowOnlyHelper, 2, 10}}, positions(r.Errors))
	require.True(t, sort.SliceIsSorted(r.Errors, func(i, j int) bool {
		return r.Errors[i].Code < r.Errors[j].Code
	}))
}

func TestCheckSnippets(t *testing.T) {
	t.Run("long line is cut to 200 runes", func(t *testing.T) {
		long := "  return undefined_name + \"" + strings.Repeat("é", 300) + "\""
		r := Check("main.star", fn(long), false)
		require.Len(t, r.Errors, 1)
		require.Equal(t, 200, len([]rune(r.Errors[0].Snippet)))
		require.True(t, strings.HasPrefix(long, r.Errors[0].Snippet))
	})
	t.Run("CRLF line endings", func(t *testing.T) {
		r := Check("main.star", "def main(ctx, input):\r\n  return nope\r\n", false)
		require.Equal(t, []at{{CodeUndefinedName, 2, 10}}, positions(r.Errors))
		require.Equal(t, "  return nope", r.Errors[0].Snippet)
	})
	t.Run("a lone CR ends a line, as in the scanner", func(t *testing.T) {
		r := Check("main.star", "def main(ctx, input):\r  x = 1\r  return nope\n", false)
		require.Equal(t, []at{{CodeUndefinedName, 3, 10}}, positions(r.Errors))
		require.Equal(t, "  return nope", r.Errors[0].Snippet)
	})
	t.Run("columns count runes", func(t *testing.T) {
		r := Check("main.star", fn("  s = \"ééé\" + nope", "  return s"), false)
		require.Equal(t, []at{{CodeUndefinedName, 2, 15}}, positions(r.Errors))
	})
	t.Run("error at end of file", func(t *testing.T) {
		r := Check("main.star", "def main(ctx, input):\n  return (1 +", false)
		require.Len(t, r.Errors, 1)
		require.Equal(t, CodeSyntaxError, r.Errors[0].Code)
		require.Positive(t, r.Errors[0].Line)
	})
}

func TestReportJSON(t *testing.T) {
	b, err := json.Marshal(Check("main.star", calculateTax, false))
	require.NoError(t, err)
	require.JSONEq(t, `{"errors":[],"warnings":[],"detected_features":[],"uses_workflow_primitives":false}`, string(b))

	b, err = json.Marshal(Check("main.star", "def main(ctx, input):\n  return nothing_here\n", false))
	require.NoError(t, err)
	require.JSONEq(t, `{"errors":[{"code":"UNDEFINED_NAME","message":"undefined name 'nothing_here'","line":2,"column":10,
		"source_snippet":"  return nothing_here"}],"warnings":[],"detected_features":[],"uses_workflow_primitives":false}`, string(b))

	b, err = json.Marshal(Check("main.star", "", false))
	require.NoError(t, err)
	require.NotContains(t, string(b), "source_snippet", "empty snippets are omitted")
}

func TestCheckOddInputs(t *testing.T) {
	for _, src := range []string{
		"\x00", "\xff\xfe", "def main(ctx, input):\n  return \"\xff\"\n", strings.Repeat("(", 5000),
		strings.Repeat("[", 999) + strings.Repeat("]", 999), "def main(ctx, input):\n\treturn 1\n",
		"def main(ctx, input):\n  return " + strings.Repeat("-", 3000) + "1\n",
	} {
		require.NotPanics(t, func() {
			r := Check("odd.star", src, false)
			for _, d := range r.Errors {
				require.NotContains(t, d.Message, internalErrorPrefix)
			}
		}, "%q", src)
	}
}

func ExampleCheck() {
	src := `def main(ctx, input):
    res = r_await(r_http_get_v1("https://rates.example/eur"))
    r_sleep(1000)
    return res.response.body["rate"] * input.amount
`
	r := Check("convert.star", src, false)
	fmt.Println("valid:", r.Valid())
	for _, d := range r.Errors {
		fmt.Printf("error %s at %d:%d: %s\n", d.Code, d.Line, d.Column, d.Message)
	}
	for _, d := range r.Warnings {
		fmt.Printf("warning %s at %d:%d: %s\n", d.Code, d.Line, d.Column, d.Message)
	}
	fmt.Println("features:", r.Features)
	// Output:
	// valid: false
	// error WORKFLOW_ONLY_HELPER at 3:5: r_sleep may only be used in workflows, not in functions
	// warning MISSING_TIMEOUT at 2:19: r_http_get_v1 at line 2 has no timeout_ms; the default 30 s applies
	// features: [await durable_timer http_client workflow_primitives]
}

// TestCheckLargeInputsStayCheap guards against super-linear behaviour on
// sources at the size limit. The first case took minutes when the resolver's
// spelling suggestions were used (it sorts every global for every undefined
// use); it takes well under a second now.
func TestCheckLargeInputsStayCheap(t *testing.T) {
	var globals strings.Builder
	for i := 0; globals.Len() < MaxSourceBytes/2; i++ {
		fmt.Fprintf(&globals, "g%d = 1\n", i)
	}
	for globals.Len() < MaxSourceBytes-10 {
		globals.WriteString("u(zzzz)\n")
	}
	tests := map[string]string{
		"many globals and undefined uses": globals.String(),
		"many unknown helpers":            strings.Repeat("r_zzzz_v1\n", MaxSourceBytes/10),
		"many loads":                      strings.Repeat("load(\"a\", \"b\")\n", MaxSourceBytes/16),
		"many bad helper calls":           "def main(ctx, input):\n" + strings.Repeat("  r_http_get_v1(1, 2, 3, 4, 5, 6, a=1)\n", MaxSourceBytes/40),
		"one long expression":             "x = " + strings.Repeat("1+", MaxSourceBytes/2-10) + "1\n",
	}
	for name, src := range tests {
		t.Run(name, func(t *testing.T) {
			require.LessOrEqual(t, len(src), MaxSourceBytes)
			start := time.Now()
			r := Check("big.star", src, false)
			require.Less(t, time.Since(start), 20*time.Second)
			require.NotEmpty(t, r.Errors)
			for _, d := range r.Errors {
				require.NotContains(t, d.Message, internalErrorPrefix)
			}
		})
	}
}

func TestCheckUndefinedReportedAtEveryUse(t *testing.T) {
	src := "X = totl\n" + fn("  total = 1", "  return totl + totl", "def other():", "  return totl")
	r := Check("main.star", src, false)
	require.Equal(t, []at{
		{CodeUndefinedName, 1, 5}, {CodeUndefinedName, 4, 10}, {CodeUndefinedName, 4, 17}, {CodeUndefinedName, 6, 10},
	}, positions(r.Errors))
	// Suggestions come from the names visible where the typo is.
	require.Equal(t, "undefined name 'totl'", r.Errors[0].Message)
	require.Equal(t, "undefined name 'totl' (did you mean total?)", r.Errors[1].Message)
	require.Equal(t, "undefined name 'totl'", r.Errors[3].Message)
}

func TestCheckHintsAreBounded(t *testing.T) {
	src := fn(strings.Repeat("  lenn\n", maxHints+10) + "  return None")
	r := Check("main.star", src, false)
	require.Len(t, r.Errors, maxHints+10)
	require.Equal(t, "undefined name 'lenn' (did you mean len?)", r.Errors[maxHints-1].Message)
	require.Equal(t, "undefined name 'lenn'", r.Errors[maxHints].Message)
}

package sandbox

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var knownCodes = map[string]bool{
	CodeSyntaxError: true, CodeForbiddenBuiltin: true, CodeUndefinedName: true, CodeMissingMain: true,
	CodeBadMainSignature: true, CodeUnknownHelper: true, CodeHelperArity: true,
	CodeWorkflowOnlyHelper: true, CodeSourceTooLarge: true, CodeUnavailableHelper: true, CodeInvalidArgument: true, CodeHelperOutsideStep: true,
	CodeInvalidFilter: true,
}

func FuzzCheck(f *testing.F) {
	seeds := []string{
		calculateTax,
		orderWorkflow,
		enrichFunction,
		"",
		"def main(ctx, input):\n  return {\"tax\": input.invoice_total * }\n",
		"load(\"lib.star\", \"x\")\ndef main(ctx):\n  r_sleep(1, milliseconds=2)\n  r_http_get_v1(timeout=3, timeout=4)\n",
		"def main(ctx, input):\n  return r_foo_v9(lenn(x), r_now_v1(1), r_emit_v1(payload=1, payload=2))\n",
		"def main(*, ctx, input=1, **kw):\n  pass\n",
		"x = 1\nx = 2\nbreak\nreturn\n",
		"def main(ctx, input):\n  r_http_get_v1(*a, **k)\n  r_invoke_v1(\"e~\", {}, 5, 6, 7)\n",
		"def main(ctx, input):\n\tif True:\n  return 1\n",
		"def main(ctx, input):\r\n  return \"\xff\"\r\n",
		"def main(ctx, input):\n  return [x for x in range(3) if r_rand_v1()]\n",
		strings.Repeat("(", 100),
		"def main(ctx, input):\n  return lambda: r_snapshot_v1\n",
	}
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, src string, workflow bool) {
		r := Check("fuzz.star", src, workflow)
		checkReportInvariants(t, src, r)
		require.Equal(t, r, Check("fuzz.star", src, workflow), "deterministic")
	})
}

func checkReportInvariants(t *testing.T, src string, r Report) {
	t.Helper()
	require.NotNil(t, r.Errors)
	require.NotNil(t, r.Warnings)
	require.NotNil(t, r.Features)
	require.Equal(t, len(r.Errors) == 0, r.Valid())
	lines := len(splitLines(src))
	for _, list := range [][]Diagnostic{r.Errors, r.Warnings} {
		require.True(t, sort.SliceIsSorted(list, func(i, j int) bool {
			a, b := list[i], list[j]
			return a.Line < b.Line || (a.Line == b.Line && (a.Column < b.Column ||
				(a.Column == b.Column && a.Code < b.Code)))
		}), "sorted: %+v", list)
		for _, d := range list {
			require.NotContains(t, d.Message, internalErrorPrefix, "checker panicked on %q", src)
			require.NotEmpty(t, d.Message)
			require.GreaterOrEqual(t, d.Line, 0)
			require.GreaterOrEqual(t, d.Column, 0)
			require.LessOrEqual(t, d.Line, lines+1)
			require.LessOrEqual(t, utf8.RuneCountInString(d.Snippet), maxSnippetRunes)
			require.True(t, utf8.ValidString(d.Snippet))
			require.NotContains(t, d.Snippet, "\n")
			require.NotContains(t, d.Snippet, "\r")
		}
	}
	for _, d := range r.Errors {
		require.True(t, knownCodes[d.Code], d.Code)
	}
	for _, d := range r.Warnings {
		require.Equal(t, CodeMissingTimeout, d.Code)
	}
	require.True(t, slices.IsSorted(r.Features))
	require.Equal(t, len(r.Features), len(slices.Compact(slices.Clone(r.Features))))
	require.Equal(t, slices.Contains(r.Features, FeatureWorkflowPrimitives), r.UsesWorkflowPrimitives)
}

// benchmarkSource is a ~100-line workflow using most helpers.
func benchmarkSource() string {
	var b strings.Builder
	b.WriteString("# generated benchmark workflow\nBASE = \"https://api.example\"\n\n")
	for i := range 10 {
		fmt.Fprintf(&b, `def step_%d(ctx, step_input):
    res = r_await(r_http_get_v1(BASE + "/items/%d", headers={"x-i": "%d"}, timeout_ms=1000))
    if not res.ok:
        r_exit(res.error)
    total = 0
    for item in res.response.body.get("items", []):
        total += item["amount"] * %d
    return {"total": total, "at": r_now_v1()}

`, i, i, i, i)
	}
	b.WriteString("def main(ctx, input):\n    results = []\n")
	for i := range 10 {
		fmt.Fprintf(&b, "    results.append(r_run_step_v1(\"step_%d\", step_%d, input))\n", i, i)
	}
	b.WriteString("    r_snapshot_v1(label=\"done\")\n    return {\"results\": [r.value for r in results if r.ok]}\n")
	return b.String()
}

func TestBenchmarkSourceIsValid(t *testing.T) {
	src := benchmarkSource()
	require.InDelta(t, 100, strings.Count(src, "\n"), 20)
	r := Check("bench.star", src, true)
	require.Empty(t, r.Errors)
	require.Empty(t, r.Warnings)
	checkReportInvariants(t, src, r)
}

func BenchmarkCheck(b *testing.B) {
	src := benchmarkSource()
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if r := Check("bench.star", src, true); !r.Valid() {
			b.Fatal(r.Errors)
		}
	}
}

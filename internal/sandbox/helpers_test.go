package sandbox

import (
	"sort"
	"testing"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/stretchr/testify/require"
)

func TestFileOptions(t *testing.T) {
	o := FileOptions()
	require.True(t, o.While)
	require.True(t, o.TopLevelControl)
	require.False(t, o.GlobalReassign)
	require.True(t, o.Recursion)
	require.True(t, o.Set)
	require.False(t, o.LoadBindsGlobally)

	o.While = false
	require.True(t, FileOptions().While, "each call returns a fresh value")
}

func TestHelpersTable(t *testing.T) {
	hs := Helpers()
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.Name
	}
	require.Equal(t, []string{
		"r_await", "r_await_all", "r_http_get_v1", "r_http_post_v1", "r_sleep", "r_sleep_v1",
		"r_now_v1", "r_rand_v1", "r_exit", "r_wait_event_v1", "r_snapshot_v1", "r_step_v1",
		"r_run_step_v1", "r_invoke_v1", "r_emit_v1", "r_continue_as_new_v1",
	}, names)

	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	require.Equal(t, sorted, HelperNames())

	var workflowOnly, io []string
	for _, h := range hs {
		require.NotEmpty(t, h.Feature, h.Name)
		require.Equal(t, len(h.Params), h.MaxArgs, "%s: every parameter may be given positionally", h.Name)
		require.LessOrEqual(t, h.MinArgs, h.MaxArgs, h.Name)
		require.Len(t, h.Defaults, h.MaxArgs-h.MinArgs, h.Name)
		require.NotNil(t, h.Params, h.Name)
		if h.WorkflowOnly {
			workflowOnly = append(workflowOnly, h.Name)
		}
		if h.IO {
			io = append(io, h.Name)
			require.Contains(t, h.Params, "timeout_ms", h.Name)
		}
		got, ok := LookupHelper(h.Name)
		require.True(t, ok)
		require.Equal(t, h, got)
		require.True(t, IsPredeclared(h.Name))
	}
	require.Equal(t, []string{"r_sleep", "r_sleep_v1", "r_wait_event_v1", "r_snapshot_v1", "r_step_v1", "r_run_step_v1", "r_continue_as_new_v1"}, workflowOnly)
	require.Equal(t, []string{"r_http_get_v1", "r_http_post_v1", "r_wait_event_v1", "r_invoke_v1"}, io)

	_, ok := LookupHelper("r_http_get_v2")
	require.False(t, ok)
}

func TestHelperSpecDetails(t *testing.T) {
	tests := []struct {
		name      string
		min, max  int
		params    []string
		feature   string
		signature string
	}{
		{"r_await", 1, 1, []string{"promise"}, "await", "r_await(promise)"},
		{"r_await_all", 1, 1, []string{"promises"}, "await", "r_await_all(promises)"},
		{"r_http_get_v1", 1, 5, []string{"url", "headers", "timeout_ms", "retry", "exit_on_http_error"}, "http_client",
			"r_http_get_v1(url, headers=None, timeout_ms=None, retry=None, exit_on_http_error=True)"},
		{"r_http_post_v1", 2, 6, []string{"url", "body", "headers", "timeout_ms", "retry", "exit_on_http_error"}, "http_client",
			"r_http_post_v1(url, body, headers=None, timeout_ms=None, retry=None, exit_on_http_error=True)"},
		{"r_sleep", 1, 1, []string{"milliseconds"}, "durable_timer", "r_sleep(milliseconds)"},
		{"r_sleep_v1", 1, 1, []string{"milliseconds"}, "durable_timer", "r_sleep_v1(milliseconds)"},
		{"r_now_v1", 0, 0, []string{}, "clock", "r_now_v1()"},
		{"r_rand_v1", 0, 1, []string{"label"}, "randomness", "r_rand_v1(label=None)"},
		{"r_exit", 1, 1, []string{"error"}, "exit", "r_exit(error)"},
		{"r_wait_event_v1", 1, 4, []string{"event_type_id", "event_filter_query", "timeout_ms", "exit_on_error"}, "event_wait",
			"r_wait_event_v1(event_type_id, event_filter_query=None, timeout_ms=None, exit_on_error=True)"},
		{"r_snapshot_v1", 0, 1, []string{"label"}, "snapshot", "r_snapshot_v1(label=None)"},
		{"r_step_v1", 2, 3, []string{"name", "fn", "compensate_fn"}, "steps", "r_step_v1(name, fn, compensate_fn=None)"},
		{"r_run_step_v1", 3, 4, []string{"step_name", "fn", "input", "exit_on_error"}, "steps",
			"r_run_step_v1(step_name, fn, input, exit_on_error=True)"},
		{"r_invoke_v1", 1, 3, []string{"entrypoint_id", "params", "timeout_ms"}, "internal_invoke",
			"r_invoke_v1(entrypoint_id, params={}, timeout_ms=None)"},
		{"r_emit_v1", 2, 2, []string{"event_type_id", "payload"}, "event_emit", "r_emit_v1(event_type_id, payload)"},
		{"r_continue_as_new_v1", 0, 1, []string{"input"}, "continue_as_new", "r_continue_as_new_v1(input=None)"},
	}
	require.Len(t, tests, len(Helpers()))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := LookupHelper(tt.name)
			require.True(t, ok)
			require.Equal(t, tt.min, h.MinArgs)
			require.Equal(t, tt.max, h.MaxArgs)
			require.Equal(t, tt.params, h.Params)
			require.Equal(t, tt.feature, h.Feature)
			require.Equal(t, tt.signature, h.Signature())
		})
	}
}

func TestHelpersReturnsCopies(t *testing.T) {
	hs := Helpers()
	hs[2].Params[0] = "mutated"
	hs[2].Defaults[0] = "mutated"
	h, _ := LookupHelper("r_http_get_v1")
	require.Equal(t, "url", h.Params[0])
	require.Equal(t, "None", h.Defaults[0])
	h.Params[0] = "mutated"
	h2, _ := LookupHelper("r_http_get_v1")
	require.Equal(t, "url", h2.Params[0])
}

func TestPredeclaredNames(t *testing.T) {
	names := PredeclaredNames()
	require.True(t, sort.StringsAreSorted(names))
	for name := range starlark.Universe {
		require.Contains(t, names, name)
		require.True(t, IsPredeclared(name), name)
	}
	for _, name := range []string{"struct", "json", "math", "len", "range", "str", "dict", "fail", "print", "set", "None", "True"} {
		require.True(t, IsPredeclared(name), name)
	}
	for _, h := range Helpers() {
		require.Contains(t, names, h.Name)
	}
	require.Len(t, names, len(starlark.Universe)+3+len(Helpers()))
	for _, name := range []string{"exec", "eval", "open", "load", "time", "random", "r_foo", "main", ""} {
		require.False(t, IsPredeclared(name), name)
	}
	names[0] = "mutated"
	require.NotEqual(t, "mutated", PredeclaredNames()[0])
}

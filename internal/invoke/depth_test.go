package invoke_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/sandbox"
)

// TestParamsDepthBounded: params nested deeper than invocation.MaxJSONDepth are refused with 422
// naming the path (they would be stored in the invocation record), and nothing is created; params
// at the limit run.
func TestParamsDepthBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("echo", "def main(ctx, input):\n  return {\"ok\": True}\n", nil)
	id := fnPrefix + "echo.v1~"
	// {"x": [[...[1]...]]}: the object is one level, so n arrays put 1 inside n+1 containers.
	params := func(n int) json.RawMessage {
		return json.RawMessage(`{"x":` + strings.Repeat("[", n) + "1" + strings.Repeat("]", n) + "}")
	}
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: id, Params: params(invocation.MaxJSONDepth - 1)}, invoke.StartOptions{})
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, st.Record.Status)

	for _, n := range []int{invocation.MaxJSONDepth, 999} {
		_, err = e.start(bob, invoke.StartRequest{EntrypointID: id, Params: params(n)}, invoke.StartOptions{})
		pe := problem.From(err)
		require.Equal(t, 422, pe.Status, "depth %d", n)
		require.Len(t, pe.Issues, 1)
		require.Equal(t, "TOO_DEEP", pe.Issues[0].Code)
		require.Equal(t, "$.params.x"+strings.Repeat("[0]", invocation.MaxJSONDepth), pe.Issues[0].Path)
	}
}

// TestResultDepthBounded: a result nested deeper than the limit fails the invocation instead of
// being stored.
func TestResultDepthBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fn("deep", "def main(ctx, input):\n  v = 1\n  for i in range(1000): v = [v]\n  return v\n", nil)
	st, err := e.start(bob, invoke.StartRequest{EntrypointID: fnPrefix + "deep.v1~"}, invoke.StartOptions{})
	require.NoError(t, err)
	require.NotEqual(t, invocation.StatusSucceeded, st.Record.Status)
	require.Equal(t, sandbox.ErrRuntime, st.Record.Error.TypeID)
	require.Contains(t, st.Record.Error.Message, "levels deep")
	require.Empty(t, st.Record.Result)
}

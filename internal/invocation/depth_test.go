package invocation

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nested returns a value with n levels of {"a": [...]} around a scalar (n arrays/objects in all).
func nested(n int) any {
	var v any = json.Number("1")
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			v = []any{v}
		} else {
			v = map[string]any{"a": v}
		}
	}
	return v
}

func TestTooDeep(t *testing.T) {
	_, deep := TooDeep("$.params", map[string]any{"x": nested(MaxJSONDepth - 1)})
	require.False(t, deep, "a scalar inside exactly MaxJSONDepth containers is accepted")

	path, deep := TooDeep("$.params", map[string]any{"x": nested(MaxJSONDepth)})
	require.True(t, deep)
	rest, ok := strings.CutPrefix(path, "$.params.x.a[0]")
	require.True(t, ok, path)
	require.Equal(t, MaxJSONDepth+1, 3+strings.Count(rest, "[")+strings.Count(rest, "."), "the path names the value one level too deep: %s", path)

	raw := json.RawMessage(strings.Repeat("[", 1000) + strings.Repeat("]", 1000))
	path, deep = TooDeep("$", raw)
	require.True(t, deep)
	require.Equal(t, "$"+strings.Repeat("[0]", MaxJSONDepth+1), path)

	path, deep = TooDeep("$", map[string]any{"odd key": nested(MaxJSONDepth + 5)})
	require.True(t, deep)
	require.True(t, strings.HasPrefix(path, "$['odd key']"), path)
}

package sandbox

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
)

// TestOutputDepthBounded: a result nested deeper than invocation.MaxJSONDepth fails the execution
// (it would be stored, and SQLite's JSON functions cannot read documents near 1,000 levels); one
// exactly at the limit is returned.
func TestOutputDepthBounded(t *testing.T) {
	body := func(n int) string {
		return fn(`  v = 1`, `  for i in range(`+strconv.Itoa(n)+`): v = [v]`, `  return v`)
	}
	res, rerr := exec(t, body(invocation.MaxJSONDepth), nil, Limits{}, nil)
	require.Nil(t, rerr)
	_, deep := invocation.TooDeep("$", res.Output)
	require.False(t, deep)

	_, rerr = exec(t, body(invocation.MaxJSONDepth+1), nil, Limits{}, nil)
	require.NotNil(t, rerr, "a result one level too deep must fail")
	require.Contains(t, rerr.Message, "nested more than "+strconv.Itoa(invocation.MaxJSONDepth)+" levels deep")

	_, rerr = exec(t, body(1000), nil, Limits{}, nil)
	require.NotNil(t, rerr)
	require.True(t, strings.Contains(rerr.Message, "levels deep"), rerr.Message)
}

package sandbox

import (
	"fmt"
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

// TestInputDepthNotBounded: values coming in (an HTTP response, params) may be deeper than what is
// stored; only what goes out is bounded.
func TestInputDepthNotBounded(t *testing.T) {
	deep := jsonInput(t, `{"x":`+strings.Repeat("[", 500)+strings.Repeat("]", 500)+`}`)
	res, rerr := exec(t, fn(`  v = input.x`, `  n = 0`, `  for i in range(1000):`, `    if len(v) == 0: break`, `    v = v[0]`, `    n += 1`, `  return n`), deep, Limits{}, nil)
	require.Nil(t, rerr)
	require.EqualValues(t, "499", fmt.Sprint(res.Output))
}

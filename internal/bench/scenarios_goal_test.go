package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCPUGoal(t *testing.T) {
	t.Parallel()
	require.Nil(t, cpuGoal(nil, 0.35, "server"), "no CPU measured, no goal")
	c := NewCPUPerUnit("invocation", 1000, 0.3, nil, "")
	g := cpuGoal(c, 0.35, "server")
	require.Len(t, g, 1)
	require.True(t, g[0].Met, "0.30 ms ≤ 0.35 ms")
	require.Equal(t, "≤ 0.35 ms server CPU/invocation", g[0].Target)
	pg := 0.4
	c = NewCPUPerUnit("invocation", 1000, 0.3, &pg, "")
	g = cpuGoal(c, 0.6, "server + PG")
	require.False(t, g[0].Met, "0.30 + 0.40 ms > 0.6 ms")
	require.InDelta(t, 0.7, g[0].Value, 1e-9)
}

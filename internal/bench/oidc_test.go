package bench

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSyncOIDCFigures: the ratio is OIDC req/s ÷ Lark-token req/s against the 0.90 goal; a failed
// request or a failed stop fails the scenario.
func TestSyncOIDCFigures(t *testing.T) {
	t.Parallel()
	r := &Runner{Log: io.Discard}
	lark := LoadResult{Requests: 1000, Throughput: 1000}
	lark.Latency.P99Ms = 10
	oidc := LoadResult{Requests: 950, Throughput: 950}
	oidc.Latency.P99Ms = 11
	s := r.finishSyncOIDC(Scenario{Name: "sync-oidc", Status: StatusOK}, lark, oidc, nil)
	require.InDelta(t, 0.95, s.Ratio, 1e-9)
	require.InDelta(t, 1.1, s.P99Ratio, 1e-9)
	require.True(t, s.Goals[0].Met)
	require.Equal(t, StatusOK, s.Status)

	slow := LoadResult{Requests: 800, Throughput: 800}
	s = r.finishSyncOIDC(Scenario{Name: "sync-oidc", Status: StatusOK}, lark, slow, nil)
	require.False(t, s.Goals[0].Met, "0.80 misses the goal")

	bad := oidc
	bad.Errors = 3
	require.Equal(t, StatusFailed, r.finishSyncOIDC(Scenario{Status: StatusOK}, lark, bad, nil).Status)
	require.Equal(t, StatusFailed, r.finishSyncOIDC(Scenario{Status: StatusOK}, lark, oidc, errors.New("stop")).Status)
}

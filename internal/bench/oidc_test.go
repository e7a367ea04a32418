package bench

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSyncOIDCFigures: the ratio is OIDC req/s ÷ Lark-token req/s against the 0.90 goal; a failed
// request or a failed stop fails the scenario.
func TestSyncOIDCFigures(t *testing.T) {
	t.Parallel()
	r := &Runner{Log: io.Discard}
	side := func(reqs []int64, p99 float64, cpuS float64) oidcSide {
		var o oidcSide
		for _, n := range reqs {
			w := LoadResult{Requests: n, Window: time.Second}
			w.Latency.P99Ms = p99
			o.add(w, cpuS/float64(len(reqs)))
		}
		return o
	}
	lark := side([]int64{1000, 1000}, 10, 0.7)
	oidc := side([]int64{900, 1000}, 11, 0.76)
	s := r.finishSyncOIDC(Scenario{Name: "sync-oidc", Status: StatusOK}, lark, oidc, nil)
	require.InDelta(t, 0.95, s.Ratio, 1e-9, "the windows' requests over their time")
	require.InDelta(t, 1.1, s.P99Ratio, 1e-9)
	require.InDelta(t, 0.35, s.SyncOIDC.LarkCPUPerReqMs, 1e-9)
	require.InDelta(t, 0.4, s.SyncOIDC.OIDCCPUPerReqMs, 1e-9)
	require.InDelta(t, 0.4/0.35, s.SyncOIDC.CPURatio, 1e-9)
	require.True(t, s.Goals[0].Met)
	require.Equal(t, StatusOK, s.Status)
	require.Contains(t, details(s), "sync-oidc: 2 windows per token (Lark, OIDC, OIDC, Lark); server CPU per request 0.40 ms with the OIDC token, 0.35 ms with a Lark token (1.143)")

	slow := side([]int64{800, 800}, 10, 0.7)
	s = r.finishSyncOIDC(Scenario{Name: "sync-oidc", Status: StatusOK}, lark, slow, nil)
	require.False(t, s.Goals[0].Met, "0.80 misses the goal")

	bad := oidc
	bad.Errors = 3
	require.Equal(t, StatusFailed, r.finishSyncOIDC(Scenario{Status: StatusOK}, lark, bad, nil).Status)
	require.Equal(t, StatusFailed, r.finishSyncOIDC(Scenario{Status: StatusOK}, lark, oidc, errors.New("stop")).Status)
}

package asset_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/asset"
)

// The protocol's moves are exactly 004 §16's, with approve and reject of a quarantined output;
// promoted and rejected are final.
func TestStateMoves(t *testing.T) {
	t.Parallel()
	allowed := map[[2]asset.State]bool{
		{asset.StateStaged, asset.StateCommitted}:     true,
		{asset.StateStaged, asset.StateQuarantined}:   true,
		{asset.StateStaged, asset.StateRejected}:      true,
		{asset.StateCommitted, asset.StatePromoted}:   true,
		{asset.StateCommitted, asset.StateRejected}:   true,
		{asset.StateQuarantined, asset.StatePromoted}: true,
		{asset.StateQuarantined, asset.StateRejected}: true,
	}
	for _, from := range asset.States {
		require.True(t, from.Valid())
		for _, to := range asset.States {
			require.Equal(t, allowed[[2]asset.State{from, to}], from.CanMove(to), "%s -> %s", from, to)
		}
	}
	require.Equal(t, []asset.State{asset.StateCommitted, asset.StateQuarantined}, asset.StatePromoted.From())
	require.Empty(t, asset.StateStaged.From())
	require.False(t, asset.State("done").Valid())
	require.False(t, asset.State("done").CanMove(asset.StateRejected))
	require.True(t, asset.StateQuarantined.Initial())
	require.False(t, asset.StatePromoted.Initial())
	require.True(t, asset.GatingAllowWithWarning.Valid())
	require.False(t, asset.GatingDecision("maybe").Valid())
	err := error(&asset.TransitionError{ID: "mat_1", From: asset.StatePromoted, To: asset.StateRejected})
	require.EqualError(t, err, "materialization mat_1: cannot move from promoted to rejected")
}

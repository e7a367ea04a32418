package migration_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/migration"
)

var known = migration.FromPaths([]int64{1, 2, 3, 5}, []string{"m/00001_a.sql", "m/00002_b.sql", "m/00003_c.sql", "m/00005_e.sql"})

func TestCompute(t *testing.T) {
	for name, tc := range map[string]struct {
		applied  []int64
		current  int64
		pending  []int64
		unknown  []int64
		tooNew   bool
		behindOK bool // Check(false) passes
	}{
		"new":     {applied: nil, current: 0, pending: []int64{1, 2, 3, 5}},
		"goose 0": {applied: []int64{0}, current: 0, pending: []int64{1, 2, 3, 5}},
		"behind":  {applied: []int64{0, 1, 2}, current: 2, pending: []int64{3, 5}},
		"latest":  {applied: []int64{5, 3, 2, 1, 0}, current: 5, behindOK: true},
		"newer":   {applied: []int64{1, 2, 3, 5, 6}, current: 6, unknown: []int64{6}, tooNew: true},
		"foreign": {applied: []int64{1, 2, 3, 4, 5}, current: 5, unknown: []int64{4}, tooNew: true},
	} {
		t.Run(name, func(t *testing.T) {
			st := migration.Compute(known, tc.applied)
			require.Equal(t, tc.current, st.Current)
			require.Equal(t, int64(5), st.Latest)
			var pending []int64
			for _, m := range st.Pending {
				pending = append(pending, m.Version)
			}
			require.Equal(t, tc.pending, pending)
			require.Equal(t, tc.unknown, st.Unknown)
			var tooNew *migration.TooNewError
			var behind *migration.BehindError
			err := st.Check(true)
			require.Equal(t, tc.tooNew, errors.As(err, &tooNew), "Check(true): %v", err)
			if !tc.tooNew {
				require.NoError(t, err)
			}
			err = st.Check(false)
			switch {
			case tc.tooNew:
				require.True(t, errors.As(err, &tooNew))
			case tc.behindOK:
				require.NoError(t, err)
			default:
				require.True(t, errors.As(err, &behind), "Check(false): %v", err)
				require.Equal(t, len(tc.pending), behind.Pending)
				require.ErrorContains(t, err, "lark migrate up")
			}
		})
	}
	require.Equal(t, "00005_e.sql", known[3].Name)
}

package sqlcore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/odata"
)

func TestSplitIn(t *testing.T) {
	t.Parallel()
	split := []string{"status", "entrypoint_id"}
	many := make([]string, maxSplit+1)
	for i := range many {
		many[i] = fmt.Sprintf("'s%d'", i)
	}
	for _, c := range []struct {
		filter string
		want   []string // the branches, formatted; nil: not split
	}{
		{"status in ('failed', 'running')", []string{"status eq 'failed'", "status eq 'running'"}},
		{"status eq 'failed' or status eq 'running' or status eq 'failed'", []string{"status eq 'failed'", "status eq 'running'"}},
		{"mode eq 'sync' and status in ('a', 'b') and created_at ge 2026-01-01T00:00:00Z",
			[]string{"mode eq 'sync' and status eq 'a' and created_at ge 2026-01-01T00:00:00Z", "mode eq 'sync' and status eq 'b' and created_at ge 2026-01-01T00:00:00Z"}},
		{"entrypoint_id in ('x', 'y') and status in ('a', 'b')", []string{"entrypoint_id in ('x', 'y') and status eq 'a'", "entrypoint_id in ('x', 'y') and status eq 'b'"}},
		{"entrypoint_id in ('x', 'y')", []string{"entrypoint_id eq 'x'", "entrypoint_id eq 'y'"}},
		{"status in ('a')", nil},
		{"status eq 'a'", nil},
		{"not (status in ('a', 'b'))", nil},
		{"status in ('a', 'b') or mode eq 'sync'", nil},
		{"status eq 'a' or mode eq 'sync'", nil},
		{"status ne 'a' or status ne 'b'", nil},
		{"mode in ('sync', 'async')", nil},
		{"status in (" + strings.Join(many, ", ") + ")", nil},
	} {
		e, err := odata.ParseFilter(c.filter)
		require.NoError(t, err, c.filter)
		var got []string
		for _, arm := range splitIn(e, split) {
			got = append(got, odata.Format(arm))
		}
		require.Equal(t, c.want, got, c.filter)
	}
	require.Nil(t, splitIn(nil, split))
}

package dag_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/dag"
)

func TestValidKey(t *testing.T) {
	t.Parallel()
	daily := &dag.Partitioning{Type: dag.Daily, Start: "2026-01-01"}
	hourly := &dag.Partitioning{Type: dag.Hourly, Start: "2026-03-01T00", Timezone: "America/New_York"}
	static := &dag.Partitioning{Type: dag.Static, Declared: []string{"eu", "us"}}
	for _, c := range []struct {
		p   *dag.Partitioning
		key string
		ok  bool
	}{
		{daily, "2026-01-01", true},
		{daily, "2030-12-31", true}, // ahead of today: still a partition
		{daily, "2025-12-31", false},
		{daily, "2026-02-30", false},
		{daily, "2026-1-05", false},
		{daily, "2026-01-01T00", false},
		{daily, "", false},
		{hourly, "2026-03-01T00", true},
		{hourly, "2026-03-08T01", true},
		{hourly, "2026-03-08T02", false}, // skipped when clocks go forward in New York
		{hourly, "2026-03-08T03", true},
		{hourly, "2026-11-01T01", true}, // happens twice: one partition
		{hourly, "2026-02-28T23", false},
		{hourly, "2026-03-01T24", false},
		{static, "eu", true},
		{static, "EU", false},
	} {
		err := c.p.ValidKey(c.key)
		if c.ok {
			require.NoError(t, err, "%s %q", c.p.Type, c.key)
		} else {
			require.ErrorIs(t, err, dag.ErrPartitionKey, "%s %q", c.p.Type, c.key)
		}
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	daily := &dag.Partitioning{Type: dag.Daily, Start: "2024-01-01", Timezone: "Pacific/Apia"}
	keys, err := daily.Keys("2024-02-27", "2024-03-02")
	require.NoError(t, err)
	require.Equal(t, []string{"2024-02-27", "2024-02-28", "2024-02-29", "2024-03-01", "2024-03-02"}, keys)

	one, err := daily.Keys("2024-05-05", "2024-05-05")
	require.NoError(t, err)
	require.Equal(t, []string{"2024-05-05"}, one)

	hourly := &dag.Partitioning{Type: dag.Hourly, Start: "2026-01-01T00", Timezone: "Europe/Berlin"}
	keys, err = hourly.Keys("2026-03-29T00", "2026-03-29T04") // 02 does not exist in Berlin that night
	require.NoError(t, err)
	require.Equal(t, []string{"2026-03-29T00", "2026-03-29T01", "2026-03-29T03", "2026-03-29T04"}, keys)
	keys, err = hourly.Keys("2026-10-25T01", "2026-10-25T03") // 02 happens twice: one partition
	require.NoError(t, err)
	require.Equal(t, []string{"2026-10-25T01", "2026-10-25T02", "2026-10-25T03"}, keys)

	utc := &dag.Partitioning{Type: dag.Hourly, Start: "2026-01-01T00"}
	keys, err = utc.Keys("2026-01-01T22", "2026-01-02T01")
	require.NoError(t, err)
	require.Equal(t, []string{"2026-01-01T22", "2026-01-01T23", "2026-01-02T00", "2026-01-02T01"}, keys)

	static := &dag.Partitioning{Type: dag.Static, Declared: []string{"eu", "us", "apac", "latam"}}
	keys, err = static.Keys("us", "latam")
	require.NoError(t, err)
	require.Equal(t, []string{"us", "apac", "latam"}, keys)

	for _, c := range []struct {
		p        *dag.Partitioning
		from, to string
	}{
		{static, "latam", "eu"},                    // backwards
		{static, "eu", "mars"},                     // not declared
		{daily, "2024-03-02", "2024-03-01"},        // backwards
		{daily, "2023-12-31", "2024-01-02"},        // before the start
		{utc, "2026-01-01T00", "2038-01-01T00"},    // more than MaxRangeKeys hours
		{daily, "2024-01-01", "2400-01-01"},        // more than MaxRangeKeys days
		{hourly, "2026-03-29T02", "2026-03-29T03"}, // a key that does not exist
	} {
		_, err := c.p.Keys(c.from, c.to)
		require.True(t, errors.Is(err, dag.ErrPartitionKey), "%s %s..%s: %v", c.p.Type, c.from, c.to, err)
	}
	// The bound itself is allowed.
	keys, err = utc.Keys("2026-01-01T00", "2037-05-29T15")
	require.NoError(t, err)
	require.Len(t, keys, dag.MaxRangeKeys)
}

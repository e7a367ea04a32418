package usage_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/usage"
)

// now is a Saturday afternoon; its ISO week starts on Monday 2026-11-16.
var now = time.Date(2026, 11, 21, 15, 30, 0, 0, time.UTC)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseWindow(t *testing.T) {
	for name, tc := range map[string]struct {
		q          usage.HistoryQuery
		g          usage.Granularity
		start, end string
	}{
		"defaults: the last 30 days, daily": {usage.HistoryQuery{}, usage.Daily, "2026-10-23T00:00:00Z", "2026-11-22T00:00:00Z"},
		"hourly default: 24 hours to the end of this hour": {usage.HistoryQuery{Granularity: "hourly"}, usage.Hourly,
			"2026-11-20T16:00:00Z", "2026-11-21T16:00:00Z"},
		"weekly default: 12 ISO weeks": {usage.HistoryQuery{Granularity: "weekly"}, usage.Weekly, "2026-08-31T00:00:00Z", "2026-11-23T00:00:00Z"},
		"start rounds down, end up": {usage.HistoryQuery{Granularity: "hourly", Start: "2026-11-21T09:10:00Z", End: "2026-11-21T10:01:00Z"},
			usage.Hourly, "2026-11-21T09:00:00Z", "2026-11-21T11:00:00Z"},
		"boundaries stay": {usage.HistoryQuery{Granularity: "daily", Start: "2026-11-01T00:00:00Z", End: "2026-11-03T00:00:00Z"},
			usage.Daily, "2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z"},
		"offsets are converted to UTC": {usage.HistoryQuery{Granularity: "daily", Start: "2026-11-02T01:00:00+02:00", End: "2026-11-02T12:00:00+02:00"},
			usage.Daily, "2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z"},
		"weeks start on Monday": {usage.HistoryQuery{Granularity: "weekly", Start: "2026-11-22T23:00:00Z", End: "2026-11-23T01:00:00Z"},
			usage.Weekly, "2026-11-16T00:00:00Z", "2026-11-30T00:00:00Z"},
		"only a start: until now": {usage.HistoryQuery{Granularity: "hourly", Start: "2026-11-21T13:00:00Z"}, usage.Hourly,
			"2026-11-21T13:00:00Z", "2026-11-21T16:00:00Z"},
		"the largest hourly range": {usage.HistoryQuery{Granularity: "hourly", Start: "2026-10-01T00:00:00Z", End: "2026-11-01T00:00:00Z"},
			usage.Hourly, "2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z"},
	} {
		t.Run(name, func(t *testing.T) {
			w, err := usage.ParseWindow(tc.q, now)
			require.NoError(t, err)
			require.Equal(t, usage.Window{Granularity: tc.g, Start: ts(tc.start), End: ts(tc.end)}, w)
		})
	}
}

func TestParseWindowRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		q     usage.HistoryQuery
		paths []string
	}{
		"granularity":         {usage.HistoryQuery{Granularity: "monthly"}, []string{"$.granularity"}},
		"start not RFC 3339":  {usage.HistoryQuery{Start: "2026-11-21"}, []string{"$.start"}},
		"end not RFC 3339":    {usage.HistoryQuery{End: "yesterday"}, []string{"$.end"}},
		"all three at once":   {usage.HistoryQuery{Granularity: "x", Start: "y", End: "z"}, []string{"$.granularity", "$.start", "$.end"}},
		"start after end":     {usage.HistoryQuery{Start: "2026-11-03T00:00:00Z", End: "2026-11-02T00:00:00Z"}, []string{"$.start"}},
		"start equals end":    {usage.HistoryQuery{Start: "2026-11-03T00:00:00Z", End: "2026-11-03T00:00:00Z"}, []string{"$.start"}},
		"start after now":     {usage.HistoryQuery{Start: "2026-12-01T00:00:00Z"}, []string{"$.start"}},
		"too many hours":      {usage.HistoryQuery{Granularity: "hourly", Start: "2026-10-01T00:00:00Z", End: "2026-11-01T01:00:00Z"}, []string{"$.start"}},
		"too many days":       {usage.HistoryQuery{Granularity: "daily", Start: "2025-01-01T00:00:00Z", End: "2026-01-03T00:00:00Z"}, []string{"$.start"}},
		"too many weeks":      {usage.HistoryQuery{Granularity: "weekly", Start: "2025-01-01T00:00:00Z", End: "2026-03-01T00:00:00Z"}, []string{"$.start"}},
		"before the epoch":    {usage.HistoryQuery{Start: "1969-12-31T00:00:00Z"}, []string{"$.start"}},
		"impossible calendar": {usage.HistoryQuery{End: "2026-02-30T00:00:00Z"}, []string{"$.end"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := usage.ParseWindow(tc.q, now)
			var pe *problem.Error
			require.True(t, errors.As(err, &pe), "%v", err)
			require.Equal(t, problem.TypeValidation, pe.Type)
			var paths []string
			for _, is := range pe.Issues {
				require.Equal(t, "INVALID_VALUE", is.Code)
				require.NotEmpty(t, is.Message)
				paths = append(paths, is.Path)
			}
			require.ElementsMatch(t, tc.paths, paths)
		})
	}
}

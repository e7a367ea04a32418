package cron_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/cron"
)

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return ts
}

// next lists the first n instants after `after` as RFC 3339 UTC.
func next(t testing.TB, expr, tz, after string, n int) []string {
	t.Helper()
	loc, err := cron.LoadLocation(tz)
	require.NoError(t, err)
	c, err := cron.ParseCron(expr, loc)
	require.NoError(t, err, expr)
	var out []string
	for _, x := range cron.NextN(c, mustTime(t, after), n) {
		out = append(out, x.Format(time.RFC3339))
	}
	return out
}

func TestCronForms(t *testing.T) {
	for _, tc := range []struct {
		expr, after string
		want        []string
	}{
		{"0 2 * * *", "2026-11-24T10:00:00Z", []string{"2026-11-25T02:00:00Z", "2026-11-26T02:00:00Z"}},
		{"*/15 * * * *", "2026-11-24T10:07:00Z", []string{"2026-11-24T10:15:00Z", "2026-11-24T10:30:00Z", "2026-11-24T10:45:00Z"}},
		{"0 9 * * MON-FRI", "2026-11-27T10:00:00Z", []string{"2026-11-30T09:00:00Z", "2026-12-01T09:00:00Z"}}, // Fri → Mon
		{"0 0 1 * *", "2026-11-24T00:00:00Z", []string{"2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"0 */4 * * *", "2026-11-24T05:00:00Z", []string{"2026-11-24T08:00:00Z", "2026-11-24T12:00:00Z"}},
		{"5,10-12,50/5 3 * * *", "2026-11-24T00:00:00Z", []string{"2026-11-24T03:05:00Z", "2026-11-24T03:10:00Z", "2026-11-24T03:11:00Z",
			"2026-11-24T03:12:00Z", "2026-11-24T03:50:00Z", "2026-11-24T03:55:00Z", "2026-11-25T03:05:00Z"}},
		{"10-30/10 0 * * *", "2026-11-24T00:00:00Z", []string{"2026-11-24T00:10:00Z", "2026-11-24T00:20:00Z", "2026-11-24T00:30:00Z", "2026-11-25T00:10:00Z"}},
		{"0 0 * jan,Jul *", "2026-11-24T00:00:00Z", []string{"2027-01-01T00:00:00Z", "2027-01-02T00:00:00Z"}},
		{"0 0 * * 7", "2026-11-24T00:00:00Z", []string{"2026-11-29T00:00:00Z"}}, // 7 is Sunday
		{"0 0 * * 0", "2026-11-24T00:00:00Z", []string{"2026-11-29T00:00:00Z"}},
		{"0 0 * * sun", "2026-11-24T00:00:00Z", []string{"2026-11-29T00:00:00Z"}},
		{"0 0 ? * TUE", "2026-11-24T00:00:00Z", []string{"2026-12-01T00:00:00Z"}},
		{"0 0 13 * FRI", "2026-11-01T00:00:00Z", []string{"2026-11-06T00:00:00Z", "2026-11-13T00:00:00Z", "2026-11-20T00:00:00Z", "2026-11-27T00:00:00Z", "2026-12-04T00:00:00Z"}}, // OR
		{"0 0 13 * *", "2026-11-01T00:00:00Z", []string{"2026-11-13T00:00:00Z", "2026-12-13T00:00:00Z"}},
		{"0 0 31 * *", "2026-11-01T00:00:00Z", []string{"2026-12-31T00:00:00Z", "2027-01-31T00:00:00Z", "2027-03-31T00:00:00Z"}},
		{"0 0 29 2 *", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"*/20 * * * * *", "2026-11-24T10:00:05Z", []string{"2026-11-24T10:00:20Z", "2026-11-24T10:00:40Z", "2026-11-24T10:01:00Z"}},
		{"30 0 12 * * *", "2026-11-24T00:00:00Z", []string{"2026-11-24T12:00:30Z"}},
		{"@hourly", "2026-11-24T10:30:00Z", []string{"2026-11-24T11:00:00Z"}},
		{"@daily", "2026-11-24T10:30:00Z", []string{"2026-11-25T00:00:00Z"}},
		{"@weekly", "2026-11-24T10:30:00Z", []string{"2026-11-29T00:00:00Z"}},
		{"@monthly", "2026-11-24T10:30:00Z", []string{"2026-12-01T00:00:00Z"}},
		{"@yearly", "2026-11-24T10:30:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"0 2 * * *", "2026-11-25T02:00:00Z", []string{"2026-11-26T02:00:00Z"}}, // strictly after
	} {
		require.Equal(t, tc.want, next(t, tc.expr, "UTC", tc.after, len(tc.want)), tc.expr)
	}
}

func TestCronTimezone(t *testing.T) {
	require.Equal(t, []string{"2026-11-27T03:30:00Z", "2026-11-30T03:30:00Z"}, next(t, "0 9 * * MON-FRI", "Asia/Kolkata", "2026-11-27T00:00:00Z", 2), "+05:30")
	require.Equal(t, []string{"2026-11-25T07:00:00Z"}, next(t, "0 2 * * *", "America/New_York", "2026-11-24T12:00:00Z", 1), "EST")
	require.Equal(t, []string{"2026-07-01T06:00:00Z"}, next(t, "0 2 * * *", "America/New_York", "2026-06-30T12:00:00Z", 1), "EDT")
	require.Equal(t, []string{"2026-11-24T23:00:00Z"}, next(t, "0 0 * * *", "Europe/Berlin", "2026-11-24T12:00:00Z", 1), "CET")
}

func TestCronDST(t *testing.T) {
	for _, tc := range []struct {
		name, expr, tz, after string
		want                  []string
	}{
		// New York, spring forward 2026-03-08 02:00 EST → 03:00 EDT.
		{"NY spring daily in the gap runs once at the gap's end", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"NY spring every 15 min keeps cadence", "*/15 * * * *", "America/New_York", "2026-03-08T06:30:00Z",
			[]string{"2026-03-08T06:45:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:15:00Z"}},
		{"NY spring hourly", "0 * * * *", "America/New_York", "2026-03-08T05:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		// New York, fall back 2026-11-01 02:00 EDT → 01:00 EST.
		{"NY fall daily in the repeated hour runs once", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NY fall every 15 min keeps cadence", "*/15 * * * *", "America/New_York", "2026-11-01T05:30:00Z",
			[]string{"2026-11-01T05:45:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:15:00Z", "2026-11-01T06:30:00Z", "2026-11-01T06:45:00Z", "2026-11-01T07:00:00Z"}},
		{"NY fall hourly fires in both 01:00s", "0 * * * *", "America/New_York", "2026-11-01T04:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		// Berlin, spring forward 2026-03-29 02:00 CET → 03:00 CEST.
		{"Berlin spring daily in the gap", "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"Berlin spring every 15 min", "*/15 * * * *", "Europe/Berlin", "2026-03-29T00:30:00Z",
			[]string{"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z"}},
		{"Berlin spring hourly", "0 * * * *", "Europe/Berlin", "2026-03-28T23:30:00Z",
			[]string{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
		// Berlin, fall back 2026-10-25 03:00 CEST → 02:00 CET.
		{"Berlin fall daily in the repeated hour runs once", "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"Berlin fall every 15 min", "*/15 * * * *", "Europe/Berlin", "2026-10-25T00:30:00Z",
			[]string{"2026-10-25T00:45:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:15:00Z", "2026-10-25T01:30:00Z", "2026-10-25T01:45:00Z", "2026-10-25T02:00:00Z"}},
		{"Berlin fall hourly fires in both 02:00s", "0 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
		// A 30-minute shift: Lord Howe Island, spring forward 2026-10-04 02:00 → 02:30.
		{"Lord Howe spring", "15 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z",
			[]string{"2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, next(t, tc.expr, tc.tz, tc.after, len(tc.want)))
		})
	}
}

func TestCronErrors(t *testing.T) {
	for _, tc := range []struct{ expr, reason string }{
		{"0 25 * * *", "hour must be 0-23"},
		{"60 * * * *", "minute must be 0-59"},
		{"60 0 * * * *", "second must be 0-59"},
		{"0 0 32 * *", "day of month must be 1-31"},
		{"0 0 0 * *", "day of month must be 1-31"},
		{"0 0 * 13 *", "month must be 1-12 or JAN-DEC"},
		{"0 0 * FOO *", `month: cannot parse "FOO"`},
		{"0 0 * * 8", "day of week must be 0-7 or SUN-SAT"},
		{"*/0 * * * *", "minute step must be a positive integer"},
		{"*/x * * * *", "minute step must be a positive integer"},
		{"5-3 * * * *", "minute range 5-3 is backwards"},
		{"x * * * *", `minute: cannot parse "x"`},
		{"0 0 * *", "expected 5 or 6 fields, got 4"},
		{"", "expected 5 or 6 fields, got 0"},
		{"0 0 0 0 * * *", "expected 5 or 6 fields, got 7"},
		{"0 0 30 2 *", "expression never fires"},
		{"0 0 31 4,6,9,11 *", "expression never fires"},
		{"99999999999999999999 * * * *", "minute must be 0-59"},
	} {
		_, err := cron.ParseCron(tc.expr, time.UTC)
		var ce *cron.Error
		require.True(t, errors.As(err, &ce), "%q: %v", tc.expr, err)
		require.Equal(t, "expression.value", ce.Field)
		require.Equal(t, tc.reason, ce.Reason, tc.expr)
	}
	_, err := cron.LoadLocation("Mars/Olympus")
	var ce *cron.Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "timezone", ce.Field)
	require.Equal(t, `unknown IANA time zone "Mars/Olympus"`, ce.Reason)
	_, err = cron.Parse("weekly", "x", "", time.Time{})
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "expression.kind", ce.Field)
}

func TestInterval(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration
		err  string
	}{
		{"PT15M", 15 * time.Minute, ""},
		{"PT1H30M", 90 * time.Minute, ""},
		{"PT45S", 45 * time.Second, ""},
		{"P1D", 24 * time.Hour, ""},
		{"P2W", 14 * 24 * time.Hour, ""},
		{"P1DT12H", 36 * time.Hour, ""},
		{"P1M", 0, "interval must not use years or months (their length varies); use a cron expression"},
		{"P1Y2D", 0, "interval must not use years or months (their length varies); use a cron expression"},
		{"PT0S", 0, "interval must be at least 1 second"},
		{"PT", 0, "interval must be an ISO 8601 duration such as PT15M or P1D"},
		{"15m", 0, "interval must be an ISO 8601 duration such as PT15M or P1D"},
		{"", 0, "interval must be an ISO 8601 duration such as PT15M or P1D"},
	} {
		d, err := cron.ParseInterval(tc.v)
		if tc.err != "" {
			var ce *cron.Error
			require.True(t, errors.As(err, &ce), tc.v)
			require.Equal(t, tc.err, ce.Reason, tc.v)
			continue
		}
		require.NoError(t, err, tc.v)
		require.Equal(t, tc.want, d, tc.v)
	}
	anchor := mustTime(t, "2026-01-01T00:00:00Z")
	iv := cron.Interval{Every: 15 * time.Minute, Anchor: anchor}
	require.Equal(t, mustTime(t, "2026-11-24T10:15:00Z"), iv.Next(mustTime(t, "2026-11-24T10:00:00Z")), "strictly after an instant")
	require.Equal(t, mustTime(t, "2026-11-24T10:15:00Z"), iv.Next(mustTime(t, "2026-11-24T10:07:13Z")))
	require.Equal(t, mustTime(t, "2025-12-31T23:45:00Z"), iv.Next(mustTime(t, "2025-12-31T23:31:00Z")), "before the anchor")
	require.Equal(t, mustTime(t, "2026-01-01T00:00:00Z"), iv.Next(mustTime(t, "2025-12-31T23:45:00Z")))
	s, err := cron.Parse("interval", "P1D", "America/New_York", time.Unix(0, 0))
	require.NoError(t, err)
	require.Equal(t, mustTime(t, "2026-03-09T00:00:00Z"), s.Next(mustTime(t, "2026-03-08T12:00:00Z")), "elapsed days: the zone plays no part")
}

func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/15 0-5 1,15 JAN-MAR MON-FRI", "0 0 30 2 *", "@daily", "1-2/3 4 5 6 7", "59 59 23 31 12 7", "? ? ? ? ? ?"} {
		f.Add(s, "America/New_York")
	}
	f.Fuzz(func(t *testing.T, expr, tz string) {
		loc, err := cron.LoadLocation(tz)
		if err != nil {
			loc = time.UTC
		}
		c, err := cron.ParseCron(expr, loc)
		if err != nil {
			return
		}
		after := time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)
		for range 5 {
			n := c.Next(after)
			if n.IsZero() {
				return
			}
			if !n.After(after) {
				t.Fatalf("%q: Next(%s) = %s, not after", expr, after, n)
			}
			after = n
		}
	})
}

func BenchmarkNext(b *testing.B) {
	loc, _ := cron.LoadLocation("America/New_York")
	for _, expr := range []string{"*/15 * * * *", "0 9 * * MON-FRI", "* * * * *"} {
		c, err := cron.ParseCron(expr, loc)
		require.NoError(b, err)
		b.Run(expr, func(b *testing.B) {
			t := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
			for b.Loop() {
				t = c.Next(t)
			}
		})
	}
}

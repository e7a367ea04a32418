package usage

import (
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/problem"
)

// Granularity is the width of history buckets.
type Granularity string

// The granularities of 000's UsageGranularity. Buckets are aligned in UTC: hours, days from
// midnight, weeks from Monday midnight (ISO weeks).
const (
	Hourly Granularity = "hourly"
	Daily  Granularity = "daily"
	Weekly Granularity = "weekly"
)

// DefaultGranularity applies when a request names none.
const DefaultGranularity = Daily

func (g Granularity) width() time.Duration {
	switch g {
	case Hourly:
		return time.Hour
	case Weekly:
		return 7 * 24 * time.Hour
	}
	return 24 * time.Hour
}

// MaxBuckets bounds the buckets one request may span, so that a request reads a bounded number of
// hourly aggregates (about 9,000 hours per entrypoint at most): 744 hours (31 days), 366 days, 53
// weeks.
func (g Granularity) MaxBuckets() int {
	switch g {
	case Hourly:
		return 744
	case Weekly:
		return 53
	}
	return 366
}

// defaultBuckets is the span of a request that gives no start: a day of hours, 30 days, 12 weeks.
func (g Granularity) defaultBuckets() int {
	switch g {
	case Hourly:
		return 24
	case Weekly:
		return 12
	}
	return 30
}

// floor is the start of the bucket holding t.
func (g Granularity) floor(t time.Time) time.Time {
	t = t.UTC()
	switch g {
	case Hourly:
		return t.Truncate(time.Hour)
	case Weekly:
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// ceil is the first bucket boundary at or after t.
func (g Granularity) ceil(t time.Time) time.Time {
	f := g.floor(t)
	if f.Equal(t) {
		return f
	}
	return f.Add(g.width())
}

// HistoryQuery is a history request's query parameters, as given (empty: not given).
type HistoryQuery struct {
	Granularity string
	Start       string
	End         string
}

// Window is a validated history range: whole buckets from Start (inclusive) to End (exclusive).
type Window struct {
	Granularity Granularity
	Start, End  time.Time
}

// ParseWindow validates a history request at now. granularity is hourly, daily or weekly (default
// daily); start and end are RFC 3339 times. start is rounded down and end up to bucket boundaries
// (UTC); end defaults to now and start to a default span before end (24 hours, 30 days, 12 weeks).
// start must be before end and the range at most MaxBuckets buckets. Every bad parameter is
// reported, at $.<name>, in one 422.
func ParseWindow(q HistoryQuery, now time.Time) (Window, error) {
	var issues []problem.Issue
	bad := func(name, format string, args ...any) {
		issues = append(issues, problem.Issue{Path: "$." + name, Code: "INVALID_VALUE", Message: fmt.Sprintf(format, args...)})
	}
	w := Window{Granularity: Granularity(q.Granularity)}
	switch w.Granularity {
	case "":
		w.Granularity = DefaultGranularity
	case Hourly, Daily, Weekly:
	default:
		bad("granularity", "granularity must be hourly, daily or weekly, got %q", q.Granularity)
		w.Granularity = DefaultGranularity
	}
	g := w.Granularity
	parse := func(name, v string) (time.Time, bool) {
		if v == "" {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			bad(name, "%s must be an RFC 3339 time such as 2026-01-21T00:00:00Z, got %q", name, v)
			return time.Time{}, false
		}
		if t.Year() < 1970 || t.Year() > 9999 {
			bad(name, "%s must be between the years 1970 and 9999", name)
			return time.Time{}, false
		}
		return t, true
	}
	start, hasStart := parse("start", q.Start)
	end, hasEnd := parse("end", q.End)
	if len(issues) > 0 {
		return w, problem.Validation("invalid usage history query", issues)
	}
	if !hasEnd {
		end = now
	}
	w.End = g.ceil(end)
	if w.End.Year() > 9999 {
		// Rounded up to its bucket's end, a time late in 9999 leaves the years RFC 3339 can write.
		return w, problem.Validation("invalid usage history query", []problem.Issue{{Path: "$.end", Code: "INVALID_VALUE",
			Message: fmt.Sprintf("end rounded up to its %s bucket must stay within the year 9999", g)}})
	}
	if hasStart {
		w.Start = g.floor(start)
	} else {
		w.Start = w.End.Add(-time.Duration(g.defaultBuckets()) * g.width())
	}
	n := int64(w.End.Sub(w.Start) / g.width())
	switch {
	case hasStart && !start.Before(end):
		bad("start", "start must be before end (now, when end is not given)")
	case n > int64(g.MaxBuckets()):
		bad("start", "the range spans %d %s buckets; at most %d are allowed", n, g, g.MaxBuckets())
	}
	if len(issues) > 0 {
		return w, problem.Validation("invalid usage history query", issues)
	}
	return w, nil
}

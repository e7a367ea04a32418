// Package cron computes when schedules fire: cron expressions (5 fields, or 6 with seconds first)
// read against the wall clock of an IANA time zone, and ISO 8601 intervals of elapsed time.
//
// Daylight saving time is decided here, once, for every schedule:
//   - A wall time skipped by spring-forward (it does not exist) fires once, at the first valid
//     instant after the gap (New York, 2026-03-08 02:30 → 03:00 EDT). Several skipped matches become
//     that one instant and fire once in all.
//   - A wall time repeated by fall-back (it occurs twice) fires in both occurrences when the hour
//     field matches every hour (`*/15 * * * *` keeps its real-time cadence), and otherwise once, at
//     the first occurrence (`30 1 * * *` runs at 01:30 EDT only).
//
// Intervals ignore the time zone: they are elapsed time, aligned to an anchor.
package cron

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "time/tzdata" // time zones on machines without /usr/share/zoneinfo
)

// Schedule yields the fire instants of a schedule.
type Schedule interface {
	// Next returns the first fire instant strictly after `after` (UTC), or the zero time if there
	// is none.
	Next(after time.Time) time.Time
}

// Error is a bad expression or time zone: Field names the request field ("expression.value",
// "expression.kind" or "timezone"), Reason says why in words a user reads.
type Error struct{ Field, Reason string }

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

func exprErr(format string, args ...any) *Error {
	return &Error{Field: "expression.value", Reason: fmt.Sprintf(format, args...)}
}

// Parse builds a schedule from 000's expression {kind: "cron"|"interval", value} and an IANA time
// zone ("" = UTC); anchor aligns intervals (their instants are anchor + k × interval).
func Parse(kind, value, timezone string, anchor time.Time) (Schedule, error) {
	switch kind {
	case "cron":
		loc, err := LoadLocation(timezone)
		if err != nil {
			return nil, err
		}
		return ParseCron(value, loc)
	case "interval":
		if _, err := LoadLocation(timezone); err != nil {
			return nil, err
		}
		d, err := ParseInterval(value)
		if err != nil {
			return nil, err
		}
		return Interval{Every: d, Anchor: anchor}, nil
	}
	return nil, &Error{Field: "expression.kind", Reason: `kind must be "cron" or "interval"`}
}

// NextN returns up to n instants of s after `after`, in order.
func NextN(s Schedule, after time.Time, n int) []time.Time {
	var out []time.Time
	for t := after; len(out) < n; {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

var locations sync.Map // name → *time.Location

// LoadLocation returns the IANA time zone name ("" = UTC), cached.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	if strings.EqualFold(name, "local") {
		return nil, &Error{Field: "timezone", Reason: `"Local" is not an IANA time zone; name one, such as "Europe/Berlin"`}
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, &Error{Field: "timezone", Reason: fmt.Sprintf("unknown IANA time zone %q", name)}
	}
	locations.Store(name, l)
	return l, nil
}

// Interval fires every Every of elapsed time at Anchor + k × Every (k any integer).
type Interval struct {
	Every  time.Duration
	Anchor time.Time
}

// Next implements Schedule.
func (iv Interval) Next(after time.Time) time.Time {
	if iv.Every <= 0 {
		return time.Time{}
	}
	d := after.Sub(iv.Anchor)
	k := d / iv.Every
	if d < 0 && d%iv.Every != 0 {
		k-- // floor, not truncation toward zero
	}
	return iv.Anchor.Add((k + 1) * iv.Every).UTC()
}

var isoDuration = regexp.MustCompile(`^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$`)

// ParseInterval parses an ISO 8601 duration of weeks, days, hours, minutes and seconds (PT15M,
// P1D, P2W, P1DT12H). A day is 24 hours of elapsed time. Years and months are refused: their
// length varies.
func ParseInterval(value string) (time.Duration, error) {
	date, _, _ := strings.Cut(value, "T")
	if strings.HasPrefix(value, "P") && (strings.Contains(date, "Y") || strings.Contains(date, "M")) {
		return 0, exprErr("interval must not use years or months (their length varies); use a cron expression")
	}
	m := isoDuration.FindStringSubmatch(value)
	if m == nil || value == "P" || strings.HasSuffix(value, "T") {
		return 0, exprErr("interval must be an ISO 8601 duration such as PT15M or P1D")
	}
	var d time.Duration
	for i, unit := range []time.Duration{7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > int64(100*365*24*time.Hour/unit) {
			return 0, exprErr("interval is too long (at most 100 years)")
		}
		d += time.Duration(n) * unit
	}
	if d < time.Second {
		return 0, exprErr("interval must be at least 1 second")
	}
	if d > 100*365*24*time.Hour {
		return 0, exprErr("interval is too long (at most 100 years)")
	}
	return d, nil
}

// Cron is a parsed cron expression in a time zone.
type Cron struct {
	second, minute, hour, dom, month, dow uint64 // bit i set: value i matches
	domStar, dowStar                      bool   // the day field was * or ? (standard day rule)
	everyHour                             bool   // the hour field matches every hour (fall-back rule)
	loc                                   *time.Location
}

type field struct {
	name     string
	min, max int
	names    map[string]int
	rangeMsg string
}

var (
	secondF = field{name: "second", min: 0, max: 59, rangeMsg: "0-59"}
	minuteF = field{name: "minute", min: 0, max: 59, rangeMsg: "0-59"}
	hourF   = field{name: "hour", min: 0, max: 23, rangeMsg: "0-23"}
	domF    = field{name: "day of month", min: 1, max: 31, rangeMsg: "1-31"}
	monthF  = field{name: "month", min: 1, max: 12, rangeMsg: "1-12 or JAN-DEC", names: map[string]int{
		"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}}
	dowF = field{name: "day of week", min: 0, max: 7, rangeMsg: "0-7 or SUN-SAT", names: map[string]int{
		"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}}
)

var macros = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
	"@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

// ParseCron parses a cron expression: 5 fields (minute hour day-of-month month day-of-week) or 6
// with seconds first; `*`, `?` (in the day fields), numbers, ranges, steps and lists; month and
// weekday names; day of week 0-7 (0 and 7 are Sunday); and the @yearly … @hourly macros.
func ParseCron(expr string, loc *time.Location) (*Cron, error) {
	if loc == nil {
		loc = time.UTC
	}
	s := strings.TrimSpace(expr)
	if m, ok := macros[strings.ToLower(s)]; ok {
		s = m
	}
	f := strings.Fields(s)
	if len(f) == 5 {
		f = append([]string{"0"}, f...)
	}
	if len(f) != 6 {
		return nil, exprErr("expected 5 or 6 fields, got %d", len(f))
	}
	c := &Cron{loc: loc}
	var err error
	specs := []struct {
		f   field
		dst *uint64
	}{{secondF, &c.second}, {minuteF, &c.minute}, {hourF, &c.hour}, {domF, &c.dom}, {monthF, &c.month}, {dowF, &c.dow}}
	for i, sp := range specs {
		if *sp.dst, err = parseField(f[i], sp.f); err != nil {
			return nil, err
		}
	}
	if c.dow&(1<<7) != 0 {
		c.dow = c.dow&^(1<<7) | 1 // 7 is Sunday
	}
	c.domStar = f[3] == "*" || f[3] == "?"
	c.dowStar = f[5] == "*" || f[5] == "?"
	c.everyHour = c.hour == 1<<24-1
	if _, ok := c.nextCivil(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)); !ok {
		return nil, exprErr("expression never fires")
	}
	return c, nil
}

func parseField(s string, f field) (uint64, error) {
	if s == "" {
		return 0, exprErr("%s: cannot parse %q", f.name, s)
	}
	var set uint64
	for _, part := range strings.Split(s, ",") {
		expr, stepS, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepS)
			if err != nil || n <= 0 {
				return 0, exprErr("%s step must be a positive integer", f.name)
			}
			step = n
		}
		lo, hi := f.min, f.max
		if f.name == "day of week" {
			hi = 6 // `*` is every day once; 7 only as a value
		}
		switch {
		case expr == "*" || (expr == "?" && (f.name == "day of month" || f.name == "day of week")):
		default:
			a, b, isRange := strings.Cut(expr, "-")
			var err error
			if lo, err = value(a, f); err != nil {
				return 0, err
			}
			hi = lo
			if isRange {
				if hi, err = value(b, f); err != nil {
					return 0, err
				}
				if hi < lo {
					return 0, exprErr("%s range %s is backwards", f.name, expr)
				}
			} else if hasStep {
				hi = f.max
				if f.name == "day of week" {
					hi = 6
				}
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << uint(v)
		}
	}
	return set, nil
}

func value(s string, f field) (int, error) {
	if n, ok := f.names[strings.ToUpper(s)]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
			return 0, exprErr("%s must be %s", f.name, f.rangeMsg) // digits, but too many
		}
		return 0, exprErr("%s: cannot parse %q", f.name, s)
	}
	if n < f.min || n > f.max {
		return 0, exprErr("%s must be %s", f.name, f.rangeMsg)
	}
	return n, nil
}

func has(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }

func (c *Cron) dayMatches(t time.Time) bool {
	d, w := has(c.dom, t.Day()), has(c.dow, int(t.Weekday()))
	if c.domStar || c.dowStar {
		return d && w
	}
	return d || w
}

// nextCivil returns the first wall time at or after t (a civil time held in UTC) that matches.
func (c *Cron) nextCivil(t time.Time) (time.Time, bool) {
	limit := t.Year() + 30
wrap:
	if t.Year() > limit {
		return time.Time{}, false
	}
	for !has(c.month, int(t.Month())) {
		t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		if t.Month() == time.January {
			goto wrap
		}
	}
	for !c.dayMatches(t) {
		t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
		if t.Day() == 1 {
			goto wrap
		}
	}
	for !has(c.hour, t.Hour()) {
		t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, time.UTC)
		if t.Hour() == 0 {
			goto wrap
		}
	}
	for !has(c.minute, t.Minute()) {
		t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute()+1, 0, 0, time.UTC)
		if t.Minute() == 0 {
			goto wrap
		}
	}
	for !has(c.second, t.Second()) {
		t = t.Add(time.Second)
		if t.Second() == 0 {
			goto wrap
		}
	}
	return t, true
}

// civil is the wall time of u in loc, held in UTC.
func civil(u time.Time, loc *time.Location) time.Time {
	l := u.In(loc)
	y, m, d := l.Date()
	return time.Date(y, m, d, l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// resolve returns the instants whose wall time in loc is m (0, 1 or 2 of them, in order), and the
// instant a skipped wall time moves to.
func (c *Cron) resolve(m time.Time) (first, second time.Time) {
	var offs [3]int
	_, offs[0] = m.Add(-26 * time.Hour).In(c.loc).Zone()
	_, offs[1] = m.In(c.loc).Zone()
	_, offs[2] = m.Add(26 * time.Hour).In(c.loc).Zone()
	for _, off := range offs {
		u := m.Add(-time.Duration(off) * time.Second)
		if civil(u, c.loc) != m {
			continue
		}
		if first.IsZero() || u.Before(first) {
			first, second = u, first
		} else if !u.Equal(first) && (second.IsZero() || u.Before(second)) {
			second = u
		}
	}
	if !second.IsZero() && second.Equal(first) {
		second = time.Time{}
	}
	if first.IsZero() {
		// Skipped: the instant the gap ends (the start of the zone period the wall time falls into
		// when read with the offset from before the gap).
		u := m.Add(-time.Duration(offs[0]) * time.Second)
		start, _ := u.In(c.loc).ZoneBounds()
		if start.IsZero() || start.After(u) || !civil(start, c.loc).After(m) {
			start = u
		}
		return start.UTC(), time.Time{}
	}
	if !c.everyHour {
		second = time.Time{}
	}
	return first.UTC(), second.UTC()
}

// window is how far around a zone transition Next looks (larger than any DST shift).
const window = 4 * time.Hour

// Next implements Schedule.
func (c *Cron) Next(after time.Time) time.Time {
	after = after.UTC()
	from := civil(after, c.loc).Add(time.Second) // the first wall second after `after`
	// Fast path: no zone transition within the window around `after` and the match: the wall
	// clock is a fixed offset from UTC there.
	zs, ze := after.In(c.loc).ZoneBounds()
	if zs.IsZero() || after.Sub(zs) > window {
		m, ok := c.nextCivil(from)
		if !ok {
			return time.Time{}
		}
		_, off := after.In(c.loc).Zone()
		u := m.Add(-time.Duration(off) * time.Second)
		if ze.IsZero() || ze.Sub(u) > window {
			return u
		}
	}
	// Near a transition: take the earliest instant after `after` over the wall times from a window
	// before it (the second pass of a repeated hour comes after later wall times' first pass).
	var best time.Time
	consider := func(u time.Time) {
		if u.After(after) && (best.IsZero() || u.Before(best)) {
			best = u
		}
	}
	t := from.Add(-window)
	for {
		m, ok := c.nextCivil(t)
		if !ok {
			return best
		}
		if !best.IsZero() && m.Sub(civil(best, c.loc)) > window {
			return best
		}
		a, b := c.resolve(m)
		consider(a)
		if !b.IsZero() {
			consider(b)
		}
		t = m.Add(time.Second)
	}
}

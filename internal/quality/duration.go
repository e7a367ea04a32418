package quality

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxMaxAge bounds a freshness check's max_age (about 100 years: beyond it durations overflow).
const maxMaxAge = 100 * 365 * 24 * time.Hour

// ParseMaxAge parses a freshness check's max_age: a Go duration ("36h", "1h30m") or an ISO 8601
// duration of weeks, days, hours, minutes and seconds ("P1W", "P1DT12H", "PT90M", "PT0.5S"). Years
// and months are refused: their length varies. The duration must be positive.
func ParseMaxAge(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if strings.HasPrefix(s, "P") {
		d, err = parseISODuration(s)
	} else {
		d, err = time.ParseDuration(s)
	}
	switch {
	case err != nil:
		return 0, err
	case d <= 0:
		return 0, fmt.Errorf("duration %q is not positive", s)
	case d > maxMaxAge:
		return 0, fmt.Errorf("duration %q is longer than 100 years", s)
	}
	return d, nil
}

// isoUnits are the ISO 8601 designators accepted in the date part and in the time part.
var isoUnits = map[bool]map[byte]time.Duration{
	false: {'W': 7 * 24 * time.Hour, 'D': 24 * time.Hour},
	true:  {'H': time.Hour, 'M': time.Minute, 'S': time.Second},
}

// parseISODuration parses PnW, PnD, PnDTnHnMnS and their parts; each number is a decimal, units
// appear in order and at most once.
func parseISODuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not an ISO 8601 duration of weeks, days, hours, minutes and seconds (e.g. P1DT12H)", s)
	rest := s[1:]
	inTime, total, parts := false, 0.0, 0
	order := "WDHMS"
	for rest != "" {
		if rest[0] == 'T' && !inTime {
			inTime, rest = true, rest[1:]
			if rest == "" {
				return 0, bad
			}
			continue
		}
		n := strings.IndexFunc(rest, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if n <= 0 {
			return 0, bad
		}
		num, err := strconv.ParseFloat(rest[:n], 64)
		unit, ok := isoUnits[inTime][rest[n]]
		pos := strings.IndexByte(order, rest[n])
		if err != nil || !ok || pos < 0 {
			return 0, bad
		}
		order = order[pos+1:]
		total += num * float64(unit)
		parts++
		rest = rest[n+1:]
	}
	switch {
	case parts == 0:
		return 0, bad
	case total > float64(maxMaxAge):
		return 0, fmt.Errorf("duration %q is longer than 100 years", s)
	}
	return time.Duration(total), nil
}

package dag

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/larkrun/lark/internal/cron"
)

// Key layouts of the time partitionings.
const (
	dailyLayout  = "2006-01-02"
	hourlyLayout = "2006-01-02T15"
)

// ErrPartitionKey marks a partition key that the partitioning does not have (or a key given to
// an unpartitioned DAG, or none given to a partitioned one).
var ErrPartitionKey = errors.New("bad partition key")

// partitioning reads spec.partitioning.
func (w *walker) partitioning(v any, path string) *Partitioning {
	m, ok := w.object(v, path, "type", "start", "timezone", "keys")
	if !ok {
		return nil
	}
	before := len(w.issues)
	p := &Partitioning{Type: w.str(m, "type", path, true)}
	p.Start = w.str(m, "start", path, false)
	p.Timezone = w.str(m, "timezone", path, false)
	p.Declared = w.strings(m, "keys", path, MaxStaticKeys)
	if len(w.issues) > before {
		return p
	}
	switch p.Type {
	case Daily, Hourly:
		w.timePartitioning(p, m, path)
	case Static:
		w.staticPartitioning(p, m, path)
	default:
		w.add(path+".type", CodeInvalidValue, "type must be %q, %q or %q, got %q", Daily, Hourly, Static, p.Type)
	}
	return p
}

// timePartitioning checks a daily or hourly partitioning: a start key, a known time zone, no keys.
func (w *walker) timePartitioning(p *Partitioning, m map[string]any, path string) {
	if _, present := m["keys"]; present {
		w.add(path+".keys", CodeInvalidValue, "keys are for a static partitioning; a %s one has a start", p.Type)
	}
	if _, err := cron.LoadLocation(p.Timezone); err != nil {
		w.add(path+".timezone", CodeInvalidValue, "unknown time zone %q: use an IANA name such as \"Europe/Berlin\" (default UTC)", p.Timezone)
		return
	}
	if _, present := m["start"]; !present {
		w.add(path+".start", CodeMissingField, "a %s partitioning needs a start (%s)", p.Type, p.layoutName())
		return
	}
	if _, err := p.parse(p.Start); err != nil {
		w.add(path+".start", CodeInvalidValue, "%v", err)
	}
}

// staticPartitioning checks a static partitioning: 1 to MaxStaticKeys distinct well-formed keys.
func (w *walker) staticPartitioning(p *Partitioning, m map[string]any, path string) {
	for _, k := range []string{"start", "timezone"} {
		if _, present := m[k]; present {
			w.add(child(path, k), CodeInvalidValue, "%s is for a daily or hourly partitioning; a static one has keys", k)
		}
	}
	if len(p.Declared) == 0 {
		w.add(path+".keys", CodeMissingField, "a static partitioning needs at least one key")
		return
	}
	seen := map[string]int{}
	for i, k := range p.Declared {
		kp := index(path+".keys", i)
		if j, dup := seen[k]; dup {
			w.add(kp, CodeDuplicate, "duplicate key %q (already keys[%d])", k, j)
			continue
		}
		seen[k] = i
		if len(k) > MaxStaticKeyBytes || !staticKeyRE.MatchString(k) {
			w.add(kp, CodeInvalidValue, "key %q must be 1 to %d letters, digits, '_', '-', '.' or ':'", k, MaxStaticKeyBytes)
		}
	}
}

// layoutName is how a key of p reads, for messages.
func (p *Partitioning) layoutName() string {
	if p.Type == Hourly {
		return "YYYY-MM-DDTHH"
	}
	return "YYYY-MM-DD"
}

// parse reads a daily or hourly key as the instant its partition starts in p's time zone. A key
// must be written exactly as the layout writes it and name a wall-clock time that exists there (an
// hour skipped by a daylight saving change is not a key).
func (p *Partitioning) parse(key string) (time.Time, error) {
	loc, err := cron.LoadLocation(p.Timezone)
	if err != nil {
		return time.Time{}, err
	}
	layout := dailyLayout
	if p.Type == Hourly {
		layout = hourlyLayout
	}
	t, err := time.ParseInLocation(layout, key, loc)
	if err != nil || t.Format(layout) != key {
		return time.Time{}, fmt.Errorf("%q is not a %s partition key (%s in %s)", key, p.Type, p.layoutName(), loc)
	}
	return t, nil
}

// ValidKey reports whether key is a partition of p: a declared key of a static partitioning; a
// day or hour of a daily or hourly one, at or after its start, in its time zone. Keys after today
// are partitions too (a run may be planned ahead).
func (p *Partitioning) ValidKey(key string) error {
	if p.Type == Static {
		if !slices.Contains(p.Declared, key) {
			return fmt.Errorf("%w: %q is not one of the %d declared keys", ErrPartitionKey, key, len(p.Declared))
		}
		return nil
	}
	if _, err := p.parse(key); err != nil {
		return fmt.Errorf("%w: %w", ErrPartitionKey, err)
	}
	if key < p.Start { // keys of one layout sort as their times do
		return fmt.Errorf("%w: %q is before the partitioning's start %q", ErrPartitionKey, key, p.Start)
	}
	return nil
}

// Keys returns the partitions from one key to another, both included, in order: the declared keys
// between them for a static partitioning, each day or wall-clock hour of the time zone otherwise
// (a repeated hour when clocks go back is one partition; a skipped one is none). At most
// MaxRangeKeys.
func (p *Partitioning) Keys(from, to string) ([]string, error) {
	for _, k := range []string{from, to} {
		if err := p.ValidKey(k); err != nil {
			return nil, err
		}
	}
	if p.Type == Static {
		i, j := slices.Index(p.Declared, from), slices.Index(p.Declared, to)
		if i > j {
			return nil, fmt.Errorf("%w: %q comes after %q in the declared keys", ErrPartitionKey, from, to)
		}
		return slices.Clone(p.Declared[i : j+1]), nil
	}
	if from > to {
		return nil, fmt.Errorf("%w: %q is after %q", ErrPartitionKey, from, to)
	}
	start, _ := p.parse(from)
	end, _ := p.parse(to)
	step := time.Hour
	if p.Type == Daily {
		// Calendar days: step whole days at noon UTC, clear of any time zone's transitions.
		start = time.Date(start.Year(), start.Month(), start.Day(), 12, 0, 0, 0, time.UTC)
		end = time.Date(end.Year(), end.Month(), end.Day(), 12, 0, 0, 0, time.UTC)
		step = 24 * time.Hour
	}
	if n := end.Sub(start)/step + 1; n > MaxRangeKeys {
		return nil, fmt.Errorf("%w: %s to %s is %d partitions, more than %d", ErrPartitionKey, from, to, n, MaxRangeKeys)
	}
	return p.walk(start, step, to), nil
}

// walk lists the keys from the instant t on, step by step, through the key last.
func (p *Partitioning) walk(t time.Time, step time.Duration, last string) []string {
	layout, loc := hourlyLayout, time.UTC
	if p.Type == Daily {
		layout = dailyLayout
	} else {
		loc, _ = cron.LoadLocation(p.Timezone)
	}
	var out []string
	for ; ; t = t.Add(step) {
		k := t.In(loc).Format(layout)
		if k > last {
			return out
		}
		if len(out) == 0 || out[len(out)-1] != k {
			out = append(out, k)
		}
	}
}

// KeyAt is the key of the daily or hourly partition at instant t, in p's time zone (a static
// partitioning has no instants: an error).
func (p *Partitioning) KeyAt(t time.Time) (string, error) {
	if p.Type == Static {
		return "", fmt.Errorf("%w: a static partitioning has no partition at an instant", ErrPartitionKey)
	}
	loc, err := cron.LoadLocation(p.Timezone)
	if err != nil {
		return "", err
	}
	layout := dailyLayout
	if p.Type == Hourly {
		layout = hourlyLayout
	}
	key := t.In(loc).Format(layout)
	return key, p.ValidKey(key)
}

// Package memlimit bounds the process's memory: it finds what the machine or the container allows
// (Detect), and keeps Go's soft memory limit (runtime/debug.SetMemoryLimit) close to what the
// process needs now (Tracker): its own live heap, twice over for the collector's room, plus what
// the running executions have reserved (package admission), never above the process limit.
//
// Lark runs with a high GOGC for throughput (cmd/lark, DefaultGCPercent): the heap may grow to
// five times the live heap between two collections. A burst of executions that allocate hundreds
// of MiB each would then leave the heap, and the resident set, at several GiB. With the soft
// limit following the reservations, the collector works harder exactly while executions hold a
// lot of memory, and the heap returns toward its baseline once they end.
package memlimit

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Detect returns the memory the process may use, in bytes, and where that figure comes from: the
// cgroup's limit (v2 memory.max, or v1 memory.limit_in_bytes) when there is one, else the
// machine's memory (MemTotal of /proc/meminfo). 0 if neither can be read.
func Detect() (int64, string) {
	if n, ok := readLimit("/sys/fs/cgroup/memory.max"); ok {
		return n, "cgroup memory.max"
	}
	if n, ok := readLimit("/sys/fs/cgroup/memory/memory.limit_in_bytes"); ok {
		return n, "cgroup memory.limit_in_bytes"
	}
	if n := memTotal("/proc/meminfo"); n > 0 {
		return n, "MemTotal"
	}
	return 0, "unknown"
}

// readLimit reads a cgroup limit file: false when absent, "max" or absurdly large (no limit).
func readLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}

// memTotal reads MemTotal (kB) from a meminfo file, in bytes.
func memTotal(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return n << 10
			}
		}
	}
	return 0
}

// DefaultFraction is the part of the detected memory the process limit defaults to: the rest is
// the kernel's, the page cache's (SQLite reads through it) and other processes'.
const DefaultFraction = 0.75

// Default is the process limit for detected bytes of memory (0: none).
func Default(detected int64) int64 {
	return int64(float64(detected) * DefaultFraction)
}

// Options configure a Tracker.
type Options struct {
	// Limit is the process's memory limit in bytes (0: Default(Detect())); the soft limit never
	// exceeds it.
	Limit int64
	// Floor is both the reservations below which the soft limit is Limit, and the least room left
	// for the collector above the live heap (default 64 MiB).
	Floor int64
	// Every is how often the soft limit is recomputed (default 100 ms).
	Every time.Duration
}

// Tracker keeps the soft memory limit, while executions reserve more than Options.Floor, at the
// live heap that is not theirs with room for the collector (half of it, at least Options.Floor),
// plus their reservations; never above Options.Limit. With less reserved, GOGC alone paces the
// collector (under Options.Limit), which keeps small executions at full throughput.
type Tracker struct {
	o        Options
	reserved atomic.Int64
	applied  int64
}

// New returns a Tracker; Run applies its limit.
func New(o Options) *Tracker {
	if o.Limit <= 0 {
		d, _ := Detect()
		o.Limit = Default(d)
	}
	if o.Floor <= 0 {
		o.Floor = 64 << 20
	}
	if o.Every <= 0 {
		o.Every = 100 * time.Millisecond
	}
	return &Tracker{o: o}
}

// Limit is the process's memory limit (0: none).
func (t *Tracker) Limit() int64 { return t.o.Limit }

// Reserved is told the bytes the running executions reserve (admission.Options.OnReserved). It
// never blocks.
func (t *Tracker) Reserved(total int64) { t.reserved.Store(total) }

// Target is the soft limit for a live heap of live bytes, reserved of which executions reserve.
func (t *Tracker) Target(live, reserved int64) int64 {
	if reserved < t.o.Floor {
		return t.o.Limit
	}
	own := max(live-reserved, 0)
	target := own + max(own/2, t.o.Floor) + reserved
	if t.o.Limit > 0 {
		target = min(target, t.o.Limit)
	}
	return target
}

// Run recomputes and applies the soft limit until ctx ends, then sets the process limit (or no
// limit) back.
func (t *Tracker) Run(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(t.o.Every)
	defer tick.Stop()
	defer t.apply(t.o.Limit)
	for {
		metrics.Read(sample)
		var live int64
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = int64(min(sample[0].Value.Uint64(), math.MaxInt64))
		}
		t.apply(t.Target(live, t.reserved.Load()))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// apply sets the soft limit when it moved by more than 4 MiB (0: no limit).
func (t *Tracker) apply(limit int64) {
	if limit <= 0 {
		limit = math.MaxInt64
	}
	if d := limit - t.applied; d > -4<<20 && d < 4<<20 {
		return
	}
	t.applied = limit
	debug.SetMemoryLimit(limit)
}

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
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
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
	// Threshold is the grown reservations below which the soft limit is Limit (default 32 MiB):
	// small executions leave the collector to GOGC.
	Threshold int64
	// Room is the least room left to the collector above the live heap and the reservations
	// (default 16 MiB; an eighth of the server's own live heap when that is more).
	Room int64
	// Every is how often the soft limit is recomputed (default 100 ms).
	Every time.Duration
}

// Tracker keeps the soft memory limit, while executions reserve more than Options.Threshold, at
// the live heap that is not theirs, plus room for the collector (Options.Room, or an eighth of that
// heap), plus their reservations; never above Options.Limit. With less reserved, GOGC alone paces
// the collector (under Options.Limit), which keeps small executions at full throughput — but only
// after one collection has run since the reservations fell: the garbage the big executions left
// would otherwise count as live in GOGC's next goal. The reservations bound the executions' live
// memory from above (their accounting is cumulative), and what they hold is mostly strings and
// lists of them, cheap to mark, so a tight limit costs little collector CPU.
type Tracker struct {
	o            Options
	reserved     atomic.Int64
	lastReserved atomic.Int64  // the reservations the applied limit was computed with
	collect      chan struct{} // a big execution ended: collect its garbage now

	mu      sync.Mutex
	applied int64
	tight   bool      // the limit follows the reservations
	fellAt  uint64    // the collections counted when the reservations fell below the threshold
	fellOn  time.Time // and when
	samples [2]metrics.Sample
}

// New returns a Tracker; Run applies its limit.
func New(o Options) *Tracker {
	if o.Limit <= 0 {
		d, _ := Detect()
		o.Limit = Default(d)
	}
	if o.Threshold <= 0 {
		o.Threshold = 32 << 20
	}
	if o.Room <= 0 {
		o.Room = 16 << 20
	}
	if o.Every <= 0 {
		o.Every = 100 * time.Millisecond
	}
	t := &Tracker{o: o, collect: make(chan struct{}, 1)}
	t.samples[0].Name, t.samples[1].Name = "/gc/heap/live:bytes", "/gc/cycles/total:gc-cycles"
	return t
}

// Limit is the process's memory limit (0: none).
func (t *Tracker) Limit() int64 { return t.o.Limit }

// Reserved is told the bytes the running executions reserve beyond their initial reservations
// (admission.Options.OnReserved): a change of 8 MiB or more applies a new limit at once, so that a
// fast-growing execution does not outrun the next tick. It never blocks for long.
// A fall of Options.Threshold or more (a big execution ended) also starts a collection at once, on
// Run's goroutine: its garbage goes, and the live heap the limit is computed from is current again.
func (t *Tracker) Reserved(total int64) {
	t.reserved.Store(total)
	d := total - t.lastReserved.Load()
	if d >= 8<<20 || d <= -8<<20 {
		t.update()
	}
	if d <= -t.o.Threshold {
		select {
		case t.collect <- struct{}{}:
		default:
		}
	}
}

// Target is the soft limit for a live heap of live bytes, reserved of which executions reserve,
// while the limit follows the reservations.
func (t *Tracker) Target(live, reserved int64) int64 {
	own := max(live-reserved, 0)
	target := own + max(own/8, t.o.Room) + reserved
	if t.o.Limit > 0 {
		target = min(target, t.o.Limit)
	}
	return target
}

// Run recomputes and applies the soft limit every Options.Every until ctx ends, then sets the
// process limit back.
func (t *Tracker) Run(ctx context.Context) {
	tick := time.NewTicker(t.o.Every)
	defer tick.Stop()
	defer func() {
		t.mu.Lock()
		t.apply(t.o.Limit)
		t.mu.Unlock()
	}()
	for {
		t.update()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-t.collect:
			runtime.GC()
		}
	}
}

// update computes and applies the limit for the current reservations and heap.
func (t *Tracker) update() {
	t.mu.Lock()
	defer t.mu.Unlock()
	reserved := t.reserved.Load()
	t.lastReserved.Store(reserved)
	metrics.Read(t.samples[:])
	live, cycles := int64(0), uint64(0)
	if v := t.samples[0].Value; v.Kind() == metrics.KindUint64 {
		live = int64(min(v.Uint64(), math.MaxInt64))
	}
	if v := t.samples[1].Value; v.Kind() == metrics.KindUint64 {
		cycles = v.Uint64()
	}
	switch {
	case reserved >= t.o.Threshold:
		t.tight, t.fellOn = true, time.Time{}
	case t.tight && t.fellOn.IsZero():
		t.fellAt, t.fellOn = cycles, time.Now()
	case t.tight && (cycles > t.fellAt || time.Since(t.fellOn) > 2*time.Second):
		t.tight = false // collected since: GOGC's goal no longer counts the executions' garbage
	}
	if t.tight {
		t.apply(t.Target(live, reserved))
	} else {
		t.apply(t.o.Limit)
	}
}

// apply sets the soft limit when it moved by more than 4 MiB (0: no limit). t.mu is held.
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

package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxSamples bounds the latencies a Recorder keeps (16 MiB of durations). Beyond it the
// recorder keeps a uniform random sample (reservoir sampling), so the percentiles stay unbiased;
// the count, minimum, mean and maximum stay exact.
const DefaultMaxSamples = 2_000_000

// Percentile is the nearest-rank percentile p (0 < p ≤ 100) of sorted, ascending durations: the
// smallest value with at least p% of the values at or below it. Empty input gives 0.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// p*n/100 rather than p/100*n: for integral p and n the product is exact, so ceil is too.
	rank := int(math.Ceil(p * float64(n) / 100))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Summary describes a set of latencies, in milliseconds.
type Summary struct {
	Count   int64   `json:"count"`   // every recorded latency
	Samples int     `json:"samples"` // the latencies the percentiles come from (= count unless capped)
	MinMs   float64 `json:"min_ms"`
	MeanMs  float64 `json:"mean_ms"`
	P50Ms   float64 `json:"p50_ms"`
	P90Ms   float64 `json:"p90_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Recorder collects latencies from many goroutines: exact percentiles up to its capacity, a
// uniform reservoir sample beyond it.
type Recorder struct {
	mu       sync.Mutex
	capacity int
	n        int64
	sum      time.Duration
	min, max time.Duration
	kept     []time.Duration
	rng      *rand.Rand
}

// NewRecorder keeps at most capacity latencies (DefaultMaxSamples when capacity ≤ 0).
func NewRecorder(capacity int) *Recorder {
	if capacity <= 0 {
		capacity = DefaultMaxSamples
	}
	return &Recorder{capacity: capacity, rng: rand.New(rand.NewPCG(1, 2))}
}

// Add records one latency.
func (r *Recorder) Add(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.sum += d
	if r.n == 1 || d < r.min {
		r.min = d
	}
	if d > r.max {
		r.max = d
	}
	if len(r.kept) < r.capacity {
		r.kept = append(r.kept, d)
		return
	}
	// Algorithm R: the n-th value replaces a random kept one with probability capacity/n.
	if j := r.rng.Int64N(r.n); j < int64(r.capacity) {
		r.kept[j] = d
	}
}

// Count is the number of latencies recorded.
func (r *Recorder) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Summary sorts a copy of the kept latencies and summarizes them.
func (r *Recorder) Summary() Summary {
	r.mu.Lock()
	s := slices.Clone(r.kept)
	out := Summary{Count: r.n, Samples: len(r.kept), MinMs: ms(r.min), MaxMs: ms(r.max)}
	if r.n > 0 {
		out.MeanMs = ms(r.sum / time.Duration(r.n))
	}
	r.mu.Unlock()
	slices.Sort(s)
	out.P50Ms, out.P90Ms, out.P99Ms = ms(Percentile(s, 50)), ms(Percentile(s, 90)), ms(Percentile(s, 99))
	return out
}

// Load drives Do from Workers goroutines, either for Warmup then Duration (Count == 0: the figures
// cover only the requests that complete inside the Duration window), or for exactly Count requests
// (no warm-up; the window runs from the first request to the last answer).
type Load struct {
	Workers    int
	Warmup     time.Duration
	Duration   time.Duration
	Count      int64
	MaxSamples int   // latencies kept for the percentiles (DefaultMaxSamples when 0)
	MaxErrors  int64 // stop early after this many errors (default 1000): the run is failed anyway
	// Do sends one request and reads its whole answer; an error (transport, unexpected status,
	// unexpected body) is counted and the worker goes on.
	Do func(ctx context.Context) error
	// Mark, when set, is called with "measure" as the measured window opens and "end" as it
	// closes, also when the run stops early (possibly on another goroutine while workers keep
	// running), e.g. to read CPU counters.
	Mark func(phase string)
}

// LoadResult is what one Load.Run measured.
type LoadResult struct {
	Requests     int64         `json:"requests"` // successful requests inside the window
	Errors       int64         `json:"errors"`   // failed requests, warm-up included
	ErrorSamples []string      `json:"error_samples,omitempty"`
	Window       time.Duration `json:"-"`
	WindowS      float64       `json:"window_s"`
	Throughput   float64       `json:"throughput_per_s"`
	Latency      Summary       `json:"latency"`
}

const maxErrorSamples = 5

type errorLog struct {
	n       atomic.Int64
	mu      sync.Mutex
	samples []string
}

func (e *errorLog) add(err error) int64 {
	n := e.n.Add(1)
	e.mu.Lock()
	if len(e.samples) < maxErrorSamples {
		msg := err.Error()
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		if !slices.Contains(e.samples, msg) {
			e.samples = append(e.samples, msg)
		}
	}
	e.mu.Unlock()
	return n
}

// Run runs the load until it is done, ctx ends, or MaxErrors errors have happened.
func (l Load) Run(ctx context.Context) LoadResult {
	workers := max(l.Workers, 1)
	maxErrors := l.MaxErrors
	if maxErrors <= 0 {
		maxErrors = 1000
	}
	rec := NewRecorder(l.MaxSamples)
	var errs errorLog
	var stop atomic.Bool
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		if ctx.Err() != nil {
			return // stopped: requests cut short are not failures of the server
		}
		if errs.add(err) >= maxErrors {
			stop.Store(true)
		}
	}
	mark := func(string) {}
	if l.Mark != nil {
		mark = l.Mark
	}

	var wg sync.WaitGroup
	var res LoadResult
	if l.Count > 0 {
		var next atomic.Int64
		mark("measure")
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for !stop.Load() && ctx.Err() == nil && next.Add(1) <= l.Count {
					t0 := time.Now()
					if err := l.Do(ctx); err != nil {
						fail(err)
						continue
					}
					rec.Add(time.Since(t0))
				}
			})
		}
		wg.Wait()
		res.Window = time.Since(start)
		mark("end")
	} else {
		start := time.Now()
		mStart := start.Add(l.Warmup)
		mEnd := mStart.Add(l.Duration)
		marks := make(chan struct{})
		marked := 0 // marks made by the goroutine; read after <-marks
		go func() {
			defer close(marks)
			for _, m := range []struct {
				at    time.Time
				phase string
			}{{mStart, "measure"}, {mEnd, "end"}} {
				t := time.NewTimer(time.Until(m.at))
				select {
				case <-t.C:
					mark(m.phase)
					marked++
				case <-ctx.Done():
					t.Stop()
					return
				}
			}
		}()
		for range workers {
			wg.Go(func() {
				for !stop.Load() && ctx.Err() == nil {
					t0 := time.Now()
					if !t0.Before(mEnd) {
						return
					}
					if err := l.Do(ctx); err != nil {
						fail(err)
						continue
					}
					if t1 := time.Now(); !t1.Before(mStart) && !t1.After(mEnd) {
						rec.Add(t1.Sub(t0))
					}
				}
			})
		}
		wg.Wait()
		end := time.Now()
		if end.After(mEnd) {
			end = mEnd
		}
		if stop.Load() || ctx.Err() != nil {
			cancel() // stopped early: the marks goroutine gives up
		}
		<-marks // otherwise every worker saw mEnd pass, so "end" fires at once
		if marked == 1 {
			mark("end") // the window closes early
		}
		res.Window = max(end.Sub(mStart), 0)
	}
	res.Requests = rec.Count()
	res.Errors = errs.n.Load()
	res.ErrorSamples = errs.samples
	res.WindowS = res.Window.Seconds()
	if res.Window > 0 {
		res.Throughput = float64(res.Requests) / res.Window.Seconds()
	}
	res.Latency = rec.Summary()
	return res
}

// statusError is an answer with an unexpected HTTP status.
type statusError struct {
	Method, Path string
	Status, Want int
	Body         string
}

func (e *statusError) Error() string {
	body := e.Body
	if len(body) > 200 {
		body = body[:200] + "…"
	}
	return fmt.Sprintf("%s %s: HTTP %d (want %d): %s", e.Method, e.Path, e.Status, e.Want, body)
}

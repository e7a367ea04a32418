package groupcommit

import (
	"sync"
	"time"
)

// Bucket upper bounds of the committer's histograms: closures per committed transaction, and the
// time from a batch's BEGIN to its COMMIT (seconds).
var (
	SizeBuckets    = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	LatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
)

// Histogram is a cumulative histogram in Prometheus' shape: Buckets maps each upper bound to the
// count of observations at most that bound.
type Histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// histogram accumulates observations into fixed buckets (counts per bucket, not cumulative).
type histogram struct {
	bounds []float64
	counts []uint64
	count  uint64
	sum    float64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds))}
}

func (h *histogram) observe(v float64) {
	h.count++
	h.sum += v
	for i, b := range h.bounds {
		if v <= b {
			h.counts[i]++
			return
		}
	}
}

func (h *histogram) snapshot() Histogram {
	out := Histogram{Count: h.count, Sum: h.sum, Buckets: make(map[float64]uint64, len(h.bounds))}
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		out.Buckets[b] = cum
	}
	return out
}

// batchStats are the histograms of committed batches: their size and their latency.
type batchStats struct {
	mu      sync.Mutex
	size    histogram
	latency histogram
}

func newBatchStats() *batchStats {
	return &batchStats{size: newHistogram(SizeBuckets), latency: newHistogram(LatencyBuckets)}
}

func (s *batchStats) observe(n int, d time.Duration) {
	s.mu.Lock()
	s.size.observe(float64(n))
	s.latency.observe(d.Seconds())
	s.mu.Unlock()
}

// Histograms returns the histograms of the transactions committed so far: how many closures each
// carried, and how long each took from BEGIN to the end of COMMIT.
func (c *Committer) Histograms() (size, latency Histogram) {
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	return c.stats.size.snapshot(), c.stats.latency.snapshot()
}

// Add returns the sum of h and o, histograms of the same buckets (several committers' together).
func (h Histogram) Add(o Histogram) Histogram {
	out := Histogram{Count: h.Count + o.Count, Sum: h.Sum + o.Sum, Buckets: make(map[float64]uint64, len(h.Buckets))}
	for b, n := range h.Buckets {
		out.Buckets[b] = n
	}
	for b, n := range o.Buckets {
		out.Buckets[b] += n
	}
	return out
}

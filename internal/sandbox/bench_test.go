package sandbox

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRunCalculateTax is the sync path of a small function: one
// execution of a cached program, input conversion and output conversion.
func BenchmarkRunCalculateTax(b *testing.B) {
	prog, err := Compile("calculate_tax.star", calculateTax)
	if err != nil {
		b.Fatal(err)
	}
	host := &fakeHost{}
	input := map[string]any{"amount": 100}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, rerr := Run(ctx, Request{Program: prog, Input: input, Info: testInfo, Host: host}); rerr != nil {
			b.Fatal(rerr)
		}
	}
}

// BenchmarkCompileCacheHit is the lookup of a compiled program.
func BenchmarkCompileCacheHit(b *testing.B) {
	c := NewCache(128)
	if _, err := c.Get("bench", "bench.star", calculateTax); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get("bench", "bench.star", calculateTax); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStepsPerSecond measures the interpreter's speed on a tight
// loop, the calibration of StepsPerCPUSecond (reported as steps/s).
func BenchmarkStepsPerSecond(b *testing.B) {
	for _, tc := range []struct{ name, src string }{
		{"while", fn(`  while True: pass`)},
		{"call", fn(`  def f(a): return a + 1`, `  x = 0`, `  while True: x = f(x)`)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			prog, err := Compile("loop.star", tc.src)
			if err != nil {
				b.Fatal(err)
			}
			var steps uint64
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				res, _ := Run(context.Background(), Request{Program: prog, Host: &fakeHost{},
					Limits: Limits{Timeout: 2 * time.Second, CPU: MinCPU}})
				elapsed += time.Since(start)
				steps += res.Steps
			}
			b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
		})
	}
}

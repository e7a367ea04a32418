package main

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the Go garbage collector's target that `lark serve` and `lark dev` run with
// when GOGC is not set: 400, not Go's 100. A runtime allocates a lot per request and keeps a small
// live heap (the state is in the database), so collecting less often is cheap in memory and buys
// throughput: +17 % sync invocations per second for about 80 MiB more RSS under full load on a
// 2-core machine (docs/benchmarks.md). GOGC and GOMEMLIMIT, when set, are the Go runtime's as
// usual (docs/operations.md).
const DefaultGCPercent = 400

// tuneGC applies DefaultGCPercent unless the operator set GOGC.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGCPercent)
	}
}

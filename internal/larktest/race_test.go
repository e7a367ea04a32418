//go:build race

package larktest_test

// raceEnabled: the race detector slows the runtime down about tenfold.
const raceEnabled = true

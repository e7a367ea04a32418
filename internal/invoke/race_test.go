//go:build race

package invoke_test

// raceEnabled: the race detector slows the runtime down about tenfold (SQLite writes more).
const raceEnabled = true

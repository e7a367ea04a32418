package main

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	t.Setenv("GOGC", "150") // the operator's setting wins (the runtime read it at start)
	tuneGC()
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC set: left alone")

	t.Setenv("GOGC", "")
	require.NoError(t, unsetenv("GOGC"))
	tuneGC()
	require.Equal(t, DefaultGCPercent, debug.SetGCPercent(100), "GOGC unset: the runtime's default")
}

func unsetenv(k string) error { return os.Unsetenv(k) }

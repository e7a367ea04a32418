package memlimit

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTargetFollowsTheReservations(t *testing.T) {
	t.Parallel()
	tr := New(Options{Limit: 4 << 30})
	require.Equal(t, int64(50<<20+16<<20+200<<20), tr.Target(250<<20, 200<<20),
		"200 MiB reserved over a 50 MiB heap: the heap may hold both and 16 MiB of room")
	require.Equal(t, int64(800<<20+100<<20+200<<20), tr.Target(1000<<20, 200<<20), "room grows with the server's own heap")
	require.Equal(t, int64(1<<30), New(Options{Limit: 1 << 30}).Target(3<<30, 2<<30), "never above the process limit")
}

func TestLimitFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	n, ok := readLimit(write("v2", "2147483648\n"))
	require.True(t, ok)
	require.Equal(t, int64(2<<30), n)
	_, ok = readLimit(write("max", "max\n"))
	require.False(t, ok, "cgroup v2 without a limit")
	_, ok = readLimit(write("v1", "9223372036854771712\n"))
	require.False(t, ok, "cgroup v1 without a limit")
	_, ok = readLimit(filepath.Join(dir, "absent"))
	require.False(t, ok)
	require.Equal(t, int64(24576000)<<10, memTotal(write("meminfo", "MemFree: 1 kB\nMemTotal:       24576000 kB\n")))
	require.Equal(t, int64(3<<30), Default(4<<30))
}

func ExampleTracker_Target() {
	tr := New(Options{Limit: 8 << 30})
	// Executions reserve 512 MiB while the server's own live heap is 100 MiB: the collector keeps
	// the heap near 100 + 16 + 512 MiB instead of letting it grow to five times the live heap.
	fmt.Println(tr.Target(612<<20, 512<<20)>>20, "MiB")
	// Output: 628 MiB
}

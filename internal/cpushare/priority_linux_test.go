package cpushare

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// lowered returns a one-slot scheduler whose slot holders run at nice 19, or skips the test where
// this process may not restore a thread's priority.
func lowered(t *testing.T) *Scheduler {
	t.Helper()
	s := New(1)
	if err := s.LowerPriority(19); err != nil {
		t.Skipf("thread priorities cannot be restored here (%v): LowerPriority is off, as the server then runs", err)
	}
	return s
}

// onThread runs f on a goroutine of its own and waits for it (so that the test's goroutine is
// never left wired to a thread).
func onThread(f func()) {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	<-done
}

func TestHoldersInterpretAtLowPriority(t *testing.T) {
	s := lowered(t)
	ctx := context.Background()
	onThread(func() {
		before, err := threadNice()
		require.NoError(t, err)
		require.NoError(t, s.Acquire(ctx, "a"))
		during, err := threadNice()
		require.NoError(t, err)
		require.Equal(t, 19, during, "the slot holder's thread runs at the low priority")
		require.NoError(t, s.Yield(ctx, "a"))
		during, err = threadNice()
		require.NoError(t, err)
		require.Equal(t, 19, during, "and keeps it across a yield")
		s.Release()
		after, err := threadNice()
		require.NoError(t, err)
		require.Equal(t, before, after, "Release gives the thread its priority back")
	})
	require.Zero(t, s.PriorityFailures())
}

func TestYieldThatGivesUpRestoresThePriority(t *testing.T) {
	s := lowered(t)
	onThread(func() {
		before, err := threadNice()
		require.NoError(t, err)
		require.NoError(t, s.Acquire(context.Background(), "a"))
		other := acquireAsync(s, context.Background(), "b") // b waits: the yield hands the slot over
		waitQueued(t, s, 1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.Error(t, s.Yield(ctx, "a"), "a's execution ends while it waits for its turn")
		after, err := threadNice()
		require.NoError(t, err)
		require.Equal(t, before, after, "no slot, so the normal priority")
		require.True(t, granted(other))
		s.Release()
	})
}

func TestLowerPriorityRefusesOutOfRange(t *testing.T) {
	s := New(1)
	require.Error(t, s.LowerPriority(0))
	require.Error(t, s.LowerPriority(20))
	require.Zero(t, s.nice, "nothing changed")
}

// TestLowerPriorityRefusedWithoutTheRightToRestore runs this test binary again without
// CAP_SYS_NICE (capsh, as root): the probe can lower a thread's priority but not restore it, so
// LowerPriority must refuse and change nothing, and the process's threads keep their priority.
func TestLowerPriorityRefusedWithoutTheRightToRestore(t *testing.T) {
	if os.Getenv("CPUSHARE_PROBE_CHILD") == "1" {
		s := New(1)
		err := s.LowerPriority(19)
		nice, nerr := threadNice()
		fmt.Printf("refused=%v nice=%d nerr=%v slotnice=%d\n", err != nil, nice, nerr, s.nice)
		return
	}
	capsh, err := exec.LookPath("capsh")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and capsh to run a process without CAP_SYS_NICE")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(capsh, "--drop=cap_sys_nice", "--", "-c",
		self+" -test.run=^TestLowerPriorityRefusedWithoutTheRightToRestore$ -test.count=1")
	cmd.Env = append(os.Environ(), "CPUSHARE_PROBE_CHILD=1")
	base, err := threadNice()
	require.NoError(t, err)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), fmt.Sprintf("refused=true nice=%d nerr=<nil> slotnice=0", base),
		"without the right to restore, priorities are left alone")
}

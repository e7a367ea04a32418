package cpushare

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

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

func TestHoldersInterpretAtLowPriorityOnceLowered(t *testing.T) {
	s := lowered(t)
	ctx := context.Background()
	onThread(func() {
		before, err := threadNice()
		require.NoError(t, err)
		require.NoError(t, s.Acquire(ctx, "a"))
		first, err := threadNice()
		require.NoError(t, err)
		require.Equal(t, before, first, "a holder's first quantum runs at the normal priority")
		s.Lower()
		during, err := threadNice()
		require.NoError(t, err)
		require.Equal(t, 19, during, "after Lower the slot holder's thread runs at the low priority")
		require.NoError(t, s.Yield(ctx, "a"))
		during, err = threadNice()
		require.NoError(t, err)
		require.Equal(t, 19, during, "and keeps it across a yield")
		s.Restore()
		s.Release()
		after, err := threadNice()
		require.NoError(t, err)
		require.Equal(t, before, after, "Restore gives the thread its priority back")
	})
	require.Zero(t, s.PriorityFailures())
}

func TestShortHoldersChangeNoPriority(t *testing.T) {
	s := lowered(t)
	onThread(func() {
		before, err := threadNice()
		require.NoError(t, err)
		require.NoError(t, s.Acquire(context.Background(), "a"))
		s.Release()
		after, err := threadNice()
		require.NoError(t, err)
		require.Equal(t, before, after)
	})
	require.Zero(t, s.PriorityFailures())
}

func TestLowerPriorityRefusesOutOfRange(t *testing.T) {
	s := New(1)
	require.Error(t, s.LowerPriority(0))
	require.Error(t, s.LowerPriority(20))
	require.Zero(t, s.nice, "nothing changed")
}

// TestOneWayWithoutTheRightToRestore runs this test binary again without CAP_SYS_NICE (capsh, as
// root): the probe can lower a thread's priority but not restore it, so LowerPriority chooses the
// one-way mode. Executions run through Do on workers at the low priority, reused while they are
// idle; the caller's thread, and Acquire and Release, leave priorities alone.
func TestOneWayWithoutTheRightToRestore(t *testing.T) {
	if os.Getenv("CPUSHARE_PROBE_CHILD") == "1" {
		s := New(1)
		err := s.LowerPriority(19)
		base, berr := threadNice()
		var first, second, held int
		var tid1, tid2 int
		s.Do(func() {
			first, tid1 = mustNice(), syscall.Gettid()
			if s.Acquire(context.Background(), "a") == nil {
				held = mustNice()
				s.Release()
			}
		})
		// Reuse is opportunistic: a Do that comes while the worker has not yet gone back to wait
		// for jobs starts another worker. Within a few Do calls the first worker takes one; on a
		// loaded machine its thread, at nice 19, may wait a while for a core to get back to its
		// wait, so the tries go on for up to ten seconds, a millisecond apart.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			s.Do(func() { second, tid2 = mustNice(), syscall.Gettid() })
			if tid2 == tid1 || second != 19 {
				break
			}
		}
		caller := mustNice()
		var panicked any
		func() {
			defer func() { panicked = recover() }()
			s.Do(func() { panic("boom") })
		}()
		fmt.Printf("err=%v oneway=%v base=%d/%v worker=%d,%d held=%d reused=%v caller=%d panic=%v\n",
			err, s.OwnThreads(), base, berr, first, second, held, tid1 == tid2, caller, panicked)
		return
	}
	out := withoutSysNice(t, "TestOneWayWithoutTheRightToRestore", "CPUSHARE_PROBE_CHILD")
	base, err := threadNice()
	require.NoError(t, err)
	require.Contains(t, out, fmt.Sprintf("err=<nil> oneway=true base=%d/<nil> worker=19,19 held=19 reused=true caller=%d panic=boom", base, base),
		"one way: workers interpret at the low priority and are reused; the caller keeps its priority; a panic is the caller's")
}

// mustNice is the calling thread's nice value, or -100 when it cannot be read.
func mustNice() int {
	n, err := threadNice()
	if err != nil {
		return -100
	}
	return n
}

func TestRestorableIsNotOneWay(t *testing.T) {
	s := lowered(t)
	require.False(t, s.OwnThreads())
	require.False(t, New(1).OwnThreads(), "no lowered priority, no own threads")
	var nilScheduler *Scheduler
	require.False(t, nilScheduler.OwnThreads())
	ran := false
	s.Do(func() { ran = true })
	require.True(t, ran, "Do calls f where it is, outside the one-way mode")
}

// TestOneWayWorkersAreBounded: with MaxWorkers executions waiting on workers, the next one runs
// where it is called, at the caller's priority, and is counted; none is refused or stalled.
func TestOneWayWorkersAreBounded(t *testing.T) {
	if os.Getenv("CPUSHARE_BOUND_CHILD") == "1" {
		s := New(1)
		if err := s.LowerPriority(19); err != nil || !s.OwnThreads() {
			fmt.Printf("not one-way: %v\n", err)
			return
		}
		release := make(chan struct{})
		var started sync.WaitGroup
		started.Add(MaxWorkers)
		for range MaxWorkers {
			go s.Do(func() { started.Done(); <-release })
		}
		started.Wait()
		nice := -1
		s.Do(func() { nice = mustNice() })
		close(release)
		fmt.Printf("overflow=%d nice=%d\n", s.Overflows(), nice)
		return
	}
	out := withoutSysNice(t, "TestOneWayWorkersAreBounded", "CPUSHARE_BOUND_CHILD")
	base, err := threadNice()
	require.NoError(t, err)
	require.Contains(t, out, fmt.Sprintf("overflow=1 nice=%d", base), "the execution beyond MaxWorkers ran on the caller's thread")
}

// withoutSysNice runs this test binary's test name again in a process without CAP_SYS_NICE (capsh,
// as root), with env set to 1 so that the test plays the child's part, and returns its output. It
// skips the test where it cannot.
func withoutSysNice(t *testing.T, name, env string) string {
	t.Helper()
	capsh, err := exec.LookPath("capsh")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and capsh to run a process without CAP_SYS_NICE")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(capsh, "--drop=cap_sys_nice", "--", "-c", self+" -test.run=^"+name+"$ -test.count=1")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/admission"
)

// churn allocates 40 strings of 1 MiB and holds them.
var churn = fn("  held = []", "  for i in range(40):", "    held.append(\"x\" * 1048576)", "  return len(held)")

func TestExecutionReservesWhatItAllocates(t *testing.T) {
	t.Parallel()
	var peak int64
	g := admission.New(admission.Options{Memory: 1 << 30, OnReserved: func(total int64) { peak = max(peak, total) }})
	prog, err := Compile("t.star", churn)
	require.NoError(t, err)
	_, rerr := Run(context.Background(), Request{Program: prog, Info: testInfo, Host: &fakeHost{}, CPU: &recordingCPU{}, Gate: g,
		Limits: Limits{MemoryMB: 128}})
	require.Nil(t, rerr)
	require.GreaterOrEqual(t, peak, int64(40<<20), "the reservation grew with the allocations")
	require.LessOrEqual(t, peak, int64(128<<20), "never past the execution's memory_mb")
	require.Equal(t, admission.Stats{}, g.Stats(), "all given back at the end")
}

func TestExecutionPausesForMemoryAndItsTimeoutStartsAtAdmission(t *testing.T) {
	t.Parallel()
	g := admission.New(admission.Options{Memory: 1 << 30, TenantMemory: 16 << 20, Runnable: 1})
	holder, err := g.Enter(context.Background(), testInfo.TenantID, 64<<20)
	require.NoError(t, err)
	prog, err := Compile("t.star", churn)
	require.NoError(t, err)
	done := make(chan *Error, 1)
	var res Result
	go func() {
		var rerr *Error
		res, rerr = Run(context.Background(), Request{Program: prog, Info: testInfo, Host: &fakeHost{}, CPU: &recordingCPU{}, Gate: g,
			Limits: Limits{MemoryMB: 128, Timeout: time.Second}})
		done <- rerr
	}()
	// The tenant's one runnable place is taken: the execution waits to start, its timeout not running.
	time.Sleep(1500 * time.Millisecond)
	select {
	case rerr := <-done:
		t.Fatalf("the execution ran while the tenant's place was taken: %v", rerr)
	default:
	}
	require.Equal(t, 1, g.Stats().Waiting)
	holder.Leave()
	require.Nil(t, <-done, "admitted after a wait longer than its timeout, it still has its whole timeout")
	require.GreaterOrEqual(t, res.Waited, time.Second)
	require.Less(t, res.Duration, time.Second)
}

func TestAnExecutionNotAdmittedInTimeEndsWithoutRunning(t *testing.T) {
	t.Parallel()
	g := admission.New(admission.Options{Runnable: 1})
	holder, err := g.Enter(context.Background(), testInfo.TenantID, 1<<20)
	require.NoError(t, err)
	defer holder.Leave()
	h := &fakeHost{}
	prog, err := Compile("t.star", fn("  ctx.log(\"ran\")", "  return 1"))
	require.NoError(t, err)
	res, rerr := Run(context.Background(), Request{Program: prog, Info: testInfo, Host: h, Gate: g, AdmitWithin: 50 * time.Millisecond})
	require.NotNil(t, rerr)
	require.Equal(t, ErrTimeout, rerr.TypeID)
	require.Contains(t, rerr.Message, "not started")
	require.Zero(t, res.Steps, "nothing ran")
	require.Equal(t, 0, g.Stats().Waiting)
}

func TestACallersTicketIsGivenBackWhenTheExecutionEnds(t *testing.T) {
	t.Parallel()
	g := admission.New(admission.Options{Runnable: 1})
	ticket, err := g.Enter(context.Background(), testInfo.TenantID, 1<<20) // a sync call, admitted before its start is written
	require.NoError(t, err)
	prog, err := Compile("t.star", fn("  return 1"))
	require.NoError(t, err)
	_, rerr := Run(admission.Admitted(context.Background(), ticket), Request{Program: prog, Info: testInfo, Host: &fakeHost{}, Gate: g})
	require.Nil(t, rerr)
	require.Equal(t, 0, g.Stats().Admitted, "the place is free once the execution ends, while the caller still writes its outcome")
	ticket.Leave() // the caller's own Leave afterwards does nothing more
	require.Equal(t, admission.Stats{}, g.Stats())
}

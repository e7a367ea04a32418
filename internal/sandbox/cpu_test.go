package sandbox

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordingCPU is a CPUScheduler that counts what an execution asks of it.
type recordingCPU struct {
	mu                         sync.Mutex
	held                       int
	acquires, releases, yields int
	maxHeld                    int
	onRelease                  func()
}

func (c *recordingCPU) Acquire(ctx context.Context, tenant string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acquires++
	c.held++
	c.maxHeld = max(c.maxHeld, c.held)
	return nil
}

func (c *recordingCPU) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releases++
	c.held--
	if c.onRelease != nil {
		c.onRelease()
		c.onRelease = nil
	}
}

func (c *recordingCPU) Yield(ctx context.Context, tenant string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.yields++
	return nil
}

func (c *recordingCPU) holding() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

func TestExecutionYieldsItsCPUSlot(t *testing.T) {
	cpu := &recordingCPU{}
	prog, err := Compile("t.star", fn("  n = 0", "  for i in range(100000):", "    n += i", "  return n"))
	require.NoError(t, err)
	res, rerr := Run(context.Background(), Request{Program: prog, Info: testInfo, Host: &fakeHost{}, CPU: cpu})
	require.Nil(t, rerr)
	require.GreaterOrEqual(t, cpu.yields, int(res.Steps/CPUQuantum)-1, "a yield every quantum (%d steps)", res.Steps)
	require.Equal(t, 1, cpu.acquires)
	require.Equal(t, 1, cpu.releases)
	require.Zero(t, cpu.holding())
}

func TestExecutionHoldsNoSlotWhileItWaits(t *testing.T) {
	// The call answers only once the program has given its slot back to wait for it.
	waiting := make(chan struct{})
	cpu := &recordingCPU{onRelease: func() { close(waiting) }}
	host := &fakeHost{http: func(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
		<-waiting
		return HTTPResponse{StatusCode: 200, Body: []byte(`{}`)}, nil
	}}
	prog, err := Compile("t.star", fn(`  p = r_http_get_v1("https://h.example/x", timeout_ms=5000)`, `  return r_await(p).ok`))
	require.NoError(t, err)
	res, rerr := Run(context.Background(), Request{Program: prog, Info: testInfo, Host: host, CPU: cpu})
	require.Nil(t, rerr)
	require.Equal(t, true, res.Output)
	require.Equal(t, 2, cpu.acquires, "at the start, and after the await")
	require.Equal(t, 2, cpu.releases, "to wait, and at the end")
	require.Zero(t, cpu.holding())
	require.Equal(t, 1, cpu.maxHeld)
}

// oneWayCPU is a recordingCPU in cpushare's one-way mode: it notes the goroutine of every Acquire.
type oneWayCPU struct {
	recordingCPU
	own        bool
	goroutines map[uint64]bool
}

func (c *oneWayCPU) OwnThreads() bool { return c.own }

// Do runs f on a goroutine of its own, as cpushare's workers do.
func (c *oneWayCPU) Do(f func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}

func (c *oneWayCPU) Acquire(ctx context.Context, tenant string) error {
	c.mu.Lock()
	c.goroutines[goid()] = true
	c.mu.Unlock()
	return c.recordingCPU.Acquire(ctx, tenant)
}

// goid is the calling goroutine's id, from the first line of its stack ("goroutine 42 [running]:").
func goid() uint64 {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	f := strings.Fields(string(b))
	id, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		panic(err)
	}
	return id
}

// A scheduler that cannot restore a thread's priority gets every execution, workflow compensations
// included, on a goroutine of its own (one that ends with it); any other runs on the caller's.
func TestExecutionsRunOnTheirOwnGoroutineWhenAsked(t *testing.T) {
	prog, err := Compile("t.star", fn("  return 1"))
	require.NoError(t, err)
	for _, own := range []bool{false, true} {
		cpu := &oneWayCPU{own: own, goroutines: map[uint64]bool{}}
		_, rerr := Run(context.Background(), Request{Program: prog, Info: testInfo, Host: &fakeHost{}, CPU: cpu})
		require.Nil(t, rerr)
		wprog, err := CompileWorkflow("w.star", `
def charge(ctx, input):
  return {"charged": input}

def refund(ctx, input, output):
  return None

def main(ctx, input):
  r_run_step_v1("charge", r_step_v1("charge", charge, refund), 1)
  fail("after the charge")
`)
		require.NoError(t, err)
		out, rerr := RunWorkflow(context.Background(), WorkflowRequest{Request: Request{Program: wprog, Info: testInfo, Host: &fakeHost{}, CPU: cpu}})
		require.NotNil(t, rerr, "main fails after its step")
		require.Len(t, out.Compensations, 1, "the step's compensation ran")
		require.Equal(t, !own, cpu.goroutines[goid()], "own=%v: the caller's goroutine interpreted", own)
		if own {
			require.GreaterOrEqual(t, len(cpu.goroutines), 2, "the function, the workflow and its compensation each on a goroutine of their own")
		}
	}
}

// priorityCPU is a recordingCPU that lowers thread priorities (cpushare.Scheduler.LowerPriority):
// it notes whether the holder's thread is lowered at each call.
type priorityCPU struct {
	recordingCPU
	lowered            bool
	lowers, restores   int
	releasedWhileLower int
}

func (c *priorityCPU) Lower() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lowers++
	c.lowered = true
}

func (c *priorityCPU) Restore() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restores++
	c.lowered = false
}

func (c *priorityCPU) Release() {
	c.mu.Lock()
	if c.lowered {
		c.releasedWhileLower++
	}
	c.mu.Unlock()
	c.recordingCPU.Release()
}

// An execution that ends within its first quantum never touches its thread's priority; a longer
// one lowers it once, at its first yield, and restores it before it gives the slot up.
func TestExecutionLowersItsPriorityAfterItsFirstQuantum(t *testing.T) {
	t.Parallel()
	short := &priorityCPU{}
	prog, err := Compile("t.star", fn("  return 1 + 1"))
	require.NoError(t, err)
	_, rerr := Run(context.Background(), Request{Program: prog, Info: testInfo, Host: &fakeHost{}, CPU: short})
	require.Nil(t, rerr)
	require.Equal(t, 1, short.releases)
	require.Zero(t, short.lowers, "a short execution runs at the normal priority")
	require.Zero(t, short.restores)

	long := &priorityCPU{}
	prog, err = Compile("t.star", fn("  n = 0", "  for i in range(100000):", "    n += i", "  return n"))
	require.NoError(t, err)
	_, rerr = Run(context.Background(), Request{Program: prog, Info: testInfo, Host: &fakeHost{}, CPU: long})
	require.Nil(t, rerr)
	require.Greater(t, long.yields, 1)
	require.Equal(t, 1, long.lowers, "lowered once, at the first yield")
	require.Equal(t, 1, long.restores)
	require.Zero(t, long.releasedWhileLower, "the priority is restored before the slot is released")
}

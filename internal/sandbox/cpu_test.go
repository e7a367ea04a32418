package sandbox

import (
	"context"
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

package sandbox

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heapCeiling is the most heap (runtime.MemStats.HeapAlloc) a hostile
// script may cause, with a 64 MiB budget.
const heapCeiling = 300 << 20

// peakHeap runs f while sampling runtime.ReadMemStats, and returns the
// largest HeapAlloc seen.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var (
		mu   sync.Mutex
		peak uint64
	)
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mu.Lock()
		peak = max(peak, ms.HeapAlloc)
		mu.Unlock()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(2 * time.Millisecond)
		defer ticker.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	sample()
	return peak
}

func TestHostileScripts(t *testing.T) {
	memory := []string{ErrMemoryLimit}
	memoryOrCPU := []string{ErrMemoryLimit, ErrCPULimit, ErrTimeout}
	tests := []struct {
		name string
		body []string
		want []string // acceptable error types
	}{
		{"string repeat", []string{`  return "x" * (1 << 30)`}, memory},
		{"string doubling", []string{`  s = "x"`, `  for i in range(40): s = s + s`, `  return len(s)`}, memory},
		{"string += doubling", []string{`  s = "x"`, `  for i in range(40): s += s`}, memory},
		{"list repeat", []string{`  return len([0] * (1<<28))`}, memory},
		{"list of range", []string{`  return len(list(range(1<<30)))`}, memory},
		{"join", []string{`  return len(",".join(["x"*1000]*1000000))`}, memory},
		{"dict comprehension", []string{`  return len({i: i for i in range(10000000)})`}, memoryOrCPU},
		{"json.encode of a huge nested value", []string{
			`  x = ["x" * 1000] * 10000`,
			`  for i in range(30): x = [x, x]`,
			`  return len(json.encode(x))`}, memory},
		{"str of shared strings", []string{`  return len(str(["x" * 1000] * 1000000))`}, memory},
		{"repr", []string{`  l = ["y" * 10000] * 10000`, `  return len(repr([l, l, l]))`}, memory},
		{"percent doubling", []string{`  s = "x" * 1000`, `  for i in range(40): s = "%s%s" % (s, s)`}, memory},
		{"format doubling", []string{`  s = "x" * 1000`, `  for i in range(40): s = "{}{}".format(s, s)`}, memory},
		{"replace", []string{`  s = "a" * 100000`, `  return len(s.replace("a", "b" * 100000))`}, memory},
		{"split", []string{`  s = "," * 10000000`, `  return len(s.split(","))`}, memory},
		{"list comprehension", []string{`  return len([i for i in range(100000000)])`}, memoryOrCPU},
		{"append loop", []string{`  l = []`, `  for i in range(100000000): l.append(i)`}, memoryOrCPU},
		{"extend doubling", []string{`  l = [1]`, `  for i in range(40): l.extend(l)`}, memory},
		{"list += doubling", []string{`  l = [1]`, `  for i in range(40): l += l`}, memory},
		{"sorted range", []string{`  return len(sorted(range(1 << 30)))`}, memory},
		{"set of range", []string{`  return len(set(range(1 << 30)))`}, memory},
		{"zip", []string{`  return len(zip(range(1 << 30), range(1 << 30)))`}, memory},
		{"enumerate", []string{`  return len(enumerate(range(1 << 30)))`}, memory},
		{"tuple", []string{`  return len(tuple(range(1 << 30)))`}, memory},
		{"star args", []string{`  return max(*range(1 << 30))`}, memory},
		{"dict update", []string{`  d = {}`, `  d.update([(i, i) for i in range(1 << 30)])`}, memory},
		{"bytes", []string{`  return len(bytes(range(256)) * (1 << 24))`}, memory},
		{"slice copies", []string{`  l = [0] * 1000000`, `  m = []`, `  for i in range(1000): m.append(l[1:])`}, memory},
		{"big int growth", []string{`  x = 3`, `  for i in range(64): x = x * x`}, []string{ErrRuntime, ErrMemoryLimit}},
		{"nested lists printed", []string{`  l = []`, `  for i in range(200000): l = [l]`, `  return len(str(l))`}, []string{ErrRuntime, ErrMemoryLimit}},
		{"struct fields", []string{`  d = {"f%d" % i: i for i in range(10000000)}`, `  return struct(**d)`}, memoryOrCPU},
		{"json.decode", []string{`  s = "[" + ",".join(["1"] * 5000000) + "]"`, `  return len(json.decode(s))`}, memory},
		{"json.decode deep", []string{`  return json.decode("[" * 1000000 + "]" * 1000000)`}, []string{ErrRuntime, ErrMemoryLimit}},
		{"json.indent", []string{`  s = json.encode([[[1]]] * 100000)`, `  return len(json.indent(s, indent=" " * 1000))`}, memory},
		{"fail message", []string{`  fail(*(["x" * 1000] * 1000000))`}, memory},
		{"promises", []string{`  return len([r_http_get_v1("http://h/") for i in range(1000000)])`}, memoryOrCPU},
		{"deep recursion", []string{`  def f(n): return f(n + 1) + 1`, `  return f(0)`}, []string{ErrMemoryLimit, ErrRuntime}},
		{"while true", []string{`  while True: pass`}, []string{ErrCPULimit, ErrTimeout}},
		{"max of a range", []string{`  return max(range(2147483647))`}, []string{ErrCPULimit, ErrTimeout}},
		{"all of a range", []string{`  return all(range(1, 2147483647))`}, []string{ErrCPULimit, ErrTimeout}},
		{"issubset of a range", []string{`  return set([-1]).issubset(range(2147483647))`}, []string{ErrCPULimit, ErrTimeout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rerr *Error
			var res Result
			// A script that must end on the memory limit gets a long timeout, so that it reaches
			// the limit even when the machine starves it (user code runs at a low OS priority, and
			// CI runs other packages' race tests beside it); the others end on the CPU budget or
			// the 5 s timeout.
			timeout := 5 * time.Second
			if slices.Equal(tt.want, memory) {
				timeout = 60 * time.Second
			}
			start := time.Now()
			peak := peakHeap(func() {
				res, rerr = exec(t, fn(tt.body...), nil, Limits{Timeout: timeout, CPU: 0.2, MemoryMB: 64}, nil)
			})
			elapsed := time.Since(start)
			require.NotNil(t, rerr, "the script succeeded")
			require.Contains(t, tt.want, rerr.TypeID, "%v", rerr)
			require.Less(t, peak, uint64(heapCeiling), "peak HeapAlloc %d MiB", peak>>20)
			require.Less(t, elapsed, timeout+2*time.Second, "the timeout is %v", timeout)
			require.LessOrEqual(t, res.MaxMemoryBytes, int64(64<<20))
			t.Logf("%s after %v, %d steps, %d MiB accounted, peak heap %d MiB: %s",
				shortType(rerr.TypeID), elapsed.Round(time.Millisecond), res.Steps, res.MaxMemoryBytes>>20, peak>>20, rerr.Message)
		})
	}
}

func TestCPULimit(t *testing.T) {
	start := time.Now()
	res, rerr := exec(t, fn(`  while True: pass`), nil, Limits{Timeout: 3 * time.Second, CPU: 0.1}, nil)
	require.NotNil(t, rerr)
	require.Contains(t, []string{ErrCPULimit, ErrTimeout}, rerr.TypeID)
	require.Equal(t, CategoryResourceLimit == rerr.Category || CategoryTimeout == rerr.Category, true)
	if rerr.TypeID == ErrCPULimit {
		// The budget is 0.1 × 3 s × StepsPerCPUSecond steps; a fast machine
		// spends it well within the timeout.
		require.Equal(t, uint64(0.1*3*StepsPerCPUSecond), res.Steps)
		require.EqualValues(t, uint64(0.1*3*StepsPerCPUSecond), rerr.Details["max_steps"])
		require.Positive(t, rerr.Details["line"])
		require.InDelta(t, 0.3, res.CPUTime.Seconds(), 0.01)
	}
	require.Less(t, time.Since(start), 4*time.Second)
}

func TestMemoryLimitDetails(t *testing.T) {
	res, rerr := exec(t, fn(`  x = 1`, `  return "x" * (1 << 30)`), nil, Limits{MemoryMB: 8}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, ErrMemoryLimit, rerr.TypeID)
	require.Equal(t, CategoryResourceLimit, rerr.Category)
	require.Equal(t, 3, rerr.Details["line"])
	require.Equal(t, 8, rerr.Details["memory_mb"])
	require.EqualValues(t, 1<<30+32, rerr.Details["requested_bytes"])
	require.Less(t, res.MaxMemoryBytes, int64(1<<20))

	// Memory held by earlier allocations counts.
	_, rerr = exec(t, fn(`  keep = []`, `  for i in range(100): keep.append("x" * 100000)`), nil, Limits{MemoryMB: 8}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, ErrMemoryLimit, rerr.TypeID)

	// Input counts too.
	_, rerr = exec(t, fn(`  return 1`), map[string]any{"big": string(make([]byte, 2<<20))}, Limits{MemoryMB: 1}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, ErrMemoryLimit, rerr.TypeID)

	// So does the output.
	_, rerr = exec(t, fn(`  return [[1]] * 1000000`), nil, Limits{MemoryMB: 32}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, ErrMemoryLimit, rerr.TypeID)
}

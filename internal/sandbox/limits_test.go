package sandbox

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A result that holds one large string many times is charged as the JSON
// text it becomes, is bounded by the payload limit, and its conversion
// shows in the reported peak.
func TestResultConversionIsCharged(t *testing.T) {
	bomb := fn(`  return ["x" * 1000000] * 200`)

	// Default payload limit (2 MiB): a typed, non-retryable error, never a
	// truncated success; converting stopped early.
	var res Result
	var rerr *Error
	peak := peakHeap(func() { res, rerr = exec(t, bomb, nil, Limits{MemoryMB: 16}, nil) })
	require.NotNil(t, rerr)
	require.Equal(t, ErrPayloadTooLarge, rerr.TypeID, "%v", rerr)
	require.Equal(t, CategoryNonRetryable, rerr.Category)
	require.EqualValues(t, DefaultMaxPayloadBytes, rerr.Details["limit_bytes"])
	require.Equal(t, 2, rerr.Details["line"])
	require.Less(t, peak, uint64(100<<20), "peak heap %d MiB", peak>>20)

	// Without a payload limit the memory budget stops it: 200 copies are
	// 200 MB of JSON, beyond 16 MiB.
	peak = peakHeap(func() { res, rerr = exec(t, bomb, nil, Limits{MemoryMB: 16, MaxPayloadBytes: -1}, nil) })
	require.NotNil(t, rerr)
	require.Equal(t, ErrMemoryLimit, rerr.TypeID, "%v", rerr)
	require.LessOrEqual(t, res.MaxMemoryBytes, int64(16<<20))
	require.Greater(t, res.MaxMemoryBytes, int64(14<<20), "the peak reflects the conversion")
	require.Less(t, peak, uint64(100<<20), "peak heap %d MiB", peak>>20)

	// A result that fits reports the memory its conversion took: 15 copies
	// of a 100 kB string are 1.5 MB of JSON.
	res, rerr = exec(t, fn(`  return ["x" * 100000] * 15`), nil, Limits{MemoryMB: 16}, nil)
	require.Nil(t, rerr)
	require.Len(t, res.Output, 15)
	require.Greater(t, res.MaxMemoryBytes, int64(1600000))

	// An input echoed many times is charged the same way.
	in := map[string]any{"s": strings.Repeat("y", 900_000)}
	res, rerr = exec(t, fn(`  return [input] * 1000`), in, Limits{MemoryMB: 64, MaxPayloadBytes: -1}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, ErrMemoryLimit, rerr.TypeID, "%v", rerr)
	require.LessOrEqual(t, res.MaxMemoryBytes, int64(64<<20))
}

// Helper arguments are charged and bounded like results.
func TestHelperArgumentsAreBounded(t *testing.T) {
	limits := Limits{MemoryMB: 64, MaxPayloadBytes: 1 << 20}
	for name, body := range map[string]string{
		"http body":     `  return r_await(r_http_post_v1("http://h/", ["x" * 100000] * 100))`,
		"invoke params": `  return r_await(r_invoke_v1("gts.x.test.fn.v1~x.test.f.v1~", {"a": ["x" * 100000] * 100}))`,
	} {
		t.Run(name, func(t *testing.T) {
			h := &fakeHost{invoke: func(context.Context, InvokeRequest) (InvokeResult, error) {
				return InvokeResult{OK: true, Value: "ok"}, nil
			}}
			_, rerr := exec(t, fn(body), nil, limits, h)
			require.NotNil(t, rerr)
			require.Equal(t, ErrPayloadTooLarge, rerr.TypeID, "%v", rerr)
			require.Empty(t, h.reqs, "nothing was sent")
		})
	}
}

// r_exit's message is cut at 4 KiB, its details bounded by MaxErrorBytes.
func TestExitEnvelopeIsBounded(t *testing.T) {
	_, rerr := exec(t, fn(`  r_exit({"message": "m" * 100000000, "details": {"k": "v"}})`), nil, Limits{MemoryMB: 256}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, ErrRuntime, rerr.TypeID)
	require.LessOrEqual(t, len(rerr.Message), maxMessageBytes)
	require.Equal(t, "v", rerr.Details["k"])

	_, rerr = exec(t, fn(`  r_exit(struct(message="m", details={"k": "d" * 100000000}))`), nil, Limits{MemoryMB: 256}, nil)
	require.NotNil(t, rerr)
	require.Equal(t, ErrPayloadTooLarge, rerr.TypeID, "%v", rerr)
	require.EqualValues(t, MaxErrorBytes, rerr.Details["limit_bytes"])
	b, err := json.Marshal(rerr)
	require.NoError(t, err)
	require.Less(t, len(b), MaxErrorBytes)
}

// Log messages are cut at MaxLogEntryBytes with a marker; fields share
// what is left.
func TestLogEntryIsBounded(t *testing.T) {
	h := &fakeHost{}
	_, rerr := exec(t, fn(
		`  ctx.log("L" * 100000)`,
		`  print("P" * 100000)`,
		`  ctx.log("m", big=["f" * 10000] * 10, small=1)`,
	), nil, Limits{}, h)
	require.Nil(t, rerr)
	require.Len(t, h.logs, 3)
	for _, l := range h.logs[:2] {
		require.LessOrEqual(t, len(l.Msg), MaxLogEntryBytes)
		require.Contains(t, l.Msg, "bytes dropped]")
	}
	require.Contains(t, h.logs[2].Fields["big"], "field dropped")
	require.Equal(t, json.Number("1"), h.logs[2].Fields["small"])
	b, err := json.Marshal(h.logs[2])
	require.NoError(t, err)
	require.Less(t, len(b), MaxLogEntryBytes)
}

// Long built-ins observe the deadline and count their work as steps.
func TestLongBuiltinsObserveTheDeadline(t *testing.T) {
	tests := []struct{ name, body string }{
		{"json.encode", `  return len(json.encode([[0] * 10000] * 10000))`},
		{"json.decode", `  s = json.encode([[0] * 1000] * 3000)` + "\n" + `  for i in range(1000): json.decode(s)`},
		{"result conversion", `  return [[0] * 10000] * 10000`},
		{"str", `  return len(str([[0] * 10000] * 10000))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, rerr := exec(t, fn(tt.body), nil, Limits{Timeout: time.Second, MemoryMB: 512, MaxPayloadBytes: -1}, nil)
			elapsed := time.Since(start)
			require.NotNil(t, rerr)
			require.Contains(t, []string{ErrTimeout, ErrCPULimit}, rerr.TypeID, "%v", rerr)
			// Before, json.encode here ran 12.7 s past its 1 s limit, counting 16 steps. The bounds leave
			// room for the race detector and a loaded machine.
			require.Less(t, elapsed, 3*time.Second, "the timeout is 1 s")
			require.Greater(t, res.Steps, uint64(100_000), "the built-in's work is accounted as steps")
			t.Logf("%s after %v, %d steps (%v CPU)", shortType(rerr.TypeID), elapsed.Round(time.Millisecond), res.Steps, res.CPUTime)
		})
	}
}

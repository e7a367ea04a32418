package api_test

// HTTP-level tests of what hostile code sees of its limits: results and conversions charged to the
// memory budget and bounded in size, logs bounded per attempt, long built-ins stopped at the
// deadline and billed.

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
)

// metricsOf returns an invocation record's metrics.
func metricsOf(rec obj) obj { return rec["observability"].(obj)["metrics"].(obj) }

// TestLimitsResultBomb stays serial: it samples the heap of the whole process, which tests running
// beside it would grow.
func TestLimitsResultBomb(t *testing.T) {
	const bomb = "def main(ctx, input):\n  return {\"r\": [\"x\" * 1000000] * 200}\n"
	limits := set("traits.limits", obj{"timeout_seconds": 10, "memory_mb": 16, "cpu": 1.0, "max_concurrent": 10})

	t.Run("the payload limit fails it, non-retryable, nothing stored", func(t *testing.T) {
		e := newEnv(t)
		adm := invTenant(t, e, "acme")
		id := e.registerActive(t, adm, invFn(t, "limits.bomb.v1~", bomb, limits))["entrypoint_id"].(string)
		h := startHeapSampler()
		rec := invSync(t, e, adm, id, obj{}, nil)
		heapGrowth, _ := h.finish()
		require.Contains(t, []string{"failed", "dead_lettered"}, rec["status"], "%v", rec)
		er := invErrorOf(t, rec)
		require.Equal(t, invErr("payload_too_large"), er["error_type_id"], "%v", er)
		require.Equal(t, "non_retryable", er["category"], "%v", er)
		require.Nil(t, rec["result"])
		m := metricsOf(rec)
		require.GreaterOrEqual(t, m["max_memory_used_mb"].(float64), 2.0, "the conversion's peak: %v", m)
		require.LessOrEqual(t, m["max_memory_used_mb"].(float64), 16.0, "%v", m)
		got := e.expect(t, http.StatusOK, http.MethodGet, invPath+"/"+invID(rec), adm, nil)
		require.Less(t, len(got.Raw), 64<<10, "the stored record is small")
		require.Less(t, heapGrowth, int64(200<<20), "peak HeapAlloc grew by %d MiB", heapGrowth>>20)
	})

	t.Run("without a payload limit the memory budget fails it and reports its peak", func(t *testing.T) {
		e := newEnv(t, func(c *server.Config) { c.MaxPayloadBytes = 1 << 30 })
		adm := invTenant(t, e, "acme")
		id := e.registerActive(t, adm, invFn(t, "limits.bomb.v1~", bomb, limits))["entrypoint_id"].(string)
		h := startHeapSampler()
		rec := invSync(t, e, adm, id, obj{}, nil)
		heapGrowth, _ := h.finish()
		er := invErrorOf(t, rec)
		require.Equal(t, invErr("memory_limit"), er["error_type_id"], "%v", er)
		m := metricsOf(rec)
		require.GreaterOrEqual(t, m["max_memory_used_mb"].(float64), 15.0, "%v", m)
		require.LessOrEqual(t, m["max_memory_used_mb"].(float64), 16.0, "%v", m)
		require.Less(t, heapGrowth, int64(200<<20), "peak HeapAlloc grew by %d MiB", heapGrowth>>20)
	})

	t.Run("a result that fits reports the memory its conversion took", func(t *testing.T) {
		e := newEnv(t)
		adm := invTenant(t, e, "acme")
		id := e.registerActive(t, adm, invFn(t, "limits.fits.v1~",
			"def main(ctx, input):\n  return {\"r\": [\"x\" * 100000] * 15}\n", limits))["entrypoint_id"].(string)
		rec := invSync(t, e, adm, id, obj{}, nil)
		require.Equal(t, "succeeded", rec["status"], "%v", rec)
		require.GreaterOrEqual(t, metricsOf(rec)["max_memory_used_mb"].(float64), 2.0, "%v", metricsOf(rec))
	})

	t.Run("params and event payloads over the limit are refused with 413", func(t *testing.T) {
		e := newEnv(t, func(c *server.Config) { c.MaxPayloadBytes = 64 << 10 })
		adm := invTenant(t, e, "acme")
		id := e.registerActive(t, adm, invFn(t, "limits.echo.v1~", "def main(ctx, input):\n  return {}\n"))["entrypoint_id"].(string)
		r := e.expectProblem(t, http.StatusRequestEntityTooLarge, "payload_too_large", http.MethodPost, invPath, adm,
			obj{"entrypoint_id": id, "mode": "sync", "params": obj{"s": strings.Repeat("p", 100<<10)}})
		require.EqualValues(t, 64<<10, r.Body["limit_bytes"], "%s", r)
		r = e.expectProblem(t, http.StatusRequestEntityTooLarge, "payload_too_large", http.MethodPost, eventsPath, adm,
			obj{"event_type_id": paymentType, "payload": obj{"s": strings.Repeat("p", 100<<10)}})
		require.EqualValues(t, 64<<10, r.Body["limit_bytes"], "%s", r)
	})
}

// TestLimitsLogFlood stays serial: its function logs 10,000 entries of 100 KB (1 GB, of which 1 MiB
// is kept), CPU-bound for a second under -race within a 10 s timeout. With 100,000 entries it took
// seconds, and under a loaded machine (the whole suite beside it) it missed the timeout.
func TestLimitsLogFlood(t *testing.T) {
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	id := e.registerActive(t, adm, invFn(t, "limits.chatty.v1~", `
def main(ctx, input):
    s = "L" * 100000
    for i in range(10000):
        ctx.log(s)
    return {}
`))["entrypoint_id"].(string)
	exit := e.registerActive(t, adm, invFn(t, "limits.exit.v1~", `
def main(ctx, input):
    r_exit({"message": "M" * 100000000, "details": {"d": "D" * 100000}})
`, set("traits.limits", obj{"timeout_seconds": 10, "memory_mb": 256, "cpu": 1.0, "max_concurrent": 10})))["entrypoint_id"].(string)

	rec := invSync(t, e, adm, id, obj{}, nil)
	require.Equal(t, "succeeded", rec["status"], "%v", rec)
	var logs []obj
	total := 0
	q := url.Values{"limit": {"200"}}
	for {
		r := timelinePage(t, e, adm, invID(rec), q)
		total += len(r.Raw)
		for _, it := range r.items() {
			if it["event_type"] == "log" {
				logs = append(logs, it)
			}
		}
		next, _ := r.Body["page_info"].(obj)["next_cursor"].(string)
		if next == "" {
			break
		}
		q.Set("cursor", next)
	}
	// 1 MiB of log entries (the timeline renders each entry's message twice: message and details).
	require.Less(t, total, 3<<20, "the whole timeline is about 2 MiB")
	require.NotEmpty(t, logs)
	last := invJSON(t, logs[len(logs)-1])
	kept := len(logs) - 1
	require.Contains(t, last, invJSON(t, 10000-kept)+" log entries dropped", "one marker counts the dropped entries: %s", last)
	require.Less(t, kept, 100, "1 MiB of 16 KiB entries")
	first, _ := logs[0]["message"].(string)
	require.LessOrEqual(t, len(first), 16<<10, "one entry's message is cut at 16 KiB")
	require.Contains(t, first, "bytes dropped]")

	rec = invSync(t, e, adm, exit, obj{}, nil)
	er := invErrorOf(t, rec)
	require.LessOrEqual(t, len(er["message"].(string)), 4<<10, "%v", er["error_type_id"])
	got := e.expect(t, http.StatusOK, http.MethodGet, invPath+"/"+invID(rec), adm, nil)
	require.Less(t, len(got.Raw), 64<<10, "the stored error is small")
}

// TestLimitsJSONEncodeBomb stays serial: it bounds the wall time of a CPU-bound execution.
func TestLimitsJSONEncodeBomb(t *testing.T) {
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	id := e.registerActive(t, adm, invFn(t, "limits.encode.v1~",
		"def main(ctx, input):\n  return {\"n\": len(json.encode([[0] * 10000] * 10000))}\n",
		set("traits.limits", obj{"timeout_seconds": 2, "memory_mb": 512, "cpu": 1.0, "max_concurrent": 10})))["entrypoint_id"].(string)
	start := time.Now()
	rec := invSync(t, e, adm, id, obj{}, nil)
	took := time.Since(start)
	require.Less(t, took, 5*time.Second, "the 2 s limit plus slack for -race and load (before: 12.7 s)")
	er := invErrorOf(t, rec)
	require.Contains(t, []string{invErr("cpu_limit"), invErr("timeout")}, er["error_type_id"], "%v", er)
	m := metricsOf(rec)
	require.Greater(t, m["cpu_time_ms"].(float64), 1.0, "the encoder's work is billed (before: 0): %v", m)
	require.GreaterOrEqual(t, m["max_memory_used_mb"].(float64), 2.0, "the encoder's output so far is in the peak: %v", m)
	t.Logf("%s after %v: %v", er["error_type_id"], took.Round(time.Millisecond), m)
}

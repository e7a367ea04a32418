package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	trgCrashFn         = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.ops.on_orders.v1~"
	trgCrashType       = "gts.x.core.events.event.v1~vendor.app.ops.order_placed.v1~"
	trgCrashEvents     = 10000
	trgCrashPublishers = 16
	trgCrashBatch      = 50
)

// TestCrashTriggerBatches: a flood of 10,000 events into a batching trigger (max_size 50), with a
// SIGKILL of the server in the middle of it. Publishers retry what the kill interrupted with the
// same event id (a publish that committed before the kill answers 200 and starts nothing). In the
// end every event reaches the entrypoint exactly once, in invocations of at most 50 events in
// arrival order: none lost with the killed process, none doubled by the retries or the restart.
func TestCrashTriggerBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: kills and restarts the server; skipped with -short")
	}
	data := t.TempDir()
	p := startLark(t, data)
	def := fmt.Appendf(nil, `{"entrypoint_id":%q,"title":"on orders","owner":{"owner_type":"tenant"},
		"schema":{"params":{"type":"object"},"returns":{"type":"object"}},
		"traits":{"invocation":{"supported":["async"],"default":"async"},"limits":{"timeout_seconds":5,"memory_mb":64,"cpu":0.2},"retry":{"max_attempts":1,"initial_delay_ms":100,"max_delay_ms":1000,"backoff_multiplier":2.0}},
		"implementation":{"adapter":"gts.x.core.serverless.adapter.starlark.v1~","kind":"code",
		"code":{"language":"starlark","source":"def main(ctx, input):\n  return {\"n\": len(input.events)}\n"}}}`, trgCrashFn)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, def), http.StatusCreated, nil)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints/"+trgCrashFn+":status", p.Token, []byte(`{"action":"activate"}`)), http.StatusOK, nil)
	trg := fmt.Appendf(nil, `{"trigger_id":"orders","event_type_id":%q,"entrypoint_id":%q,
		"event_filter_query":"payload.n >= 0","batch":{"enabled":true,"max_size":%d,"max_wait_ms":200}}`, trgCrashType, trgCrashFn, trgCrashBatch)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/triggers", p.Token, trg), http.StatusCreated, nil)

	// Publishers take event numbers from a shared counter; a publish that fails (the server is
	// being killed) is retried with the same id until it is answered.
	var next atomic.Int64
	var mu sync.Mutex
	cur := p
	server := func() *larkProc { mu.Lock(); defer mu.Unlock(); return cur }
	// publishOne runs on the publishers' goroutines: it reports with t.Errorf, never FailNow.
	publishOne := func(c *http.Client, n int64) bool {
		body := fmt.Appendf(nil, `{"event_id":"ev-%05d","event_type_id":%q,"payload":{"n":%d}}`, n, trgCrashType, n)
		for attempt := 0; attempt < 2000; attempt++ {
			s := server()
			r, err := s.try(c, http.MethodPost, apiBase+"/events", s.Token, body)
			if err == nil && (r.Status == http.StatusAccepted || r.Status == http.StatusOK) {
				return true
			}
			if err == nil && r.Status < 500 && r.Status != http.StatusTooManyRequests {
				t.Errorf("event %d: publish refused: %s", n, r)
				return false
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("event %d never accepted", n)
		return false
	}
	var wg sync.WaitGroup
	for range trgCrashPublishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := poolClient(2)
			for n := next.Add(1); n <= trgCrashEvents; n = next.Add(1) {
				if !publishOne(c, n) {
					return
				}
			}
		}()
	}
	// Kill once about a third of the events are in, then restart on the same data.
	for next.Load() < trgCrashEvents/3 {
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	cur.Kill()
	t.Logf("killed after ~%d events", next.Load())
	cur = startLark(t, data)
	mu.Unlock()
	wg.Wait()
	require.False(t, t.Failed(), "publishing failed")
	p = server()
	defer p.Stop()

	// Every event in exactly one invocation, batches of at most max_size in arrival order (the
	// events of one publisher are published in increasing order, so within a batch the event
	// numbers of any one publisher rise; globally, the batch's order is the store's arrival order).
	deadline := time.Now().Add(60 * time.Second)
	for {
		seen := map[string]int{}
		batches := 0
		q := url.Values{"$filter": {fmt.Sprintf("entrypoint_id eq '%s'", trgCrashFn)}}
		for _, raw := range p.listAll(apiBase+"/invocations?"+q.Encode(), p.Token) {
			var inv struct {
				Params struct {
					Events []struct {
						EventID string `json:"event_id"`
					} `json:"events"`
				} `json:"params"`
			}
			require.NoError(t, json.Unmarshal(raw, &inv))
			require.NotEmpty(t, inv.Params.Events)
			require.LessOrEqual(t, len(inv.Params.Events), trgCrashBatch)
			for _, ev := range inv.Params.Events {
				seen[ev.EventID]++
			}
			batches++
		}
		for id, n := range seen {
			require.Equal(t, 1, n, "event %s reached the entrypoint %d times", id, n)
		}
		if len(seen) == trgCrashEvents {
			t.Logf("%d events in %d invocations", len(seen), batches)
			require.GreaterOrEqual(t, batches, trgCrashEvents/trgCrashBatch)
			return
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d events reached the entrypoint", len(seen), trgCrashEvents)
		time.Sleep(200 * time.Millisecond)
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	schCrashFn        = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.ops.tick.v1~"
	schCrashSchedules = 20
	schCrashKills     = 3
	schCrashRun       = 3 * time.Second // each life of the server before it is killed
)

// TestCrashSchedules: 20 schedules firing every second; the server is killed with SIGKILL three
// times and restarted. Every instant is recorded at most once, every started run has exactly one
// invocation of its own, and instants missed while the server was down are recorded as skipped
// (missed_policy skip) or runs — never lost without a trace, never run twice.
func TestCrashSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: kills and restarts the server; skipped with -short")
	}
	data := t.TempDir()
	p := startLark(t, data)
	def := fmt.Appendf(nil, `{"entrypoint_id":%q,"title":"tick","owner":{"owner_type":"tenant"},
		"schema":{"params":{"type":"object"},"returns":{"type":"object"}},
		"traits":{"invocation":{"supported":["async"],"default":"async"},"limits":{"timeout_seconds":5,"memory_mb":64,"cpu":0.2},"retry":{"max_attempts":1,"initial_delay_ms":100,"max_delay_ms":1000,"backoff_multiplier":2.0}},
		"implementation":{"adapter":"gts.x.core.serverless.adapter.starlark.v1~","kind":"code",
		"code":{"language":"starlark","source":"def main(ctx, input):\n  return {\"ok\": True}\n"}}}`, schCrashFn)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints", p.Token, def), http.StatusCreated, nil)
	requireJSON(t, p.do(http.MethodPost, apiBase+"/entrypoints/"+schCrashFn+":status", p.Token, []byte(`{"action":"activate"}`)), http.StatusOK, nil)
	for i := range schCrashSchedules {
		body := fmt.Appendf(nil, `{"schedule_id":"tick%02d","entrypoint_id":%q,"expression":{"kind":"cron","value":"* * * * * *"}}`, i, schCrashFn)
		requireJSON(t, p.do(http.MethodPost, apiBase+"/schedules", p.Token, body), http.StatusCreated, nil)
	}
	begin := time.Now().UTC()
	for k := range schCrashKills {
		time.Sleep(schCrashRun)
		p.Kill()
		t.Logf("kill %d at %s", k+1, time.Now().Format(time.StampMilli))
		p = startLark(t, data)
	}
	time.Sleep(schCrashRun)
	p.Stop()
	p = startLark(t, data) // read back (schedules keep firing meanwhile; reads are by instant window)
	defer p.Stop()
	end := begin.Add(time.Duration(schCrashKills+1) * schCrashRun)

	type run struct {
		RunID        string    `json:"run_id"`
		ScheduledAt  time.Time `json:"scheduled_at"`
		Kind         string    `json:"kind"`
		Status       string    `json:"status"`
		InvocationID string    `json:"invocation_id"`
	}
	invocations := map[string]string{} // invocation id → schedule/instant
	started := 0
	for i := range schCrashSchedules {
		id := fmt.Sprintf("tick%02d", i)
		seen := map[time.Time]bool{}
		for _, raw := range p.listAll(apiBase+"/schedules/"+id+"/history?next_runs=0&until="+end.Format(time.RFC3339), p.Token) {
			var r run
			require.NoError(t, json.Unmarshal(raw, &r))
			require.False(t, seen[r.ScheduledAt], "%s: instant %s recorded twice", id, r.ScheduledAt)
			seen[r.ScheduledAt] = true
			if r.InvocationID == "" {
				require.Equal(t, "skipped", r.Status, "%s %s", id, r.ScheduledAt)
				continue
			}
			started++
			key := id + "@" + r.ScheduledAt.Format(time.RFC3339)
			prev, dup := invocations[r.InvocationID]
			require.False(t, dup, "invocation %s belongs to %s and %s", r.InvocationID, prev, key)
			invocations[r.InvocationID] = key
			var inv struct {
				Status string `json:"status"`
			}
			requireJSON(t, p.do(http.MethodGet, apiBase+"/invocations/"+r.InvocationID, p.Token, nil), http.StatusOK, &inv)
		}
		// Every second from the first fire to the end is accounted for (run or skipped), except
		// the ones not due yet when the schedule was created and the last second's edge.
		require.GreaterOrEqual(t, len(seen), int(end.Sub(begin).Seconds())-2, "%s: instants accounted for", id)
	}
	t.Logf("%d started runs over %d schedules, %d kills", started, schCrashSchedules, schCrashKills)
	require.Greater(t, started, schCrashSchedules*int(schCrashRun.Seconds()), "runs started in every life of the server")
}

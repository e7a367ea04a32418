package bench

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWorkflow10Source(t *testing.T) {
	src := Workflow10Source(3)
	require.Equal(t, "def s(ctx, input):\n  return input\n\ndef main(ctx, input):\n"+
		"  r_run_step_v1(\"s0\", s, 0)\n  r_run_step_v1(\"s1\", s, 1)\n  r_run_step_v1(\"s2\", s, 2)\n"+
		"  return {\"ok\": True}\n", src)
	require.Equal(t, 10, strings.Count(Workflow10Source(Workflow10Steps), "r_run_step_v1("))
	require.Equal(t, "def main(ctx, input):\n  r_sleep(20000)\n  return {\"ok\": True}\n", SleeperSource(20000))
}

func TestWorkflowDefinition(t *testing.T) {
	var def struct {
		ID     string `json:"entrypoint_id"`
		Traits struct {
			Invocation struct {
				Supported []string `json:"supported"`
			} `json:"invocation"`
			Workflow map[string]any `json:"workflow"`
		} `json:"traits"`
		Impl struct {
			Code struct {
				Source string `json:"source"`
			} `json:"code"`
		} `json:"implementation"`
	}
	require.NoError(t, json.Unmarshal(WorkflowDefinition(SleeperID, "src"), &def))
	require.Equal(t, SleeperID, def.ID)
	require.True(t, strings.HasPrefix(def.ID, "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~vendor.app.bench."))
	require.Equal(t, []string{"sync", "async"}, def.Traits.Invocation.Supported)
	require.Equal(t, map[string]any{
		"compensation":        map[string]any{"on_failure": nil, "on_cancel": nil},
		"checkpointing":       map[string]any{"strategy": "automatic"},
		"max_suspension_days": float64(30),
	}, def.Traits.Workflow)
	require.Equal(t, "src", def.Impl.Code.Source)
}

func TestSleepLag(t *testing.T) {
	tl := `{"invocation_id":"inv_1","status":"succeeded","items":[
	 {"seq":1,"at":"2026-11-21T11:29:11.681986Z","event_type":"created","details":{}},
	 {"seq":3,"at":"2026-11-21T11:29:11.683889Z","event_type":"journal","details":{"helper":"r_sleep","until":"2026-11-21T11:29:13.683734Z"}},
	 {"seq":4,"at":"2026-11-21T11:29:11.684258Z","event_type":"suspended","details":{"reason":"timer","until":"2026-11-21T11:29:13.683734Z"}},
	 {"seq":5,"at":"2026-11-21T11:29:13.684026Z","event_type":"resumed","details":{"reason":"timer"}},
	 {"seq":7,"at":"2026-11-21T11:29:13.685432Z","event_type":"succeeded","details":{"result":{"ok":true}}}]}`
	due, fin, err := SleepLag([]byte(tl))
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 11, 21, 11, 29, 13, 683734000, time.UTC), due.UTC())
	require.Equal(t, 1698*time.Microsecond, fin.Sub(due))

	_, _, err = SleepLag([]byte(`{"items":[{"at":"2026-11-21T11:29:13Z","event_type":"succeeded","details":{}}]}`))
	require.ErrorContains(t, err, "no suspended event")
	_, _, err = SleepLag([]byte(`{"items":[{"at":"2026-11-21T11:29:13Z","event_type":"suspended","details":{"until":"2026-11-21T11:29:14Z"}}]}`))
	require.ErrorContains(t, err, "no succeeded event")
	_, _, err = SleepLag([]byte(`nope`))
	require.Error(t, err)
}

func TestParseVmRSS(t *testing.T) {
	n, err := ParseVmRSS([]byte("Name:\tlark\nVmPeak:\t  99999 kB\nVmRSS:\t   45120 kB\nRssAnon:\t 1 kB\n"))
	require.NoError(t, err)
	require.Equal(t, int64(45120), n)
	_, err = ParseVmRSS([]byte("Name:\tlark\n"))
	require.Error(t, err)
	_, err = ParseVmRSS([]byte("VmRSS:\t 12 MB\n"))
	require.Error(t, err)
}

func TestRSSWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := []rssSample{{t0, 10}, {t0.Add(time.Second), 20}, {t0.Add(2 * time.Second), 40}, {t0.Add(3 * time.Second), 99}}
	mx, mean, n := rssWindow(s, t0.Add(time.Second), t0.Add(2*time.Second))
	require.Equal(t, int64(40), mx)
	require.Equal(t, int64(30), mean)
	require.Equal(t, 2, n)
	mx, mean, n = rssWindow(s, t0.Add(10*time.Second), t0.Add(11*time.Second))
	require.Zero(t, mx+mean+int64(n))
}

func TestEvenSample(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	require.Equal(t, ids, evenSample(ids, 0))
	require.Equal(t, ids, evenSample(ids, 10))
	require.Equal(t, ids, evenSample(ids, 20))
	require.Equal(t, []string{"a", "c", "e", "g", "i"}, evenSample(ids, 5))
	require.Equal(t, []string{"a", "d", "g"}, evenSample(ids, 3))
}

func TestWorkflowRows(t *testing.T) {
	wf := Scenario{Name: "workflow10", Status: StatusOK, Throughput: 7023, Unit: "steps/s",
		Latency: &Summary{Count: 200, P50Ms: 1.52, P99Ms: 7.79}, Result: ResultMiss,
		Goals:      []Goal{{Name: "steps_per_s", Target: "≥ 10,000"}, {Name: "p50_ms", Target: "≤ 3 ms", Met: true}},
		Workflow10: &Workflow10Detail{Steps: 10, N: 5000, Clients: 50, BurnDownS: 7.1, WorkflowsS: 702.3, StepsPerS: 7023, SerialN: 200, SerialWarmup: 10}}
	sl := Scenario{Name: "sleepers", Status: StatusOK, Latency: &Summary{Count: 10000, P50Ms: 12.1, P99Ms: 112}, Result: ResultPass,
		Goals:    []Goal{{Name: "lag_p99_ms", Target: "≤ 1000 ms", Met: true}},
		Sleepers: &SleepersDetail{N: 10000, SleepS: 20, ParkedBeforeDue: true, SleepRSSMaxKiB: 38 << 10, IdleRSSKiB: 23 << 10, LagSampled: 10000}}
	var b strings.Builder
	require.NoError(t, (&Report{Scenarios: []Scenario{wf, sl}}).WriteMarkdown(&b))
	out := b.String()
	require.Contains(t, out, "| workflow10 | 7,023 steps/s | 1.52 ms | 7.79 ms |  |  |  |  |  |  |  | ≥ 10,000 steps/s; p50 ≤ 3 ms | MISS |\n")
	require.Contains(t, out, "| sleepers | — | 12.1 ms | 112 ms |  |  |  |  |  |  |  | lag p99 ≤ 1000 ms | PASS |\n")
	require.Contains(t, out, "702 workflows/s, 7,023 steps/s")
	require.Contains(t, out, "server RSS while sleeping max 38 MiB")
	require.Contains(t, out, "all parked before the first was due")
	require.Contains(t, out, "from the timelines of 10000 workflows")
}

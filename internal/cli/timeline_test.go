package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/pkg/larkclient"
)

// TestTimelineLinesShowTheCause renders a real timeline (the README's process_order against a shop
// that does not resolve: four step retries with durable backoffs, then failed and compensated)
// and checks that every line that has a cause in its details prints it.
func TestTimelineLinesShowTheCause(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join("testdata", "timeline", "process_order.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e larkclient.TimelineEntry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		e.JSON = append(json.RawMessage(nil), sc.Bytes()...)
		lines = append(lines, timelineLine(e))
	}
	require.NoError(t, sc.Err())
	require.Len(t, lines, 36)
	const dns = "http_transport: egress: transport (host shop.example.com): lookup shop.example.com on 10.255.255.53:53: no such host (retryable)"
	require.Equal(t, "   5  01:43:14.045Z  step_retried           running       step=reserve_inventory retrying at 01:43:15.045Z after 1s (attempt 2): "+dns, lines[4])
	require.Equal(t, "   4  01:43:14.044Z  http_call              running       POST shop.example.com error=transport (11ms)", lines[3])
	require.Equal(t, "   7  01:43:14.048Z  suspended              suspended     until 2026-11-28 01:43:15.044Z (step retry)", lines[6])
	require.Equal(t, "   8  01:43:15.046Z  resumed                running       (step_retry)", lines[7])
	require.Equal(t, "  10  01:43:15.172Z  step_started           running       step=reserve_inventory attempt 2", lines[9])
	require.Contains(t, lines[25], "retrying at 01:43:29.266Z after 8s (attempt 5)")
	require.Equal(t, "  33  01:43:29.286Z  step_failed            running       step=reserve_inventory "+dns, lines[32])
	require.Equal(t, "  34  01:43:29.290Z  failed                 failed        "+dns, lines[33])
	require.Equal(t, "  35  01:43:29.290Z  compensation_started   compensating  on failure handler=vendor.app.orders.rollback_order.v1 handler_invocation=inv_01a21fd25b0778cba776f6cb0dab29ec", lines[34])
	require.Equal(t, "  36  01:43:29.293Z  compensation_completed compensated   handler_invocation=inv_01a21fd25b0778cba776f6cb0dab29ec handler_status=succeeded", lines[35])
	for i, l := range lines {
		require.NotRegexp(t, `\s$`, l, "line %d", i+1)
	}
	golden(t, &normaliser{}, "timeline_process_order", []string{"(rendered from testdata/timeline/process_order.jsonl)"},
		result{stdout: strings.Join(lines, "\n") + "\n"})
}

// TestStatusExit: each unsuccessful end has its own exit code.
func TestStatusExit(t *testing.T) {
	t.Parallel()
	codes := map[string]int{}
	for _, s := range []string{"succeeded", "failed", "canceled", "compensated", "dead_lettered"} {
		codes[s] = statusExit(s)
	}
	require.Equal(t, map[string]int{"succeeded": 0, "failed": 1, "canceled": 4, "compensated": 5, "dead_lettered": 6}, codes)
}

// TestScheduleTimesCarryTheirZone: a schedule's times print in its zone, with the zone's name.
func TestScheduleTimesCarryTheirZone(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 15, 1, 0, 0, 0, time.UTC)
	require.Equal(t, "2026-01-15 02:00:00 CET", tsZone(&at, "Europe/Berlin"))
	require.Equal(t, "2026-01-15 01:00:00 UTC", tsZone(&at, ""))
	require.Equal(t, "-", tsZone(nil, "UTC"))
}

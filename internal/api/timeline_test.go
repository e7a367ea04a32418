package api_test

// HTTP-level tests of GET /invocations/{id}/timeline: it is a paginated list in seq order whose `at`
// never goes backwards, and each `resumed` entry says why the workflow resumed.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/server"
)

// timelinePage reads one page of an invocation's timeline with the query.
func timelinePage(t testing.TB, e *env, tok, id string, q url.Values) *resp {
	t.Helper()
	return e.expect(t, http.StatusOK, http.MethodGet, invPath+"/"+id+"/timeline?"+q.Encode(), tok, nil)
}

// requireInOrder checks that items have consecutive seqs from first and non-decreasing `at`.
func requireInOrder(t testing.TB, items []obj, first int, raw []byte) {
	t.Helper()
	var last time.Time
	for i, it := range items {
		require.Equal(t, float64(first+i), it["seq"], "entry %d: %s", i, raw)
		at, err := time.Parse(time.RFC3339Nano, it["at"].(string))
		require.NoError(t, err)
		require.False(t, at.Before(last), "at of seq %v goes backwards (%v after %v): %s", it["seq"], at, last, raw)
		last = at
	}
}

func TestTimelinePages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adm := invTenant(t, e, "acme")
	fn := e.registerActive(t, adm, invFn(t, "misc.chatty.v1~", `
def main(ctx, input):
    for i in range(60):
        print("line %d" % i)
    return {}
`))
	id := invID(invSync(t, e, adm, fn["entrypoint_id"].(string), obj{}, nil))
	rec := invGet(t, e, adm, id)
	require.Equal(t, "succeeded", rec["status"])

	// Walk forward in pages of the default size (25).
	var all []obj
	var pages []*resp
	q := url.Values{}
	for {
		r := timelinePage(t, e, adm, id, q)
		require.Equal(t, id, r.Body["invocation_id"], "%s", r)
		require.Equal(t, "succeeded", r.Body["status"], "%s", r)
		pi := r.Body["page_info"].(obj)
		require.LessOrEqual(t, len(r.items()), 25, "%s", r)
		pages = append(pages, r)
		all = append(all, r.items()...)
		next, _ := pi["next_cursor"].(string)
		require.Equal(t, next != "", pi["has_more"], "has_more and next_cursor agree: %s", r)
		if next == "" {
			break
		}
		require.Len(t, r.items(), 25, "a page with more after it is full: %s", r)
		q.Set("cursor", next)
	}
	// created, started, 60 log lines, succeeded: each exactly once, in seq order.
	require.Len(t, all, 63)
	require.Len(t, pages, 3)
	requireInOrder(t, all, 1, nil)
	require.Equal(t, "created", all[0]["event_type"])
	require.Equal(t, "started", all[1]["event_type"])
	for i := range 60 {
		require.Equal(t, "log", all[2+i]["event_type"])
		require.Equal(t, fmt.Sprintf("line %d", i), all[2+i]["message"])
		require.Equal(t, "running", all[2+i]["status"], "the status after each entry")
	}
	require.Equal(t, "succeeded", all[62]["event_type"])
	require.Equal(t, "succeeded", all[62]["status"])
	require.Nil(t, pages[0].Body["page_info"].(obj)["prev_cursor"], "the first page has nothing before it")

	// prev_cursor of the third page gives the second page back.
	prev := pages[2].Body["page_info"].(obj)["prev_cursor"].(string)
	back := timelinePage(t, e, adm, id, url.Values{"cursor": {prev}})
	require.Equal(t, pages[1].items(), back.items())

	// A larger page, and the limits and errors of every list.
	big := timelinePage(t, e, adm, id, url.Values{"limit": {"200"}})
	require.Equal(t, all, big.items())
	require.Equal(t, false, big.Body["page_info"].(obj)["has_more"])
	tail := timelinePage(t, e, adm, id, url.Values{"limit": {"10"}, "cursor": {pages[1].Body["page_info"].(obj)["next_cursor"].(string)}})
	requireInOrder(t, tail.items(), 51, tail.Raw)
	require.Len(t, tail.items(), 10)
	for _, bad := range []url.Values{{"limit": {"0"}}, {"limit": {"201"}}, {"cursor": {"not-a-cursor"}}, {"$filter": {"event_type eq 'log'"}}} {
		e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, invPath+"/"+id+"/timeline?"+bad.Encode(), adm, nil)
	}
}

// TestTimelineAtNeverGoesBackwards: entries a run collected before it was canceled are written after
// the canceled entry (as it ends); they are logged at or after it, not at the time they were collected.
func TestTimelineAtNeverGoesBackwards(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.UnsafeEgressAllowLoopback = true; c.Clock = clk })
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	up := newBlockingUpstream(t, arrived, release)
	fn := e.registerActive(t, adm, invFn(t, "misc.slow_call.v1~", fmt.Sprintf(`
def main(ctx, input):
    print("calling")
    r_http_get_v1(%q, timeout_ms=20000)
    return {}
`, up)))
	id := invID(invAsync(t, e, adm, fn["entrypoint_id"].(string), obj{}, nil))
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the function never called its upstream")
	}
	clk.Advance(time.Minute)
	r := invControl(t, e, adm, id, "cancel")
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	var items []obj
	var raw []byte
	require.Eventually(t, func() bool {
		items, raw = invTimeline(t, e, adm, id)
		return invIndex(items, "late_result", 0) >= 0
	}, 30*time.Second, 10*time.Millisecond, "the canceled run records its late result")
	c := invIndex(items, "canceled", 0)
	l := invIndex(items, "log", c)
	require.True(t, c >= 0 && l > c, "the run's log line is written after canceled: %s", raw)
	require.Equal(t, items[c]["at"], items[l]["at"], "and logged at canceled's time, not before it: %s", raw)
	requireInOrder(t, items, 1, raw)
}

// newBlockingUpstream serves requests that signal arrived and then wait for release (or for the
// client to give up); it returns the server's URL.
func newBlockingUpstream(t testing.TB, arrived chan<- struct{}, release <-chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestTimelineResumeReasons: each resumed entry of a workflow carries why it resumed.
func TestTimelineResumeReasons(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *server.Config) { c.Clock = clk })
	invDispatcher(t, e)
	adm := invTenant(t, e, "acme")
	wf := e.registerActive(t, adm, wfBody(t, "resumes.v1~", fmt.Sprintf(`
def main(ctx, input):
    r_sleep(60000)
    r_await(r_wait_event_v1(%q, timeout_ms=3600000))
    r_sleep(3600000)
    return {}
`, approvalType)))
	id := invID(invAsync(t, e, adm, wf["entrypoint_id"].(string), obj{}, nil))
	reasons := func() ([]any, []byte) {
		items, raw := invTimeline(t, e, adm, id)
		var out []any
		for _, it := range items {
			if it["event_type"] == "resumed" {
				out = append(out, it["details"].(obj)["reason"])
			}
		}
		return out, raw
	}
	// parked waits until the workflow has resumed n times and is suspended again.
	parked := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			got, _ := reasons()
			return len(got) == n && invGet(t, e, adm, id)["status"] == "suspended"
		}, 30*time.Second, 10*time.Millisecond, "resumed %d times, then suspended", n)
	}
	parked(0)
	clk.Advance(61 * time.Second)
	e.srv.Wake()
	parked(1) // the sleep came due; now waiting for the event
	p := publish(t, e, adm, http.StatusAccepted, obj{"event_type_id": approvalType, "payload": obj{}})
	require.Equal(t, 1.0, p.Body["delivered"], "%s", p)
	parked(2) // the event arrived; now asleep for an hour
	r := invControl(t, e, adm, id, "resume")
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	parked(3) // resumed by the operator; the timer is not due, so it sleeps again
	clk.Advance(time.Hour)
	e.srv.Wake()
	done := invWait(t, e, adm, id, wfTerminal...)
	require.Equal(t, "succeeded", done["status"], "%v", done)
	got, raw := reasons()
	require.Equal(t, []any{"timer", "event", "operator_resume", "timer"}, got, "%s", raw)
}

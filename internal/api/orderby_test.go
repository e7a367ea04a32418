package api_test

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// invPages follows next_cursor through GET /invocations with q and returns every item seen, page
// by page in order.
func invPages(t *testing.T, e *env, tok string, q url.Values) []obj {
	t.Helper()
	var out []obj
	for page := 0; ; page++ {
		require.Less(t, page, 50, "pagination does not end")
		r := e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+q.Encode(), tok, nil)
		out = append(out, r.items()...)
		next, _ := r.Body["page_info"].(obj)["next_cursor"].(string)
		if next == "" {
			return out
		}
		q = cloneValues(q)
		q.Set("cursor", next)
	}
}

func TestOrderbySeveralFieldsPaginates(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // dispatcher not running: async work stays queued
	adm := invTenant(t, e, "acme")
	e.registerActive(t, adm, fn(t, taxV1))
	params := obj{"invoice_id": "inv_001", "amount": 100}
	// Ties on the first field (status) and on the second (correlation_id), so that the id has to
	// break them.
	corr := func(c string) map[string]string { return map[string]string{"X-Correlation-Id": c} }
	for _, c := range []string{"corr-b", "corr-a", "corr-b", "corr-a"} {
		invSync(t, e, adm, taxV1, params, corr(c)) // succeeded
	}
	for _, c := range []string{"corr-a", "corr-b", "corr-a"} {
		invAsync(t, e, adm, taxV1, params, corr(c)) // queued
	}
	all := invPages(t, e, adm, query("limit", "100"))
	require.Len(t, all, 7)

	str := func(o obj, k string) string {
		if k == "correlation_id" {
			o, _ = o["observability"].(obj)
		}
		s, _ := o[k].(string)
		return s
	}
	for _, c := range []struct {
		orderby    string
		statusDesc bool
		corrAsc    bool
	}{
		{"status asc,correlation_id desc", false, false},
		{"status desc, correlation_id asc", true, true},
		{"status,correlation_id", false, true},
	} {
		t.Run(c.orderby, func(t *testing.T) {
			want := slices.Clone(all)
			slices.SortFunc(want, func(a, b obj) int {
				s := cmp.Compare(str(a, "status"), str(b, "status"))
				if c.statusDesc {
					s = -s
				}
				if s != 0 {
					return s
				}
				ct := cmp.Compare(str(a, "correlation_id"), str(b, "correlation_id"))
				if !c.corrAsc {
					ct = -ct
				}
				if ct != 0 {
					return ct
				}
				return cmp.Compare(invID(a), invID(b)) // the id is the final tiebreaker
			})
			got := invPages(t, e, adm, query("limit", "2", "$orderby", c.orderby))
			require.Equal(t, invIDs(want), invIDs(got), "every row exactly once, in %q order", c.orderby)
			// The order really is by status first: the two statuses form two runs.
			first := str(got[0], "status")
			if c.statusDesc {
				require.Equal(t, "succeeded", first)
			} else {
				require.Equal(t, "queued", first)
			}
		})
	}

	t.Run("unknown or malformed", func(t *testing.T) {
		for _, ob := range []string{"status,colour", "status asc desc", "status,,created_at", "status,status desc"} {
			e.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, invPath+"?"+query("$orderby", ob).Encode(), adm, nil)
		}
	})
}

func invIDs(list []obj) []string {
	out := make([]string, 0, len(list))
	for _, o := range list {
		out = append(out, invID(o))
	}
	return out
}

// schPages follows next_cursor through GET /schedules with q and returns the schedule ids seen.
func schPages(t *testing.T, e *env, tok string, q url.Values) []string {
	t.Helper()
	var out []string
	for page := 0; ; page++ {
		require.Less(t, page, 50, "pagination does not end")
		r := e.expect(t, http.StatusOK, http.MethodGet, schPath+"?"+q.Encode(), tok, nil)
		for _, it := range r.items() {
			out = append(out, it["schedule_id"].(string))
		}
		next, _ := r.Body["page_info"].(obj)["next_cursor"].(string)
		if next == "" {
			return out
		}
		q = cloneValues(q)
		q.Set("cursor", next)
	}
}

func TestOrderbySchedulesNextRunAt(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 50, 0, 0, time.UTC))
	cron := func(id, status, expr string) {
		s.create(t, obj{"schedule_id": id, "status": status, "expression": obj{"kind": "cron", "value": expr},
			"input_overrides": taxOverrides(1)})
	}
	cron("a-daily", "active", "0 2 * * *")                // next 2026-11-25T02:00
	cron("b-hourly", "active", "0 * * * *")               // next 2026-11-24T10:00
	cron("c-hourly", "active", "0 * * * *")               // next 2026-11-24T10:00 (tie with b)
	cron("d-daily", "active", "0 2 * * *")                // next 2026-11-25T02:00 (tie with a)
	for _, id := range []string{"e-paused", "f-paused"} { // a paused schedule keeps its next instant
		cron(id, "active", "0 * * * *")
		s.expect(t, http.StatusOK, http.MethodPost, schPath+"/"+id+":pause", s.adm, nil)
	}
	got := schPages(t, s.env, s.adm, query("limit", "2", "$orderby", "next_run_at desc,name desc"))
	require.Equal(t, []string{"d-daily", "a-daily", "f-paused", "e-paused", "c-hourly", "b-hourly"}, got)
	got = schPages(t, s.env, s.adm, query("limit", "3", "$orderby", "next_run_at,name"))
	require.Equal(t, []string{"b-hourly", "c-hourly", "e-paused", "f-paused", "a-daily", "d-daily"}, got)
}

package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/server"
)

const schPath = base + "/schedules"

// schEnv is a server on a fake clock whose firing loop the test drives (fire).
type schEnv struct {
	*env
	clk *clock.Fake
	adm string
}

func newSchEnv(t testing.TB, start time.Time, mods ...func(*server.Config)) *schEnv {
	t.Helper()
	clk := clock.NewFake(start)
	e := newEnv(t, append([]func(*server.Config){func(c *server.Config) { c.Clock = clk }}, mods...)...)
	s := &schEnv{env: e, clk: clk, adm: invTenant(t, e, "acme")}
	e.registerActive(t, s.adm, schTax(t))
	return s
}

// schTax is the README's calculate_tax without its rate limit, with a default amount of 100.
func schTax(t testing.TB) obj {
	return fn(t, taxV1, del("traits.rate_limit"), set("schema.params.properties.amount.default", 100))
}

// fire runs one firing pass at the fake clock's now and returns how many runs it started.
func (s *schEnv) fire(t *testing.T) int {
	t.Helper()
	n, err := s.srv.Schedules.FireDue(context.Background())
	require.NoError(t, err)
	return n
}

func (s *schEnv) advanceTo(t *testing.T, at string) {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, at)
	require.NoError(t, err)
	require.False(t, ts.Before(s.clk.Now()), "the clock only moves forward")
	s.clk.Set(ts)
}

func (s *schEnv) create(t *testing.T, body obj) obj {
	t.Helper()
	if body["entrypoint_id"] == nil {
		body["entrypoint_id"] = taxV1
	}
	return s.expect(t, http.StatusCreated, http.MethodPost, schPath, s.adm, body).Body
}

// history returns the schedule's runs, oldest instant first, as "kind scheduled_at status[/reason]".
func (s *schEnv) history(t *testing.T, id string, q url.Values) ([]obj, []string) {
	t.Helper()
	if q == nil {
		q = url.Values{}
	}
	q.Set("$orderby", "scheduled_at asc")
	q.Set("limit", "200")
	r := s.expect(t, http.StatusOK, http.MethodGet, schPath+"/"+id+"/history?"+q.Encode(), s.adm, nil)
	var lines []string
	for _, it := range r.items() {
		l := it["kind"].(string) + " " + it["scheduled_at"].(string) + " " + it["status"].(string)
		if reason, ok := it["skip_reason"].(string); ok {
			l += "/" + reason
		}
		lines = append(lines, l)
	}
	return r.items(), lines
}

func taxOverrides(amount float64) obj { return obj{"invoice_id": "sch", "amount": amount} }

func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 59, 30, 0, time.UTC))
	viewer := s.token(t, "acme", "val", "viewer")
	other := invTenant(t, s.env, "globex")

	// Validation: each answer is a 422 naming the field and the reason.
	bad := []struct {
		body      obj
		path, msg string
	}{
		{obj{"expression": obj{"kind": "cron", "value": "0 25 * * *"}}, "$.expression.value", "hour must be 0-23"},
		{obj{"expression": obj{"kind": "cron", "value": "0 0 * *"}}, "$.expression.value", "expected 5 or 6 fields"},
		{obj{"expression": obj{"kind": "interval", "value": "P1M"}}, "$.expression.value", "years or months"},
		{obj{"expression": obj{"kind": "weekly", "value": "x"}}, "$.expression.kind", "kind must be"},
		{obj{"expression": obj{"kind": "cron", "value": "0 2 * * *"}, "timezone": "Mars/Olympus"}, "$.timezone", "Mars/Olympus"},
		{obj{"expression": obj{"kind": "cron", "value": "0 2 * * *"}, "missed_policy": "sometimes"}, "$.missed_policy", "skip, catch_up or backfill"},
		{obj{"expression": obj{"kind": "cron", "value": "0 2 * * *"}, "concurrency_policy": "queue"}, "$.concurrency_policy", "allow, forbid or replace"},
		{obj{"expression": obj{"kind": "cron", "value": "0 2 * * *"}, "max_catch_up_runs": 101}, "$.max_catch_up_runs", "1-100"},
		{obj{"expression": obj{"kind": "cron", "value": "0 2 * * *"}, "schedule_id": "no spaces"}, "$.schedule_id", "schedule_id must be"},
		{obj{}, "$.expression", "expression is required"},
		{obj{"expression": obj{"kind": "cron", "value": "0 2 * * *"}, "input_overrides": obj{"amount": "ten"}}, "$.input_overrides.amount", ""},
	}
	for _, b := range bad {
		b.body["entrypoint_id"] = taxV1
		r := s.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, schPath, s.adm, b.body)
		is := issueAt(r, b.path)
		require.NotNil(t, is, "%v: %s", b.body, r)
		require.Contains(t, is["message"], b.msg, "%s", r)
	}
	s.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, schPath, s.adm,
		obj{"entrypoint_id": taxV1, "expression": obj{"kind": "cron", "value": "0 2 * * *"}, "color": "red"})
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, schPath, s.adm,
		obj{"entrypoint_id": fnPrefix + "vendor.app.billing.nope.v1~", "expression": obj{"kind": "cron", "value": "0 2 * * *"}})
	s.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, schPath, viewer,
		obj{"entrypoint_id": taxV1, "expression": obj{"kind": "cron", "value": "0 2 * * *"}})
	internal := s.registerActive(t, s.adm, fnNamed(t, "ops.internal_only.v1~", del("traits.rate_limit"), set("traits.entrypoint", false)))
	s.expectProblem(t, http.StatusForbidden, "forbidden", http.MethodPost, schPath, s.adm,
		obj{"entrypoint_id": internal["entrypoint_id"], "expression": obj{"kind": "cron", "value": "0 2 * * *"}, "input_overrides": taxOverrides(1)})

	// Create with a client id; defaults filled in; next_run_at in the timezone.
	sch := s.create(t, obj{"schedule_id": "daily-tax", "name": "Daily tax", "timezone": "America/New_York",
		"expression": obj{"kind": "cron", "value": "0 2 * * MON-FRI"}, "input_overrides": taxOverrides(10)})
	require.Equal(t, "daily-tax", sch["schedule_id"])
	require.Equal(t, "acme", sch["tenant_id"])
	require.Equal(t, "active", sch["status"])
	require.Equal(t, "skip", sch["missed_policy"])
	require.Equal(t, "allow", sch["concurrency_policy"])
	require.Equal(t, "system", sch["execution_context"])
	require.EqualValues(t, 1, sch["max_catch_up_runs"])
	require.Equal(t, "2026-11-25T07:00:00Z", sch["next_run_at"], "Wednesday 02:00 EST")
	s.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, schPath, s.adm,
		obj{"schedule_id": "daily-tax", "entrypoint_id": taxV1, "expression": obj{"kind": "cron", "value": "0 2 * * *"}, "input_overrides": taxOverrides(1)})

	// Generated id; interval expression (aligned to the Unix epoch).
	iv := s.create(t, obj{"expression": obj{"kind": "interval", "value": "PT15M"}, "input_overrides": taxOverrides(1)})
	require.Regexp(t, `^sch_`, iv["schedule_id"])
	require.Equal(t, iv["schedule_id"], iv["name"], "name defaults to the id")
	require.Equal(t, "2026-11-24T10:00:00Z", iv["next_run_at"])

	// Read, list, isolation.
	got := s.expect(t, http.StatusOK, http.MethodGet, schPath+"/daily-tax", viewer, nil).Body
	require.Equal(t, "Daily tax", got["name"])
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, schPath+"/daily-tax", other, nil)
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodDelete, schPath+"/daily-tax", other, nil)
	require.Len(t, s.expect(t, http.StatusOK, http.MethodGet, schPath, other, nil).items(), 0)
	list := s.expect(t, http.StatusOK, http.MethodGet, schPath+"?"+query("$filter", "schedule_id eq 'daily-tax'").Encode(), viewer, nil).items()
	require.Len(t, list, 1)
	require.Len(t, s.expect(t, http.StatusOK, http.MethodGet, schPath+"?limit=1", viewer, nil).items(), 1)

	// PATCH merges; a new expression takes effect from the next instant.
	p := s.expect(t, http.StatusOK, http.MethodPatch, schPath+"/daily-tax", s.adm, obj{"expression": obj{"value": "0 3 * * MON-FRI"},
		"input_overrides": obj{"amount": 20}}).Body
	require.Equal(t, "2026-11-25T08:00:00Z", p["next_run_at"])
	require.Equal(t, obj{"invoice_id": "sch", "amount": json.Number("20")}, toNumbers(t, p["input_overrides"]))
	require.Equal(t, "Daily tax", p["name"], "untouched fields stay")
	s.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPatch, schPath+"/daily-tax", s.adm, obj{"schedule_id": "renamed"})
	// PUT replaces: the GET body can be sent back; absent fields take their defaults.
	put := got
	put["concurrency_policy"] = "forbid"
	delete(put, "name")
	r := s.expect(t, http.StatusOK, http.MethodPut, schPath+"/daily-tax", s.adm, put).Body
	require.Equal(t, "forbid", r["concurrency_policy"])
	require.Equal(t, "daily-tax", r["name"])

	// Pause, resume.
	ps := s.expect(t, http.StatusOK, http.MethodPost, schPath+"/daily-tax:pause", s.adm, nil).Body
	require.Equal(t, "paused", ps["status"])
	require.NotNil(t, ps["paused_at"])
	rs := s.expect(t, http.StatusOK, http.MethodPost, schPath+"/daily-tax:resume", s.adm, obj{"catch_up_missed": false}).Body
	require.Equal(t, "active", rs["status"])
	require.EqualValues(t, 0, rs["catch_up_runs_queued"])

	// The tenant's max_schedules quota.
	s.expect(t, http.StatusOK, http.MethodPatch, tenantPath("acme"), operator, obj{"quotas": obj{"max_schedules": 2}})
	q := s.expectProblem(t, http.StatusTooManyRequests, "quota_exceeded", http.MethodPost, schPath, s.adm,
		obj{"entrypoint_id": taxV1, "expression": obj{"kind": "cron", "value": "0 2 * * *"}, "input_overrides": taxOverrides(1)})
	require.NotEmpty(t, q.Header.Get("Retry-After"))
	require.Equal(t, "max_schedules", q.Body["quota"])

	// Delete.
	d := s.expect(t, http.StatusOK, http.MethodDelete, schPath+"/daily-tax", s.adm, nil).Body
	require.Equal(t, "daily-tax", d["schedule_id"])
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, schPath+"/daily-tax", s.adm, nil)
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, schPath+"/daily-tax/history", s.adm, nil)

	// One audit event per change.
	ev := s.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?"+query("$filter", "resource_type eq 'schedule'", "limit", "200").Encode(), s.adm, nil).items()
	var types []string
	for _, e := range ev {
		types = append(types, e["type"].(string)[len(auditBase):])
	}
	require.Equal(t, []string{"schedule_created.v1~", "schedule_created.v1~", "schedule_updated.v1~", "schedule_updated.v1~",
		"schedule_paused.v1~", "schedule_resumed.v1~", "schedule_deleted.v1~"}, types)
}

// toNumbers re-decodes v with json.Number numbers (the client decodes numbers as float64).
func toNumbers(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&out))
	return out
}

func TestScheduleFiringAndHistory(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 59, 30, 0, time.UTC))
	sch := s.create(t, obj{"schedule_id": "q", "expression": obj{"kind": "cron", "value": "*/15 * * * *"}, "input_overrides": obj{"invoice_id": "q"},
		"concurrency_policy": "forbid"})
	require.Equal(t, "2026-11-24T10:00:00Z", sch["next_run_at"])
	require.Equal(t, 0, s.fire(t), "nothing is due before 10:00")

	s.advanceTo(t, "2026-11-24T10:00:00Z")
	require.Equal(t, 1, s.fire(t))
	require.Equal(t, 0, s.fire(t), "an instant fires once")
	items, lines := s.history(t, "q", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z queued"}, lines)
	inv := invGet(t, s.env, s.adm, items[0]["invocation_id"].(string))
	require.Equal(t, "async", inv["mode"])
	require.Equal(t, taxV1, inv["entrypoint_id"])
	require.Equal(t, obj{"invoice_id": "q", "amount": 100.0}, inv["params"], "input_overrides over the schema's defaults")

	// forbid: the 10:00 run is still queued (no dispatcher) when 10:15 is due.
	s.advanceTo(t, "2026-11-24T10:15:00Z")
	require.Equal(t, 0, s.fire(t))
	items, lines = s.history(t, "q", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z queued", "scheduled 2026-11-24T10:15:00Z skipped/concurrency_policy_forbid"}, lines)
	require.Equal(t, items[0]["invocation_id"], items[1]["previous_invocation_id"])

	// replace: the queued run is canceled and a new one starts.
	s.expect(t, http.StatusOK, http.MethodPatch, schPath+"/q", s.adm, obj{"concurrency_policy": "replace"})
	s.advanceTo(t, "2026-11-24T10:30:00Z")
	require.Equal(t, 1, s.fire(t))
	_, lines = s.history(t, "q", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z canceled", "scheduled 2026-11-24T10:15:00Z skipped/concurrency_policy_forbid",
		"scheduled 2026-11-24T10:30:00Z queued"}, lines)

	// allow: runs overlap.
	s.expect(t, http.StatusOK, http.MethodPatch, schPath+"/q", s.adm, obj{"concurrency_policy": "allow"})
	s.advanceTo(t, "2026-11-24T10:45:20Z") // 20 s late: within the grace, on time
	require.Equal(t, 1, s.fire(t))

	// Trigger now: a manual run with params_override, outside the cadence.
	tr := s.expect(t, http.StatusAccepted, http.MethodPost, schPath+"/q:trigger", s.adm, obj{"params_override": obj{"amount": 7}}).Body
	require.Equal(t, "q", tr["schedule_id"])
	require.Equal(t, obj{"invoice_id": "q", "amount": 7.0}, tr["params"])
	trInv := tr["invocation"].(obj)
	require.Equal(t, "queued", trInv["status"])
	require.Equal(t, obj{"invoice_id": "q", "amount": 7.0}, invGet(t, s.env, s.adm, trInv["invocation_id"].(string))["params"])
	s.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, schPath+"/q:trigger", s.adm, obj{"params_override": obj{"amount": "x"}})

	// History: runs with their invocations; filters; next_runs.
	items, lines = s.history(t, "q", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z canceled", "scheduled 2026-11-24T10:15:00Z skipped/concurrency_policy_forbid",
		"scheduled 2026-11-24T10:30:00Z queued", "scheduled 2026-11-24T10:45:00Z queued", "manual 2026-11-24T10:45:20Z queued"}, lines)
	require.NotNil(t, items[0]["completed_at"], "a canceled run has ended")
	_, skipped := s.history(t, "q", query("status", "skipped"))
	require.Equal(t, []string{"scheduled 2026-11-24T10:15:00Z skipped/concurrency_policy_forbid"}, skipped)
	_, window := s.history(t, "q", query("since", "2026-11-24T10:15:00Z", "until", "2026-11-24T10:45:00Z"))
	require.Len(t, window, 2)
	h := s.expect(t, http.StatusOK, http.MethodGet, schPath+"/q/history?next_runs=3&limit=2", s.adm, nil)
	require.Len(t, h.items(), 2)
	require.Equal(t, "manual", h.items()[0]["kind"], "newest first by default")
	require.Equal(t, true, h.Body["page_info"].(obj)["has_more"])
	require.Equal(t, []any{obj{"scheduled_at": "2026-11-24T11:00:00Z"}, obj{"scheduled_at": "2026-11-24T11:15:00Z"},
		obj{"scheduled_at": "2026-11-24T11:30:00Z"}}, h.Body["next_runs"])
	s.expectProblem(t, http.StatusBadRequest, "bad_request", http.MethodGet, schPath+"/q/history?since=yesterday", s.adm, nil)

	// Runs execute: with the dispatcher running, the queued runs succeed and history says so.
	invDispatcher(t, s.env)
	s.srv.Wake()
	invWait(t, s.env, s.adm, items[3]["invocation_id"].(string), "succeeded")
	items, _ = s.history(t, "q", query("status", "succeeded"))
	require.NotEmpty(t, items)
	require.NotNil(t, items[0]["started_at"])
	require.NotNil(t, items[0]["duration_ms"])
}

func TestScheduleMissedPolicies(t *testing.T) {
	t.Parallel()
	// The server is "down" from 10:00 to 12:00:10: FireDue is not called. Instants 10:15 … 11:45 are
	// missed (older than the 1 min grace); 12:00 is on time.
	for _, tc := range []struct {
		policy string
		want   []string
	}{
		{"skip", []string{"skipped/missed", "skipped/missed", "skipped/missed", "skipped/missed", "skipped/missed", "skipped/missed", "skipped/missed"}},
		{"catch_up", []string{"skipped/missed", "skipped/missed", "skipped/missed", "skipped/missed", "skipped/missed", "pending", "pending"}},
		{"backfill", []string{"pending", "pending", "pending", "pending", "pending", "pending", "pending"}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			s := newSchEnv(t, time.Date(2026, 11, 24, 9, 59, 30, 0, time.UTC))
			s.create(t, obj{"schedule_id": "m", "expression": obj{"kind": "cron", "value": "*/15 * * * *"}, "input_overrides": obj{"invoice_id": "m"},
				"missed_policy": tc.policy, "max_catch_up_runs": 2})
			s.advanceTo(t, "2026-11-24T10:00:00Z")
			require.Equal(t, 1, s.fire(t))
			s.advanceTo(t, "2026-11-24T12:00:10Z")
			s.fire(t)
			items, _ := s.history(t, "m", nil)
			require.Len(t, items, 9, "10:00, seven missed, 12:00")
			var missed []string
			for _, it := range items[1:8] {
				st := it["status"].(string)
				if r, ok := it["skip_reason"].(string); ok {
					st += "/" + r
				}
				missed = append(missed, st)
			}
			// No catch-up run started: the 10:00 run is still queued (no dispatcher), so in flight.
			require.Equal(t, tc.want, missed)
			require.Equal(t, "scheduled", items[8]["kind"])
			require.Equal(t, "2026-11-24T12:00:00Z", items[8]["scheduled_at"])
			sch := s.expect(t, http.StatusOK, http.MethodGet, schPath+"/m", s.adm, nil).Body
			require.Equal(t, "2026-11-24T12:15:00Z", sch["next_run_at"])
		})
	}
}

func TestScheduleCatchUpRunsOneAfterAnother(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	s.create(t, obj{"schedule_id": "c", "expression": obj{"kind": "cron", "value": "0 * * * *"}, "input_overrides": obj{"invoice_id": "c"},
		"missed_policy": "catch_up", "max_catch_up_runs": 3})
	// Down from before 10:00 until 15:30: 10:00 … 15:00 missed (6); the latest 3 are caught up.
	s.advanceTo(t, "2026-11-24T15:30:00Z")
	require.Equal(t, 1, s.fire(t), "the oldest catch-up run starts")
	require.Equal(t, 0, s.fire(t), "the next waits for it to finish")
	_, lines := s.history(t, "c", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z skipped/missed", "scheduled 2026-11-24T11:00:00Z skipped/missed",
		"scheduled 2026-11-24T12:00:00Z skipped/missed", "catch_up 2026-11-24T13:00:00Z queued",
		"catch_up 2026-11-24T14:00:00Z pending", "catch_up 2026-11-24T15:00:00Z pending"}, lines)
	sch := s.expect(t, http.StatusOK, http.MethodGet, schPath+"/c", s.adm, nil).Body
	require.EqualValues(t, 2, sch["pending_catch_up_runs"])

	invDispatcher(t, s.env)
	for _, want := range []string{"14:00", "15:00"} {
		last := s.expect(t, http.StatusOK, http.MethodGet, schPath+"/c", s.adm, nil).Body["last_invocation_id"].(string)
		s.srv.Wake()
		invWait(t, s.env, s.adm, last, "succeeded")
		s.clk.Advance(time.Second) // pending catch-up runs are looked at every second
		require.Equal(t, 1, s.fire(t), "catch-up %s starts once the previous run finished", want)
	}
	_, lines = s.history(t, "c", query("status", "pending"))
	require.Empty(t, lines)
	sch = s.expect(t, http.StatusOK, http.MethodGet, schPath+"/c", s.adm, nil).Body
	require.EqualValues(t, 0, sch["pending_catch_up_runs"])
	require.Equal(t, "2026-11-24T16:00:00Z", sch["next_run_at"])
}

func TestSchedulePauseResume(t *testing.T) {
	t.Parallel()
	for _, catchUp := range []bool{false, true} {
		t.Run("catch_up_missed="+map[bool]string{false: "false", true: "true"}[catchUp], func(t *testing.T) {
			s := newSchEnv(t, time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
			s.create(t, obj{"schedule_id": "p", "expression": obj{"kind": "cron", "value": "0 * * * *"}, "input_overrides": obj{"invoice_id": "p"},
				"max_catch_up_runs": 2})
			s.advanceTo(t, "2026-11-24T10:00:00Z")
			require.Equal(t, 1, s.fire(t))
			s.expect(t, http.StatusOK, http.MethodPost, schPath+"/p:pause", s.adm, nil)
			s.advanceTo(t, "2026-11-24T14:30:00Z")
			require.Equal(t, 0, s.fire(t), "a paused schedule does not fire")
			rs := s.expect(t, http.StatusOK, http.MethodPost, schPath+"/p:resume", s.adm, obj{"catch_up_missed": catchUp}).Body
			require.Equal(t, "2026-11-24T15:00:00Z", rs["next_run_at"])
			_, lines := s.history(t, "p", nil)
			if !catchUp {
				require.EqualValues(t, 0, rs["catch_up_runs_queued"])
				require.Equal(t, 0, s.fire(t))
				require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z queued"}, lines, "instants missed while paused are not run")
			} else {
				require.EqualValues(t, 2, rs["catch_up_runs_queued"], "the latest max_catch_up_runs of 11:00 … 14:00")
				require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z queued", "catch_up 2026-11-24T13:00:00Z pending",
					"catch_up 2026-11-24T14:00:00Z pending"}, lines)
			}
			s.advanceTo(t, "2026-11-24T15:00:00Z")
			s.fire(t)
			_, lines = s.history(t, "p", query("$filter", "kind eq 'scheduled'"))
			require.Equal(t, "scheduled 2026-11-24T15:00:00Z queued", lines[len(lines)-1])
		})
	}
}

// TestScheduleExactlyOnceAcrossRestart: a server fires, stops, and a new one on the same data
// directory at the same instant fires nothing again; the next instant fires once.
func TestScheduleExactlyOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 24, 9, 59, 0, 0, time.UTC))
	dir, st := t.TempDir(), testStore(t)
	start := func() *schEnv {
		srv, err := server.New(context.Background(), server.Config{DataDir: dir, Store: st, AdminToken: operator, Clock: clk})
		require.NoError(t, err)
		e := &env{srv: srv, ts: httptest.NewServer(checked(t, srv.Handler()))}
		e.client = e.ts.Client()
		return &schEnv{env: e, clk: clk}
	}
	stop := func(s *schEnv) {
		s.ts.Close()
		require.NoError(t, s.srv.Close())
	}
	s := start()
	s.adm = invTenant(t, s.env, "acme")
	s.registerActive(t, s.adm, schTax(t))
	s.create(t, obj{"schedule_id": "x", "expression": obj{"kind": "cron", "value": "* * * * *"}, "input_overrides": obj{"invoice_id": "x"}})
	s.advanceTo(t, "2026-11-24T10:00:00Z")
	require.Equal(t, 1, s.fire(t))
	stop(s)

	s2 := start()
	defer stop(s2)
	s2.adm = s.adm
	require.Equal(t, 0, s2.fire(t), "the 10:00 instant is recorded: it does not fire again")
	s2.advanceTo(t, "2026-11-24T10:01:00Z")
	require.Equal(t, 1, s2.fire(t))
	_, lines := s2.history(t, "x", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z queued", "scheduled 2026-11-24T10:01:00Z queued"}, lines)
	list := s2.expect(t, http.StatusOK, http.MethodGet, invPath+"?limit=200", s2.adm, nil).items()
	require.Len(t, list, 2, "one invocation per instant")
}

func TestScheduleDSTInstants(t *testing.T) {
	t.Parallel()
	// Spring forward in New York (2026-03-08, 02:00 → 03:00): a daily 02:30 runs once, at 03:00 EDT.
	s := newSchEnv(t, time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	sch := s.create(t, obj{"schedule_id": "ny", "timezone": "America/New_York", "expression": obj{"kind": "cron", "value": "30 2 * * *"},
		"input_overrides": obj{"invoice_id": "ny"}})
	require.Equal(t, "2026-03-08T07:00:00Z", sch["next_run_at"])
	s.advanceTo(t, "2026-03-08T07:00:00Z")
	require.Equal(t, 1, s.fire(t))
	sch = s.expect(t, http.StatusOK, http.MethodGet, schPath+"/ny", s.adm, nil).Body
	require.Equal(t, "2026-03-09T06:30:00Z", sch["next_run_at"], "then 02:30 EDT")
}

func TestScheduleSkipsWhenEntrypointUnavailable(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 59, 0, 0, time.UTC))
	s.create(t, obj{"schedule_id": "u", "expression": obj{"kind": "cron", "value": "0 * * * *"}, "input_overrides": obj{"invoice_id": "u"}})
	s.status(t, s.adm, taxV1, "disable")
	s.advanceTo(t, "2026-11-24T10:00:00Z")
	require.Equal(t, 0, s.fire(t))
	items, lines := s.history(t, "u", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z skipped/entrypoint_unavailable"}, lines)
	require.Contains(t, items[0]["message"], "no active version")
	sch := s.expect(t, http.StatusOK, http.MethodGet, schPath+"/u", s.adm, nil).Body
	require.Equal(t, "2026-11-24T11:00:00Z", sch["next_run_at"], "the schedule goes on")
}

// TestScheduleRunsQueuedAhead: an allow schedule's runs are recorded up to 5 s ahead of their
// instant, runnable only from the instant on; a pause (or a change, or a deletion) withdraws them.
func TestScheduleRunsQueuedAhead(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 59, 58, 0, time.UTC))
	s.create(t, obj{"schedule_id": "sec", "expression": obj{"kind": "cron", "value": "*/2 * * * * *"}, "input_overrides": obj{"invoice_id": "s"}})
	s.create(t, obj{"schedule_id": "fb", "expression": obj{"kind": "cron", "value": "*/2 * * * * *"}, "input_overrides": obj{"invoice_id": "f"},
		"concurrency_policy": "forbid"})
	s.advanceTo(t, "2026-11-24T10:00:00Z")
	require.Equal(t, 4, s.fire(t), "sec: 10:00:00, :02, :04 (within 5 s); fb: 10:00:00 only")
	items, lines := s.history(t, "sec", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z queued", "scheduled 2026-11-24T10:00:02Z queued",
		"scheduled 2026-11-24T10:00:04Z queued"}, lines)
	_, fbLines := s.history(t, "fb", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z queued"}, fbLines, "forbid decides at the instant")
	sch := s.expect(t, http.StatusOK, http.MethodGet, schPath+"/sec", s.adm, nil).Body
	require.Equal(t, "2026-11-24T10:00:06Z", sch["next_run_at"])

	// The dispatcher runs each at its instant, not before.
	invDispatcher(t, s.env)
	s.srv.Wake()
	invWait(t, s.env, s.adm, items[0]["invocation_id"].(string), "succeeded")
	require.Equal(t, "queued", invGet(t, s.env, s.adm, items[1]["invocation_id"].(string))["status"], "10:00:02 is not due at 10:00:00")
	s.advanceTo(t, "2026-11-24T10:00:02Z")
	s.srv.Wake()
	invWait(t, s.env, s.adm, items[1]["invocation_id"].(string), "succeeded")
	require.Equal(t, "queued", invGet(t, s.env, s.adm, items[2]["invocation_id"].(string))["status"])

	// Pause withdraws the run queued ahead (10:00:04): gone from the history, its invocation
	// canceled; the schedule's next run goes back to it.
	ps := s.expect(t, http.StatusOK, http.MethodPost, schPath+"/sec:pause", s.adm, nil).Body
	require.Equal(t, "2026-11-24T10:00:04Z", ps["next_run_at"])
	require.Equal(t, "canceled", invGet(t, s.env, s.adm, items[2]["invocation_id"].(string))["status"])
	_, lines = s.history(t, "sec", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z succeeded", "scheduled 2026-11-24T10:00:02Z succeeded"}, lines)
	// Resumed before 10:00:04, the instant fires (again, with a new invocation).
	s.advanceTo(t, "2026-11-24T10:00:03Z")
	rs := s.expect(t, http.StatusOK, http.MethodPost, schPath+"/sec:resume", s.adm, nil).Body
	require.Equal(t, "2026-11-24T10:00:04Z", rs["next_run_at"])
	s.fire(t)
	items, lines = s.history(t, "sec", nil)
	require.Equal(t, "scheduled 2026-11-24T10:00:04Z queued", lines[2])
	require.Len(t, lines, 5, "10:00:04, :06, :08 queued ahead again")

	// A change withdraws them too; DELETE cancels what is left queued ahead.
	s.expect(t, http.StatusOK, http.MethodPatch, schPath+"/sec", s.adm, obj{"input_overrides": obj{"invoice_id": "s2"}})
	require.Equal(t, "canceled", invGet(t, s.env, s.adm, items[3]["invocation_id"].(string))["status"])
	s.fire(t)
	items, _ = s.history(t, "sec", nil)
	last := items[len(items)-1]
	require.Equal(t, obj{"invoice_id": "s2", "amount": 100.0}, invGet(t, s.env, s.adm, last["invocation_id"].(string))["params"], "queued again with the new params")
	s.expect(t, http.StatusOK, http.MethodDelete, schPath+"/sec", s.adm, nil)
	require.Equal(t, "canceled", invGet(t, s.env, s.adm, last["invocation_id"].(string))["status"])
}

func TestScheduleSkipsWhileTenantDisabled(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 59, 0, 0, time.UTC))
	s.create(t, obj{"schedule_id": "d", "expression": obj{"kind": "cron", "value": "0 * * * *"}, "input_overrides": obj{"invoice_id": "d"},
		"missed_policy": "catch_up", "concurrency_policy": "forbid"})
	s.expect(t, http.StatusOK, http.MethodPost, base+"/tenants/acme/serverless-runtime:disable", operator, nil)
	s.advanceTo(t, "2026-11-24T12:00:00Z") // 10:00 and 11:00 missed, 12:00 on time: all skipped
	require.Equal(t, 0, s.fire(t))
	s.expect(t, http.StatusOK, http.MethodPost, base+"/tenants/acme/serverless-runtime:enable", operator, nil)
	_, lines := s.history(t, "d", nil)
	require.Equal(t, []string{"scheduled 2026-11-24T10:00:00Z skipped/tenant_disabled", "scheduled 2026-11-24T11:00:00Z skipped/tenant_disabled",
		"scheduled 2026-11-24T12:00:00Z skipped/tenant_disabled"}, lines)
	sch := s.expect(t, http.StatusOK, http.MethodGet, schPath+"/d", s.adm, nil).Body
	require.EqualValues(t, 0, sch["pending_catch_up_runs"], "nothing is queued for catch-up while disabled")
	s.advanceTo(t, "2026-11-24T13:00:00Z")
	require.Equal(t, 1, s.fire(t), "enabled again, it fires")
}

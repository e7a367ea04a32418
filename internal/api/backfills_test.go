package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/server"
)

const (
	bfPath    = base + "/backfills"
	partMajor = fnPrefix + "vendor.app.ops.partition.v1~"
)

// partitionFn is a function that fails for March 2025 (v1.0), or never (fixed: v1.1).
func partitionFn(t testing.TB, minor string, fixed bool) obj {
	src := "def main(ctx, input):\n  if input.scheduled_at.startswith(\"2025-03\"):\n    fail(\"march\")\n  return {\"at\": input.scheduled_at}\n"
	if fixed {
		src = "def main(ctx, input):\n  return {\"at\": input.scheduled_at}\n"
	}
	return fn(t, fnPrefix+"vendor.app.ops.partition.v1"+minor+"~", source(src), del("traits.rate_limit"),
		set("schema.params", obj{"type": "object", "properties": obj{"scheduled_at": obj{"type": "string", "format": "date-time"}}, "required": []any{"scheduled_at"}}),
		set("schema.returns", obj{"type": "object"}),
		set("traits.retry", obj{"max_attempts": 1, "initial_delay_ms": 0, "max_delay_ms": 0, "backoff_multiplier": 1.0}))
}

// drive runs driver passes until the backfill is in one of the states (or the deadline passes),
// calling check after each pass.
func (s *schEnv) drive(t *testing.T, id string, check func(b obj), states ...string) obj {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s.srv.Schedules.DriveBackfills(context.Background())
		require.NoError(t, err)
		b := s.expect(t, http.StatusOK, http.MethodGet, bfPath+"/"+id, s.adm, nil).Body
		if check != nil {
			check(b)
		}
		for _, st := range states {
			if b["state"] == st {
				return b
			}
		}
		require.True(t, time.Now().Before(deadline), "backfill %s did not reach %v: %v", id, states, b)
		time.Sleep(5 * time.Millisecond)
	}
}

// partitions lists every partition of a backfill (in instant order).
func (s *schEnv) partitions(t *testing.T, id string, q url.Values) []obj {
	t.Helper()
	var all []obj
	if q == nil {
		q = url.Values{}
	}
	q.Set("limit", "200")
	for {
		r := s.expect(t, http.StatusOK, http.MethodGet, bfPath+"/"+id+"/partitions?"+q.Encode(), s.adm, nil)
		all = append(all, r.items()...)
		next, _ := r.Body["page_info"].(obj)["next_cursor"].(string)
		if next == "" {
			return all
		}
		q.Set("cursor", next)
	}
}

func runningChunks(t *testing.T, s *schEnv, id string) map[float64]bool {
	chunks := map[float64]bool{}
	for _, p := range s.partitions(t, id, query("$filter", "status eq 'running'")) {
		chunks[p["chunk"].(float64)] = true
	}
	return chunks
}

func TestBackfill365DailyPartitions(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	s.registerActive(t, s.adm, partitionFn(t, ".0", false))
	invDispatcher(t, s.env)

	b := s.expect(t, http.StatusCreated, http.MethodPost, bfPath, s.adm, obj{"backfill_id": "y2025", "entrypoint_id": partMajor,
		"start": "2025-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z", "step": "P1D", "params": obj{"k": "v"},
		"chunk_size": 50, "max_concurrent_runs": 3}).Body
	require.Equal(t, "running", b["state"])
	require.EqualValues(t, 365, b["progress"].(obj)["total"])
	require.EqualValues(t, 365, b["progress"].(obj)["pending"])
	require.EqualValues(t, 8, b["chunks"].(obj)["total"])

	// Pause after the first pass: the three chunks in flight finish, no other starts.
	_, err := s.srv.Schedules.DriveBackfills(context.Background())
	require.NoError(t, err)
	require.Equal(t, map[float64]bool{0: true, 1: true, 2: true}, runningChunks(t, s, "y2025"), "chunks 0-2 start first")
	s.expect(t, http.StatusOK, http.MethodPost, bfPath+"/y2025:pause", s.adm, nil)
	paused := s.drive(t, "y2025", func(b obj) {
		require.Equal(t, "paused", b["state"])
	}, "paused")
	deadline := time.Now().Add(30 * time.Second)
	for paused["progress"].(obj)["running"].(float64) > 0 {
		require.True(t, time.Now().Before(deadline), "chunks in flight finish while paused: %v", paused)
		time.Sleep(10 * time.Millisecond)
		paused = s.drive(t, "y2025", nil, "paused")
	}
	require.EqualValues(t, 150, paused["progress"].(obj)["completed"].(float64)+paused["progress"].(obj)["failed"].(float64), "chunks 0-2 only")
	require.EqualValues(t, 215, paused["progress"].(obj)["pending"])
	require.Empty(t, runningChunks(t, s, "y2025"))
	s.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, bfPath+"/y2025:pause", s.adm, nil)

	// Resume: never more than 3 chunks in flight, all the way.
	s.expect(t, http.StatusOK, http.MethodPost, bfPath+"/y2025:resume", s.adm, nil)
	maxInFlight := 0.0
	done := s.drive(t, "y2025", func(b obj) {
		n := b["chunks"].(obj)["in_flight"].(float64)
		maxInFlight = max(maxInFlight, n)
		require.LessOrEqual(t, n, 3.0, "%v", b)
		require.LessOrEqual(t, len(runningChunks(t, s, "y2025")), 3)
	}, "succeeded", "failed")
	require.Equal(t, 3.0, maxInFlight, "the limit was reached")
	require.Equal(t, "failed", done["state"], "the March partitions failed")
	require.Equal(t, obj{"total": 365.0, "completed": 334.0, "failed": 31.0, "skipped": 0.0, "pending": 0.0, "running": 0.0}, done["progress"])
	require.Contains(t, done["failure_reason"], "31 of 365 partitions failed")

	// Each invocation ran its instant, with the backfill's params.
	parts := s.partitions(t, "y2025", nil)
	require.Len(t, parts, 365)
	first := map[string]string{}
	for i, p := range parts {
		first[p["scheduled_at"].(string)] = p["invocation_id"].(string)
		require.Equal(t, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i).Format(time.RFC3339), p["scheduled_at"])
		require.EqualValues(t, i/50, p["chunk"])
		if i%30 == 0 {
			inv := invGet(t, s.env, s.adm, p["invocation_id"].(string))
			require.Equal(t, obj{"k": "v", "scheduled_at": p["scheduled_at"]}, inv["params"])
		}
	}

	// Retry runs the failed partitions only (v1.1, activated since, no longer fails).
	s.registerActive(t, s.adm, partitionFn(t, ".1", true))
	r := s.expect(t, http.StatusOK, http.MethodPost, bfPath+"/y2025:retry", s.adm, nil).Body
	require.Equal(t, "running", r["state"])
	require.EqualValues(t, 31, r["progress"].(obj)["pending"])
	done = s.drive(t, "y2025", nil, "succeeded", "failed")
	require.Equal(t, "succeeded", done["state"], "%v", done)
	require.EqualValues(t, 365, done["progress"].(obj)["completed"])
	for _, p := range s.partitions(t, "y2025", nil) {
		at := p["scheduled_at"].(string)
		if at[:7] == "2025-03" {
			require.EqualValues(t, 2, p["attempts"], at)
			require.NotEqual(t, first[at], p["invocation_id"], at)
		} else {
			require.EqualValues(t, 1, p["attempts"], at)
			require.Equal(t, first[at], p["invocation_id"], "%s ran once", at)
		}
	}
	s.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, bfPath+"/y2025:retry", s.adm, nil)
}

func TestBackfillAPI(t *testing.T) {
	t.Parallel()
	s := newSchEnv(t, time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	other := invTenant(t, s.env, "globex")
	s.create(t, obj{"schedule_id": "nightly", "timezone": "Europe/Berlin", "expression": obj{"kind": "cron", "value": "0 2 * * *"},
		"input_overrides": obj{"invoice_id": "n"}})

	// A schedule's backfill: its expression, zone and input_overrides, plus params and the instant.
	b := s.expect(t, http.StatusCreated, http.MethodPost, bfPath, s.adm, obj{"schedule_id": "nightly",
		"start": "2026-03-27T00:00:00Z", "end": "2026-03-31T00:00:00Z", "params": obj{"amount": 5}, "chunk_size": 2, "max_concurrent_runs": 1,
		"stop_on_failure": true}).Body
	id := b["backfill_id"].(string)
	require.Regexp(t, `^bf_`, id)
	require.Equal(t, taxV1, b["entrypoint_id"])
	require.Equal(t, obj{"kind": "cron", "value": "0 2 * * *", "timezone": "Europe/Berlin"}, b["step"])
	parts := s.partitions(t, id, nil)
	var ats []string
	for _, p := range parts {
		ats = append(ats, p["scheduled_at"].(string))
	}
	require.Equal(t, []string{"2026-03-27T01:00:00Z", "2026-03-28T01:00:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"}, ats,
		"02:00 Berlin: CET, then 03:00 CEST on the spring-forward day, then CEST")
	_, err := s.srv.Schedules.DriveBackfills(context.Background())
	require.NoError(t, err)
	running := s.partitions(t, id, query("$filter", "status eq 'running'"))
	require.Len(t, running, 2, "one chunk of 2")
	inv := invGet(t, s.env, s.adm, running[0]["invocation_id"].(string))
	require.Equal(t, obj{"invoice_id": "n", "amount": 5.0, "scheduled_at": "2026-03-27T01:00:00Z"}, inv["params"])

	// Cancel: pending partitions are skipped, running ones canceled.
	c := s.expect(t, http.StatusOK, http.MethodPost, bfPath+"/"+id+":cancel", s.adm, nil).Body
	require.Equal(t, "canceled", c["state"])
	require.EqualValues(t, 4, c["progress"].(obj)["skipped"])
	require.Equal(t, "canceled", invGet(t, s.env, s.adm, running[0]["invocation_id"].(string))["status"])
	s.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, bfPath+"/"+id+":resume", s.adm, nil)
	s.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, bfPath+"/"+id+":retry", s.adm, nil)
	s.probesUnknownRoutes() // an action backfills do not have, on purpose
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, bfPath+"/"+id+":explode", s.adm, nil)

	// Lists and isolation.
	require.Len(t, s.expect(t, http.StatusOK, http.MethodGet, bfPath+"?"+query("$filter", "state eq 'canceled'").Encode(), s.adm, nil).items(), 1)
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, bfPath+"/"+id, other, nil)
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, bfPath+"/"+id+"/partitions", other, nil)
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, bfPath+"/"+id+":pause", other, nil)

	// Validation.
	for _, tc := range []struct {
		body obj
		path string
	}{
		{obj{"entrypoint_id": taxV1, "schedule_id": "nightly", "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"}, "$.entrypoint_id"},
		{obj{"entrypoint_id": taxV1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"}, "$.step"},
		{obj{"entrypoint_id": taxV1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "step": "P1M"}, "$.step.value"},
		{obj{"entrypoint_id": taxV1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "step": obj{"kind": "cron", "value": "0 25 * * *"}}, "$.step.value"},
		{obj{"entrypoint_id": taxV1, "start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z", "step": "P1D"}, "$.end"},
		{obj{"entrypoint_id": taxV1, "start": "2026-01-01T00:00:00Z", "end": "2027-01-01T00:00:00Z", "step": "PT1M"}, "$.end"},
		{obj{"entrypoint_id": taxV1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "step": "P1D", "chunk_size": 0}, "$.chunk_size"},
		{obj{"entrypoint_id": taxV1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "step": "P1D", "max_concurrent_runs": 51}, "$.max_concurrent_runs"},
		{obj{"entrypoint_id": taxV1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "step": "P1D", "failure_threshold": "ten"}, "$.failure_threshold"},
		{obj{"entrypoint_id": taxV1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "step": "P1D", "params": obj{"amount": "x"}}, "$.params.amount"},
	} {
		r := s.expectProblem(t, http.StatusUnprocessableEntity, "validation", http.MethodPost, bfPath, s.adm, tc.body)
		require.NotNil(t, issueAt(r, tc.path), "%v: %s", tc.body, r)
	}
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, bfPath, s.adm,
		obj{"schedule_id": "nope", "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"})
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodPost, bfPath, other,
		obj{"schedule_id": "nightly", "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"})
	body := obj{"backfill_id": "dup", "entrypoint_id": taxV1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-03T00:00:00Z", "step": "P1D",
		"params": obj{"invoice_id": "d"}}
	s.expect(t, http.StatusCreated, http.MethodPost, bfPath, s.adm, body)
	s.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, bfPath, s.adm, body)

	ev := s.expect(t, http.StatusOK, http.MethodGet, base+"/audit-events?"+query("$filter", "resource_type eq 'backfill'", "limit", "200").Encode(), s.adm, nil).items()
	var types []string
	for _, e := range ev {
		types = append(types, e["type"].(string)[len(auditBase):])
	}
	require.Equal(t, []string{"backfill_created.v1~", "backfill_canceled.v1~", "backfill_created.v1~"}, types)
}

// TestBackfillSurvivesRestart: a backfill in flight when the server stops continues on a new one.
func TestBackfillSurvivesRestart(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	dir, st := t.TempDir(), testStore(t)
	start := func() *schEnv {
		srv, err := server.New(context.Background(), server.Config{DataDir: dir, Store: st, AdminToken: operator, Clock: clk})
		require.NoError(t, err)
		e := &env{srv: srv, ts: httptest.NewServer(checked(t, srv.Handler()))}
		e.client = e.ts.Client()
		return &schEnv{env: e, clk: clk}
	}
	s := start()
	s.adm = invTenant(t, s.env, "acme")
	s.registerActive(t, s.adm, partitionFn(t, ".0", true))
	s.expect(t, http.StatusCreated, http.MethodPost, bfPath, s.adm, obj{"backfill_id": "r", "entrypoint_id": partMajor,
		"start": "2025-06-01T00:00:00Z", "end": "2025-06-11T00:00:00Z", "step": "P1D", "chunk_size": 2, "max_concurrent_runs": 2})
	_, err := s.srv.Schedules.DriveBackfills(context.Background())
	require.NoError(t, err)
	require.Len(t, runningChunks(t, s, "r"), 2)
	s.ts.Close()
	require.NoError(t, s.srv.Close())

	s2 := start()
	defer func() {
		s2.ts.Close()
		require.NoError(t, s2.srv.Close())
	}()
	s2.adm = s.adm
	invDispatcher(t, s2.env)
	s2.srv.Wake()
	done := s2.drive(t, "r", func(b obj) { require.LessOrEqual(t, b["chunks"].(obj)["in_flight"].(float64), 2.0) }, "succeeded", "failed")
	require.Equal(t, "succeeded", done["state"], "%v", done)
	require.EqualValues(t, 10, done["progress"].(obj)["completed"])
}

package quality

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/larkrun/lark/internal/clock"
)

// mustChecks parses checks for a test.
func mustChecks(t *testing.T, raw string) []Check {
	t.Helper()
	checks, issues := ParseChecks(json.RawMessage(raw), "$")
	if issues != nil {
		t.Fatalf("checks: %v", issues)
	}
	return checks
}

// runOne runs one check (post) on value, decoded from JSON.
func runOne(t *testing.T, check, value string, previous *Previous) Result {
	t.Helper()
	r := Runner{Clock: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	results := r.Run(context.Background(), mustChecks(t, "["+check+"]"), PhasePost, json.RawMessage(value), previous)
	if len(results) != 1 {
		t.Fatalf("results: %+v", results)
	}
	return results[0]
}

func TestRunEachType(t *testing.T) {
	t.Parallel()
	const rows = `{"rows":[{"id":1,"email":"a@x","day":"d1","at":"2026-03-01T10:00:00Z"},{"id":2,"email":null,"day":"d1","at":"2026-02-28T00:00:00Z"},{"id":1.0,"day":"d2","at":"2026-02-27T00:00:00Z"}],"n":3}`
	prev := &Previous{Output: json.RawMessage(`{"rows":[1,2,3,4,5,6,7,8,9,10],"n":10}`)}
	tests := []struct {
		name, check string
		previous    *Previous
		passed      bool
		observed    any
		msg         string
	}{
		{"schema ok", `{"name":"s","type":"json_schema","severity":"ERROR","schema":{"type":"object","required":["rows"]}}`, nil, true, 0, "valid against the schema"},
		{"schema bad", `{"name":"s","type":"json_schema","severity":"ERROR","path":"$.rows","schema":{"type":"array","items":{"required":["email"]}}}`, nil, false, 1, "1 schema violation(s): $.rows[2].email:"},
		{"count ok", `{"name":"c","type":"row_count","path":"$.rows","min":1,"max":3,"severity":"ERROR"}`, nil, true, int64(3), "3 rows"},
		{"count number", `{"name":"c","type":"row_count","path":"$.n","min":3,"severity":"ERROR"}`, nil, true, int64(3), "3 rows"},
		{"count min", `{"name":"c","type":"row_count","path":"$.rows","min":4,"severity":"ERROR"}`, nil, false, int64(3), "3 rows, below the minimum 4"},
		{"count max", `{"name":"c","type":"row_count","path":"$.rows","max":2,"severity":"ERROR"}`, nil, false, int64(3), "3 rows, above the maximum 2"},
		{"count not array", `{"name":"c","type":"row_count","path":"$.rows[0]","min":1,"severity":"ERROR"}`, nil, false, nil, "$.rows[0]: an object is not an array or a count"},
		{"count missing", `{"name":"c","type":"row_count","path":"$.lines","min":1,"severity":"ERROR"}`, nil, false, nil, "$.lines is not in the value"},
		{"ratio ok", `{"name":"c","type":"row_count","path":"$.rows","min_ratio":0.3,"severity":"ERROR"}`, prev, true, int64(3), "3 rows"},
		{"ratio low", `{"name":"c","type":"row_count","path":"$.rows","min_ratio":0.5,"severity":"ERROR"}`, prev, false, int64(3), "3 rows, 0.3 of the previous 10, below min_ratio 0.5"},
		{"ratio count", `{"name":"c","type":"row_count","path":"$.n","min_ratio":0.5,"severity":"ERROR"}`, prev, false, int64(3), "0.3 of the previous 10"},
		{"ratio first", `{"name":"c","type":"row_count","path":"$.rows","min_ratio":0.5,"severity":"ERROR"}`, nil, true, int64(3), "no previous materialization: min_ratio not applied"},
		{"not null ok", `{"name":"n","type":"not_null","path":"$.rows","fields":["id","day"],"severity":"ERROR"}`, nil, true, 0, "id, day not null in all 3 item(s)"},
		{"not null bad", `{"name":"n","type":"not_null","path":"$.rows","fields":["id","email"],"severity":"ERROR"}`, nil, false, 2, "2 of 3 item(s) have a missing or null field: [1] email; [2] email"},
		{"not null object", `{"name":"n","type":"not_null","fields":["n","rows"],"severity":"ERROR"}`, nil, true, 0, "in all 1 item(s)"},
		{"unique ok", `{"name":"u","type":"unique","path":"$.rows","fields":["id","day"],"severity":"ERROR"}`, nil, true, 0, "all 3 item(s) unique on (id, day)"},
		{"unique bad", `{"name":"u","type":"unique","path":"$.rows","fields":["day"],"severity":"ERROR"}`, nil, false, 1, `1 duplicate item(s) on (day): [1] repeats [0] ("d1")`},
		{"unique numbers", `{"name":"u","type":"unique","path":"$.rows","fields":["id"],"severity":"ERROR"}`, nil, false, 1, "[2] repeats [0] (1)"},
		{"unique object", `{"name":"u","type":"unique","fields":["id"],"severity":"ERROR"}`, nil, false, nil, "$: an object is not an array"},
		{"fresh ok", `{"name":"f","type":"freshness","path":"$.rows","field":"at","max_age":"PT2H","severity":"ERROR"}`, nil, true, "2026-03-01T10:00:00Z", "newest at is 2026-03-01T10:00:00Z, 2h0m0s old (max_age 2h0m0s)"},
		{"fresh stale", `{"name":"f","type":"freshness","path":"$.rows","field":"at","max_age":"1h","severity":"ERROR"}`, nil, false, "2026-03-01T10:00:00Z", "2h0m0s old (max_age 1h0m0s)"},
		{"fresh object", `{"name":"f","type":"freshness","path":"$.rows[1]","field":"at","max_age":"P2D","severity":"ERROR"}`, nil, true, "2026-02-28T00:00:00Z", "36h0m0s old"},
		{"fresh bad", `{"name":"f","type":"freshness","path":"$.rows","field":"email","max_age":"P2D","severity":"ERROR"}`, nil, false, nil, "$.rows[0]: email is not an RFC 3339 timestamp: \"a@x\""},
		{"fresh empty", `{"name":"f","type":"freshness","path":"$.rows[0].id","field":"at","max_age":"P2D","severity":"ERROR"}`, nil, false, nil, "is not an array or an object"},
		{"custom ok", `{"name":"x","type":"custom","severity":"ERROR","source":"def check(output, previous):\n    return len(output.rows) == output.n and previous == None\n"}`, nil, true, nil, "custom check passed"},
		{"custom false", `{"name":"x","type":"custom","severity":"ERROR","source":"def check(output, previous):\n    return len(output[\"rows\"]) >= previous.n\n"}`, prev, false, nil, "custom check returned False"},
		{"custom message", `{"name":"x","type":"custom","severity":"ERROR","path":"$.rows","source":"def check(rows, previous):\n    bad = [r[\"id\"] for r in rows if r.get(\"email\") == None]\n    return (len(bad) == 0, \"%d rows without email\" % len(bad))\n"}`, nil, false, nil, "2 rows without email"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runOne(t, tt.check, rows, tt.previous)
			if res.Passed != tt.passed || fmt.Sprint(res.Observed) != fmt.Sprint(tt.observed) || !strings.Contains(res.Message, tt.msg) {
				t.Errorf("got passed=%v observed=%v %q\nwant passed=%v observed=%v %q", res.Passed, res.Observed, res.Message, tt.passed, tt.observed, tt.msg)
			}
			if res.Severity != SeverityError || res.Name == "" || res.Type == "" || res.Skipped {
				t.Errorf("result fields: %+v", res)
			}
		})
	}
}

func TestRunPhasesAndFailFast(t *testing.T) {
	t.Parallel()
	checks := mustChecks(t, `[
		{"name":"in","type":"not_null","phase":"pre","fields":["day"],"severity":"CRITICAL"},
		{"name":"info","type":"row_count","path":"$.rows","min":5,"severity":"INFO"},
		{"name":"crit","type":"row_count","path":"$.rows","min":5,"severity":"CRITICAL"},
		{"name":"after","type":"row_count","path":"$.rows","min":0,"severity":"ERROR"}
	]`)
	var r Runner
	pre := r.Run(context.Background(), checks, PhasePre, map[string]any{"day": "2026-01-01"}, nil)
	if len(pre) != 1 || pre[0].Name != "in" || !pre[0].Passed {
		t.Fatalf("pre: %+v", pre)
	}
	post := r.Run(context.Background(), checks, PhasePost, map[string]any{"rows": []any{1.0, 2.0}}, nil)
	if len(post) != 3 || post[0].Passed || post[1].Passed || post[1].Name != "crit" {
		t.Fatalf("post: %+v", post)
	}
	if after := post[2]; after.Name != "after" || !after.Skipped || after.Passed || after.Message != "not run: critical check crit failed" || after.Severity != SeverityError {
		t.Errorf("after a failed critical check: %+v", after)
	}
	if d := Gate(post, false); d.Action != Block {
		t.Errorf("gate: %+v", d)
	}
}

func TestRunFailsBadInput(t *testing.T) {
	t.Parallel()
	var r Runner
	check := Check{Name: "c", Type: TypeRowCount, Severity: SeverityWarning}
	res := r.Run(context.Background(), []Check{check}, PhasePost, []any{}, nil)
	if len(res) != 1 || res[0].Passed || !strings.Contains(res[0].Message, "invalid check: $: a row_count check needs min, max or min_ratio") || res[0].Severity != SeverityWarning {
		t.Errorf("invalid check: %+v", res)
	}
	check.Max = new(int64)
	res = r.Run(context.Background(), []Check{check}, PhasePost, json.RawMessage(`[1`), nil)
	if res[0].Passed || !strings.Contains(res[0].Message, "the checked value is not JSON") {
		t.Errorf("bad JSON: %+v", res)
	}
	res = r.Run(context.Background(), []Check{check}, PhasePost, json.RawMessage(`[]`), &Previous{Output: []byte(`{} {}`)})
	if res[0].Passed || !strings.Contains(res[0].Message, "the previous output is not JSON: trailing data") {
		t.Errorf("bad previous: %+v", res)
	}
}

func TestRunTimeouts(t *testing.T) {
	t.Parallel()
	rows := make([]any, 200_000)
	for i := range rows {
		rows[i] = map[string]any{"id": float64(i), "k": "key"}
	}
	checks := mustChecks(t, `[{"name":"u","type":"unique","fields":["id","k"],"severity":"ERROR","timeout_ms":1}]`)
	var r Runner
	res := r.Run(context.Background(), checks, PhasePost, rows, nil)
	if res[0].Passed || res[0].Message != "check timed out after 1ms" || res[0].DurationMS > 1000 {
		t.Errorf("timeout: %+v", res[0])
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	checks = mustChecks(t, `[{"name":"c","type":"row_count","min":1,"severity":"CRITICAL"}]`)
	res = r.Run(ctx, checks, PhasePost, []any{1.0}, nil)
	if res[0].Passed || res[0].Message != "check canceled: context canceled" {
		t.Errorf("canceled: %+v", res[0])
	}
}

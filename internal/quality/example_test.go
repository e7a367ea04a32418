package quality_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/quality"
)

func ExampleRunner_Run() {
	// A task's checks, as registered with its DAG.
	checks, issues := quality.ParseChecks(json.RawMessage(`[
		{"name": "has_rows", "type": "row_count", "path": "$.rows", "min": 1, "min_ratio": 0.5, "severity": "CRITICAL"},
		{"name": "ids", "type": "unique", "path": "$.rows", "fields": ["id"], "severity": "ERROR"},
		{"name": "fresh", "type": "freshness", "path": "$.rows", "field": "at", "max_age": "PT6H", "severity": "WARNING"},
		{"name": "sane", "type": "custom", "path": "$.rows", "severity": "INFO",
		 "source": "def check(rows, previous):\n    return (all([r.amount >= 0 for r in rows]), \"amounts checked\")\n"}
	]`), "$.tasks[1].checks")
	if issues != nil {
		fmt.Println(issues)
		return
	}
	runner := quality.Runner{Clock: clock.NewFake(time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC))}
	output := json.RawMessage(`{"rows": [
		{"id": 1, "amount": 10, "at": "2026-01-02T08:00:00Z"},
		{"id": 1, "amount": 12, "at": "2026-01-02T07:00:00Z"}]}`)
	previous := &quality.Previous{Output: json.RawMessage(`{"rows": [{}, {}, {}]}`)}
	results := runner.Run(context.Background(), checks, quality.PhasePost, output, previous)
	for _, r := range results {
		fmt.Printf("%s %s passed=%v: %s\n", r.Severity, r.Name, r.Passed, r.Message)
	}
	fmt.Println(quality.Gate(results, true))
	// Output:
	// CRITICAL has_rows passed=true: 2 rows
	// ERROR ids passed=false: 1 duplicate item(s) on (id): [1] repeats [0] (1)
	// WARNING fresh passed=true: newest at is 2026-01-02T08:00:00Z, 1h0m0s old (max_age 6h0m0s)
	// INFO sane passed=true: amounts checked
	// {ALLOW_WITH_WARNING error check(s) failed: ids: the run is flagged}
}

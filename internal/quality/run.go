package quality

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/clock"
)

// Previous is the previous good materialization of the task's asset for the same partition: the
// one that is promoted (latest), never a quarantined or rejected one.
type Previous struct {
	// Output is its output: decoded JSON (map[string]any, []any, json.Number or float64, string,
	// bool, nil) or its encoding (json.RawMessage, []byte).
	Output any
}

// Result is the outcome of one check.
type Result struct {
	Name     string   `json:"name"`
	Type     Type     `json:"type"`
	Severity Severity `json:"severity"`
	// Passed is false for a check that failed, errored, timed out or was skipped.
	Passed bool `json:"passed"`
	// Skipped is true for a check that did not run because a CRITICAL check before it failed
	// (004 §6.2: fail fast on CRITICAL). Gate does not count skipped checks as failed.
	Skipped bool `json:"skipped,omitempty"`
	// Message says what was found, or why the check failed.
	Message string `json:"message"`
	// Observed is the measurement: the row count (row_count), the number of offending items
	// (not_null, unique), of schema violations (json_schema), the newest timestamp (freshness).
	Observed any `json:"observed,omitempty"`
	// DurationMS is how long the check ran.
	DurationMS int64 `json:"duration_ms"`
}

// Runner runs checks. The zero value uses the wall clock.
type Runner struct {
	// Clock is "now" for freshness checks and for custom checks' r_now_v1 (clock.Real if nil).
	Clock clock.Clock
}

// Run runs, in order, the checks of phase on value (the task's input params for PhasePre, its
// output for PhasePost), with previous (nil: there is none) for min_ratio and custom checks. Each
// check runs within its timeout (and ctx): a check that times out, errors or is not valid fails
// with its severity and its message says why. After a CRITICAL check fails the remaining checks
// are skipped (004 §6.2). Checks of the other phase are left out of the results.
func (r Runner) Run(ctx context.Context, checks []Check, phase Phase, value any, previous *Previous) []Result {
	value, verr := decodeValue(value)
	var prev any
	var perr error
	if previous != nil {
		prev, perr = decodeValue(previous.Output)
	}
	var results []Result
	blockedBy := ""
	for _, c := range checks {
		if c.phase() != phase {
			continue
		}
		var res Result
		switch {
		case blockedBy != "":
			res = Result{Skipped: true, Message: fmt.Sprintf("not run: critical check %s failed", blockedBy)}
		case verr != nil:
			res.Message = fmt.Sprintf("the checked value is not JSON: %v", verr)
		case perr != nil:
			res.Message = fmt.Sprintf("the previous output is not JSON: %v", perr)
		default:
			res = r.runOne(ctx, c, value, prev, previous != nil)
		}
		res.Name, res.Type, res.Severity = c.Name, c.Type, c.Severity
		if !res.Passed && !res.Skipped && c.Severity == SeverityCritical {
			blockedBy = c.Name
		}
		results = append(results, res)
	}
	return results
}

// runOne runs one check within its timeout.
func (r Runner) runOne(ctx context.Context, c Check, value, prev any, hasPrev bool) Result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	if ctx.Err() != nil {
		o := interrupted(ctx, c)
		return Result{Message: o.message}
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- failed(nil, "check failed: internal error: %v", p)
			}
		}()
		done <- r.evaluate(ctx, c, value, prev, hasPrev)
	}()
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		o = interrupted(ctx, c)
	}
	return Result{Passed: o.passed, Message: o.message, Observed: o.observed,
		DurationMS: time.Since(start).Milliseconds()}
}

// interrupted is the outcome of a check whose context ended first.
func interrupted(ctx context.Context, c Check) outcome {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return failed(nil, "check timed out after %v", c.timeout())
	}
	return failed(nil, "check canceled: %v", context.Cause(ctx))
}

// evaluate validates c and runs it on value.
func (r Runner) evaluate(ctx context.Context, c Check, value, prev any, hasPrev bool) outcome {
	raw, err := json.Marshal(c)
	if err != nil {
		return failed(nil, "invalid check: %v", err)
	}
	if _, issues := ParseCheck(raw, "$"); len(issues) > 0 {
		return failed(nil, "invalid check: %s: %s", issues[0].Path, issues[0].Message)
	}
	target, err := lookup(value, c.path())
	if err != nil {
		return failed(nil, "%v", err)
	}
	switch c.Type {
	case TypeJSONSchema:
		return checkSchema(c, target)
	case TypeRowCount:
		return checkRowCount(c, target, prev, hasPrev)
	case TypeNotNull:
		return checkNotNull(ctx, c, target)
	case TypeUnique:
		return checkUnique(ctx, c, target)
	case TypeFreshness:
		return checkFreshness(ctx, c, target, r.now())
	default: // TypeCustom (ParseCheck knows no other)
		return runCustom(ctx, c, target, prev, r.now)
	}
}

func (r Runner) now() time.Time {
	if r.Clock == nil {
		return clock.Real{}.Now()
	}
	return r.Clock.Now()
}

// outcome is what a check found.
type outcome struct {
	passed   bool
	message  string
	observed any
}

// failed is a failed outcome.
func failed(observed any, format string, args ...any) outcome {
	return outcome{message: fmt.Sprintf(format, args...), observed: observed}
}

// decodeValue returns v as decoded JSON, decoding an encoding (numbers as json.Number).
func decodeValue(v any) (any, error) {
	var data []byte
	switch b := v.(type) {
	case json.RawMessage:
		data = b
	case []byte:
		data = b
	default:
		return v, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return out, nil
}

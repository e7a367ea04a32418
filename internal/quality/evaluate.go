package quality

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxExamples bounds the offending items a message names.
const maxExamples = 5

// pollEvery is how many items a check walks between two looks at its context.
const pollEvery = 1024

// checkSchema validates target against the check's JSON Schema.
func checkSchema(c Check, target any) outcome {
	reg, err := schemas()
	if err != nil {
		return failed(nil, "%v", err)
	}
	s, issues := reg.CompileUserSchema("$.schema", c.Schema)
	if len(issues) > 0 {
		return failed(nil, "invalid schema: %s: %s", issues[0].Path, issues[0].Message)
	}
	issues = reg.ValidateValue(s, c.path(), target)
	if len(issues) == 0 {
		return outcome{passed: true, message: "valid against the schema", observed: 0}
	}
	var examples []string
	for _, is := range issues[:min(len(issues), maxExamples)] {
		examples = append(examples, is.Path+": "+is.Message)
	}
	return failed(len(issues), "%d schema violation(s): %s%s", len(issues), strings.Join(examples, "; "), more(len(issues)))
}

// checkRowCount compares the count at the check's path with min, max and, against the previous
// materialization's count at the same path, min_ratio.
func checkRowCount(c Check, target, prev any, hasPrev bool) outcome {
	count, err := rowCount(target)
	if err != nil {
		return failed(nil, "%s: %v", c.path(), err)
	}
	var problems, notes []string
	if c.Min != nil && count < *c.Min {
		problems = append(problems, fmt.Sprintf("below the minimum %d", *c.Min))
	}
	if c.Max != nil && count > *c.Max {
		problems = append(problems, fmt.Sprintf("above the maximum %d", *c.Max))
	}
	if c.MinRatio != nil {
		problem, note := ratioProblem(c, count, prev, hasPrev)
		problems, notes = appendNonEmpty(problems, problem), appendNonEmpty(notes, note)
	}
	msg := fmt.Sprintf("%d rows", count)
	if len(problems) > 0 {
		return failed(count, "%s, %s", msg, strings.Join(problems, ", "))
	}
	if len(notes) > 0 {
		msg += " (" + strings.Join(notes, "; ") + ")"
	}
	return outcome{passed: true, message: msg, observed: count}
}

// ratioProblem compares count with the previous count: a problem if the ratio is below min_ratio,
// a note if there is nothing to compare with.
func ratioProblem(c Check, count int64, prev any, hasPrev bool) (problem, note string) {
	if !hasPrev {
		return "", "no previous materialization: min_ratio not applied"
	}
	pt, err := lookup(prev, c.path())
	if err != nil {
		return "", "min_ratio not applied: the previous output has no count: " + err.Error()
	}
	pc, err := rowCount(pt)
	if err != nil {
		return "", "min_ratio not applied: the previous output has no count: " + err.Error()
	}
	if pc == 0 {
		return "", "the previous count is 0: min_ratio not applied"
	}
	ratio := float64(count) / float64(pc)
	if ratio < *c.MinRatio {
		return fmt.Sprintf("%.3g of the previous %d, below min_ratio %g", ratio, pc, *c.MinRatio), ""
	}
	return "", ""
}

func appendNonEmpty(list []string, s string) []string {
	if s == "" {
		return list
	}
	return append(list, s)
}

// rowCount is an array's length, or a non-negative integer taken as a count.
func rowCount(v any) (int64, error) {
	switch n := v.(type) {
	case []any:
		return int64(len(n)), nil
	case json.Number:
		if i, err := n.Int64(); err == nil && i >= 0 {
			return i, nil
		}
	case float64:
		if n >= 0 && n == math.Trunc(n) && n < math.MaxInt64 {
			return int64(n), nil
		}
	default:
		return 0, fmt.Errorf("%s is not an array or a count", jsonType(v))
	}
	return 0, fmt.Errorf("%v is not a count (a non-negative integer)", v)
}

// items returns the items a check looks at: the elements of an array, or an object itself when
// objectOK.
func items(target any, objectOK bool) ([]any, error) {
	switch v := target.(type) {
	case []any:
		return v, nil
	case map[string]any:
		if objectOK {
			return []any{v}, nil
		}
	}
	want := "an array"
	if objectOK {
		want = "an array or an object"
	}
	return nil, fmt.Errorf("%s is not %s", jsonType(target), want)
}

// checkNotNull requires every field to be present and not null in every item.
func checkNotNull(ctx context.Context, c Check, target any) outcome {
	list, err := items(target, true)
	if err != nil {
		return failed(nil, "%s: %v", c.path(), err)
	}
	bad := 0
	var examples []string
	for i, item := range list {
		if i%pollEvery == 0 && ctx.Err() != nil {
			return failed(nil, "check stopped: %v", context.Cause(ctx))
		}
		obj, _ := item.(map[string]any)
		var nulls []string
		for _, f := range c.Fields {
			if v, ok := obj[f]; !ok || v == nil {
				nulls = append(nulls, f)
			}
		}
		if len(nulls) > 0 {
			bad++
			if len(examples) < maxExamples {
				examples = append(examples, fmt.Sprintf("[%d] %s", i, strings.Join(nulls, ", ")))
			}
		}
	}
	if bad > 0 {
		return failed(bad, "%d of %d item(s) have a missing or null field: %s%s", bad, len(list), strings.Join(examples, "; "), more(bad))
	}
	return outcome{passed: true, observed: 0, message: fmt.Sprintf("%s not null in all %d item(s)", strings.Join(c.Fields, ", "), len(list))}
}

// checkUnique requires the items to be unique on the check's fields (a missing field is null; values
// compare by their JSON encoding, numbers by value).
func checkUnique(ctx context.Context, c Check, target any) outcome {
	list, err := items(target, false)
	if err != nil {
		return failed(nil, "%s: %v", c.path(), err)
	}
	first := make(map[string]int, len(list))
	dups := 0
	var examples []string
	for i, item := range list {
		if i%pollEvery == 0 && ctx.Err() != nil {
			return failed(nil, "check stopped: %v", context.Cause(ctx))
		}
		obj, ok := item.(map[string]any)
		if !ok {
			return failed(nil, "%s[%d] is %s, not an object", c.path(), i, jsonType(item))
		}
		key := compositeKey(obj, c.Fields)
		if j, seen := first[key]; seen {
			dups++
			if len(examples) < maxExamples {
				examples = append(examples, fmt.Sprintf("[%d] repeats [%d] %s", i, j, key))
			}
			continue
		}
		first[key] = i
	}
	if dups > 0 {
		return failed(dups, "%d duplicate item(s) on (%s): %s%s", dups, strings.Join(c.Fields, ", "), strings.Join(examples, "; "), more(dups))
	}
	return outcome{passed: true, observed: 0, message: fmt.Sprintf("all %d item(s) unique on (%s)", len(list), strings.Join(c.Fields, ", "))}
}

// compositeKey encodes the values of fields in obj (a missing one as null).
func compositeKey(obj map[string]any, fields []string) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = keyPart(obj[f])
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// keyPart encodes one value of a key: numbers by value (1, 1.0 and 1e0 are equal), anything else as
// JSON.
func keyPart(v any) string {
	switch n := v.(type) {
	case json.Number:
		if _, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return string(n)
		}
		if f, err := n.Float64(); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
		return string(n)
	case float64:
		return strconv.FormatFloat(n, 'g', -1, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// checkFreshness requires the newest timestamp of the check's field to be at most max_age old.
func checkFreshness(ctx context.Context, c Check, target any, now time.Time) outcome {
	maxAge, err := ParseMaxAge(c.MaxAge)
	if err != nil {
		return failed(nil, "max_age: %v", err)
	}
	list, err := items(target, true)
	if err != nil {
		return failed(nil, "%s: %v", c.path(), err)
	}
	if len(list) == 0 {
		return failed(nil, "%s: no items to take %s from", c.path(), c.Field)
	}
	var newest time.Time
	for i, item := range list {
		if i%pollEvery == 0 && ctx.Err() != nil {
			return failed(nil, "check stopped: %v", context.Cause(ctx))
		}
		obj, _ := item.(map[string]any)
		s, _ := obj[c.Field].(string)
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return failed(nil, "%s: %s is not an RFC 3339 timestamp: %s", itemPath(c, target, i), c.Field, keyPart(obj[c.Field]))
		}
		if t.After(newest) {
			newest = t
		}
	}
	age := now.Sub(newest)
	observed := newest.UTC().Format(time.RFC3339Nano)
	msg := fmt.Sprintf("newest %s is %s, %v old (max_age %v)", c.Field, observed, age.Round(time.Second), maxAge)
	return outcome{passed: age <= maxAge, message: msg, observed: observed}
}

// itemPath names item i of target for messages.
func itemPath(c Check, target any, i int) string {
	if _, isArr := target.([]any); isArr {
		return c.path() + "[" + strconv.Itoa(i) + "]"
	}
	return c.path()
}

// more marks a list of examples cut to maxExamples.
func more(n int) string {
	if n > maxExamples {
		return ", …"
	}
	return ""
}

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

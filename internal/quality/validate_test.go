package quality

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/larkrun/lark/internal/schema"
)

func TestValidateCheckAcceptsEachType(t *testing.T) {
	t.Parallel()
	valid := []string{
		`{"name":"shape","type":"json_schema","severity":"ERROR","schema":{"type":"object","required":["rows"]}}`,
		`{"name":"has_rows","type":"row_count","path":"$.rows","min":1,"severity":"CRITICAL"}`,
		`{"name":"no_drop","type":"row_count","path":"$.rows","min_ratio":0.5,"max":1000,"severity":"WARNING","timeout_ms":60000}`,
		`{"name":"ids","type":"not_null","path":"$.rows","fields":["id","email"],"severity":"ERROR"}`,
		`{"name":"pk","type":"unique","path":"$['the rows']","fields":["id","day"],"severity":"ERROR","phase":"post"}`,
		`{"name":"fresh","type":"freshness","path":"$","field":"updated_at","max_age":"PT36H","severity":"INFO"}`,
		`{"name":"fresh.go","type":"freshness","field":"updated_at","max_age":"36h","severity":"INFO"}`,
		`{"name":"input_ok","type":"custom","phase":"pre","severity":"CRITICAL","timeout_ms":1,"source":"def check(output, previous):\n    return output != None\n"}`,
	}
	for _, raw := range valid {
		if issues := ValidateCheck(json.RawMessage(raw), "$.checks[0]"); issues != nil {
			t.Errorf("%s: %v", raw, issues)
		}
	}
}

func TestValidateCheckIssues(t *testing.T) {
	t.Parallel()
	const base = `"name":"c","severity":"ERROR"`
	tests := []struct {
		raw, path, code, msg string
	}{
		{`[1]`, "$.c", schema.CodeSchemaMismatch, "a check must be a JSON object"},
		{`{"type":"row_count","min":1,"severity":"ERROR"}`, "$.c.name", schema.CodeMissingField, "name is required"},
		{`{"name":"c","min":1,"severity":"ERROR"}`, "$.c.type", schema.CodeMissingField, "type is required"},
		{`{"name":"c","type":"row_count","min":1}`, "$.c.severity", schema.CodeMissingField, "severity is required"},
		{`{"name":7,"type":"row_count","min":1,"severity":"ERROR"}`, "$.c.name", schema.CodeSchemaMismatch, "name must be a string"},
		{`{"name":"a b",` + `"type":"row_count","min":1,"severity":"ERROR"}`, "$.c.name", schema.CodeInvalidValue, "a check name is 1 to 64"},
		{`{"name":"` + strings.Repeat("n", 65) + `","type":"row_count","min":1,"severity":"ERROR"}`, "$.c.name", schema.CodeInvalidValue, "a check name is 1 to 64"},
		{`{` + base + `,"type":"sql"}`, "$.c.type", schema.CodeInvalidValue, `type must be one of "json_schema", "row_count"`},
		{`{"name":"c","severity":"error","type":"row_count","min":1}`, "$.c.severity", schema.CodeInvalidValue, `severity must be one of "INFO", "WARNING", "ERROR", "CRITICAL"`},
		{`{` + base + `,"type":"row_count","min":1,"phase":"during"}`, "$.c.phase", schema.CodeInvalidValue, `phase must be "pre" or "post"`},
		{`{` + base + `,"type":"row_count","min":1,"timeout_ms":0}`, "$.c.timeout_ms", schema.CodeInvalidValue, "timeout_ms must be 1..60000"},
		{`{` + base + `,"type":"row_count","min":1,"timeout_ms":60001}`, "$.c.timeout_ms", schema.CodeInvalidValue, "timeout_ms must be 1..60000"},
		{`{` + base + `,"type":"row_count","min":1,"timeout_ms":"5"}`, "$.c.timeout_ms", schema.CodeSchemaMismatch, "timeout_ms must be an integer"},
		{`{` + base + `,"type":"row_count","min":1,"path":"rows"}`, "$.c.path", schema.CodeInvalidValue, "a path starts with $"},
		{`{` + base + `,"type":"row_count","min":1,"path":"$.rows[x]"}`, "$.c.path", schema.CodeInvalidValue, "an index is a non-negative integer"},
		{`{` + base + `,"type":"row_count","min":1,"path":"$` + strings.Repeat(".a", 129) + `"}`, "$.c.path", schema.CodeInvalidValue, "a path is at most 256 bytes"},
		{`{` + base + `,"type":"row_count","min":1,"color":"red"}`, "$.c.color", schema.CodeUnknownField, `unknown member "color" of a check`},
		{`{` + base + `,"type":"row_count","min":1,"fields":["id"]}`, "$.c.fields", schema.CodeUnknownField, `fields is a member of "not_null", "unique" checks, not of row_count checks`},
		{`{` + base + `,"type":"row_count"}`, "$.c", schema.CodeMissingField, "a row_count check needs min, max or min_ratio"},
		{`{` + base + `,"type":"row_count","min":-1}`, "$.c.min", schema.CodeInvalidValue, "min must not be negative"},
		{`{` + base + `,"type":"row_count","min":1.5}`, "$.c.min", schema.CodeSchemaMismatch, "min must be an integer"},
		{`{` + base + `,"type":"row_count","min":5,"max":4}`, "$.c.max", schema.CodeInvalidValue, "max (4) is less than min (5)"},
		{`{` + base + `,"type":"row_count","min_ratio":0}`, "$.c.min_ratio", schema.CodeInvalidValue, "min_ratio must be greater than 0 and at most 1000"},
		{`{` + base + `,"type":"row_count","min_ratio":1001}`, "$.c.min_ratio", schema.CodeInvalidValue, "min_ratio must be greater than 0 and at most 1000"},
		{`{` + base + `,"type":"row_count","min_ratio":0.5,"phase":"pre"}`, "$.c.min_ratio", schema.CodeInvalidValue, "post checks only"},
		{`{` + base + `,"type":"not_null"}`, "$.c.fields", schema.CodeMissingField, "fields is required"},
		{`{` + base + `,"type":"not_null","fields":[]}`, "$.c.fields", schema.CodeInvalidValue, "fields holds 1 to 16 field names"},
		{`{` + base + `,"type":"unique","fields":"id"}`, "$.c.fields", schema.CodeSchemaMismatch, "fields must be an array of strings"},
		{`{` + base + `,"type":"unique","fields":["id",3]}`, "$.c.fields[1]", schema.CodeSchemaMismatch, "fields[1] must be a string"},
		{`{` + base + `,"type":"unique","fields":["id","id"]}`, "$.c.fields[1]", schema.CodeInvalidValue, `field "id" is listed twice`},
		{`{` + base + `,"type":"unique","fields":["` + strings.Repeat("f", 129) + `"]}`, "$.c.fields[0]", schema.CodeInvalidValue, "a field name is 1 to 128 bytes"},
		{`{` + base + `,"type":"unique","fields":[` + strings.Repeat(`"f",`, 16) + `"g"]}`, "$.c.fields", schema.CodeInvalidValue, "fields holds 1 to 16 field names"},
		{`{` + base + `,"type":"freshness","max_age":"1h"}`, "$.c.field", schema.CodeMissingField, "field is required"},
		{`{` + base + `,"type":"freshness","field":"ts"}`, "$.c.max_age", schema.CodeMissingField, "max_age is required"},
		{`{` + base + `,"type":"freshness","field":"ts","max_age":"P1M"}`, "$.c.max_age", schema.CodeInvalidValue, "is not an ISO 8601 duration"},
		{`{` + base + `,"type":"freshness","field":"ts","max_age":"-1h"}`, "$.c.max_age", schema.CodeInvalidValue, "is not positive"},
		{`{` + base + `,"type":"json_schema"}`, "$.c.schema", schema.CodeMissingField, "schema is required"},
		{`{` + base + `,"type":"json_schema","schema":{"type":"nope"}}`, "$.c.schema.type", schema.CodeInvalidSchema, "value must be one of"},
		{`{` + base + `,"type":"custom"}`, "$.c.source", schema.CodeMissingField, "source is required"},
		{`{` + base + `,"type":"custom","source":"def check(output, previous):\n    return (\n"}`, "$.c.source", schema.CodeInvalidValue, "syntax error: check.star:3:1: got outdent"},
		{`{` + base + `,"type":"custom","source":"def test(output, previous):\n    return True\n"}`, "$.c.source", schema.CodeInvalidValue, "no top-level check function"},
		{`{` + base + `,"type":"custom","source":"def check(output):\n    return True\n"}`, "$.c.source", schema.CodeInvalidValue, "line 1: check must take exactly two parameters"},
		{`{` + base + `,"type":"custom","source":"def check(o, p):\n    return True\ndef main(ctx, input):\n    return 1\n"}`, "$.c.source", schema.CodeInvalidValue, "line 3: a custom check defines check(output, previous), not main"},
		{`{` + base + `,"type":"custom","source":"def check(o, p):\n    return undefined_name\n"}`, "$.c.source", schema.CodeInvalidValue, "line 2: undefined: undefined_name"},
		{`{` + base + `,"type":"custom","source":"load('x.star', 'y')\ndef check(o, p):\n    return True\n"}`, "$.c.source", schema.CodeInvalidValue, "load() is not allowed"},
		{`{` + base + `,"type":"custom","source":"` + strings.Repeat("#", MaxSourceBytes) + `\ndef check(o, p):\n    return True\n"}`, "$.c.source", schema.CodeInvalidValue, "at most 16384 bytes"},
		{`{` + base + `,"type":"custom","source":"` + strings.Repeat("#", MaxCheckBytes) + `"}`, "$.c", schema.CodeInvalidValue, "a check is at most 131072 bytes of JSON"},
	}
	for _, tt := range tests {
		issues := ValidateCheck(json.RawMessage(tt.raw), "$.c")
		if !hasIssue(issues, tt.path, tt.code, tt.msg) {
			t.Errorf("%.120s:\n got %v\nwant %s %s %q", tt.raw, issues, tt.path, tt.code, tt.msg)
		}
	}
}

func hasIssue(issues []schema.Issue, path, code, msg string) bool {
	for _, is := range issues {
		if is.Path == path && is.Code == code && strings.Contains(is.Message, msg) {
			return true
		}
	}
	return false
}

func TestValidateChecksBounds(t *testing.T) {
	t.Parallel()
	checks := func(n int) json.RawMessage {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf(`{"name":"c%d","type":"row_count","min":1,"severity":"INFO"}`, i)
		}
		return json.RawMessage("[" + strings.Join(items, ",") + "]")
	}
	if issues := ValidateChecks(checks(MaxChecks), "$.checks"); issues != nil {
		t.Fatalf("%d checks: %v", MaxChecks, issues)
	}
	got, issues := ParseChecks(checks(3), "$.checks")
	if issues != nil || len(got) != 3 || got[2].Name != "c2" || *got[2].Min != 1 {
		t.Fatalf("ParseChecks: %+v %v", got, issues)
	}
	if issues := ValidateChecks(checks(MaxChecks+1), "$.checks"); !hasIssue(issues, "$.checks", schema.CodeInvalidValue, "a task has at most 50 checks; this one has 51") {
		t.Errorf("51 checks: %v", issues)
	}
	if issues := ValidateChecks(json.RawMessage(`{"name":"c"}`), "$.checks"); !hasIssue(issues, "$.checks", schema.CodeSchemaMismatch, "checks must be an array") {
		t.Errorf("object: %v", issues)
	}
	dup := `[{"name":"a","type":"row_count","min":1,"severity":"INFO"},{"name":"a","type":"row_count","max":1,"severity":"INFO"},{"name":"b","type":"row_count","severity":"INFO"}]`
	issues = ValidateChecks(json.RawMessage(dup), "$.checks")
	if !hasIssue(issues, "$.checks[1].name", schema.CodeInvalidValue, `check name "a" is already used by checks[0]`) ||
		!hasIssue(issues, "$.checks[2]", schema.CodeMissingField, "needs min, max or min_ratio") {
		t.Errorf("duplicates: %v", issues)
	}
}

func TestParseMaxAge(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		"36h": "36h0m0s", "1h30m": "1h30m0s", "PT36H": "36h0m0s", "P1D": "24h0m0s", "P1DT12H": "36h0m0s",
		"P1W": "168h0m0s", "PT90M": "1h30m0s", "PT0.5S": "500ms", "PT1H30M15S": "1h30m15s",
	}
	for in, want := range good {
		if d, err := ParseMaxAge(in); err != nil || d.String() != want {
			t.Errorf("ParseMaxAge(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, in := range []string{"", "P", "PT", "P1Y", "P1M", "PT1D", "P1H", "PT1S1M", "P1D1D", "0s", "-5m", "P0D", "1 hour", "P-1D", "P200000W", "1000000h"} {
		if d, err := ParseMaxAge(in); err == nil {
			t.Errorf("ParseMaxAge(%q) = %v, want an error", in, d)
		}
	}
}

func TestPath(t *testing.T) {
	t.Parallel()
	value := map[string]any{"rows": []any{map[string]any{"id": "a"}}, "odd key": map[string]any{"it's": true}}
	good := map[string]any{
		"$":                     value,
		"$.rows[0].id":          "a",
		`$['odd key']["it's"]`:  true,
		`$['odd key']['it\'s']`: true,
	}
	for p, want := range good {
		got, err := lookup(value, p)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("lookup(%s) = %v, %v", p, got, err)
		}
	}
	missing := map[string]string{"$.rows[1]": "$.rows[1] is not in the value", "$.rows.id": "$.rows.id is not in the value",
		"$.x.y": "$.x is not in the value", "$['odd key'].no": "$['odd key'].no is not in the value"}
	for p, want := range missing {
		if _, err := lookup(value, p); err == nil || err.Error() != want {
			t.Errorf("lookup(%s): %v, want %q", p, err, want)
		}
	}
	for _, p := range []string{"", "rows", "$.", "$..a", "$[", "$[-1]", "$[+1]", "$['a'", "$['a'x]", "$.1a", "$ .a"} {
		if _, err := parsePath(p); err == nil {
			t.Errorf("parsePath(%q) accepted", p)
		}
	}
}

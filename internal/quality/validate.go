package quality

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/larkrun/lark/internal/schema"
)

// schemas compiles the JSON Schemas of json_schema checks (its cache makes compiling the same
// schema for every run cheap). schema.New fails only if Lark's embedded schemas are broken.
var schemas = sync.OnceValues(schema.New)

// namePattern is what a check's name may be.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// commonKeys are the members every check may have; typeKeys those of each type besides.
var (
	commonKeys = []string{"name", "type", "severity", "phase", "timeout_ms", "path"}
	typeKeys   = map[Type][]string{
		TypeJSONSchema: {"schema"},
		TypeRowCount:   {"min", "max", "min_ratio"},
		TypeNotNull:    {"fields"},
		TypeUnique:     {"fields"},
		TypeFreshness:  {"field", "max_age"},
		TypeCustom:     {"source"},
	}
)

// ValidateCheck validates one check definition (the JSON of an element of a task's "checks") and
// returns its issues, located under path (e.g. "$.implementation.workflow_spec.spec.tasks[1].checks[0]"),
// with internal/schema's codes: missing_field, unknown_field, schema_mismatch (a member of the
// wrong JSON type), invalid_value (a value that breaks a rule), invalid_schema and
// schema_too_complex (a json_schema check's schema). Nil means the check is valid.
func ValidateCheck(raw json.RawMessage, path string) []schema.Issue {
	_, issues := ParseCheck(raw, path)
	return issues
}

// ValidateChecks validates a task's "checks" array: at most MaxChecks checks, each valid, with
// distinct names. Issues are located under path, as for ValidateCheck.
func ValidateChecks(raw json.RawMessage, path string) []schema.Issue {
	_, issues := ParseChecks(raw, path)
	return issues
}

// ParseChecks is ValidateChecks that also returns the checks when there is no issue.
func ParseChecks(raw json.RawMessage, path string) ([]Check, []schema.Issue) {
	path = orRoot(path)
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, []schema.Issue{{Path: path, Code: schema.CodeSchemaMismatch, Message: "checks must be an array of check objects"}}
	}
	if len(items) > MaxChecks {
		return nil, []schema.Issue{{Path: path, Code: schema.CodeInvalidValue,
			Message: fmt.Sprintf("a task has at most %d checks; this one has %d", MaxChecks, len(items))}}
	}
	var checks []Check
	var issues []schema.Issue
	first := map[string]int{}
	for i, item := range items {
		at := path + "[" + strconv.Itoa(i) + "]"
		c, is := ParseCheck(item, at)
		issues = append(issues, is...)
		if j, dup := first[c.Name]; dup && c.Name != "" {
			issues = append(issues, schema.Issue{Path: at + ".name", Code: schema.CodeInvalidValue,
				Message: fmt.Sprintf("check name %q is already used by checks[%d]", c.Name, j)})
		} else {
			first[c.Name] = i
		}
		checks = append(checks, c)
	}
	if len(issues) > 0 {
		return nil, sortIssues(issues)
	}
	return checks, nil
}

// ParseCheck is ValidateCheck that also returns the check when there is no issue.
func ParseCheck(raw json.RawMessage, path string) (Check, []schema.Issue) {
	path = orRoot(path)
	if len(raw) > MaxCheckBytes {
		return Check{}, []schema.Issue{{Path: path, Code: schema.CodeInvalidValue,
			Message: fmt.Sprintf("a check is at most %d bytes of JSON; this one is %d", MaxCheckBytes, len(raw))}}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return Check{}, []schema.Issue{{Path: path, Code: schema.CodeSchemaMismatch, Message: "a check must be a JSON object"}}
	}
	d := &definition{obj: obj, path: path}
	c := d.check()
	if len(d.issues) == 0 {
		validate(c, d)
	}
	if len(d.issues) > 0 {
		return Check{}, sortIssues(d.issues)
	}
	return c, nil
}

// validate checks the rules of c that its JSON types do not express.
func validate(c Check, d *definition) {
	if len(c.Name) > MaxNameBytes || !namePattern.MatchString(c.Name) {
		d.add("name", schema.CodeInvalidValue, "a check name is 1 to %d characters of A-Z, a-z, 0-9, _, . and - (not starting with . or -)", MaxNameBytes)
	}
	if !knownSeverity(c.Severity) {
		d.add("severity", schema.CodeInvalidValue, "severity must be one of %s", quoteList(Severities))
	}
	if c.Phase != "" && c.Phase != PhasePre && c.Phase != PhasePost {
		d.add("phase", schema.CodeInvalidValue, "phase must be \"pre\" or \"post\"")
	}
	if _, set := d.obj["timeout_ms"]; set && (c.TimeoutMS < 1 || c.TimeoutMS > MaxTimeout.Milliseconds()) {
		d.add("timeout_ms", schema.CodeInvalidValue, "timeout_ms must be 1..%d", MaxTimeout.Milliseconds())
	}
	if len(c.Path) > MaxPathBytes {
		d.add("path", schema.CodeInvalidValue, "a path is at most %d bytes", MaxPathBytes)
	} else if _, err := parsePath(c.path()); err != nil {
		d.add("path", schema.CodeInvalidValue, "bad JSON path %q: %v", c.Path, err)
	}
	switch c.Type {
	case TypeJSONSchema:
		validateJSONSchema(c, d)
	case TypeRowCount:
		validateRowCount(c, d)
	case TypeNotNull, TypeUnique:
		validateFields(c, d)
	case TypeFreshness:
		validateFreshness(c, d)
	case TypeCustom:
		validateCustom(c, d)
	}
}

func validateJSONSchema(c Check, d *definition) {
	if d.require("schema") {
		return
	}
	reg, err := schemas()
	if err != nil {
		d.add("schema", schema.CodeInvalidSchema, "%v", err)
		return
	}
	if _, issues := reg.CompileUserSchema(d.path+".schema", c.Schema); len(issues) > 0 {
		d.issues = append(d.issues, issues...)
	}
}

func validateRowCount(c Check, d *definition) {
	if c.Min == nil && c.Max == nil && c.MinRatio == nil {
		d.add("", schema.CodeMissingField, "a row_count check needs min, max or min_ratio")
	}
	if c.Min != nil && *c.Min < 0 {
		d.add("min", schema.CodeInvalidValue, "min must not be negative")
	}
	if c.Max != nil && *c.Max < 0 {
		d.add("max", schema.CodeInvalidValue, "max must not be negative")
	}
	if c.Min != nil && c.Max != nil && *c.Min > *c.Max {
		d.add("max", schema.CodeInvalidValue, "max (%d) is less than min (%d)", *c.Max, *c.Min)
	}
	if c.MinRatio != nil && !(*c.MinRatio > 0 && *c.MinRatio <= MaxMinRatio) {
		d.add("min_ratio", schema.CodeInvalidValue, "min_ratio must be greater than 0 and at most %d", MaxMinRatio)
	}
	if c.MinRatio != nil && c.phase() == PhasePre {
		d.add("min_ratio", schema.CodeInvalidValue, "min_ratio compares an output with the previous materialization's: it is for post checks only")
	}
}

func validateFields(c Check, d *definition) {
	if d.require("fields") {
		return
	}
	if len(c.Fields) == 0 || len(c.Fields) > MaxFields {
		d.add("fields", schema.CodeInvalidValue, "fields holds 1 to %d field names", MaxFields)
	}
	seen := map[string]bool{}
	for i, f := range c.Fields {
		at := "fields[" + strconv.Itoa(i) + "]"
		switch {
		case f == "" || len(f) > MaxFieldBytes:
			d.add(at, schema.CodeInvalidValue, "a field name is 1 to %d bytes", MaxFieldBytes)
		case seen[f]:
			d.add(at, schema.CodeInvalidValue, "field %q is listed twice", f)
		}
		seen[f] = true
	}
}

func validateFreshness(c Check, d *definition) {
	if !d.require("field") && (c.Field == "" || len(c.Field) > MaxFieldBytes) {
		d.add("field", schema.CodeInvalidValue, "a field name is 1 to %d bytes", MaxFieldBytes)
	}
	if d.require("max_age") {
		return
	}
	if _, err := ParseMaxAge(c.MaxAge); err != nil {
		d.add("max_age", schema.CodeInvalidValue, "%v", err)
	}
}

func validateCustom(c Check, d *definition) {
	if d.require("source") {
		return
	}
	if len(c.Source) > MaxSourceBytes {
		d.add("source", schema.CodeInvalidValue, "a custom check's source is at most %d bytes; this one is %d", MaxSourceBytes, len(c.Source))
		return
	}
	if _, err := compileCustom(c.Source); err != nil {
		d.add("source", schema.CodeInvalidValue, "%v", err)
	}
}

func knownSeverity(s Severity) bool {
	for _, known := range Severities {
		if s == known {
			return true
		}
	}
	return false
}

func orRoot(path string) string {
	if path == "" {
		return "$"
	}
	return path
}

func quoteList[T ~string](items []T) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(string(s))
	}
	return strings.Join(q, ", ")
}

func sortIssues(issues []schema.Issue) []schema.Issue {
	sort.SliceStable(issues, func(i, j int) bool { return issues[i].Path < issues[j].Path })
	return issues
}

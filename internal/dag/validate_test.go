package dag_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/dag"
)

const (
	tasksPath = dag.Root + ".spec.tasks"
	fnID      = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.etl.step.v1~"
)

// spec builds a workflow_spec from its tasks (JSON objects) and an optional partitioning.
func spec(partitioning string, tasks ...string) json.RawMessage {
	p := ""
	if partitioning != "" {
		p = `"partitioning":` + partitioning + `,`
	}
	return json.RawMessage(`{"format":"dag","spec":{` + p + `"tasks":[` + strings.Join(tasks, ",") + `]}}`)
}

// task is a task object with id, a function and the extra members (JSON, without braces).
func task(id string, extra ...string) string {
	members := append([]string{fmt.Sprintf(`"id":%q,"entrypoint_id":%q`, id, fnID)}, extra...)
	return "{" + strings.Join(members, ",") + "}"
}

func repeat(n int, f func(i int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// issueCase is one invalid spec and the issue it must produce (message: a substring).
type issueCase struct {
	name, path, code, msg string
	raw                   json.RawMessage
}

func runIssueCases(t *testing.T, cases []issueCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			issues := dag.Validate(c.raw, nil)
			for _, is := range issues {
				if is.Path == c.path && is.Code == c.code && strings.Contains(is.Message, c.msg) {
					return
				}
			}
			t.Fatalf("want %s %s %q; got %+v", c.path, c.code, c.msg, issues)
		})
	}
}

func TestValidSpec(t *testing.T) {
	t.Parallel()
	raw := spec(`{"type":"daily","start":"2026-01-01","timezone":"Europe/Berlin"}`,
		task("extract", `"params":{"day":"{{partition_key}}","label":"day {{ partition_key }}"}`),
		task("clean", `"depends_on":["extract"]`, `"params":{"rows":"{{tasks.extract.output.rows}}"}`,
			`"checks":[{"name":"has_rows","type":"row_count","path":"$.rows","min":1,"severity":"CRITICAL"}]`,
			`"quarantine_enabled":true`, `"retry":{"max_attempts":3,"initial_delay_ms":100,"backoff_multiplier":1.5}`,
			`"asset_key":"sales.clean"`),
		task("load", `"depends_on":["clean"]`, `"params":{"first":"{{tasks.extract.output.items[0].id}}","all":"{{tasks.clean.output}}"}`))
	ws, issues := dag.Decode(raw, nil)
	require.Empty(t, issues)
	require.Equal(t, dag.Format, ws.Format)
	require.Len(t, ws.Spec.Tasks, 3)
	require.Equal(t, dag.Daily, ws.Spec.Partitioning.Type)
	clean := ws.Spec.Tasks[1]
	require.Equal(t, []string{"extract"}, clean.DependsOn)
	require.Equal(t, 3, clean.Retry.MaxAttempts)
	require.Equal(t, int64(100), *clean.Retry.InitialDelayMS)
	require.Nil(t, clean.Retry.MaxDelayMS)
	require.True(t, clean.QuarantineEnabled)
	require.Equal(t, "sales.clean", clean.AssetKey)
	require.JSONEq(t, `{"day":"{{partition_key}}","label":"day {{ partition_key }}"}`, string(ws.Spec.Tasks[0].Params))
	_, issues = dag.Decode(spec("", task("a")), nil)
	require.Empty(t, issues)
}

func TestValidateShape(t *testing.T) {
	t.Parallel()
	ok := task("a")
	runIssueCases(t, []issueCase{
		{"malformed", dag.Root, dag.CodeSchemaMismatch, "malformed JSON", json.RawMessage(`{"format":`)},
		{"not an object", dag.Root, dag.CodeSchemaMismatch, "expected object, got array", json.RawMessage(`[]`)},
		{"unknown member", dag.Root + ".extra", dag.CodeUnknownField, `unknown field "extra"`,
			json.RawMessage(`{"format":"dag","extra":1,"spec":{"tasks":[` + ok + `]}}`)},
		{"format missing", dag.Root + ".format", dag.CodeMissingField, "format is required", json.RawMessage(`{"spec":{"tasks":[` + ok + `]}}`)},
		{"format other", dag.Root + ".format", dag.CodeInvalidValue, `format must be "dag", got "serverless-workflow"`,
			json.RawMessage(`{"format":"serverless-workflow","spec":{"tasks":[` + ok + `]}}`)},
		{"format not a string", dag.Root + ".format", dag.CodeSchemaMismatch, "expected string, got number", json.RawMessage(`{"format":1,"spec":{"tasks":[` + ok + `]}}`)},
		{"spec missing", dag.Root + ".spec", dag.CodeMissingField, "spec is required", json.RawMessage(`{"format":"dag"}`)},
		{"spec not an object", dag.Root + ".spec", dag.CodeSchemaMismatch, "expected object, got string", json.RawMessage(`{"format":"dag","spec":"x"}`)},
		{"spec unknown member", dag.Root + ".spec.steps", dag.CodeUnknownField, `unknown field "steps"`,
			json.RawMessage(`{"format":"dag","spec":{"steps":[],"tasks":[` + ok + `]}}`)},
		{"tasks missing", tasksPath, dag.CodeMissingField, "tasks is required", json.RawMessage(`{"format":"dag","spec":{}}`)},
		{"tasks not an array", tasksPath, dag.CodeSchemaMismatch, "expected array, got object", json.RawMessage(`{"format":"dag","spec":{"tasks":{}}}`)},
		{"no tasks", tasksPath, dag.CodeInvalidValue, "at least one task", spec("")},
		{"too many tasks", tasksPath, dag.CodeTooMany, "at most 500 tasks, got 501",
			spec("", repeat(dag.MaxTasks+1, func(i int) string { return task(fmt.Sprintf("t%d", i)) })...)},
		{"task not an object", tasksPath + "[1]", dag.CodeSchemaMismatch, "expected object, got string", spec("", ok, `"b"`)},
		{"task unknown member", tasksPath + "[0].run_after", dag.CodeUnknownField, `unknown field "run_after"`, spec("", task("a", `"run_after":[]`))},
		{"member name with a dot", tasksPath + `[0]["a.b"]`, dag.CodeUnknownField, `unknown field "a.b"`, spec("", task("a", `"a.b":1`))},
		{"id missing", tasksPath + "[0].id", dag.CodeMissingField, "id is required", spec("", `{"entrypoint_id":"`+fnID+`"}`)},
		{"id not a string", tasksPath + "[0].id", dag.CodeSchemaMismatch, "expected string, got number", spec("", `{"id":1,"entrypoint_id":"`+fnID+`"}`)},
		{"id empty", tasksPath + "[0].id", dag.CodeInvalidValue, `task id "" must be a letter`, spec("", task(""))},
		{"id with a dot", tasksPath + "[0].id", dag.CodeInvalidValue, `task id "a.b" must be a letter`, spec("", task("a.b"))},
		{"id starting with a digit", tasksPath + "[0].id", dag.CodeInvalidValue, `task id "1a"`, spec("", task("1a"))},
		{"id too long", tasksPath + "[0].id", dag.CodeInvalidValue, "at most 64 bytes", spec("", task("a"+strings.Repeat("b", dag.MaxIDBytes)))},
		{"entrypoint_id missing", tasksPath + "[0].entrypoint_id", dag.CodeMissingField, "entrypoint_id is required", spec("", `{"id":"a"}`)},
		{"entrypoint_id empty", tasksPath + "[0].entrypoint_id", dag.CodeInvalidValue, "must not be empty", spec("", `{"id":"a","entrypoint_id":""}`)},
		{"quarantine not a boolean", tasksPath + "[0].quarantine_enabled", dag.CodeSchemaMismatch, "expected boolean, got string", spec("", task("a", `"quarantine_enabled":"yes"`))},
		{"quarantine without an asset", tasksPath + "[0].quarantine_enabled", dag.CodeInvalidValue, "quarantine needs an asset_key", spec("", task("a", `"quarantine_enabled":true`))},
		{"asset key bad", tasksPath + "[0].asset_key", dag.CodeInvalidValue, `asset_key "sales..clean" must be segments`, spec("", task("a", `"asset_key":"sales..clean"`))},
		{"asset key too long", tasksPath + "[0].asset_key", dag.CodeInvalidValue, "at most 255 bytes", spec("", task("a", `"asset_key":"`+strings.Repeat("a", 256)+`"`))},
		{"asset key repeated", tasksPath + "[1].asset_key", dag.CodeDuplicate, `asset "s.x" is already materialized by tasks[0]`,
			spec("", task("a", `"asset_key":"s.x"`), task("b", `"asset_key":"s.x"`))},
	})
}

func TestValidateGraph(t *testing.T) {
	t.Parallel()
	runIssueCases(t, []issueCase{
		{"id repeated", tasksPath + "[2].id", dag.CodeDuplicate, `duplicate task id "a" (already at tasks[0])`, spec("", task("a"), task("b"), task("a"))},
		{"depends_on not an array", tasksPath + "[0].depends_on", dag.CodeSchemaMismatch, "expected array, got string", spec("", task("a", `"depends_on":"b"`))},
		{"depends_on entry not a string", tasksPath + "[1].depends_on[0]", dag.CodeSchemaMismatch, "expected string, got number",
			spec("", task("a"), task("b", `"depends_on":[1]`))},
		{"depends_on too long", tasksPath + "[0].depends_on", dag.CodeTooMany, "at most 50 entries, got 51",
			spec("", task("a", `"depends_on":[`+strings.Join(repeat(dag.MaxDependsOn+1, func(i int) string { return fmt.Sprintf(`"t%d"`, i) }), ",")+`]`))},
		{"depends_on unknown", tasksPath + "[1].depends_on[1]", dag.CodeUnknownTask, `unknown task "nope"`,
			spec("", task("a"), task("b", `"depends_on":["a","nope"]`))},
		{"depends_on repeated", tasksPath + "[1].depends_on[1]", dag.CodeDuplicate, `"a" is already listed (depends_on[0])`,
			spec("", task("a"), task("b", `"depends_on":["a","a"]`))},
		{"self", tasksPath + "[0].depends_on[0]", dag.CodeCycle, "depends_on forms a cycle: a -> a", spec("", task("a", `"depends_on":["a"]`))},
	})
}

func TestCycleMessage(t *testing.T) {
	t.Parallel()
	// c depends on b, b on a, a on c: work flows a -> b -> c -> a. The tasks are listed out of
	// order, and a task downstream of the cycle (d) is not part of the message.
	raw := spec("",
		task("c", `"depends_on":["b"]`),
		task("d", `"depends_on":["c"]`),
		task("a", `"depends_on":["c"]`),
		task("b", `"depends_on":["a"]`),
		task("x"))
	issues := dag.Validate(raw, nil)
	require.Equal(t, []dag.Issue{{Path: tasksPath + "[2].depends_on[0]", Code: dag.CodeCycle,
		Message: "depends_on forms a cycle: a -> b -> c -> a"}}, issues)

	// Two separate cycles are both named, each once.
	raw = spec("", task("p", `"depends_on":["q"]`), task("q", `"depends_on":["p"]`),
		task("m", `"depends_on":["n"]`), task("n", `"depends_on":["m"]`))
	issues = dag.Validate(raw, nil)
	require.Len(t, issues, 2)
	require.Equal(t, "depends_on forms a cycle: p -> q -> p", issues[0].Message)
	require.Equal(t, tasksPath+"[0].depends_on[0]", issues[0].Path)
	require.Equal(t, "depends_on forms a cycle: m -> n -> m", issues[1].Message)
	require.Equal(t, tasksPath+"[2].depends_on[0]", issues[1].Path)
}

func TestValidateTemplates(t *testing.T) {
	t.Parallel()
	daily := `{"type":"daily","start":"2026-01-01"}`
	long := strings.Repeat("x", dag.MaxTemplateBytes)
	manyRefs := strings.Repeat("{{partition_key}}", dag.MaxPlaceholders+1)
	deep := strings.Repeat(".a", dag.MaxOutputPath+1)
	up := task("up")
	runIssueCases(t, []issueCase{
		{"params not an object", tasksPath + "[0].params", dag.CodeSchemaMismatch, "expected object, got array", spec("", task("a", `"params":[]`))},
		{"params too large", tasksPath + "[0].params", dag.CodeTooMany, "more than 65536",
			spec("", task("a", `"params":{"x":"`+strings.Repeat("x", dag.MaxParamsBytes)+`"}`))},
		{"unclosed", tasksPath + "[0].params.x", dag.CodeTemplate, `unclosed placeholder: "{{partition_key" has no closing }}`,
			spec(daily, task("a", `"params":{"x":"{{partition_key"}`))},
		{"unknown placeholder", tasksPath + "[0].params.x[1]", dag.CodeTemplate, "unknown placeholder {{run_id}}",
			spec(daily, task("a", `"params":{"x":["ok","{{run_id}}"]}`))},
		{"outputs, not output", tasksPath + "[1].params.x", dag.CodeTemplate, "unknown placeholder {{tasks.up.outputs}}",
			spec("", up, task("a", `"depends_on":["up"]`, `"params":{"x":"{{tasks.up.outputs}}"}`))},
		{"bad path", tasksPath + "[1].params.x", dag.CodeTemplate, "a '.' in an output path must be followed by a member name",
			spec("", up, task("a", `"depends_on":["up"]`, `"params":{"x":"{{tasks.up.output.}}"}`))},
		{"bad index", tasksPath + "[1].params.x", dag.CodeTemplate, "a '[' in an output path must be followed by an array index",
			spec("", up, task("a", `"depends_on":["up"]`, `"params":{"x":"{{tasks.up.output[x]}}"}`))},
		{"path too deep", tasksPath + "[1].params.x", dag.CodeTemplate, "at most 32 steps",
			spec("", up, task("a", `"depends_on":["up"]`, `"params":{"x":"{{tasks.up.output`+deep+`}}"}`))},
		{"template too long", tasksPath + "[0].params.x", dag.CodeTooMany, "at most 4096 bytes",
			spec(daily, task("a", `"params":{"x":"`+long+`{{partition_key}}"}`))},
		{"too many placeholders", tasksPath + "[0].params", dag.CodeTooMany, "at most 64 placeholders in a task's params, got 65",
			spec(daily, task("a", `"params":{"x":"`+manyRefs+`"}`))},
		{"placeholder in a member name", tasksPath + `[0].params["{{partition_key}}"]`, dag.CodeTemplate, "not in member names",
			spec(daily, task("a", `"params":{"{{partition_key}}":1}`))},
		{"partition key unpartitioned", tasksPath + "[0].params.day", dag.CodeTemplate, "{{partition_key}}: the DAG has no partitioning",
			spec("", task("a", `"params":{"day":"{{partition_key}}"}`))},
		{"unknown task", tasksPath + "[0].params.x", dag.CodeUnknownTask, `{{tasks.ghost.output}}: unknown task "ghost"`,
			spec("", task("a", `"params":{"x":"{{tasks.ghost.output}}"}`))},
		{"not upstream", tasksPath + "[1].params.x", dag.CodeTemplate, `task "b" is not upstream of "c"`,
			spec("", task("a"), task("c", `"depends_on":["a"]`, `"params":{"x":"{{tasks.b.output}}"}`), task("b"))},
		{"own output", tasksPath + "[0].params.x", dag.CodeTemplate, `task "a" is not upstream of "a"`,
			spec("", task("a", `"params":{"x":"{{tasks.a.output}}"}`))},
	})
	// An ancestor two steps up may be read.
	require.Empty(t, dag.Validate(spec("", task("a"), task("b", `"depends_on":["a"]`),
		task("c", `"depends_on":["b"]`, `"params":{"x":"{{tasks.a.output}}"}`)), nil))
	// A literal "}}" is text.
	require.Empty(t, dag.Validate(spec("", task("a", `"params":{"x":"a }} b"}`)), nil))
}

func TestValidateChecks(t *testing.T) {
	t.Parallel()
	checks := func(list ...string) string { return `"checks":[` + strings.Join(list, ",") + `]` }
	c := func(name string) string { return `{"name":"` + name + `","type":"row_count"}` }
	runIssueCases(t, []issueCase{
		{"not an array", tasksPath + "[0].checks", dag.CodeSchemaMismatch, "expected array, got object", spec("", task("a", `"checks":{}`))},
		{"too many", tasksPath + "[0].checks", dag.CodeTooMany, "at most 20 checks, got 21",
			spec("", task("a", checks(repeat(dag.MaxChecks+1, func(i int) string { return c(fmt.Sprint("c", i)) })...)))},
		{"not an object", tasksPath + "[0].checks[0]", dag.CodeSchemaMismatch, "expected object, got number", spec("", task("a", checks("1")))},
		{"no name", tasksPath + "[0].checks[0].name", dag.CodeMissingField, "name is required", spec("", task("a", checks(`{"type":"x"}`)))},
		{"empty type", tasksPath + "[0].checks[0].type", dag.CodeInvalidValue, "type must not be empty", spec("", task("a", checks(`{"name":"n","type":""}`)))},
		{"type not a string", tasksPath + "[0].checks[0].type", dag.CodeSchemaMismatch, "expected string, got boolean", spec("", task("a", checks(`{"name":"n","type":true}`)))},
		{"repeated name", tasksPath + "[0].checks[1].name", dag.CodeDuplicate, `duplicate check name "n" (already at checks[0])`, spec("", task("a", checks(c("n"), c("n"))))},
	})
	// The injected validator sees each check with its path.
	var seen []string
	issues := dag.Validate(spec("", task("a", checks(c("x"), c("y")))), func(raw json.RawMessage, path string) []dag.Issue {
		seen = append(seen, path+" "+string(raw))
		return []dag.Issue{{Path: path + ".type", Code: "CHECK", Message: "no such check type"}}
	})
	require.Equal(t, []string{tasksPath + `[0].checks[0] {"name":"x","type":"row_count"}`, tasksPath + `[0].checks[1] {"name":"y","type":"row_count"}`}, seen)
	require.Len(t, issues, 2)
	require.Equal(t, "CHECK", issues[0].Code)
}

func TestValidateRetry(t *testing.T) {
	t.Parallel()
	r := func(body string) json.RawMessage { return spec("", task("a", `"retry":`+body)) }
	p := tasksPath + "[0].retry"
	runIssueCases(t, []issueCase{
		{"not an object", p, dag.CodeSchemaMismatch, "expected object, got number", r(`3`)},
		{"unknown", p + ".backoff_ms", dag.CodeUnknownField, `unknown field "backoff_ms"`, r(`{"max_attempts":2,"backoff_ms":1}`)},
		{"max_attempts missing", p + ".max_attempts", dag.CodeMissingField, "max_attempts is required", r(`{}`)},
		{"max_attempts zero", p + ".max_attempts", dag.CodeInvalidValue, "must be between 1 and 10, got 0", r(`{"max_attempts":0}`)},
		{"max_attempts fraction", p + ".max_attempts", dag.CodeSchemaMismatch, "expected integer, got 1.5", r(`{"max_attempts":1.5}`)},
		{"max_attempts string", p + ".max_attempts", dag.CodeSchemaMismatch, "expected number, got string", r(`{"max_attempts":"3"}`)},
		{"delay too long", p + ".max_delay_ms", dag.CodeInvalidValue, "between 0 and 86400000", r(`{"max_attempts":2,"max_delay_ms":86400001}`)},
		{"multiplier", p + ".backoff_multiplier", dag.CodeInvalidValue, "between 1 and 10, got 0.5", r(`{"max_attempts":2,"backoff_multiplier":0.5}`)},
		{"non-retryable not GTS", p + ".non_retryable_errors[0]", dag.CodeInvalidValue, "must be a GTS type id", r(`{"max_attempts":2,"non_retryable_errors":["oops"]}`)},
	})
}

func TestValidatePartitioning(t *testing.T) {
	t.Parallel()
	p := dag.Root + ".spec.partitioning"
	s := func(part string) json.RawMessage { return spec(part, task("a")) }
	keys := strings.Join(repeat(dag.MaxStaticKeys+1, func(i int) string { return fmt.Sprintf(`"k%d"`, i) }), ",")
	runIssueCases(t, []issueCase{
		{"not an object", p, dag.CodeSchemaMismatch, "expected object, got string", s(`"daily"`)},
		{"unknown", p + ".end", dag.CodeUnknownField, `unknown field "end"`, s(`{"type":"daily","start":"2026-01-01","end":"2026-02-01"}`)},
		{"type missing", p + ".type", dag.CodeMissingField, "type is required", s(`{"start":"2026-01-01"}`)},
		{"type other", p + ".type", dag.CodeInvalidValue, `type must be "daily", "hourly" or "static", got "weekly"`, s(`{"type":"weekly"}`)},
		{"start missing", p + ".start", dag.CodeMissingField, "a daily partitioning needs a start (YYYY-MM-DD)", s(`{"type":"daily"}`)},
		{"start bad", p + ".start", dag.CodeInvalidValue, `"2026-1-1" is not a daily partition key (YYYY-MM-DD in UTC)`, s(`{"type":"daily","start":"2026-1-1"}`)},
		{"hourly start a day", p + ".start", dag.CodeInvalidValue, `"2026-01-01" is not a hourly partition key (YYYY-MM-DDTHH in UTC)`, s(`{"type":"hourly","start":"2026-01-01"}`)},
		{"hourly start skipped by DST", p + ".start", dag.CodeInvalidValue, "is not a hourly partition key",
			s(`{"type":"hourly","start":"2026-03-08T02","timezone":"America/New_York"}`)},
		{"timezone unknown", p + ".timezone", dag.CodeInvalidValue, `unknown time zone "Mars/Olympus"`, s(`{"type":"daily","start":"2026-01-01","timezone":"Mars/Olympus"}`)},
		{"keys on daily", p + ".keys", dag.CodeInvalidValue, "keys are for a static partitioning", s(`{"type":"daily","start":"2026-01-01","keys":["a"]}`)},
		{"static without keys", p + ".keys", dag.CodeMissingField, "at least one key", s(`{"type":"static"}`)},
		{"static with start", p + ".start", dag.CodeInvalidValue, "start is for a daily or hourly partitioning", s(`{"type":"static","start":"x","keys":["a"]}`)},
		{"static key repeated", p + ".keys[1]", dag.CodeDuplicate, `duplicate key "eu" (already keys[0])`, s(`{"type":"static","keys":["eu","eu"]}`)},
		{"static key bad", p + ".keys[0]", dag.CodeInvalidValue, `key "e u" must be 1 to 128`, s(`{"type":"static","keys":["e u"]}`)},
		{"static key too long", p + ".keys[0]", dag.CodeInvalidValue, "must be 1 to 128", s(`{"type":"static","keys":["` + strings.Repeat("k", 129) + `"]}`)},
		{"static too many keys", p + ".keys", dag.CodeTooMany, "at most 10000 entries, got 10001", s(`{"type":"static","keys":[` + keys + `]}`)},
	})
}

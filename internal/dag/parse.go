package dag

import (
	"encoding/json"
	"regexp"
	"sort"
)

var (
	idRE        = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)
	assetKeyRE  = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
	staticKeyRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)
)

// Decode reads implementation.workflow_spec (raw) and validates it: the spec, and every issue
// found, sorted by path (none: the spec is valid). checks validates each quality check (nil:
// [BasicChecks]). Beyond the shape of each member it checks the graph: unique, well-formed task
// ids; depends_on naming tasks of the DAG; no cycle (reported in order, "a -> b -> a"); templates
// that name only partition_key and the outputs of upstream tasks; unique asset keys; and every
// bound (MaxTasks, MaxDependsOn, ...).
func Decode(raw json.RawMessage, checks CheckFunc) (WorkflowSpec, []Issue) {
	if checks == nil {
		checks = BasicChecks
	}
	var w walker
	v, err := decodeValue(raw)
	if err != nil {
		w.add(Root, CodeSchemaMismatch, "malformed JSON: %v", err)
		return WorkflowSpec{}, w.issues
	}
	ws := w.workflowSpec(v, checks)
	w.issues = append(w.issues, graphIssues(ws.Spec)...)
	return ws, sortIssues(w.issues)
}

// Validate is the issues of [Decode].
func Validate(raw json.RawMessage, checks CheckFunc) []Issue {
	_, issues := Decode(raw, checks)
	return issues
}

// BasicChecks is the minimum a quality check must be: an object with a string name and a string
// type (the quality framework checks the rest).
func BasicChecks(raw json.RawMessage, path string) []Issue {
	var w walker
	v, err := decodeValue(raw)
	if err != nil {
		w.add(path, CodeSchemaMismatch, "malformed JSON: %v", err)
		return w.issues
	}
	m, ok := v.(map[string]any)
	if !ok {
		w.add(path, CodeSchemaMismatch, "invalid type: expected object, got %s", typeName(v))
		return w.issues
	}
	for _, k := range []string{"name", "type"} {
		if s := w.str(m, k, path, true); s == "" && m[k] == "" {
			w.add(child(path, k), CodeInvalidValue, "%s must not be empty", k)
		}
	}
	return w.issues
}

func (w *walker) workflowSpec(v any, checks CheckFunc) WorkflowSpec {
	var ws WorkflowSpec
	m, ok := w.object(v, Root, "format", "spec")
	if !ok {
		return ws
	}
	ws.Format = w.str(m, "format", Root, true)
	if _, present := m["format"]; present && ws.Format != Format && typeName(m["format"]) == "string" {
		w.add(Root+".format", CodeInvalidValue, "format must be %q, got %q", Format, ws.Format)
	}
	sv, present := m["spec"]
	if !present {
		w.add(Root+".spec", CodeMissingField, "spec is required")
		return ws
	}
	path := Root + ".spec"
	sm, ok := w.object(sv, path, "partitioning", "tasks")
	if !ok {
		return ws
	}
	if pv, present := sm["partitioning"]; present {
		ws.Spec.Partitioning = w.partitioning(pv, path+".partitioning")
	}
	ws.Spec.Tasks = w.tasks(sm, path, checks)
	return ws
}

// tasks reads spec.tasks: 1 to MaxTasks objects.
func (w *walker) tasks(sm map[string]any, path string, checks CheckFunc) []Task {
	tv, present := sm["tasks"]
	path += ".tasks"
	if !present {
		w.add(path, CodeMissingField, "tasks is required")
		return nil
	}
	list, ok := tv.([]any)
	switch {
	case !ok:
		w.add(path, CodeSchemaMismatch, "invalid type: expected array, got %s", typeName(tv))
		return nil
	case len(list) == 0:
		w.add(path, CodeInvalidValue, "a DAG needs at least one task")
		return nil
	case len(list) > MaxTasks:
		w.add(path, CodeTooMany, "at most %d tasks, got %d", MaxTasks, len(list))
		return nil
	}
	out := make([]Task, len(list))
	for i, x := range list {
		out[i] = w.task(x, index(path, i), checks)
	}
	return out
}

// taskFields are the members of a task.
var taskFields = []string{"id", "entrypoint_id", "depends_on", "params", "checks", "quarantine_enabled", "retry", "asset_key"}

// task reads one task and checks the members that need no other task.
func (w *walker) task(v any, path string, checks CheckFunc) Task {
	var t Task
	m, ok := w.object(v, path, taskFields...)
	if !ok {
		return t
	}
	t.ID = w.str(m, "id", path, true)
	if _, isStr := m["id"].(string); isStr && !validID(t.ID) {
		w.add(path+".id", CodeInvalidValue, "task id %q must be a letter, then letters, digits, '_' or '-' (at most %d bytes)", t.ID, MaxIDBytes)
	}
	t.EntrypointID = w.str(m, "entrypoint_id", path, true)
	if _, isStr := m["entrypoint_id"].(string); isStr && t.EntrypointID == "" {
		w.add(path+".entrypoint_id", CodeInvalidValue, "entrypoint_id must not be empty")
	}
	t.DependsOn = w.strings(m, "depends_on", path, MaxDependsOn)
	t.Params = w.params(m, path)
	t.Checks = w.checks(m, path, checks)
	t.QuarantineEnabled = w.boolean(m, "quarantine_enabled", path)
	if rv, present := m["retry"]; present {
		t.Retry = w.retry(rv, path+".retry")
	}
	t.AssetKey = w.str(m, "asset_key", path, false)
	if _, isStr := m["asset_key"].(string); isStr && (len(t.AssetKey) > MaxAssetKeyBytes || !assetKeyRE.MatchString(t.AssetKey)) {
		w.add(path+".asset_key", CodeInvalidValue, "asset_key %q must be segments of letters, digits, '_' or '-' joined by '.' (at most %d bytes)", t.AssetKey, MaxAssetKeyBytes)
	}
	if t.QuarantineEnabled && t.AssetKey == "" {
		w.add(path+".quarantine_enabled", CodeInvalidValue, "quarantine needs an asset_key: a quarantined output is a materialization of the task's asset")
	}
	return t
}

func validID(id string) bool { return len(id) <= MaxIDBytes && idRE.MatchString(id) }

// params reads a task's params: an object (default {}) of at most MaxParamsBytes whose templates
// parse (template.go).
func (w *walker) params(m map[string]any, path string) json.RawMessage {
	v, present := m["params"]
	if !present {
		return json.RawMessage(`{}`)
	}
	path += ".params"
	if _, ok := v.(map[string]any); !ok {
		w.add(path, CodeSchemaMismatch, "invalid type: expected object, got %s", typeName(v))
		return nil
	}
	b := raw(v)
	if len(b) > MaxParamsBytes {
		w.add(path, CodeTooMany, "params are %d bytes encoded, more than %d", len(b), MaxParamsBytes)
		return nil
	}
	n := 0
	walkStrings(v, path, func(p, s string, key bool) {
		n += w.template(p, s, key)
	})
	if n > MaxPlaceholders {
		w.add(path, CodeTooMany, "at most %d placeholders in a task's params, got %d", MaxPlaceholders, n)
	}
	return b
}

// template checks one string of params and returns how many placeholders it holds.
func (w *walker) template(path, s string, key bool) int {
	tpl, err := parseTemplate(s)
	switch {
	case err != nil:
		w.add(path, CodeTemplate, "%v", err)
		return 0
	case len(tpl.refs()) == 0:
		return 0
	case key:
		w.add(path, CodeTemplate, "placeholders are allowed in string values only, not in member names")
	case len(s) > MaxTemplateBytes:
		w.add(path, CodeTooMany, "a string with placeholders may be at most %d bytes, got %d", MaxTemplateBytes, len(s))
	}
	return len(tpl.refs())
}

// checks reads a task's checks: at most MaxChecks, each validated by fn, names unique.
func (w *walker) checks(m map[string]any, path string, fn CheckFunc) []json.RawMessage {
	v, present := m["checks"]
	if !present {
		return nil
	}
	path += ".checks"
	list, ok := v.([]any)
	switch {
	case !ok:
		w.add(path, CodeSchemaMismatch, "invalid type: expected array, got %s", typeName(v))
		return nil
	case len(list) > MaxChecks:
		w.add(path, CodeTooMany, "at most %d checks, got %d", MaxChecks, len(list))
		return nil
	}
	out := make([]json.RawMessage, len(list))
	names := map[string]int{}
	for i, c := range list {
		p := index(path, i)
		out[i] = raw(c)
		w.issues = append(w.issues, fn(out[i], p)...)
		cm, _ := c.(map[string]any)
		name, _ := cm["name"].(string)
		if j, dup := names[name]; dup && name != "" {
			w.add(p+".name", CodeDuplicate, "duplicate check name %q (already at checks[%d])", name, j)
		} else {
			names[name] = i
		}
	}
	return out
}

// retry reads a task's retry policy.
func (w *walker) retry(v any, path string) *Retry {
	m, ok := w.object(v, path, "max_attempts", "initial_delay_ms", "max_delay_ms", "backoff_multiplier", "non_retryable_errors")
	if !ok {
		return nil
	}
	var r Retry
	if f, ok := w.number(m, "max_attempts", path, 1, 10, true); ok {
		r.MaxAttempts = int(f)
	} else if _, present := m["max_attempts"]; !present {
		w.add(path+".max_attempts", CodeMissingField, "max_attempts is required")
	}
	const maxDelay = 86400000
	for _, k := range []string{"initial_delay_ms", "max_delay_ms"} {
		if f, ok := w.number(m, k, path, 0, maxDelay, true); ok {
			n := int64(f)
			if k == "initial_delay_ms" {
				r.InitialDelayMS = &n
			} else {
				r.MaxDelayMS = &n
			}
		}
	}
	if f, ok := w.number(m, "backoff_multiplier", path, 1, 10, false); ok {
		r.BackoffMultiplier = &f
	}
	r.NonRetryableErrors = w.strings(m, "non_retryable_errors", path, 100)
	for i, e := range r.NonRetryableErrors {
		if len(e) < 4 || e[:4] != "gts." {
			w.add(index(path+".non_retryable_errors", i), CodeInvalidValue, "error type must be a GTS type id (starting with 'gts.'), got %q", e)
		}
	}
	return &r
}

// walkStrings calls fn for every string in v, member names included (key true), with its path.
func walkStrings(v any, path string, fn func(path, s string, key bool)) {
	switch x := v.(type) {
	case string:
		fn(path, x, false)
	case []any:
		for i, e := range x {
			walkStrings(e, index(path, i), fn)
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			fn(child(path, k), k, true)
			walkStrings(x[k], child(path, k), fn)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

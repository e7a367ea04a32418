// Package sandbox holds Lark's Starlark dialect: the file options, the
// table of r_* runtime helpers, the set of predeclared names and the static
// checks run when a function or workflow is registered (see
// STARLARK_RUNTIME.md, "Validation at registration"); and the executor of
// functions: Compile and Cache turn sources into Programs, Run executes a
// Program's main(ctx, input) within CPU, memory and time limits, with every
// side effect going through a Host.
//
// The executor shares FileOptions, Helpers and PredeclaredNames with Check,
// so that what passes registration is exactly what the runtime accepts
// (RuntimePredeclaredNames is the subset functions may use at run time).
// Memory limits rely on the patched interpreter in third_party/go.starlark.net
// (see its PATCHES.md).
package sandbox

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"
)

// MaxSourceBytes is the largest source file Check accepts.
const MaxSourceBytes = 256 << 10

// DefaultHelperTimeout is the timeout an I/O helper uses when it is called
// without timeout_ms.
const DefaultHelperTimeout = 30 * time.Second

// FileOptions is the single source of truth for the dialect Lark runs:
// while loops and top-level if/for/while are allowed, top-level names may
// not be reassigned, recursion and the set built-in are allowed.
// It returns a new value on every call, so callers may not affect each other.
func FileOptions() *syntax.FileOptions {
	return &syntax.FileOptions{
		While:           true,
		TopLevelControl: true,
		GlobalReassign:  false,
		Recursion:       true,
		Set:             true,
	}
}

// HelperSpec describes one r_* runtime helper.
type HelperSpec struct {
	Name string
	// MinArgs is the number of required parameters; MaxArgs the number of
	// parameters that may be given positionally (all of them, for every
	// current helper).
	MinArgs, MaxArgs int
	// Params are the parameter names in order, as usable by keyword.
	Params []string
	// Defaults holds the Starlark source text of the default value of each
	// optional parameter, aligned with Params[MinArgs:]. It is for messages
	// and documentation; the executor owns the actual default values.
	Defaults []string
	// WorkflowOnly helpers are rejected in functions.
	WorkflowOnly bool
	// IO helpers take timeout_ms and do I/O or wait.
	IO bool
	// Feature is the detected-feature name reported when the helper is used.
	Feature string
	// Unavailable, when not empty, says why the helper cannot be used yet: Check refuses it with
	// this reason, and no execution has it.
	Unavailable string
}

// Signature renders the helper's signature, e.g.
// "r_http_get_v1(url, headers=None, timeout_ms=None, retry=None, exit_on_http_error=True)".
func (h HelperSpec) Signature() string {
	var b strings.Builder
	b.WriteString(h.Name)
	b.WriteByte('(')
	for i, p := range h.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p)
		if j := i - h.MinArgs; j >= 0 && j < len(h.Defaults) {
			b.WriteByte('=')
			b.WriteString(h.Defaults[j])
		}
	}
	b.WriteByte(')')
	return b.String()
}

// Feature names reported in Report.Features.
const (
	FeatureHTTPClient         = "http_client"
	FeatureDurableTimer       = "durable_timer"
	FeatureClock              = "clock"
	FeatureRandomness         = "randomness"
	FeatureExit               = "exit"
	FeatureAwait              = "await"
	FeatureEventWait          = "event_wait"
	FeatureSnapshot           = "snapshot"
	FeatureContinueAsNew      = "continue_as_new"
	FeatureSteps              = "steps"
	FeatureInternalInvoke     = "internal_invoke"
	FeatureEventEmit          = "event_emit"
	FeatureWorkflowPrimitives = "workflow_primitives"
)

// helperTable is the table of STARLARK_RUNTIME.md, in the order of its text, then Lark's extensions.
var helperTable = []HelperSpec{
	{Name: "r_await", MinArgs: 1, MaxArgs: 1, Params: []string{"promise"}, Feature: FeatureAwait},
	{Name: "r_await_all", MinArgs: 1, MaxArgs: 1, Params: []string{"promises"}, Feature: FeatureAwait},
	{
		Name: "r_http_get_v1", MinArgs: 1, MaxArgs: 5,
		Params:   []string{"url", "headers", "timeout_ms", "retry", "exit_on_http_error"},
		Defaults: []string{"None", "None", "None", "True"},
		IO:       true, Feature: FeatureHTTPClient,
	},
	{
		Name: "r_http_post_v1", MinArgs: 2, MaxArgs: 6,
		Params:   []string{"url", "body", "headers", "timeout_ms", "retry", "exit_on_http_error"},
		Defaults: []string{"None", "None", "None", "True"},
		IO:       true, Feature: FeatureHTTPClient,
	},
	{Name: "r_sleep", MinArgs: 1, MaxArgs: 1, Params: []string{"milliseconds"}, WorkflowOnly: true, Feature: FeatureDurableTimer},
	{Name: "r_sleep_v1", MinArgs: 1, MaxArgs: 1, Params: []string{"milliseconds"}, WorkflowOnly: true, Feature: FeatureDurableTimer},
	{Name: "r_now_v1", MinArgs: 0, MaxArgs: 0, Params: []string{}, Feature: FeatureClock},
	{Name: "r_rand_v1", MinArgs: 0, MaxArgs: 1, Params: []string{"label"}, Defaults: []string{"None"}, Feature: FeatureRandomness},
	{Name: "r_exit", MinArgs: 1, MaxArgs: 1, Params: []string{"error"}, Feature: FeatureExit},
	{
		Name: "r_wait_event_v1", MinArgs: 1, MaxArgs: 4,
		Params:       []string{"event_type_id", "event_filter_query", "timeout_ms", "exit_on_error"},
		Defaults:     []string{"None", "None", "True"},
		WorkflowOnly: true, IO: true, Feature: FeatureEventWait,
	},
	{
		Name: "r_snapshot_v1", MinArgs: 0, MaxArgs: 1, Params: []string{"label"}, Defaults: []string{"None"},
		WorkflowOnly: true, Feature: FeatureSnapshot,
	},
	{
		Name: "r_step_v1", MinArgs: 2, MaxArgs: 3,
		Params: []string{"name", "fn", "compensate_fn"}, Defaults: []string{"None"},
		WorkflowOnly: true, Feature: FeatureSteps,
	},
	{
		Name: "r_run_step_v1", MinArgs: 3, MaxArgs: 4,
		Params: []string{"step_name", "fn", "input", "exit_on_error"}, Defaults: []string{"True"},
		WorkflowOnly: true, Feature: FeatureSteps,
	},
	{
		Name: "r_invoke_v1", MinArgs: 1, MaxArgs: 3,
		Params: []string{"entrypoint_id", "params", "timeout_ms"}, Defaults: []string{"{}", "None"},
		IO: true, Feature: FeatureInternalInvoke,
	},
	{
		Name: "r_emit_v1", MinArgs: 2, MaxArgs: 2, Params: []string{"event_type_id", "payload"}, Feature: FeatureEventEmit,
	},
	// Lark's extension (003 §6 continue-as-new; not in STARLARK_RUNTIME.md's table).
	{
		Name: "r_continue_as_new_v1", MinArgs: 0, MaxArgs: 1, Params: []string{"input"}, Defaults: []string{"None"},
		WorkflowOnly: true, Feature: FeatureContinueAsNew,
	},
}

// extraPredeclared are the non-helper, non-universe globals the executor provides.
var extraPredeclared = []string{"struct", "json", "math"}

type nameTables struct {
	helpers     map[string]int // name -> index in helperTable
	helperNames []string       // sorted
	predeclared map[string]bool
	predNames   []string // sorted
}

var tables = sync.OnceValue(func() (t nameTables) {
	t.helpers = make(map[string]int, len(helperTable))
	t.predeclared = make(map[string]bool)
	for i, h := range helperTable {
		t.helpers[h.Name] = i
		t.helperNames = append(t.helperNames, h.Name)
		t.predeclared[h.Name] = true
	}
	sort.Strings(t.helperNames)
	for name := range starlark.Universe {
		t.predeclared[name] = true
	}
	for _, name := range extraPredeclared {
		t.predeclared[name] = true
	}
	for name := range t.predeclared {
		t.predNames = append(t.predNames, name)
	}
	sort.Strings(t.predNames)
	return t
})

func cloneSpec(h HelperSpec) HelperSpec {
	h.Params = slices.Clone(h.Params)
	h.Defaults = slices.Clone(h.Defaults)
	if h.Params == nil {
		h.Params = []string{}
	}
	return h
}

// Helpers returns every r_* helper of STARLARK_RUNTIME.md, in the order of
// its table. The result is a fresh copy.
func Helpers() []HelperSpec {
	out := make([]HelperSpec, len(helperTable))
	for i, h := range helperTable {
		out[i] = cloneSpec(h)
	}
	return out
}

// LookupHelper returns the helper with the given name.
func LookupHelper(name string) (HelperSpec, bool) {
	i, ok := tables().helpers[name]
	if !ok {
		return HelperSpec{}, false
	}
	return cloneSpec(helperTable[i]), true
}

// HelperNames returns the helper names, sorted.
func HelperNames() []string { return slices.Clone(tables().helperNames) }

// PredeclaredNames returns, sorted, the globals user code may reference: the
// Starlark universe, struct, json, math and every helper.
func PredeclaredNames() []string { return slices.Clone(tables().predNames) }

// IsPredeclared reports whether name is one of PredeclaredNames.
func IsPredeclared(name string) bool { return tables().predeclared[name] }

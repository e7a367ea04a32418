// Package dag is the declarative side of a DAG entrypoint (004's asset workflows, reached through
// 000's implementation.kind "workflow_spec" with format "dag"): the types of its spec, their
// validation with JSON paths, the partition keys of its partitioning, the templates of its task
// params, and the deterministic plan of one run with its fingerprint (004 §15).
//
// It is pure: no store, no service, no clock. What it cannot know it is given: whether a task's
// entrypoint exists and which version it pins ([Plan]'s resolve), and what a valid quality check
// is ([CheckFunc]). Running a plan is the business of the engine above it.
package dag

import "encoding/json"

// Format is the only workflow_spec.format this package reads.
const Format = "dag"

// Root is the JSON path of a DAG's workflow spec inside a registration body: every [Issue] path
// starts with it.
const Root = "$.implementation.workflow_spec"

// Bounds of a spec. A registration over any of them is refused with the path of the excess; they
// keep validation, planning and a plan's fingerprint cheap whatever the body holds.
const (
	// MaxTasks is the most tasks a DAG may have.
	MaxTasks = 500
	// MaxDependsOn is the most entries a task's depends_on may have.
	MaxDependsOn = 50
	// MaxChecks is the most quality checks a task may declare.
	MaxChecks = 20
	// MaxParamsBytes bounds a task's params, encoded as JSON.
	MaxParamsBytes = 64 << 10
	// MaxTemplateBytes bounds a string that holds a placeholder.
	MaxTemplateBytes = 4096
	// MaxPlaceholders bounds the placeholders of one task's params.
	MaxPlaceholders = 64
	// MaxOutputPath bounds the steps of one output path (".rows", "[0]", ...).
	MaxOutputPath = 32
	// MaxIDBytes bounds a task id.
	MaxIDBytes = 64
	// MaxAssetKeyBytes bounds an asset key.
	MaxAssetKeyBytes = 255
	// MaxStaticKeys bounds the keys of a static partitioning.
	MaxStaticKeys = 10000
	// MaxStaticKeyBytes bounds one static partition key.
	MaxStaticKeyBytes = 128
	// MaxRangeKeys bounds the partitions [Partitioning.Keys] returns for one range (as a backfill
	// bounds its instants).
	MaxRangeKeys = 100000
)

// WorkflowSpec is implementation.workflow_spec of a DAG entrypoint.
type WorkflowSpec struct {
	// Format is always "dag" ([Format]).
	Format string `json:"format"`
	// Spec is the DAG itself.
	Spec Spec `json:"spec"`
}

// Spec is workflow_spec.spec: the tasks and how the data they produce is partitioned.
type Spec struct {
	// Partitioning, when set, makes every run of the DAG a run for one partition key (a day, an
	// hour or a declared key), which its tasks see as {{partition_key}}. nil: unpartitioned.
	Partitioning *Partitioning `json:"partitioning,omitempty"`
	// Tasks are the nodes of the graph: 1 to MaxTasks, each id unique. Their order does not
	// matter; a plan orders them.
	Tasks []Task `json:"tasks"`
}

// Task is one node of a DAG: a function run as a child invocation with templated params.
type Task struct {
	// ID names the task within the DAG: a letter, then letters, digits, '_' or '-' (at most
	// MaxIDBytes). Other tasks name it in depends_on and in {{tasks.<id>.output...}}.
	ID string `json:"id"`
	// EntrypointID is the function the task runs: a GTS id (exact, or major-only for the latest
	// active minor, pinned when a run is planned) or an opaque ep_ id, visible to whoever registers
	// the DAG, active or deprecated. A task cannot be a workflow or another DAG (not in this version).
	EntrypointID string `json:"entrypoint_id"`
	// DependsOn lists the tasks that must succeed before this one starts (at most MaxDependsOn, no
	// repeats). The graph they draw must be acyclic.
	DependsOn []string `json:"depends_on,omitempty"`
	// Params is the JSON object the task's function is invoked with (default {}). Its string values
	// may hold placeholders (template.go): {{partition_key}} and {{tasks.<id>.output<path>}} of an
	// upstream task (one this task depends on, directly or not).
	Params json.RawMessage `json:"params,omitempty"`
	// Checks are the quality checks run on the task's output (004 §6); each is an object with at
	// least a string name (unique within the task) and a string type. Their other members are the
	// quality checker's business ([CheckFunc]).
	Checks []json.RawMessage `json:"checks,omitempty"`
	// QuarantineEnabled: when a CRITICAL check fails, the output is quarantined (kept, never
	// promoted, awaiting approval) and dependents read the previous good one, instead of the task
	// failing. It needs an asset_key.
	QuarantineEnabled bool `json:"quarantine_enabled,omitempty"`
	// Retry, when set, replaces the function's traits.retry for the task's attempts.
	Retry *Retry `json:"retry,omitempty"`
	// AssetKey names the asset the task's output materializes ("sales.clean": segments of letters,
	// digits, '_' or '-' joined by '.', at most MaxAssetKeyBytes), unique within the DAG. Empty: the
	// output is passed to dependents but not kept as an asset.
	AssetKey string `json:"asset_key,omitempty"`
}

// Retry is a task's retry policy, with the names and meaning of 000's traits.retry.
type Retry struct {
	// MaxAttempts is the number of attempts in total, 1 to 10 (required).
	MaxAttempts int `json:"max_attempts"`
	// InitialDelayMS is the delay before the second attempt, 0 to 86,400,000 (default 200).
	InitialDelayMS *int64 `json:"initial_delay_ms,omitempty"`
	// MaxDelayMS caps the delay between attempts, 0 to 86,400,000 (default 10,000).
	MaxDelayMS *int64 `json:"max_delay_ms,omitempty"`
	// BackoffMultiplier multiplies the delay after each attempt, 1 to 10 (default 2).
	BackoffMultiplier *float64 `json:"backoff_multiplier,omitempty"`
	// NonRetryableErrors are GTS error types that fail the task at once.
	NonRetryableErrors []string `json:"non_retryable_errors,omitempty"`
}

// Partitioning types.
const (
	// Daily partitions are local calendar days of the time zone, keyed YYYY-MM-DD.
	Daily = "daily"
	// Hourly partitions are local wall-clock hours of the time zone, keyed YYYY-MM-DDTHH.
	Hourly = "hourly"
	// Static partitions are the declared keys, in their order.
	Static = "static"
)

// Partitioning is spec.partitioning: how a DAG's runs are split.
type Partitioning struct {
	// Type is Daily, Hourly or Static.
	Type string `json:"type"`
	// Start is the first partition of a daily (YYYY-MM-DD) or hourly (YYYY-MM-DDTHH) partitioning;
	// required for those, absent for static.
	Start string `json:"start,omitempty"`
	// Timezone is the IANA time zone whose calendar the daily and hourly keys follow (default UTC);
	// absent for static.
	Timezone string `json:"timezone,omitempty"`
	// Declared (keys) are the partitions of a static partitioning, in order: 1 to MaxStaticKeys
	// distinct keys of letters, digits, '_', '-', '.' or ':' (at most MaxStaticKeyBytes each);
	// absent otherwise.
	Declared []string `json:"keys,omitempty"`
}

// Issue is one thing wrong with a spec: where (a JSON path starting with [Root]), a code and a
// message. Codes are those of registration's validation report.
type Issue struct {
	Path    string `json:"path"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Issue codes.
const (
	CodeMissingField   = "MISSING_FIELD"
	CodeUnknownField   = "UNKNOWN_FIELD"
	CodeSchemaMismatch = "SCHEMA_MISMATCH"
	CodeInvalidValue   = "INVALID_VALUE"
	CodeDuplicate      = "DUPLICATE"
	CodeUnknownTask    = "UNKNOWN_TASK"
	CodeCycle          = "CYCLE"
	CodeTemplate       = "INVALID_TEMPLATE"
	CodeTooMany        = "LIMIT_EXCEEDED"
)

// CheckFunc validates one quality check (raw is the check's JSON, path where it is) and returns
// what is wrong with it. The quality framework supplies it; [BasicChecks] is the minimum.
type CheckFunc func(raw json.RawMessage, path string) []Issue

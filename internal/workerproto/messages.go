package workerproto

import "encoding/json"

// Paths of the worker route group, under the API base path /api/serverless-runtime/v1.
const (
	PathPoll      = "/workers/poll"
	PathHeartbeat = "/workers/heartbeat"
	// PathResult is the result callback of one task; {task_id} is Task.ID.
	PathResult = "/workers/tasks/{task_id}/result"
	// PathSecret resolves one {{secret:NAME}} reference of a task's outbound request; {task_id}
	// is Task.ID. Only the worker the task is assigned to, under the task's lease, gets an answer.
	PathSecret = "/workers/tasks/{task_id}/secret"
)

// Bounds of the protocol.
const (
	// MaxBodyBytes bounds every request and answer body of the worker routes.
	MaxBodyBytes = 8 << 20
	// MaxTasksPerPoll bounds PollRequest.MaxTasks.
	MaxTasksPerPoll = 64
	// MaxTasksPerHeartbeat bounds Heartbeat.Tasks.
	MaxTasksPerHeartbeat = 1024
	// MaxWaitMS bounds PollRequest.WaitMS (the long poll).
	MaxWaitMS = 60_000
	// MaxDefinitions bounds PollRequest.Definitions.
	MaxDefinitions = 1024
)

// PollRequest is the body of a poll: worker WorkerID asks for up to MaxTasks tasks, waiting up to
// WaitMS for the first. Entrypoints lists the GTS ids of adapter_ref entrypoints it implements
// itself (their implementation.adapter_ref.definition_id); Starlark says whether it runs Starlark
// functions.
type PollRequest struct {
	WorkerID    string   `json:"worker_id"`
	MaxTasks    int      `json:"max_tasks"`
	WaitMS      int64    `json:"wait_ms"`
	Starlark    bool     `json:"starlark"`
	Definitions []string `json:"definitions,omitempty"`
	// Concurrency (the most tasks the worker runs at once) and Version (what it runs, at most 128
	// bytes) are optional: GET /workers shows them. Servers older than these members refuse them,
	// so a worker sends them only to servers that know them.
	Concurrency int    `json:"concurrency,omitempty"`
	Version     string `json:"version,omitempty"`
}

// PollReply is the body of a poll's answer: the tasks given to the worker (none when the wait
// ended first) and the heartbeat interval and timeout it must keep.
type PollReply struct {
	Tasks               []Task `json:"tasks"`
	HeartbeatIntervalMS int64  `json:"heartbeat_interval_ms"`
	HeartbeatTimeoutMS  int64  `json:"heartbeat_timeout_ms"`
}

// Limits are an attempt's limits.
type Limits struct {
	TimeoutMS       int64   `json:"timeout_ms"`
	CPU             float64 `json:"cpu"`
	MemoryMB        int     `json:"memory_mb"`
	MaxPayloadBytes int64   `json:"max_payload_bytes"`
}

// Task is one claimed attempt, as data: the invocation record as the claim left it, the pinned
// version's implementation (Source for Starlark, DefinitionID for a worker-provided one), its limits
// and returns schema, and where to post the result. LeaseOwner and LeaseExpiresAt are the claim's
// lease; the result must name the same owner.
type Task struct {
	ID             string          `json:"task_id"`
	TenantID       string          `json:"tenant_id"`
	InvocationID   string          `json:"invocation_id"`
	EntrypointID   string          `json:"entrypoint_id"`
	Kind           string          `json:"kind"` // "starlark" or "adapter_ref"
	Record         json.RawMessage `json:"record"`
	Params         json.RawMessage `json:"params"`
	Source         string          `json:"source,omitempty"`
	DefinitionID   string          `json:"definition_id,omitempty"`
	Limits         Limits          `json:"limits"`
	Retry          json.RawMessage `json:"retry,omitempty"`
	Returns        json.RawMessage `json:"returns,omitempty"`
	LeaseOwner     string          `json:"lease_owner"`
	LeaseExpiresAt string          `json:"lease_expires_at"`
	ResultPath     string          `json:"result_path"`
	// AllowedOutboundDomains is the tenant policy's allowed_outbound_domains at claim time: the
	// worker's r_http_* calls go through the same egress rules as the server's (an empty list
	// allows nothing).
	AllowedOutboundDomains []string `json:"allowed_outbound_domains"`
	// SecretPath is where the worker resolves the task's secret references (PathSecret).
	SecretPath string `json:"secret_path"`
	// TraceParent and TraceState are the W3C trace context of the attempt's span on the server
	// (004 §9.2): the worker's span of the task (worker.execute) is its child, and the task's
	// outbound requests continue the trace. Empty when the server has none.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// SecretRequest is the body of a secret resolution: worker WorkerID, running task TaskID under
// the lease of LeaseOwner, asks for the tenant's secret Name.
type SecretRequest struct {
	TaskID     string `json:"task_id"`
	WorkerID   string `json:"worker_id"`
	LeaseOwner string `json:"lease_owner"`
	Name       string `json:"name"`
}

// SecretReply answers a secret resolution: the value and the host patterns it may be sent to.
// It travels only in a signed answer to the assigned worker; the worker keeps it in memory for
// the one request and never logs it.
type SecretReply struct {
	Value        string   `json:"value"`
	AllowedHosts []string `json:"allowed_hosts"`
}

// Task kinds.
const (
	KindStarlark   = "starlark"
	KindAdapterRef = "adapter_ref"
)

// Heartbeat is the body of a heartbeat: the tasks worker WorkerID is running.
type Heartbeat struct {
	WorkerID string   `json:"worker_id"`
	Tasks    []string `json:"tasks"`
}

// HeartbeatReply answers a heartbeat: Cancel lists the tasks to stop (canceled invocations:
// stop, post the result anyway; it is recorded as a late result), Unknown those the server no
// longer knows (their lease moved: stop and drop them).
type HeartbeatReply struct {
	Cancel  []string `json:"cancel"`
	Unknown []string `json:"unknown"`
}

// Error is an attempt's error: 000's error envelope fields.
type Error struct {
	TypeID   string         `json:"type_id"`
	Category string         `json:"category"`
	Message  string         `json:"message"`
	Details  map[string]any `json:"details,omitempty"`
}

// Error implements error: "<type id>: <message>".
func (e *Error) Error() string { return e.TypeID + ": " + e.Message }

// The error types and categories a worker reports on its own (000's error family; package
// sandbox has the full list).
const (
	ErrRuntime = "gts.x.core.serverless.err.v1~x.core.serverless.err.runtime.v1~"
	ErrTimeout = "gts.x.core.serverless.err.v1~x.core.serverless.err.timeout.v1~"

	CategoryRetryable    = "retryable"
	CategoryNonRetryable = "non_retryable"
	CategoryTimeout      = "timeout"
)

// Result is the body of a result callback: exactly one of Output (the result as JSON) or Error,
// the execution's metrics and its timeline entries (invocation events of the informational types:
// log, http_call). Interrupted marks a task the worker stopped without finishing (SIGTERM): the
// server makes it eligible for retry.
type Result struct {
	TaskID      string          `json:"task_id"`
	WorkerID    string          `json:"worker_id"`
	LeaseOwner  string          `json:"lease_owner"`
	Output      json.RawMessage `json:"output,omitempty"`
	Error       *Error          `json:"error,omitempty"`
	Interrupted bool            `json:"interrupted,omitempty"`
	Metrics     json.RawMessage `json:"metrics,omitempty"`
	Timeline    json.RawMessage `json:"timeline,omitempty"`
}

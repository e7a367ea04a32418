// Package quality is the quality framework of DAG tasks (004 §6): the definition of a check, its
// validation at registration, running a task's checks on its input (phase pre) or its output (phase
// post), and the gating decision their results lead to (004 §6.3). It is pure: the caller reads the
// previous materialization and records the results; custom checks run in the Starlark sandbox.
package quality

import (
	"encoding/json"
	"time"
)

// Type is what a check verifies.
type Type string

// Check types.
const (
	// TypeJSONSchema validates the value at Path against the JSON Schema 2020-12 document Schema.
	TypeJSONSchema Type = "json_schema"
	// TypeRowCount counts the rows at Path (an array's length, or a number taken as the count) and
	// compares the count with Min, Max and MinRatio (against the previous materialization's count at
	// the same path).
	TypeRowCount Type = "row_count"
	// TypeNotNull requires each of Fields to be present and not null in every item of the array at
	// Path (or in the object at Path).
	TypeNotNull Type = "not_null"
	// TypeUnique requires the items of the array at Path to be unique on Fields (a composite key).
	TypeUnique Type = "unique"
	// TypeFreshness requires the newest timestamp in Field (of the object at Path, or of the items
	// of the array at Path) to be at most MaxAge old.
	TypeFreshness Type = "freshness"
	// TypeCustom runs Source, a Starlark predicate def check(output, previous), in the sandbox.
	TypeCustom Type = "custom"
)

// Types lists the check types in the order the documentation gives them.
var Types = []Type{TypeJSONSchema, TypeRowCount, TypeNotNull, TypeUnique, TypeFreshness, TypeCustom}

// Severity is how much a failed check matters (004 §6.3): Gate turns the severities of the failed
// checks into a decision.
type Severity string

// Severities, from the least to the most severe.
const (
	SeverityInfo     Severity = "INFO"
	SeverityWarning  Severity = "WARNING"
	SeverityError    Severity = "ERROR"
	SeverityCritical Severity = "CRITICAL"
)

// Severities lists the severities from the least to the most severe.
var Severities = []Severity{SeverityInfo, SeverityWarning, SeverityError, SeverityCritical}

// Phase says when a check runs.
type Phase string

// Phases.
const (
	// PhasePre checks the task's input params before the task runs.
	PhasePre Phase = "pre"
	// PhasePost checks the task's output after it ran (the default).
	PhasePost Phase = "post"
)

// Bounds of check definitions: ValidateCheck and ValidateChecks refuse anything beyond them, so
// that a task's checks cannot make registration or a task's completion slow.
const (
	// MaxChecks bounds the checks of one task.
	MaxChecks = 50
	// MaxCheckBytes bounds the JSON of one check definition (a JSON Schema and a custom source
	// included).
	MaxCheckBytes = 128 << 10
	// MaxNameBytes bounds a check's name.
	MaxNameBytes = 64
	// MaxPathBytes bounds a check's path.
	MaxPathBytes = 256
	// MaxFields bounds the fields of a not_null or unique check.
	MaxFields = 16
	// MaxFieldBytes bounds one field name.
	MaxFieldBytes = 128
	// MaxSourceBytes bounds the Starlark source of a custom check.
	MaxSourceBytes = 16 << 10
	// MaxMinRatio bounds a row_count check's min_ratio.
	MaxMinRatio = 1000
)

// Timeouts of one check (timeout_ms).
const (
	DefaultTimeout = 5 * time.Second
	MaxTimeout     = 60 * time.Second
)

// Check is one quality check of a task, as written in the task's "checks" array. It is plain data:
// ParseCheck fills it from JSON after validating it, and Run validates it again (a check that does
// not validate fails with its severity).
type Check struct {
	// Name identifies the check within its task: 1..64 characters of [A-Za-z0-9_.-].
	Name string `json:"name"`
	// Type is the kind of check (required).
	Type Type `json:"type"`
	// Severity is what a failure means for the task (required): see Gate.
	Severity Severity `json:"severity"`
	// Phase is when the check runs: pre (on the input params) or post (on the output, the default).
	Phase Phase `json:"phase,omitempty"`
	// TimeoutMS bounds the check's run time: 1..60,000 milliseconds (default 5,000).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Path is a JSON path into the checked value ("$" is the whole value, the default): members
	// ".name" or "['name']", array elements "[i]".
	Path string `json:"path,omitempty"`
	// Schema is the JSON Schema of a json_schema check.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Min and Max bound a row_count check's count (inclusive); MinRatio is the least ratio of the
	// count to the previous materialization's (e.g. 0.5: at most a halving). At least one is set.
	Min      *int64   `json:"min,omitempty"`
	Max      *int64   `json:"max,omitempty"`
	MinRatio *float64 `json:"min_ratio,omitempty"`
	// Fields are the item fields of a not_null check (each must be present and not null) or the
	// composite key of a unique check.
	Fields []string `json:"fields,omitempty"`
	// Field is the timestamp field (RFC 3339) of a freshness check.
	Field string `json:"field,omitempty"`
	// MaxAge is a freshness check's largest accepted age: a Go duration ("36h", "90m") or an ISO
	// 8601 duration ("PT36H", "P1DT12H", "P1W"; no years or months).
	MaxAge string `json:"max_age,omitempty"`
	// Source is a custom check's Starlark source; it defines def check(output, previous) returning
	// a bool or a tuple (bool, message).
	Source string `json:"source,omitempty"`
}

// In reports whether the check runs in phase p.
func (c Check) In(p Phase) bool { return c.phase() == p }

// phase is the check's phase, PhasePost when unset.
func (c Check) phase() Phase {
	if c.Phase == "" {
		return PhasePost
	}
	return c.Phase
}

// timeout is the check's timeout, DefaultTimeout when unset.
func (c Check) timeout() time.Duration {
	if c.TimeoutMS <= 0 {
		return DefaultTimeout
	}
	return time.Duration(c.TimeoutMS) * time.Millisecond
}

// path is the check's path, "$" when unset.
func (c Check) path() string {
	if c.Path == "" {
		return "$"
	}
	return c.Path
}

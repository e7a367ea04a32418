// Package catalog is what an invocation runs and under which policy: it resolves the entrypoint an
// id names (visibility, major-only ids, callable statuses), parses and caches entrypoint
// definitions with their compiled schemas, caches tenants' policies, validates params (schema
// defaults applied), and answers the claim stage's questions (dispatch.Catalog) from the same
// caches.
package catalog

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schema"
)

// Definition is the part of a stored entrypoint definition execution needs.
type Definition struct {
	Schema struct {
		Params  json.RawMessage `json:"params"`
		Returns json.RawMessage `json:"returns"`
	} `json:"schema"`
	Traits struct {
		Invocation struct {
			Supported []string `json:"supported"`
			Default   string   `json:"default"`
		} `json:"invocation"`
		IsIdempotent bool `json:"is_idempotent"`
		Caching      struct {
			MaxAgeSeconds int64 `json:"max_age_seconds"`
		} `json:"caching"`
		Limits struct {
			TimeoutSeconds int64   `json:"timeout_seconds"`
			MemoryMB       int64   `json:"memory_mb"`
			CPU            float64 `json:"cpu"`
			MaxConcurrent  int64   `json:"max_concurrent"`
		} `json:"limits"`
		Retry      outcome.RetryPolicy `json:"retry"`
		Entrypoint *bool               `json:"entrypoint"`
		RateLimit  *struct {
			Strategy string          `json:"strategy"`
			Config   json.RawMessage `json:"config"`
		} `json:"rate_limit"`
		Workflow *struct {
			MaxSuspensionDays int `json:"max_suspension_days"`
			Checkpointing     struct {
				Strategy string `json:"strategy"`
			} `json:"checkpointing"`
			Compensation struct {
				OnFailure *string `json:"on_failure"`
				OnCancel  *string `json:"on_cancel"`
			} `json:"compensation"`
		} `json:"workflow"`
	} `json:"traits"`
	Implementation struct {
		Adapter string `json:"adapter"`
		Kind    string `json:"kind"`
		Code    struct {
			Source string `json:"source"`
		} `json:"code"`
		AdapterRef struct {
			DefinitionID string `json:"definition_id"`
		} `json:"adapter_ref"`
		// WorkflowSpec is a DAG's declaration (implementation.kind workflow_spec; internal/dag).
		WorkflowSpec json.RawMessage `json:"workflow_spec"`
	} `json:"implementation"`
	schemas *compiledSchemas // shared by copies of one parsed definition
}

// compiledSchemas holds a definition's params and returns schemas, compiled once on first use.
type compiledSchemas struct {
	params, returns       sync.Once
	paramsS, returnsS     *jsonschema.Schema
	paramsErr, returnsErr error
	defaults              sync.Once     // the defaults the params schema declares (params.go)
	defaultsN             *defaultsNode // nil: none
	defaultsErr           error
}

// compileStored compiles a stored user schema (nil for none).
func (c *Catalog) compileStored(path string, raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var sch any
	if err := invocation.DecodeJSON(raw, &sch); err != nil {
		return nil, err
	}
	compiled, issues := c.schemas.CompileUserSchema(path, sch)
	if len(issues) > 0 {
		return nil, &storedSchemaError{path: path, issues: issues}
	}
	return compiled, nil
}

// storedSchemaError is a stored schema that no longer compiles: one registered before today's
// limits (docs/security.md) and over them. Starting the entrypoint answers 409 (register a new
// version), not 500.
type storedSchemaError struct {
	path   string
	issues []schema.Issue
}

func (e *storedSchemaError) Error() string {
	return fmt.Sprintf("stored schema at %s does not compile: %v", e.path, e.issues)
}

// paramsSchema is d's compiled params schema (nil when it has none), compiled once.
func (c *Catalog) paramsSchema(d Definition) (*jsonschema.Schema, error) {
	if d.schemas == nil {
		return c.compileStored("$.schema.params", d.Schema.Params)
	}
	d.schemas.params.Do(func() { d.schemas.paramsS, d.schemas.paramsErr = c.compileStored("$.schema.params", d.Schema.Params) })
	return d.schemas.paramsS, d.schemas.paramsErr
}

// ReturnsSchema is d's compiled returns schema (nil when it has none), compiled once; an error
// when the stored schema no longer compiles.
func (c *Catalog) ReturnsSchema(d Definition) (*jsonschema.Schema, error) {
	if d.schemas == nil {
		return c.compileStored("$.schema.returns", d.Schema.Returns)
	}
	d.schemas.returns.Do(func() {
		d.schemas.returnsS, d.schemas.returnsErr = c.compileStored("$.schema.returns", d.Schema.Returns)
	})
	return d.schemas.returnsS, d.schemas.returnsErr
}

// definitionCache keeps parsed definitions (and their compiled schemas) by entrypoint version.
// Only non-draft versions are ever invoked, and those are immutable (PUT changes drafts only), so
// an entry can never be stale; the bound only limits memory.
type definitionCache struct {
	mu sync.RWMutex
	m  map[string]cachedEntrypoint
}

type cachedEntrypoint struct {
	e entrypoint.Entrypoint
	d Definition
}

const definitionCacheMax = 4096

// Definition parses e's definition, from the cache when e is not a draft.
func (c *Catalog) Definition(e entrypoint.Entrypoint) (Definition, error) {
	if e.Status != entrypoint.StatusDraft {
		c.defs.mu.RLock()
		hit, ok := c.defs.m[e.ID]
		c.defs.mu.RUnlock()
		if ok {
			return hit.d, nil
		}
	}
	d, err := Parse(e)
	if err != nil {
		return d, err
	}
	d.schemas = &compiledSchemas{}
	if e.Status != entrypoint.StatusDraft {
		c.defs.mu.Lock()
		if c.defs.m == nil || len(c.defs.m) >= definitionCacheMax {
			c.defs.m = map[string]cachedEntrypoint{}
		}
		c.defs.m[e.ID] = cachedEntrypoint{e: e, d: d}
		c.defs.mu.Unlock()
	}
	return d, nil
}

// CachedByRef returns a version seen before (its definition is immutable; its status may have
// changed since, which pinned invocations ignore).
func (c *Catalog) CachedByRef(ref string) (entrypoint.Entrypoint, Definition, bool) {
	c.defs.mu.RLock()
	defer c.defs.mu.RUnlock()
	hit, ok := c.defs.m[ref]
	return hit.e, hit.d, ok
}

// Parse parses e's definition, with the default limits filled in.
func Parse(e entrypoint.Entrypoint) (Definition, error) {
	var d Definition
	if err := json.Unmarshal(e.Definition, &d); err != nil {
		return d, fmt.Errorf("entrypoint %s definition: %w", e.ID, err)
	}
	if d.Traits.Limits.TimeoutSeconds <= 0 {
		d.Traits.Limits.TimeoutSeconds = 30
	}
	if d.Traits.Limits.MemoryMB <= 0 {
		d.Traits.Limits.MemoryMB = 128
	}
	if d.Traits.Limits.CPU <= 0 {
		d.Traits.Limits.CPU = 0.2
	}
	return d, nil
}

// Timeout is traits.limits.timeout_seconds.
func (d Definition) Timeout() time.Duration {
	return time.Duration(d.Traits.Limits.TimeoutSeconds) * time.Second
}

// Limits are the sandbox limits of an execution of the version, with the payload bound maxPayload.
func (d Definition) Limits(maxPayload int) sandbox.Limits {
	return sandbox.Limits{Timeout: d.Timeout(), CPU: d.Traits.Limits.CPU, MemoryMB: int(d.Traits.Limits.MemoryMB),
		MaxPayloadBytes: int64(maxPayload)}
}

// IsDAG reports whether the version is a DAG (implementation.kind workflow_spec).
func (d Definition) IsDAG() bool { return d.Implementation.Kind == "workflow_spec" }

// WorkerDefinition is the definition_id of a worker-provided implementation ("" for Starlark).
func (d Definition) WorkerDefinition() string {
	if d.Implementation.Kind != "adapter_ref" {
		return ""
	}
	return d.Implementation.AdapterRef.DefinitionID
}

// RetryOf is the retry policy of rec's attempts: its own (a trigger's retry_policy, with the
// entrypoint's non_retryable_errors) when it has one, else the entrypoint's traits.retry.
func (d Definition) RetryOf(rec invocation.Record) outcome.RetryPolicy {
	if len(rec.RetryPolicy) == 0 {
		return d.Traits.Retry
	}
	var p outcome.RetryPolicy
	if err := json.Unmarshal(rec.RetryPolicy, &p); err != nil {
		return d.Traits.Retry // written by Plan: cannot happen; the entrypoint's is the safe answer
	}
	p.NonRetryableErrors = d.Traits.Retry.NonRetryableErrors
	return p
}

// RunJob is the run stage's view of an attempt of rec (e's version, parsed as d): data only.
// input is rec's params decoded, when the caller has them (nil: they are decoded by the run);
// admitWithin bounds its wait for admission.
func (c *Catalog) RunJob(rec invocation.Record, e entrypoint.Entrypoint, d Definition, input any, due time.Time,
	admitWithin time.Duration) run.Job {
	returns, rerr := c.ReturnsSchema(d)
	return run.Job{Record: rec, Input: input, ProgramKey: e.ID, Source: d.Implementation.Code.Source,
		Limits: d.Limits(c.maxPayload), Retry: d.RetryOf(rec), Returns: returns, ReturnsErr: rerr, Due: due,
		AdmitWithin: admitWithin}
}

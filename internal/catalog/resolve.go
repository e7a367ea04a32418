package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// Resolve finds the entrypoint an invocation names: an exact GTS id (or opaque id) pins that
// version; a major-only id resolves to the latest active minor of the major (falling back to the
// latest deprecated one, which is still callable). 404 when nothing is visible, 409 not_active when
// it exists but is not callable. Answers are cached (cache.go).
func (c *Catalog) Resolve(ctx context.Context, v entrypoint.Viewer, id string) (entrypoint.Entrypoint, error) {
	if id == "" {
		return entrypoint.Entrypoint{}, problem.Validation("entrypoint_id is required", []problem.Issue{{Path: "$.entrypoint_id", Code: "MISSING_FIELD", Message: "entrypoint_id is required"}})
	}
	k, gen, now := resolveKey{v: v, id: id}, c.store.CatalogGeneration(), c.clock.Now()
	if e, ok := c.resolved.get(k, gen, now); ok {
		return e, nil
	}
	e, err := c.resolveStored(ctx, v, id)
	if err == nil {
		c.resolved.put(k, e, gen, now)
	}
	return e, err
}

// resolveStored is Resolve reading the store.
func (c *Catalog) resolveStored(ctx context.Context, v entrypoint.Viewer, id string) (entrypoint.Entrypoint, error) {
	gid, perr := gts.Parse(id)
	if perr == nil && gid.MajorOnly() {
		e, err := c.store.LatestActive(ctx, v, gid.Family(), gid.Last().Major)
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return e, problem.Internal(err)
		}
		versions, err := c.store.EntrypointVersions(ctx, v, gid.Family())
		if err != nil {
			return e, problem.Internal(err)
		}
		var best *entrypoint.Entrypoint
		found := false
		for i := range versions {
			if versions[i].Major != gid.Last().Major {
				continue
			}
			found = true
			if versions[i].Status == entrypoint.StatusDeprecated {
				best = &versions[i]
			}
		}
		if best != nil {
			return *best, nil
		}
		if found {
			return e, problem.New(problem.TypeNotActive, "entrypoint %s has no active version", id)
		}
		return e, problem.NotFound("entrypoint %s not found", id)
	}
	e, err := c.store.Entrypoint(ctx, v, id)
	if errors.Is(err, store.ErrNotFound) {
		return e, problem.NotFound("entrypoint %s not found", id)
	}
	if err != nil {
		return e, problem.Internal(err)
	}
	if !e.Status.Callable() {
		return e, problem.New(problem.TypeNotActive, "entrypoint %s is %s; only active or deprecated entrypoints can be invoked", id, e.Status).With("current_status", e.Status)
	}
	return e, nil
}

// Policy returns the tenant's policy (defaults when it has none, e.g. the platform), cached
// (cache.go).
func (c *Catalog) Policy(ctx context.Context, tenantID string) (tenant.Policy, error) {
	now := c.clock.Now()
	return c.policies.get(tenantID, c.store.CatalogGeneration(), now, func() (tenant.Policy, error) {
		p, err := c.store.Tenant(ctx, tenantID)
		if errors.Is(err, store.ErrNotFound) {
			return tenant.New(tenantID, now), nil
		}
		return p, err
	})
}

// ValidateParams fills in the `default`s schema.params declares (params.go) and checks the params
// against it; absent params are {}. It returns the params and their canonical JSON, defaults
// applied, which is what every invocation records and runs with.
func (c *Catalog) ValidateParams(d Definition, raw json.RawMessage) (any, json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if len(raw) > c.maxPayload {
		return nil, nil, TooLarge("params", len(raw), c.maxPayload)
	}
	var params any
	if err := invocation.DecodeJSON(raw, &params); err != nil {
		return nil, nil, problem.BadRequest("params: malformed JSON")
	}
	if _, ok := params.(map[string]any); !ok {
		return nil, nil, problem.Validation("params must be a JSON object", []problem.Issue{{Path: "$.params", Code: "SCHEMA_MISMATCH", Message: "params must be a JSON object"}})
	}
	if path, deep := invocation.TooDeep("$.params", params); deep {
		msg := fmt.Sprintf("params are nested more than %d levels deep", invocation.MaxJSONDepth)
		return nil, nil, problem.Validation(msg, []problem.Issue{{Path: path, Code: "TOO_DEEP", Message: msg}})
	}
	defaults, err := c.paramsDefaults(d)
	if err != nil {
		return nil, nil, problem.Internal(err)
	}
	if err := defaults.apply(params); err != nil {
		return nil, nil, problem.Internal(err)
	}
	compiled, err := c.paramsSchema(d)
	if se, ok := errors.AsType[*storedSchemaError](err); ok {
		return nil, nil, problem.Conflict("schema_not_compilable", "the entrypoint's %s no longer passes the schema limits (%v): register a new version with a smaller schema", se.path, se.issues[0].Message)
	}
	if err != nil {
		return nil, nil, problem.Internal(err)
	}
	if compiled != nil {
		if issues := c.schemas.ValidateValue(compiled, "$.params", params); len(issues) > 0 {
			return nil, nil, problem.Validation("params do not match the entrypoint's schema", schemaIssues(issues))
		}
	}
	canon, err := json.Marshal(params)
	if err != nil {
		return nil, nil, problem.Internal(err)
	}
	return params, canon, nil
}

func schemaIssues(in []schema.Issue) []problem.Issue {
	out := make([]problem.Issue, 0, len(in))
	for _, is := range in {
		out = append(out, problem.Issue{Path: is.Path, Message: is.Message, Code: strings.ToUpper(is.Code)})
	}
	return out
}

// TooLarge is the 413 problem of a payload over its limit.
func TooLarge(what string, size, limit int) *problem.Error {
	return problem.New(problem.TypePayloadTooLarge, "%s: %d bytes, more than the limit of %d bytes", what, size, limit).
		With("limit_bytes", limit)
}

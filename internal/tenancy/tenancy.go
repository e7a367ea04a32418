// Package tenancy administers tenants: it enables, disables and configures them through their
// TenantRuntimePolicy (000, with 001's governance settings; the types are package tenant) and
// answers whether a tenant may use the runtime (RequireEnabled).
package tenancy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/mergepatch"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// Store is the store methods the tenancy service uses (store.Store has them all): it reads tenant
// policies, and writes them with their audit events in Update.
type Store interface {
	store.TenantReader
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Service manages tenant policies.
type Service struct {
	store Store
	clock clock.Clock
	ids   idgen.Generator

	mu      sync.RWMutex
	enabled map[string]time.Time // when RequireEnabled last found the tenant enabled
}

// EnabledCacheTTL bounds how long RequireEnabled reuses a "tenant is enabled" answer. Changes made
// through this process drop the entry at once; other processes sharing the database see them within
// the TTL.
const EnabledCacheTTL = time.Second

func (s *Service) forget(tenantID string) {
	s.mu.Lock()
	delete(s.enabled, tenantID)
	s.mu.Unlock()
}

// NewService returns a Service.
func NewService(s Store, c clock.Clock, ids idgen.Generator) *Service {
	return &Service{store: s, clock: c, ids: ids}
}

// RequireEnabled answers 403 unless the tenant exists and is enabled (001, BR-021).
func (s *Service) RequireEnabled(ctx context.Context, tenantID string) error {
	now := s.clock.Now()
	s.mu.RLock()
	at, ok := s.enabled[tenantID]
	s.mu.RUnlock()
	if ok && now.Sub(at) < EnabledCacheTTL && !now.Before(at) {
		return nil
	}
	p, err := s.store.Tenant(ctx, tenantID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !p.Enabled) {
		return problem.Forbidden("the serverless runtime is not enabled for tenant %s", tenantID)
	}
	if err != nil {
		return problem.Internal(err)
	}
	s.mu.Lock()
	if s.enabled == nil || len(s.enabled) >= 10000 {
		s.enabled = map[string]time.Time{}
	}
	s.enabled[tenantID] = now
	s.mu.Unlock()
	return nil
}

// Policy returns a tenant's policy; the operator reads any, a tenant admin its own. Another
// tenant's, or a tenant that was never enabled, answers 404.
func (s *Service) Policy(ctx context.Context, sc auth.SecurityContext, tenantID string) (tenant.Policy, error) {
	if !sc.Operator && sc.TenantID != tenantID {
		return tenant.Policy{}, problem.NotFound("tenant %s not found", tenantID)
	}
	if !sc.Has(auth.RoleAdmin) {
		return tenant.Policy{}, problem.Forbidden("reading the tenant policy needs the admin role")
	}
	p, err := s.store.Tenant(ctx, tenantID)
	if errors.Is(err, store.ErrNotFound) {
		return p, problem.NotFound("tenant %s not found", tenantID)
	}
	if err != nil {
		return p, problem.Internal(err)
	}
	return p, nil
}

// Enable provisions (or re-enables) a tenant, applying body as a merge patch of quotas and
// governance. Operator only.
func (s *Service) Enable(ctx context.Context, sc auth.SecurityContext, tenantID string, body []byte) (tenant.Policy, error) {
	return s.change(ctx, sc, tenantID, body, true, func(p tenant.Policy, _ bool, now time.Time) (tenant.Policy, string, error) {
		p, err := patched(p, body)
		p.Enabled, p.EnabledAt, p.DisabledAt = true, &now, nil
		return p, audit.TenantEnabled, err
	})
}

// Disable turns the runtime off for a tenant: its definitions stay, but nothing may be invoked or
// changed by its tokens until it is enabled again. Operator only.
func (s *Service) Disable(ctx context.Context, sc auth.SecurityContext, tenantID string) (tenant.Policy, error) {
	return s.change(ctx, sc, tenantID, nil, false, func(p tenant.Policy, _ bool, now time.Time) (tenant.Policy, string, error) {
		p.Enabled, p.DisabledAt = false, &now
		return p, audit.TenantDisabled, nil
	})
}

// Patch applies a JSON merge patch (RFC 7396) to a tenant's policy. Operator only.
func (s *Service) Patch(ctx context.Context, sc auth.SecurityContext, tenantID string, body []byte) (tenant.Policy, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return tenant.Policy{}, problem.BadRequest("a JSON merge patch body is required")
	}
	return s.change(ctx, sc, tenantID, body, false, func(p tenant.Policy, _ bool, _ time.Time) (tenant.Policy, string, error) {
		p, err := applyPatch(p, body)
		return p, audit.TenantPolicyUpdated, err
	})
}

// readOnly are the policy members a body may carry (as read from GET) but never changes: PATCH,
// :enable and PUT accept and ignore them (PUT sets enabled and checks tenant_id itself).
var readOnly = []string{"created_at", "updated_at", "enabled_at", "disabled_at"}

// patchReadOnly are the members PATCH and :enable ignore: readOnly plus tenant_id (the path names
// the tenant) and enabled (changed by :enable and :disable only).
var patchReadOnly = append([]string{"tenant_id", "enabled"}, readOnly...)

// Replace is PUT /tenants/{id}/runtime-policy (000): body is a whole TenantRuntimePolicy. Members it
// leaves out take their defaults (a quota left out is no limit); tenant_id, enabled, quotas and
// retention are required, tenant_id must name the path's tenant, and the timestamps are read-only.
// It provisions a tenant that does not exist yet. Operator only.
func (s *Service) Replace(ctx context.Context, sc auth.SecurityContext, tenantID string, body []byte) (tenant.Policy, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil || doc == nil {
		return tenant.Policy{}, problem.BadRequest("the body must be a TenantRuntimePolicy JSON object")
	}
	var issues []problem.Issue
	for _, k := range []string{"tenant_id", "enabled", "quotas", "retention"} {
		if _, ok := doc[k]; !ok {
			issues = append(issues, problem.Issue{Path: "$." + k, Code: "REQUIRED", Message: "'" + k + "' is required"})
		}
	}
	var id string
	if raw, ok := doc["tenant_id"]; ok && (json.Unmarshal(raw, &id) != nil || id != tenantID) {
		issues = append(issues, problem.Issue{Path: "$.tenant_id", Code: "INVALID_VALUE", Message: "must be the tenant named in the path, " + tenantID})
	}
	var enabled bool
	if raw, ok := doc["enabled"]; ok && json.Unmarshal(raw, &enabled) != nil {
		issues = append(issues, problem.Issue{Path: "$.enabled", Code: "SCHEMA_MISMATCH", Message: "expected boolean"})
	}
	if len(issues) > 0 {
		return tenant.Policy{}, problem.Validation("invalid tenant policy", issues)
	}
	delete(doc, "tenant_id")
	delete(doc, "enabled")
	for _, k := range readOnly {
		delete(doc, k)
	}
	rest, err := json.Marshal(doc)
	if err != nil {
		return tenant.Policy{}, problem.Internal(err)
	}
	return s.change(ctx, sc, tenantID, body, true, func(cur tenant.Policy, exists bool, now time.Time) (tenant.Policy, string, error) {
		p, err := applyPatch(tenant.New(tenantID, now), rest)
		if err != nil {
			return p, "", err
		}
		p.CreatedAt, p.EnabledAt, p.DisabledAt, p.Enabled = cur.CreatedAt, cur.EnabledAt, cur.DisabledAt, enabled
		switch {
		case enabled && (!exists || !cur.Enabled):
			p.EnabledAt, p.DisabledAt = &now, nil
		case !enabled && exists && cur.Enabled:
			p.DisabledAt = &now
		}
		return p, audit.TenantPolicyUpdated, nil
	})
}

// patched applies body when there is one.
func patched(p tenant.Policy, body []byte) (tenant.Policy, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return p, nil
	}
	return applyPatch(p, body)
}

// change runs build on the tenant's current policy (a new default policy when the tenant does not
// exist and create is set; 404 otherwise), stores the result and appends one audit event of the type
// build names, with body as its details. Operator only.
func (s *Service) change(ctx context.Context, sc auth.SecurityContext, tenantID string, body []byte, create bool,
	build func(cur tenant.Policy, exists bool, now time.Time) (tenant.Policy, string, error)) (tenant.Policy, error) {
	if !sc.Operator {
		if sc.TenantID != tenantID {
			return tenant.Policy{}, problem.NotFound("tenant %s not found", tenantID)
		}
		return tenant.Policy{}, problem.Forbidden("only the platform operator changes tenant enablement and policy")
	}
	if !tenant.ValidID(tenantID) {
		return tenant.Policy{}, problem.Validation("invalid tenant id", []problem.Issue{{Path: "$.tenant_id", Code: "INVALID_VALUE",
			Message: "tenant ids are 1-63 characters of [a-z0-9_-], start with a letter or digit, and 'platform' is reserved"}})
	}
	var out tenant.Policy
	var perr error
	defer s.forget(tenantID)
	err := s.store.Update(ctx, func(tx store.Tx) error {
		now := s.clock.Now()
		cur, err := tx.Tenant(tenantID)
		exists := err == nil
		if errors.Is(err, store.ErrNotFound) {
			if !create {
				perr = problem.NotFound("tenant %s not found", tenantID)
				return perr
			}
			cur, err = tenant.New(tenantID, now), nil
		}
		if err != nil {
			return err
		}
		p, typ, err := build(cur, exists, now)
		if err != nil {
			perr = err
			return err
		}
		p.UpdatedAt = now
		if err := tx.PutTenant(p); err != nil {
			return err
		}
		out = p
		var details json.RawMessage
		if len(body) > 0 {
			details = json.RawMessage(body)
		}
		return tx.InsertAudit(audit.Event{ID: s.ids.New("aud"), TenantID: tenantID, Type: typ, ActorID: sc.SubjectID,
			ResourceType: "tenant", ResourceID: tenantID, CorrelationID: obs.CorrelationID(ctx), At: now, Details: details})
	})
	if perr != nil {
		return tenant.Policy{}, perr
	}
	if err != nil {
		return tenant.Policy{}, problem.Internal(err)
	}
	return out, nil
}

// patchable are the members a patch may touch; "governance" (001) is an alias of "policies".
var patchable = map[string]bool{"quotas": true, "retention": true, "policies": true, "governance": true,
	"idempotency": true, "defaults": true, "fairness": true}

// applyPatch merges body into p (RFC 7396), maps 001's names onto 000's and validates the result.
func applyPatch(p tenant.Policy, body []byte) (tenant.Policy, error) {
	patch, err := decodePatch(body)
	if err != nil {
		return p, err
	}
	issues := unknownMembers(patch)
	issues = append(issues, renameAliases(patch)...)
	issues = append(issues, unknownSectionKeys(patch)...)
	if len(issues) > 0 {
		return p, problem.Validation("invalid tenant policy", issues)
	}
	return mergePolicy(p, patch)
}

// decodePatch decodes the body as a JSON object (numbers kept as json.Number) and drops the
// read-only members a patch may carry.
func decodePatch(body []byte) (map[string]any, error) {
	var patch map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&patch); err != nil || patch == nil {
		return nil, problem.BadRequest("the body must be a JSON object")
	}
	for _, k := range patchReadOnly {
		delete(patch, k)
	}
	return patch, nil
}

// unknownMembers reports the top-level members of patch that are not patchable.
func unknownMembers(patch map[string]any) []problem.Issue {
	var issues []problem.Issue
	for k := range patch {
		if !patchable[k] {
			issues = append(issues, problem.Issue{Path: "$." + k, Code: "UNKNOWN_FIELD",
				Message: fmt.Sprintf("'%s' cannot be set here (allowed: quotas, governance/policies, retention, idempotency, defaults, fairness)", k)})
		}
	}
	return issues
}

// renameAliases rewrites 001's names in patch to 000's, in place: short runtime names, governance
// as policies, quotas.max_memory_mb_per_execution, and quotas.execution_history_retention_days
// (which moves to retention.execution_history_days). It reports an alias given alongside its
// 000 name.
func renameAliases(patch map[string]any) []problem.Issue {
	var issues []problem.Issue
	if q, ok := patch["quotas"].(map[string]any); ok {
		for alias, name := range map[string]string{"max_memory_mb_per_execution": "max_memory_per_execution_mb"} {
			if _, a := q[alias]; a {
				if _, n := q[name]; n {
					issues = append(issues, problem.Issue{Path: "$.quotas." + alias, Code: "INVALID_VALUE", Message: "give either " + alias + " (001) or " + name + ", not both"})
				}
			}
		}
	}
	for _, k := range []string{"policies", "governance"} {
		if g, ok := patch[k].(map[string]any); ok {
			expandRuntimeNames(g)
		}
	}
	if g, ok := patch["governance"]; ok {
		if _, both := patch["policies"]; both {
			issues = append(issues, problem.Issue{Path: "$.governance", Code: "INVALID_VALUE", Message: "give either governance or policies, not both"})
		}
		patch["policies"] = g
		delete(patch, "governance")
	}
	if q, ok := patch["quotas"].(map[string]any); ok {
		if v, ok := q["max_memory_mb_per_execution"]; ok {
			q["max_memory_per_execution_mb"] = v
			delete(q, "max_memory_mb_per_execution")
		}
		if v, ok := q["execution_history_retention_days"]; ok {
			r, _ := patch["retention"].(map[string]any)
			if r == nil {
				r = map[string]any{}
			}
			r["execution_history_days"] = v
			patch["retention"] = r
			delete(q, "execution_history_retention_days")
		}
	}
	return issues
}

// unknownSectionKeys reports the members of each (renamed) policy section that the section does
// not accept.
func unknownSectionKeys(patch map[string]any) []problem.Issue {
	var issues []problem.Issue
	for section, allowed := range sectionKeys {
		m, ok := patch[section].(map[string]any)
		if !ok {
			continue
		}
		for k := range m {
			if !allowed[k] {
				issues = append(issues, problem.Issue{Path: "$." + section + "." + k, Code: "UNKNOWN_FIELD", Message: "unknown field '" + k + "'"})
			}
		}
	}
	return issues
}

// mergePolicy applies the checked patch to p as an RFC 7396 merge on p's JSON form, decodes the
// result strictly and validates it. On failure it returns p unchanged with the problem.
func mergePolicy(p tenant.Policy, patch map[string]any) (tenant.Policy, error) {
	cur, err := json.Marshal(p)
	if err != nil {
		return p, problem.Internal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(cur, &doc); err != nil {
		return p, problem.Internal(err)
	}
	raw, err := json.Marshal(mergepatch.Apply(doc, patch))
	if err != nil {
		return p, problem.Internal(err)
	}
	var next tenant.Policy
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&next); err != nil {
		path, msg := "$", err.Error()
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			path, msg = "$."+te.Field, fmt.Sprintf("expected %s, got %s", problem.JSONKind(te.Type), te.Value)
		}
		return p, problem.Validation("invalid tenant policy", []problem.Issue{{Path: path, Code: "SCHEMA_MISMATCH", Message: msg}})
	}
	if issues := validate(next); len(issues) > 0 {
		return p, problem.Validation("invalid tenant policy", issues)
	}
	if next.Policies.AllowedRuntimes == nil {
		next.Policies.AllowedRuntimes = []string{}
	}
	if next.Policies.AllowedOutboundDomains == nil {
		next.Policies.AllowedOutboundDomains = []string{}
	}
	return next, nil
}

// runtimeNames are 001's short runtime names, accepted in allowed_runtimes for the adapter type ids.
var runtimeNames = map[string]string{"starlark": "gts.x.core.serverless.adapter.starlark.v1~"}

func expandRuntimeNames(policies map[string]any) {
	list, _ := policies["allowed_runtimes"].([]any)
	for i, v := range list {
		if s, ok := v.(string); ok && runtimeNames[s] != "" {
			list[i] = runtimeNames[s]
		}
	}
}

// sectionKeys are the members each policy section accepts, taken from the policy types' JSON tags.
var sectionKeys = map[string]map[string]bool{
	"quotas": jsonKeys(tenant.Quotas{}), "retention": jsonKeys(tenant.Retention{}), "policies": jsonKeys(tenant.Governance{}),
	"idempotency": jsonKeys(tenant.Idempotency{}), "defaults": jsonKeys(tenant.Defaults{}), "fairness": jsonKeys(tenant.Fairness{}),
}

func jsonKeys(v any) map[string]bool {
	t := reflect.TypeOf(v)
	out := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[name] = true
	}
	return out
}

// adapterRE accepts adapter type ids. 000's platform type ids (adapters, errors, strategies) use more
// than the four name tokens a GTS segment has, so they are treated as opaque, compared exactly, and
// only checked for shape here; user-authored entrypoint ids are parsed strictly by package gts.
var adapterRE = regexp.MustCompile(`^gts\.x\.core\.serverless\.adapter(\.[a-z_][a-z0-9_]*)+\.v(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?~$`)

func validate(p tenant.Policy) []problem.Issue {
	var out []problem.Issue
	minInt := func(path string, v *int64, min int64) {
		if v != nil && *v < min {
			out = append(out, problem.Issue{Path: path, Code: "INVALID_VALUE", Message: fmt.Sprintf("must be at least %d", min)})
		}
	}
	q := p.Quotas
	minInt("$.quotas.max_concurrent_executions", q.MaxConcurrentExecutions, 1)
	minInt("$.quotas.max_definitions", q.MaxDefinitions, 1)
	minInt("$.quotas.max_schedules", q.MaxSchedules, 0)
	minInt("$.quotas.max_triggers", q.MaxTriggers, 0)
	minInt("$.quotas.max_execution_history_mb", q.MaxExecutionHistoryMB, 1)
	minInt("$.quotas.max_memory_per_execution_mb", q.MaxMemoryPerExecutionMB, 1)
	minInt("$.quotas.max_execution_duration_seconds", q.MaxExecutionDurationSeconds, 1)
	if q.MaxCPUPerExecution != nil && *q.MaxCPUPerExecution <= 0 {
		out = append(out, problem.Issue{Path: "$.quotas.max_cpu_per_execution", Code: "INVALID_VALUE", Message: "must be greater than 0"})
	}
	r := p.Retention
	minInt("$.retention.execution_history_days", &r.ExecutionHistoryDays, 1)
	minInt("$.retention.audit_log_days", &r.AuditLogDays, 1)
	if w := p.Idempotency.DeduplicationWindowSeconds; w < 60 || w > 2628000 {
		out = append(out, problem.Issue{Path: "$.idempotency.deduplication_window_seconds", Code: "INVALID_VALUE", Message: "must be between 60 and 2628000"})
	}
	d := p.Defaults
	minInt("$.defaults.timeout_seconds", &d.TimeoutSeconds, 1)
	minInt("$.defaults.memory_mb", &d.MemoryMB, 1)
	if d.CPU < 0 {
		out = append(out, problem.Issue{Path: "$.defaults.cpu", Code: "INVALID_VALUE", Message: "must not be negative"})
	}
	if w := p.Fairness.Weight; !(w > 0 && w <= tenant.MaxWeight) {
		out = append(out, problem.Issue{Path: "$.fairness.weight", Code: "INVALID_VALUE", Message: fmt.Sprintf("must be greater than 0 and at most %g", tenant.MaxWeight)})
	}
	for i, a := range p.Policies.AllowedRuntimes {
		if !adapterRE.MatchString(a) {
			out = append(out, problem.Issue{Path: fmt.Sprintf("$.policies.allowed_runtimes[%d]", i), Code: "INVALID_VALUE",
				Message: "must be an adapter GTS type id such as gts.x.core.serverless.adapter.starlark.v1~"})
		}
	}
	for i, d := range p.Policies.AllowedOutboundDomains {
		if err := egress.ValidateEntry(d); err != nil {
			out = append(out, problem.Issue{Path: fmt.Sprintf("$.policies.allowed_outbound_domains[%d]", i), Code: "INVALID_VALUE",
				Message: fmt.Sprintf("%q: %v", d, err)})
		}
	}
	return out
}

package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/eventfilter"
	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// serverFields are members of a registration body that the server owns; they are checked against
// the caller, then kept out of the stored definition.
var serverFields = []string{"entrypoint_id", "tenant_id", "owner", "status", "shared", "version", "created_at", "updated_at"}

// readOnlyFields are the members Render shows that no request sets: a registration, replacement
// or validation body may carry them (a GET body sent back) and they are ignored, whatever their
// value. The status changes through :status; the owner's tenant is the caller's.
var readOnlyFields = []string{"id", "kind", "tenant_id", "status", "created_at", "updated_at",
	"activated_at", "disabled_at", "archived_at", "release_notes", "deprecation"}

var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`)

// candidate is a validated registration: the entrypoint to store and its report.
type candidate struct {
	ep     entrypoint.Entrypoint
	report Report
}

// prepare validates a registration body (or, with existing set, a replacement for a draft) and
// builds the entrypoint to store. All findings are collected; nothing is written.
func (s *Service) prepare(ctx context.Context, sc auth.SecurityContext, body map[string]any, existing *entrypoint.Entrypoint) (candidate, error) {
	var c candidate
	r := &c.report
	doc := cloneMap(body)
	if doc == nil {
		r.fail(CodeNotAnObject, "$", "the body must be a JSON object")
		r.finish()
		return c, nil
	}
	for _, f := range readOnlyFields {
		delete(doc, f)
	}
	tenantID := sc.TenantID
	if sc.Operator {
		tenantID = entrypoint.PlatformTenant
	}
	if existing != nil {
		tenantID = existing.TenantID
	}
	id, idStr, kind := checkIdentity(doc, existing, r)

	wantStatus := entrypoint.StatusDraft
	if existing != nil {
		wantStatus = existing.Status
	}
	owner := s.owner(sc, tenantID, doc, existing, r)
	shared, _ := doc["shared"].(bool)
	if shared && owner.OwnerType != entrypoint.OwnerUser {
		r.fail(CodeOwnership, "$.shared", "shared applies to user-owned entrypoints only; tenant and system entrypoints are already visible")
	}
	seg := id.Last()
	version := checkVersion(doc, seg, r)

	// Tenant policy: defaults for limits, allowed adapters, per-execution quotas.
	policy, err := s.policy(ctx, tenantID)
	if err != nil {
		return c, err
	}
	applyLimitDefaults(doc, policy)

	// Structural validation against the GTS schema of the kind, with server fields filled.
	doc["tenant_id"], doc["status"], doc["version"] = tenantID, string(wantStatus), version
	doc["owner"] = map[string]any{"owner_type": string(owner.OwnerType), "id": owner.ID, "tenant_id": owner.TenantID}
	adapter, err := s.checkDefinition(ctx, sc, doc, kind, policy, r)
	if err != nil {
		return c, err
	}
	r.finish()
	if !r.Valid {
		return c, nil
	}

	title, tags, defJSON, err := storedDefinition(doc)
	if err != nil {
		return c, err
	}
	c.ep = entrypoint.Entrypoint{GTSID: idStr, Family: id.Family(), Major: seg.Major, Minor: seg.Minor, HasMinor: seg.HasMinor,
		Kind: kind, TenantID: tenantID, Owner: owner, Shared: shared, Status: wantStatus, Version: version, Title: title,
		Tags: tags, Adapter: adapter, Definition: defJSON}
	return c, nil
}

// checkIdentity reads the GTS id (a replacement without one keeps the draft's) and the kind it
// implies, recording them in r.Info when they are valid. It returns the parsed id, the id as
// given and the kind (a function unless the id names a workflow).
func checkIdentity(doc map[string]any, existing *entrypoint.Entrypoint, r *Report) (gts.ID, string, entrypoint.Kind) {
	var id gts.ID
	kind := entrypoint.KindFunction
	rawID, hasID := doc["entrypoint_id"]
	if !hasID && existing != nil {
		rawID, hasID = existing.GTSID, true
	}
	idStr, _ := rawID.(string)
	switch {
	case !hasID:
		r.fail("MISSING_FIELD", "$.entrypoint_id", "entrypoint_id (the full GTS id) is required")
	case idStr == "":
		r.fail(CodeInvalidID, "$.entrypoint_id", "entrypoint_id must be a non-empty string")
	default:
		var err error
		if id, err = gts.Parse(idStr); err != nil {
			r.fail(CodeInvalidID, "$.entrypoint_id", err.Error())
		} else if k, err := gts.EntrypointKind(id); err != nil {
			r.fail(CodeInvalidID, "$.entrypoint_id", err.Error())
		} else {
			if k == gts.KindWorkflow {
				kind = entrypoint.KindWorkflow
			}
			r.Info.EntrypointID, r.Info.Kind = idStr, string(kind)
		}
		if existing != nil && idStr != existing.GTSID {
			r.fail(CodeReadOnly, "$.entrypoint_id", "entrypoint_id cannot change; register a new version instead")
		}
	}
	return id, idStr, kind
}

// checkVersion returns the version to store: the body's version if it is valid, else
// MAJOR.MINOR.0 of the GTS id's last segment seg. MAJOR.MINOR must match the GTS id (checked only
// when the id itself was valid); the patch level is free.
func checkVersion(doc map[string]any, seg gts.Segment, r *Report) string {
	version := fmt.Sprintf("%d.%d.0", seg.Major, seg.Minor)
	if v, ok := doc["version"]; ok {
		vs, _ := v.(string)
		m := semverRE.FindStringSubmatch(vs)
		switch {
		case m == nil:
			r.fail(CodeVersion, "$.version", "version must be MAJOR.MINOR.PATCH")
		case r.Info.EntrypointID != "" && (m[1] != strconv.Itoa(seg.Major) || m[2] != strconv.Itoa(seg.Minor)):
			r.fail(CodeVersion, "$.version", fmt.Sprintf("version %s does not match the GTS id's v%d.%d", vs, seg.Major, seg.Minor))
		default:
			version = vs
		}
	}
	return version
}

// checkDefinition validates the filled-in doc against the GTS schema of kind and the tenant
// policy (adapter, quotas), runs the Starlark static checks, checks a DAG's spec and task
// entrypoints and, for workflows, checks the compensation handlers. Findings go to r; the error is only for a failure to check. It returns
// the implementation's adapter.
func (s *Service) checkDefinition(ctx context.Context, sc auth.SecurityContext, doc map[string]any, kind entrypoint.Kind, policy tenant.Policy, r *Report) (string, error) {
	issues, err := s.schemas.ValidateEntrypointContext(ctx, string(kind), doc)
	if err != nil {
		return "", err // the request ended while a schema was compiling
	}
	r.addSchemaIssues(issues)
	traits, _ := doc["traits"].(map[string]any)
	if _, ok := traits["workflow"]; ok && kind == entrypoint.KindFunction && r.Info.EntrypointID != "" {
		r.fail(CodeKindMismatch, "$.traits.workflow", "traits.workflow is for workflows; this GTS id names a function")
	}
	impl, _ := doc["implementation"].(map[string]any)
	adapter, _ := impl["adapter"].(string)
	if adapter != "" && !policy.AllowsAdapter(adapter) {
		r.fail(CodePolicy, "$.implementation.adapter", "the tenant policy does not allow adapter "+adapter)
	}
	s.checkQuotas(traits, policy, r)
	checkStarlark(impl, adapter, kind, r)
	if adapter == schema.DAGAdapter && kind == entrypoint.KindWorkflow {
		if err := s.checkDAG(ctx, sc, impl, r); err != nil {
			return adapter, err
		}
	}
	if kind == entrypoint.KindWorkflow {
		if err := s.checkCompensation(ctx, sc, traits, r); err != nil {
			return adapter, err
		}
	}
	return adapter, nil
}

// checkStarlark runs the Starlark static checks on inline source of the Starlark adapter,
// adding its errors and warnings to r and the features it detected to r.Info.
func checkStarlark(impl map[string]any, adapter string, kind entrypoint.Kind, r *Report) {
	code, ok := impl["code"].(map[string]any)
	if !ok || adapter != schema.StarlarkAdapter {
		return
	}
	src, ok := code["source"].(string)
	if !ok {
		return
	}
	rep := sandbox.CheckWith("main.star", src, sandbox.CheckOptions{Workflow: kind == entrypoint.KindWorkflow, Filter: compileFilter})
	for _, d := range rep.Errors {
		r.Errors = append(r.Errors, diag(d))
	}
	for _, d := range rep.Warnings {
		r.Warnings = append(r.Warnings, diag(d))
	}
	r.Info.DetectedFeatures = rep.Features
	r.Info.UsesWorkflowPrimitives = rep.UsesWorkflowPrimitives
}

// storedDefinition turns a valid doc into what is stored: the schema defaults applied, the title
// and tags for the entrypoint's columns, and the definition JSON without the server's fields.
func storedDefinition(doc map[string]any) (title string, tags []string, defJSON []byte, err error) {
	applySchemaDefaults(doc)
	title, _ = doc["title"].(string)
	tags = stringList(doc["tags"])
	def := map[string]any{}
	for k, v := range doc {
		def[k] = v
	}
	for _, f := range serverFields {
		delete(def, f)
	}
	defJSON, err = json.Marshal(def)
	if err != nil {
		return "", nil, nil, err
	}
	return title, tags, defJSON, nil
}

func diag(d sandbox.Diagnostic) Finding {
	return Finding{Code: d.Code, Message: d.Message, SourceSnippet: d.Snippet,
		Location: Location{Path: sourcePath, Line: d.Line, Column: d.Column}}
}

// owner works out the owner reference from the caller and the requested owner.owner_type: the
// operator registers system-owned entrypoints; tenants register user-owned (the default, 001) or
// tenant-owned ones.
func (s *Service) owner(sc auth.SecurityContext, tenantID string, doc map[string]any, existing *entrypoint.Entrypoint, r *Report) entrypoint.Owner {
	req, _ := doc["owner"].(map[string]any)
	if existing != nil {
		o := existing.Owner
		if t, ok := req["owner_type"]; ok && t != string(o.OwnerType) {
			r.fail(CodeOwnership, "$.owner.owner_type", "the owner cannot change; register a new entrypoint instead")
		}
		return o
	}
	ot := entrypoint.OwnerUser
	if sc.Operator {
		ot = entrypoint.OwnerSystem
	}
	if t, ok := req["owner_type"].(string); ok {
		ot = entrypoint.OwnerType(t)
	}
	o := entrypoint.Owner{OwnerType: ot, TenantID: tenantID}
	switch {
	case sc.Operator && ot != entrypoint.OwnerSystem:
		r.fail(CodeOwnership, "$.owner.owner_type", "the platform operator registers system-owned entrypoints")
	case !sc.Operator && ot == entrypoint.OwnerSystem:
		r.fail(CodeOwnership, "$.owner.owner_type", "system-owned entrypoints are registered by the platform operator")
	}
	switch ot {
	case entrypoint.OwnerUser:
		o.ID = sc.SubjectID
	case entrypoint.OwnerTenant:
		o.ID = tenantID
	default:
		o.ID = entrypoint.PlatformTenant
	}
	if id, ok := req["id"]; ok && id != o.ID {
		r.fail(CodeOwnership, "$.owner.id", fmt.Sprintf("owner.id must be %q for a %s-owned entrypoint registered by this caller", o.ID, ot))
	}
	if t, ok := req["tenant_id"]; ok && t != tenantID {
		r.fail(CodeOwnership, "$.owner.tenant_id", "owner.tenant_id must be the caller's tenant ("+tenantID+")")
	}
	return o
}

func (s *Service) policy(ctx context.Context, tenantID string) (tenant.Policy, error) {
	if tenantID == entrypoint.PlatformTenant {
		return tenant.New(tenantID, s.clock.Now()), nil
	}
	p, err := s.store.Tenant(ctx, tenantID)
	if errors.Is(err, store.ErrNotFound) {
		return tenant.New(tenantID, s.clock.Now()), nil
	}
	return p, err
}

// applyLimitDefaults fills traits.limits fields the author left out from the tenant's defaults.
func applyLimitDefaults(doc map[string]any, p tenant.Policy) {
	traits, ok := doc["traits"].(map[string]any)
	if !ok {
		return
	}
	limits, ok := traits["limits"].(map[string]any)
	if !ok {
		if _, present := traits["limits"]; present {
			return
		}
		limits = map[string]any{}
		traits["limits"] = limits
	}
	setDefault(limits, "timeout_seconds", json.Number(strconv.FormatInt(p.Defaults.TimeoutSeconds, 10)))
	impl, _ := doc["implementation"].(map[string]any)
	if impl["adapter"] == schema.StarlarkAdapter || impl["adapter"] == schema.WorkerAdapter {
		setDefault(limits, "memory_mb", json.Number(strconv.FormatInt(p.Defaults.MemoryMB, 10)))
		setDefault(limits, "cpu", json.Number(strconv.FormatFloat(p.Defaults.CPU, 'f', -1, 64)))
	}
}

// applySchemaDefaults makes the stored definition say what is enforced: the schema defaults of 000.
func applySchemaDefaults(doc map[string]any) {
	setDefault(doc, "tags", []any{})
	if io, ok := doc["schema"].(map[string]any); ok {
		setDefault(io, "params", nil)
		setDefault(io, "returns", nil)
		setDefault(io, "errors", []any{})
	}
	traits, ok := doc["traits"].(map[string]any)
	if !ok {
		return
	}
	setDefault(traits, "is_idempotent", false)
	setDefault(traits, "caching", map[string]any{})
	if c, ok := traits["caching"].(map[string]any); ok {
		setDefault(c, "max_age_seconds", json.Number("0"))
	}
	setDefault(traits, "rate_limit", nil)
	setDefault(traits, "entrypoint", true)
	if l, ok := traits["limits"].(map[string]any); ok {
		setDefault(l, "max_concurrent", json.Number("100"))
	}
	if rp, ok := traits["retry"].(map[string]any); ok {
		setDefault(rp, "initial_delay_ms", json.Number("200"))
		setDefault(rp, "max_delay_ms", json.Number("10000"))
		setDefault(rp, "backoff_multiplier", json.Number("2.0"))
		setDefault(rp, "non_retryable_errors", []any{})
	}
}

func setDefault(m map[string]any, k string, v any) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// checkQuotas rejects limits above the tenant's per-execution quotas (001: definitions cannot
// request resources exceeding tenant quotas).
func (s *Service) checkQuotas(traits map[string]any, p tenant.Policy, r *Report) {
	limits, _ := traits["limits"].(map[string]any)
	num := func(k string) (float64, bool) {
		switch v := limits[k].(type) {
		case json.Number:
			f, err := v.Float64()
			return f, err == nil
		case float64:
			return v, true
		}
		return 0, false
	}
	q := p.Quotas
	if v, ok := num("memory_mb"); ok && q.MaxMemoryPerExecutionMB != nil && v > float64(*q.MaxMemoryPerExecutionMB) {
		r.fail(CodeQuota, "$.traits.limits.memory_mb", fmt.Sprintf("memory_mb exceeds the tenant quota of %d", *q.MaxMemoryPerExecutionMB))
	}
	if v, ok := num("cpu"); ok && q.MaxCPUPerExecution != nil && v > *q.MaxCPUPerExecution {
		r.fail(CodeQuota, "$.traits.limits.cpu", fmt.Sprintf("cpu exceeds the tenant quota of %g", *q.MaxCPUPerExecution))
	}
	if v, ok := num("timeout_seconds"); ok && q.MaxExecutionDurationSeconds != nil && v > float64(*q.MaxExecutionDurationSeconds) {
		r.fail(CodeQuota, "$.traits.limits.timeout_seconds", fmt.Sprintf("timeout_seconds exceeds the tenant quota of %d", *q.MaxExecutionDurationSeconds))
	}
}

// sampleCompensationContext is a minimal valid CompensationContext: a handler's params schema must
// accept it (000: "must accept CompensationContext ... or a compatible superset").
var sampleCompensationContext = map[string]any{
	"trigger": "failure", "original_workflow_invocation_id": "inv_sample", "failed_step_id": "unknown",
	"failed_step_error":       map[string]any{"error_type": "runtime_error", "message": "sample"},
	"workflow_state_snapshot": map[string]any{}, "timestamp": "2026-01-01T00:00:00Z",
	"invocation_metadata": map[string]any{"entrypoint_id": gts.WorkflowType + "vendor.app.sample.sample.v1~",
		"original_input": map[string]any{}, "tenant_id": "t_sample"},
}

// checkCompensation verifies 000's registration rules for on_failure/on_cancel handlers: the
// referenced entrypoint exists (visible to the caller), is active, and accepts a CompensationContext.
func (s *Service) checkCompensation(ctx context.Context, sc auth.SecurityContext, traits map[string]any, r *Report) error {
	wf, _ := traits["workflow"].(map[string]any)
	comp, _ := wf["compensation"].(map[string]any)
	for _, k := range []string{"on_failure", "on_cancel"} {
		ref, ok := comp[k].(string)
		if !ok || ref == "" {
			continue
		}
		path := compensationPath + k
		h, err := s.resolve(ctx, sc, ref)
		if errors.Is(err, store.ErrNotFound) {
			r.fail(CodeCompensation, path, "compensation handler "+ref+" does not exist")
			continue
		}
		if err != nil {
			return err
		}
		if h.Status != entrypoint.StatusActive {
			r.fail(CodeCompensation, path, fmt.Sprintf("compensation handler %s is %s; it must be active", h.GTSID, h.Status))
			continue
		}
		var def struct {
			Schema struct {
				Params json.RawMessage `json:"params"`
			} `json:"schema"`
		}
		if err := json.Unmarshal(h.Definition, &def); err != nil {
			return fmt.Errorf("stored definition of %s: %w", h.GTSID, err)
		}
		var params any
		if len(def.Schema.Params) > 0 {
			if err := json.Unmarshal(def.Schema.Params, &params); err != nil {
				return fmt.Errorf("stored params schema of %s: %w", h.GTSID, err)
			}
		}
		if params == nil {
			r.fail(CodeCompensation, path, "compensation handler "+h.GTSID+" declares no params; it must accept a CompensationContext ($ref gts://"+compensationCtxID+")")
			continue
		}
		compiled, issues := s.schemas.CompileUserSchema("$", params)
		if len(issues) > 0 || len(s.schemas.ValidateValue(compiled, "$", sampleCompensationContext)) > 0 {
			r.fail(CodeCompensation, path, "compensation handler "+h.GTSID+" params do not accept a CompensationContext ($ref gts://"+compensationCtxID+")")
		}
	}
	return nil
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	var out map[string]any
	dec := json.NewDecoder(bytesReader(b))
	dec.UseNumber()
	if dec.Decode(&out) != nil {
		return nil
	}
	return out
}

func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// compileFilter compiles a literal event_filter_query at registration, as the runtime will.
func compileFilter(expr string) error {
	_, err := eventfilter.Compile(expr)
	return err
}

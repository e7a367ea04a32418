// Package registry is the entrypoint registry (000's Entrypoint Registry API with 001's additions):
// registration with all-at-once validation, drafts, the status machine, versions and version
// resolution, visibility by owner, and deletion. HTTP lives in package api; storage in package store.
package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
)

// Store is the store methods the registry uses (store.Store has them all): the entrypoint catalog's
// reads, the tenant's policy (its quotas), and Update for registrations and their audit events.
type Store interface {
	store.TenantReader
	Entrypoint(ctx context.Context, v entrypoint.Viewer, id string) (entrypoint.Entrypoint, error)
	ListEntrypoints(ctx context.Context, v entrypoint.Viewer, q store.ListQuery) (store.Page[entrypoint.Entrypoint], error)
	EntrypointVersions(ctx context.Context, v entrypoint.Viewer, family string) ([]entrypoint.Entrypoint, error)
	LatestActive(ctx context.Context, v entrypoint.Viewer, family string, major int) (entrypoint.Entrypoint, error)
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Service implements the registry use cases.
type Service struct {
	store   Store
	schemas *schema.Registry
	clock   clock.Clock
	ids     idgen.Generator
	quotas  QuotaObserver
}

// NewService returns a registry Service; quotas hears of registrations refused by a quota (nil:
// nobody).
func NewService(s Store, schemas *schema.Registry, c clock.Clock, ids idgen.Generator, quotas QuotaObserver) *Service {
	return &Service{store: s, schemas: schemas, clock: c, ids: ids, quotas: quotas}
}

// QuotaObserver hears of registrations refused by a tenant quota (package metrics implements it).
type QuotaObserver interface {
	// QuotaExceeded: tenantID's registration was refused by quota ("max_definitions").
	QuotaExceeded(tenantID, quota string)
}

func viewer(sc auth.SecurityContext) entrypoint.Viewer {
	return entrypoint.Viewer{TenantID: sc.TenantID, SubjectID: sc.SubjectID, Operator: sc.Operator}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// Validate checks a registration body without saving anything (POST /entrypoints:validate).
func (s *Service) Validate(ctx context.Context, sc auth.SecurityContext, body map[string]any) (Report, error) {
	c, err := s.prepare(ctx, sc, body, nil)
	if err != nil {
		return Report{}, problem.Internal(err)
	}
	return c.report, nil
}

// Register stores a new draft entrypoint (POST /entrypoints). An invalid body answers 422 with every
// issue; an id that exists in the tenant or at platform scope answers 409.
func (s *Service) Register(ctx context.Context, sc auth.SecurityContext, body map[string]any) (entrypoint.Entrypoint, []Finding, error) {
	if !sc.Has(auth.RoleDeveloper) {
		return entrypoint.Entrypoint{}, nil, problem.Forbidden("registering entrypoints needs the developer role")
	}
	c, err := s.prepare(ctx, sc, body, nil)
	if err != nil {
		return c.ep, nil, problem.Internal(err)
	}
	if !c.report.Valid {
		return c.ep, nil, c.report.problem("the entrypoint definition is invalid")
	}
	now := s.clock.Now()
	e := c.ep
	e.ID, e.Revision, e.CreatedAt, e.UpdatedAt, e.CreatedBy = s.ids.New("ep"), 1, now, now, sc.SubjectID
	policy, err := s.policy(ctx, e.TenantID)
	if err != nil {
		return e, nil, problem.Internal(err)
	}
	var perr error
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if max := policy.Quotas.MaxDefinitions; max != nil && e.TenantID != entrypoint.PlatformTenant {
			n, err := tx.CountTenantEntrypoints(e.TenantID)
			if err != nil {
				return err
			}
			if n >= *max {
				pe := problem.New(problem.TypeQuotaExceeded, "tenant %s has reached its quota of %d definitions; archive or delete some, or ask the operator to raise max_definitions", e.TenantID, *max).With("quota", "max_definitions")
				pe.RetryAfter = quotaRetryAfter
				perr = pe
				return perr
			}
		}
		if err := tx.InsertEntrypoint(e); err != nil {
			return err
		}
		return s.writeAudit(ctx, tx, sc, e, audit.EntrypointCreated, nil)
	})
	switch {
	case perr != nil:
		if s.quotas != nil {
			s.quotas.QuotaExceeded(e.TenantID, "max_definitions")
		}
		return e, nil, perr
	case errors.Is(err, store.ErrConflict):
		return e, nil, problem.Conflict("already_exists", "entrypoint %s already exists in this tenant or at platform scope", e.GTSID)
	case err != nil:
		return e, nil, problem.Internal(err)
	}
	return e, c.report.Warnings, nil
}

// quotaRetryAfter is the Retry-After hint (seconds) on a max_definitions refusal: capacity only comes
// back when someone archives an entrypoint or raises the quota, so the hint is deliberately long.
const quotaRetryAfter = 60

// resolve finds an entrypoint visible to the caller by opaque id or GTS id; a major-only GTS id that
// is not itself registered resolves to the latest active minor of that major.
func (s *Service) resolve(ctx context.Context, sc auth.SecurityContext, id string) (entrypoint.Entrypoint, error) {
	v := viewer(sc)
	e, err := s.store.Entrypoint(ctx, v, id)
	if !errors.Is(err, store.ErrNotFound) {
		return e, err
	}
	gid, perr := gts.Parse(id)
	if perr != nil || !gid.MajorOnly() {
		return e, err
	}
	return s.store.LatestActive(ctx, v, gid.Family(), gid.Last().Major)
}

// Get returns an entrypoint visible to the caller; anything else answers 404.
func (s *Service) Get(ctx context.Context, sc auth.SecurityContext, id string) (entrypoint.Entrypoint, error) {
	e, err := s.resolve(ctx, sc, id)
	if errors.Is(err, store.ErrNotFound) {
		return e, problem.NotFound("entrypoint %s not found", id)
	}
	if err != nil {
		return e, problem.Internal(err)
	}
	return e, nil
}

// List lists the entrypoints visible to the caller.
func (s *Service) List(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[entrypoint.Entrypoint], error) {
	return s.store.ListEntrypoints(ctx, viewer(sc), q)
}

// Versions lists every version of the entrypoint's family visible to the caller.
func (s *Service) Versions(ctx context.Context, sc auth.SecurityContext, id string) ([]entrypoint.Entrypoint, error) {
	e, err := s.Get(ctx, sc, id)
	if err != nil {
		return nil, err
	}
	list, err := s.store.EntrypointVersions(ctx, viewer(sc), e.Family)
	if err != nil {
		return nil, problem.Internal(err)
	}
	return list, nil
}

// ValidateExisting re-runs every check on a stored definition (POST /entrypoints/{id}:validate).
func (s *Service) ValidateExisting(ctx context.Context, sc auth.SecurityContext, id string) (Report, error) {
	e, err := s.Get(ctx, sc, id)
	if err != nil {
		return Report{}, err
	}
	c, err := s.prepare(ctx, sc, bodyOf(e), &e)
	if err != nil {
		return Report{}, problem.Internal(err)
	}
	c.report.ID = e.ID
	return c.report, nil
}

// bodyOf rebuilds the registration body of a stored entrypoint.
func bodyOf(e entrypoint.Entrypoint) map[string]any {
	var body map[string]any
	dec := json.NewDecoder(bytesReader(e.Definition))
	dec.UseNumber()
	_ = dec.Decode(&body)
	if body == nil {
		body = map[string]any{}
	}
	body["entrypoint_id"] = e.GTSID
	if e.Shared {
		body["shared"] = true
	}
	body["version"] = e.Version
	return body
}

// editable loads an entrypoint the caller may change: not visible → 404; visible but not theirs to
// change, or without the developer role → 403. Changes name their target exactly (opaque id or the
// exact GTS id): a major-only id never resolves to "whichever minor is active" here.
func (s *Service) editable(ctx context.Context, sc auth.SecurityContext, id string) (entrypoint.Entrypoint, error) {
	e, err := s.store.Entrypoint(ctx, viewer(sc), id)
	if errors.Is(err, store.ErrNotFound) {
		return e, problem.NotFound("entrypoint %s not found", id)
	}
	if err != nil {
		return e, problem.Internal(err)
	}
	if !sc.Has(auth.RoleDeveloper) {
		return e, problem.Forbidden("changing entrypoints needs the developer role")
	}
	if !e.ModifiableBy(viewer(sc)) {
		return e, problem.Forbidden("entrypoint %s belongs to %s %s; it can be read and invoked, not changed", e.ID, e.Owner.OwnerType, e.Owner.ID)
	}
	return e, nil
}

// Update replaces a draft's definition (PUT /entrypoints/{id}); any other status answers 409.
func (s *Service) Update(ctx context.Context, sc auth.SecurityContext, id string, body map[string]any) (entrypoint.Entrypoint, []Finding, error) {
	e, err := s.editable(ctx, sc, id)
	if err != nil {
		return e, nil, err
	}
	if e.Status != entrypoint.StatusDraft {
		return e, nil, problem.Conflict("not_draft", "entrypoint %s is %s; only drafts can be updated, register a new version instead", e.ID, e.Status).With("current_status", e.Status)
	}
	c, err := s.prepare(ctx, sc, body, &e)
	if err != nil {
		return e, nil, problem.Internal(err)
	}
	if !c.report.Valid {
		return e, nil, c.report.problem("the entrypoint definition is invalid")
	}
	next := e
	next.Shared, next.Version, next.Title, next.Tags, next.Adapter, next.Definition = c.ep.Shared, c.ep.Version, c.ep.Title, c.ep.Tags, c.ep.Adapter, c.ep.Definition
	next.UpdatedAt = s.clock.Now()
	if err := s.save(ctx, sc, &next, e.Revision, audit.EntrypointUpdated, func(cur entrypoint.Entrypoint) error {
		if cur.Status != entrypoint.StatusDraft {
			return problem.Conflict("not_draft", "entrypoint %s is %s; only drafts can be updated", e.ID, cur.Status)
		}
		return nil
	}); err != nil {
		return e, nil, err
	}
	return next, c.report.Warnings, nil
}

// save writes next if the stored row is still at revision rev (and check passes), with an audit
// event, in one transaction.
func (s *Service) save(ctx context.Context, sc auth.SecurityContext, next *entrypoint.Entrypoint, rev int64, auditType string,
	check func(entrypoint.Entrypoint) error, details ...any) error {
	var perr error
	base := *next
	err := s.store.Update(ctx, func(tx store.Tx) error {
		*next = base // a run again (store.Tx) starts from the same entrypoint: UpdateEntrypoint moved its revision
		cur, err := tx.EntrypointByRef(next.ID)
		if err != nil {
			return err
		}
		if check != nil {
			if perr = check(cur); perr != nil {
				return perr
			}
		}
		if cur.Revision != rev {
			perr = problem.Conflict("concurrent_modification", "entrypoint %s changed while this request was processed; retry", next.ID)
			return perr
		}
		if err := tx.UpdateEntrypoint(next); err != nil {
			return err
		}
		var d any
		if len(details) > 0 {
			d = details[0]
		}
		return s.writeAudit(ctx, tx, sc, *next, auditType, d)
	})
	switch {
	case perr != nil:
		return perr
	case errors.Is(err, store.ErrNotFound):
		return problem.NotFound("entrypoint %s not found", next.ID)
	case err != nil:
		return problem.Internal(err)
	}
	return nil
}

// StatusRequest is the body of POST /entrypoints/{id}:status.
type StatusRequest struct {
	Action       entrypoint.Action `json:"action"`
	ReleaseNotes *string           `json:"release_notes,omitempty"`
	Reason       *string           `json:"reason,omitempty"`
	SuccessorID  *string           `json:"successor_id,omitempty"`
	SunsetDate   *time.Time        `json:"sunset_date,omitempty"`
}

var statusAudit = map[entrypoint.Action]string{
	entrypoint.ActionActivate: audit.EntrypointActivated, entrypoint.ActionDeprecate: audit.EntrypointDeprecated,
	entrypoint.ActionDisable: audit.EntrypointDisabled, entrypoint.ActionEnable: audit.EntrypointEnabled,
	entrypoint.ActionArchive: audit.EntrypointArchived,
}

// ChangeStatus applies a status action exactly as 000's transition table allows; any other
// transition answers 409.
func (s *Service) ChangeStatus(ctx context.Context, sc auth.SecurityContext, id string, req StatusRequest) (entrypoint.Entrypoint, error) {
	if err := validateStatusRequest(req); err != nil {
		return entrypoint.Entrypoint{}, err
	}
	e, err := s.editable(ctx, sc, id)
	if err != nil {
		return e, err
	}
	to, err := entrypoint.Transition(e.Status, req.Action)
	if err != nil {
		return e, invalidTransition(e, req.Action)
	}
	if req.Action == entrypoint.ActionActivate {
		if err := s.checkActivation(ctx, sc, e); err != nil {
			return e, err
		}
	}
	next := applyStatus(e, to, req, s.clock.Now())
	err = s.save(ctx, sc, &next, e.Revision, statusAudit[req.Action], func(cur entrypoint.Entrypoint) error {
		if cur.Status != e.Status {
			return invalidTransition(cur, req.Action)
		}
		return nil
	}, map[string]any{"from": e.Status, "to": to})
	if err != nil {
		return e, err
	}
	return next, nil
}

// validateStatusRequest checks the request on its own, before any entrypoint is read: the
// optional members go with their action, a successor is an entrypoint's GTS id, and the action is
// known. All findings are collected into one validation problem; nil means the request is sound.
func validateStatusRequest(req StatusRequest) error {
	var issues []problem.Issue
	if req.ReleaseNotes != nil && req.Action != entrypoint.ActionActivate {
		issues = append(issues, problem.Issue{Path: "$.release_notes", Code: "INVALID_VALUE", Message: "release_notes goes with the activate action"})
	}
	if (req.Reason != nil || req.SuccessorID != nil || req.SunsetDate != nil) && req.Action != entrypoint.ActionDeprecate {
		issues = append(issues, problem.Issue{Path: "$", Code: "INVALID_VALUE", Message: "reason, successor_id and sunset_date go with the deprecate action"})
	}
	if req.SuccessorID != nil {
		if sid, err := gts.Parse(*req.SuccessorID); err != nil {
			issues = append(issues, problem.Issue{Path: "$.successor_id", Code: "INVALID_VALUE", Message: err.Error()})
		} else if _, err := gts.EntrypointKind(sid); err != nil {
			issues = append(issues, problem.Issue{Path: "$.successor_id", Code: "INVALID_VALUE", Message: err.Error()})
		}
	}
	if _, err := entrypoint.Transition(entrypoint.StatusDraft, req.Action); errors.Is(err, entrypoint.ErrUnknownAction) {
		issues = append(issues, problem.Issue{Path: "$.action", Code: "INVALID_VALUE", Message: fmt.Sprintf("unknown action %q: use activate, deprecate, disable, enable or archive", req.Action)})
	}
	if len(issues) > 0 {
		return problem.Validation("invalid status request", issues)
	}
	return nil
}

// checkActivation enforces what activation needs beyond the transition table: the tenant's
// publish-approval policy, and a definition that still validates today (prepare runs again
// against the current policy and handlers).
func (s *Service) checkActivation(ctx context.Context, sc auth.SecurityContext, e entrypoint.Entrypoint) error {
	policy, err := s.policy(ctx, e.TenantID)
	if err != nil {
		return problem.Internal(err)
	}
	if policy.Policies.RequireApprovalForPublish && !sc.Has(auth.RoleAdmin) {
		return problem.Forbidden("tenant %s requires approval to publish: activation needs the admin role", e.TenantID)
	}
	c, err := s.prepare(ctx, sc, bodyOf(e), &e)
	if err != nil {
		return problem.Internal(err)
	}
	if !c.report.Valid {
		return c.report.problem("the entrypoint cannot be activated: its definition is no longer valid")
	}
	return nil
}

// applyStatus returns e moved to status to at now, with the timestamps and details the action
// records (release notes, the deprecation, disabled/archived times).
func applyStatus(e entrypoint.Entrypoint, to entrypoint.Status, req StatusRequest, now time.Time) entrypoint.Entrypoint {
	next := e
	next.Status, next.UpdatedAt = to, now
	switch req.Action {
	case entrypoint.ActionActivate:
		next.ActivatedAt = &now
		if req.ReleaseNotes != nil {
			next.ReleaseNotes = *req.ReleaseNotes
		}
	case entrypoint.ActionDeprecate:
		d := &entrypoint.Deprecation{DeprecatedAt: now}
		if req.Reason != nil {
			d.Reason = *req.Reason
		}
		if req.SuccessorID != nil {
			d.SuccessorID = *req.SuccessorID
		}
		if req.SunsetDate != nil {
			t := req.SunsetDate.UTC()
			d.SunsetDate = &t
		}
		next.Deprecation = d
	case entrypoint.ActionDisable:
		next.DisabledAt = &now
	case entrypoint.ActionEnable:
		next.DisabledAt = nil
	case entrypoint.ActionArchive:
		next.ArchivedAt = &now
	}
	return next
}

func invalidTransition(e entrypoint.Entrypoint, a entrypoint.Action) *problem.Error {
	return problem.Conflict("invalid_transition", "action %q is not allowed while entrypoint %s is %s", a, e.ID, e.Status).
		With("current_status", e.Status).With("action", a)
}

// Delete hard-deletes a draft; any other entrypoint is archived (soft delete). While invocations of
// it are in flight the answer is 409 in_flight_executions unless force is set.
func (s *Service) Delete(ctx context.Context, sc auth.SecurityContext, id string, force bool) (e entrypoint.Entrypoint, deleted bool, err error) {
	if e, err = s.editable(ctx, sc, id); err != nil {
		return e, false, err
	}
	var perr error
	now := s.clock.Now()
	next := e
	err = s.store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.EntrypointByRef(e.ID)
		if err != nil {
			return err
		}
		if cur.Status == entrypoint.StatusDraft {
			deleted = true
			if err := tx.DeleteEntrypoint(cur.ID); err != nil {
				return err
			}
			return s.writeAudit(ctx, tx, sc, cur, audit.EntrypointDeleted, map[string]any{"hard_delete": true})
		}
		next = cur
		if cur.Status == entrypoint.StatusArchived {
			return nil
		}
		n, err := tx.CountInFlight(cur.TenantID, cur.ID)
		if err != nil {
			return err
		}
		if n > 0 && !force {
			perr = problem.Conflict("in_flight_executions", "cannot delete: %d executions are in progress", n).
				With("execution_count", n).With("hint", "use ?force=true to delete anyway, or wait for executions to complete")
			return perr
		}
		next.Status, next.ArchivedAt, next.UpdatedAt = entrypoint.StatusArchived, &now, now
		if err := tx.UpdateEntrypoint(&next); err != nil {
			return err
		}
		return s.writeAudit(ctx, tx, sc, next, audit.EntrypointDeleted, map[string]any{"archived": true, "forced": force, "in_flight": n})
	})
	switch {
	case perr != nil:
		return e, false, perr
	case errors.Is(err, store.ErrNotFound):
		return e, false, problem.NotFound("entrypoint %s not found", id)
	case err != nil:
		return e, false, problem.Internal(err)
	}
	return next, deleted, nil
}

// writeAudit records an audit event of entrypoint e in tx.
func (s *Service) writeAudit(ctx context.Context, tx store.Tx, sc auth.SecurityContext, e entrypoint.Entrypoint, typ string, details any) error {
	d := map[string]any{"entrypoint_id": e.GTSID, "status": e.Status}
	if m, ok := details.(map[string]any); ok {
		for k, v := range m {
			d[k] = v
		}
	}
	ev, err := audit.WithDetails(audit.Event{ID: s.ids.New("aud"), TenantID: e.TenantID, Type: typ, ActorID: sc.SubjectID,
		ResourceType: "entrypoint", ResourceID: e.ID, CorrelationID: obs.CorrelationID(ctx), At: s.clock.Now()}, d)
	if err != nil {
		return err
	}
	return tx.InsertAudit(ev)
}

package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
)

// MaxDescription bounds an event type's description.
const MaxDescription = 1024

// TypeRequest is the body of POST /event-types.
type TypeRequest struct {
	EventTypeID string          `json:"event_type_id"`
	Schema      json.RawMessage `json:"schema"`
	Description string          `json:"description"`

	// Read-only fields of the resource, accepted and ignored (a GET body can be posted back).
	TenantID  json.RawMessage `json:"tenant_id,omitempty"`
	Scope     json.RawMessage `json:"scope,omitempty"`
	CreatedBy json.RawMessage `json:"created_by,omitempty"`
	CreatedAt json.RawMessage `json:"created_at,omitempty"`
}

func schemaIssues(in []schema.Issue) []problem.Issue {
	out := make([]problem.Issue, 0, len(in))
	for _, is := range in {
		out = append(out, problem.Issue{Path: is.Path, Message: is.Message, Code: strings.ToUpper(is.Code)})
	}
	return out
}

// scopeOf is the scope sc registers event types in: the platform for the operator, else its tenant
// (developer role).
func scopeOf(sc auth.SecurityContext, write bool) (string, error) {
	if sc.Operator {
		return events.PlatformScope, nil
	}
	if write && !sc.Has(auth.RoleDeveloper) {
		return "", problem.Forbidden("registering event types needs the developer role")
	}
	if !sc.Has(auth.RoleViewer) {
		return "", problem.Forbidden("reading event types needs the viewer role")
	}
	return sc.TenantID, nil
}

func (b *Bus) typeAudit(ctx context.Context, sc auth.SecurityContext, t events.Type, typ string) (audit.Event, error) {
	tenantID := t.TenantID
	if tenantID == events.PlatformScope {
		tenantID = entrypoint.PlatformTenant // the platform's audit log, as for system entrypoints
	}
	return audit.WithDetails(audit.Event{ID: b.cfg.IDs.New("aud"), TenantID: tenantID, Type: typ, ActorID: sc.SubjectID,
		ResourceType: "event_type", ResourceID: t.ID, CorrelationID: obs.CorrelationID(ctx), At: b.cfg.Clock.Now()},
		map[string]any{"event_type_id": t.ID, "scope": t.Scope})
}

// CreateType registers an event type in the caller's scope: 201 with it; 409 when the scope has it.
// The schema must be a JSON Schema within the user schema limits (schema.CompileUserSchema).
func (b *Bus) CreateType(ctx context.Context, sc auth.SecurityContext, req TypeRequest) (events.Type, error) {
	scope, err := scopeOf(sc, true)
	if err != nil {
		return events.Type{}, err
	}
	var issues []problem.Issue
	if id, err := gts.Parse(req.EventTypeID); err != nil || !id.IsType() {
		msg := "must be a GTS type id ending with ~"
		if err != nil {
			msg = err.Error()
		}
		issues = append(issues, problem.Issue{Path: "$.event_type_id", Code: "INVALID_VALUE", Message: msg})
	}
	if len(req.Description) > MaxDescription {
		issues = append(issues, problem.Issue{Path: "$.description", Code: "INVALID_VALUE", Message: "at most 1024 characters"})
	}
	if len(req.Schema) == 0 || string(req.Schema) == "null" {
		issues = append(issues, problem.Issue{Path: "$.schema", Code: "MISSING_FIELD", Message: "schema (a JSON Schema of the payload) is required"})
	} else if _, is, err := b.cfg.Schemas.CompileUserSchemaContext(ctx, "$.schema", req.Schema); err != nil {
		return events.Type{}, problem.Internal(err)
	} else {
		issues = append(issues, schemaIssues(is)...)
	}
	if len(issues) > 0 {
		return events.Type{}, problem.Validation("the event type is invalid", issues)
	}
	t := events.Type{ID: req.EventTypeID, TenantID: scope, Scope: "tenant", Schema: req.Schema, Description: req.Description,
		CreatedBy: sc.SubjectID, CreatedAt: b.cfg.Clock.Now()}
	if scope == events.PlatformScope {
		t.Scope = "platform"
	}
	err = b.cfg.Store.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertEventType(t); err != nil {
			return err
		}
		ev, err := b.typeAudit(ctx, sc, t, audit.EventTypeCreated)
		if err != nil {
			return err
		}
		return tx.InsertAudit(ev)
	})
	if errors.Is(err, store.ErrConflict) {
		return t, problem.Conflict("event_type_exists", "event type %s is registered already", t.ID).With("event_type_id", t.ID)
	}
	if err != nil {
		return t, problem.Internal(err)
	}
	return t, nil
}

// GetType reads an event type: the caller's tenant's, else the platform's (the operator: the
// platform's).
func (b *Bus) GetType(ctx context.Context, sc auth.SecurityContext, id string) (events.Type, error) {
	scope, err := scopeOf(sc, false)
	if err != nil {
		return events.Type{}, err
	}
	t, err := b.cfg.Store.EventType(ctx, scope, id)
	if errors.Is(err, store.ErrNotFound) && scope != events.PlatformScope {
		t, err = b.cfg.Store.EventType(ctx, events.PlatformScope, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return t, problem.NotFound("event type %s not found", id)
	}
	if err != nil {
		return t, problem.Internal(err)
	}
	return t, nil
}

// ListTypes lists the event types the caller sees: its tenant's and the platform's.
func (b *Bus) ListTypes(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[events.Type], error) {
	scope, err := scopeOf(sc, false)
	if err != nil {
		return store.Page[events.Type]{}, err
	}
	return b.cfg.Store.ListEventTypes(ctx, scope, q)
}

// DeleteType removes an event type of the caller's scope (a tenant cannot delete the platform's:
// 404 for it, as for one that does not exist). Events of the type published later are accepted
// unvalidated (or refused under require_registered_event_types).
func (b *Bus) DeleteType(ctx context.Context, sc auth.SecurityContext, id string) error {
	scope, err := scopeOf(sc, true)
	if err != nil {
		return err
	}
	t := events.Type{ID: id, TenantID: scope, Scope: "tenant"}
	if scope == events.PlatformScope {
		t.Scope = "platform"
	}
	err = b.cfg.Store.Update(ctx, func(tx store.Tx) error {
		if err := tx.DeleteEventType(scope, id); err != nil {
			return err
		}
		ev, err := b.typeAudit(ctx, sc, t, audit.EventTypeDeleted)
		if err != nil {
			return err
		}
		return tx.InsertAudit(ev)
	})
	if errors.Is(err, store.ErrNotFound) {
		return problem.NotFound("event type %s not found", id)
	}
	if err != nil {
		return problem.Internal(err)
	}
	return nil
}

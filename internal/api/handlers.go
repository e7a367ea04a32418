package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/registry"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tokens"
)

// AuditLister lists a tenant's audit events ("" = all).
type AuditLister interface {
	ListAudit(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[audit.Event], error)
}

func requireRole(sc auth.SecurityContext, role auth.Role, what string) error {
	if !sc.Has(role) {
		return problem.Forbidden("%s needs the %s role", what, role)
	}
	return nil
}

// --- tokens ---

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	sc := security(r)
	if err := requireRole(sc, auth.RoleAdmin, "issuing tokens"); err != nil {
		s.problem(w, r, err)
		return
	}
	var req tokens.CreateTokenRequest
	if err := decodeResource(r, &req, tokens.CreatedToken{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	tk, err := s.cfg.Tokens.CreateToken(r.Context(), sc, req)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/tokens/"+tk.ID)
	s.writeJSON(w, r, http.StatusCreated, tk)
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	sc := security(r)
	if err := requireRole(sc, auth.RoleAdmin, "listing tokens"); err != nil {
		s.problem(w, r, err)
		return
	}
	servePage(s, w, r, func(q store.ListQuery) (store.Page[auth.Token], error) {
		return s.cfg.Tokens.ListTokens(r.Context(), sc, q)
	}, asIs)
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	sc := security(r)
	if err := requireRole(sc, auth.RoleAdmin, "revoking tokens"); err != nil {
		s.problem(w, r, err)
		return
	}
	if err := s.cfg.Tokens.RevokeToken(r.Context(), sc, chi.URLParam(r, "token_id")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// --- tenants ---

func (s *Server) enableTenant(w http.ResponseWriter, r *http.Request) {
	body, err := readJSON(r, true)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	p, err := s.cfg.Tenants.Enable(r.Context(), security(r), chi.URLParam(r, "tenant_id"), body)
	s.respond(w, r, p, err)
}

func (s *Server) disableTenant(w http.ResponseWriter, r *http.Request) {
	p, err := s.cfg.Tenants.Disable(r.Context(), security(r), chi.URLParam(r, "tenant_id"))
	s.respond(w, r, p, err)
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) {
	p, err := s.cfg.Tenants.Policy(r.Context(), security(r), chi.URLParam(r, "tenant_id"))
	s.respond(w, r, p, err)
}

func (s *Server) patchTenant(w http.ResponseWriter, r *http.Request) {
	body, err := readJSON(r, true)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	p, err := s.cfg.Tenants.Patch(r.Context(), security(r), chi.URLParam(r, "tenant_id"), body)
	s.respond(w, r, p, err)
}

func (s *Server) putTenantPolicy(w http.ResponseWriter, r *http.Request) {
	body, err := readJSON(r, true)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	p, err := s.cfg.Tenants.Replace(r.Context(), security(r), chi.URLParam(r, "tenant_id"), body)
	s.respond(w, r, p, err)
}

// --- entrypoints ---

func withWarnings(m map[string]any, warnings []registry.Finding) map[string]any {
	if len(warnings) > 0 {
		m["warnings"] = warnings
	}
	return m
}

func (s *Server) registerEntrypoint(w http.ResponseWriter, r *http.Request) {
	body, err := decodeObject(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	e, warnings, err := s.cfg.Registry.Register(r.Context(), security(r), body)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/entrypoints/"+e.ID)
	s.writeJSON(w, r, http.StatusCreated, withWarnings(registry.Render(e, true), warnings))
}

func (s *Server) validateEntrypoint(w http.ResponseWriter, r *http.Request) {
	if err := requireRole(security(r), auth.RoleDeveloper, "validating entrypoints"); err != nil {
		s.problem(w, r, err)
		return
	}
	body, err := decodeObject(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	rep, err := s.cfg.Registry.Validate(r.Context(), security(r), body)
	s.respond(w, r, rep, err)
}

func (s *Server) validateExisting(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	if err := requireRole(security(r), auth.RoleDeveloper, "validating entrypoints"); err != nil {
		s.problem(w, r, err)
		return
	}
	rep, err := s.cfg.Registry.ValidateExisting(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, rep, err)
}

// planEntrypoint answers POST /entrypoints/{id}:plan: the plan of a DAG run for a partition key.
func (s *Server) planEntrypoint(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var req registry.PlanRequest
	if err := decodeStruct(r, &req, true); err != nil {
		s.problem(w, r, err)
		return
	}
	res, err := s.cfg.Registry.Plan(r.Context(), security(r), chi.URLParam(r, "id"), req)
	s.respond(w, r, res, err)
}

func (s *Server) listEntrypoints(w http.ResponseWriter, r *http.Request) {
	var src bool
	servePage(s, w, r, func(q store.ListQuery) (store.Page[entrypoint.Entrypoint], error) {
		var err error
		if src, err = boolParam(r, "include_source"); err != nil {
			return store.Page[entrypoint.Entrypoint]{}, err
		}
		return s.cfg.Registry.List(r.Context(), security(r), q)
	}, func(e entrypoint.Entrypoint) (json.RawMessage, error) { return registry.RenderJSON(e, src) }, "include_source")
}

func (s *Server) getEntrypoint(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r, "include_source"); err != nil {
		s.problem(w, r, err)
		return
	}
	src, err := boolParam(r, "include_source")
	if err != nil {
		s.problem(w, r, err)
		return
	}
	e, err := s.cfg.Registry.Get(r.Context(), security(r), chi.URLParam(r, "id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	b, err := registry.RenderJSON(e, src)
	s.respond(w, r, b, err)
}

func (s *Server) updateEntrypoint(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	body, err := decodeObject(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	e, warnings, err := s.cfg.Registry.Update(r.Context(), security(r), chi.URLParam(r, "id"), body)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, withWarnings(registry.Render(e, true), warnings))
}

func (s *Server) entrypointStatus(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var req registry.StatusRequest
	if err := decodeStruct(r, &req, false); err != nil {
		s.problem(w, r, err)
		return
	}
	e, err := s.cfg.Registry.ChangeStatus(r.Context(), security(r), chi.URLParam(r, "id"), req)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, registry.Render(e, false))
}

func (s *Server) deleteEntrypoint(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r, "force"); err != nil {
		s.problem(w, r, err)
		return
	}
	force, err := boolParam(r, "force")
	if err != nil {
		s.problem(w, r, err)
		return
	}
	e, deleted, err := s.cfg.Registry.Delete(r.Context(), security(r), chi.URLParam(r, "id"), force)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	if deleted {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.writeJSON(w, r, http.StatusOK, registry.Render(e, false))
}

func (s *Server) entrypointVersions(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	id := chi.URLParam(r, "id")
	list, err := s.cfg.Registry.Versions(r.Context(), security(r), id)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	family := ""
	if len(list) > 0 {
		family = list[0].Family
	}
	s.writeJSON(w, r, http.StatusOK, map[string]any{"family": family, "items": registry.Summaries(list)})
}

// --- audit ---

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	sc := security(r)
	if err := requireRole(sc, auth.RoleAdmin, "reading audit events"); err != nil {
		s.problem(w, r, err)
		return
	}
	tenantID := sc.TenantID
	if sc.Operator {
		tenantID = ""
	}
	servePage(s, w, r, func(q store.ListQuery) (store.Page[audit.Event], error) {
		return s.cfg.Audit.ListAudit(r.Context(), tenantID, q)
	}, func(ev audit.Event) (audit.Event, error) {
		out, ok := ev.Renderable()
		if !ok {
			obs.Logger(r.Context()).WarnContext(r.Context(), "audit event with invalid details rendered as a string", "audit_id", ev.ID)
		}
		return out, nil
	})
}

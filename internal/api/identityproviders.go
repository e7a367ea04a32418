package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/federation"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
)

// identityProviderRoutes mounts the identity provider routes (docs/api.md, "Identity
// providers"): the platform operator, or a tenant admin for its own tenant's issuer.
func (s *Server) identityProviderRoutes(r chi.Router) {
	admin := r.With(s.need(auth.RoleAdmin, "identity providers"))
	admin.Post("/identity-providers", s.createIdentityProvider)
	admin.Get("/identity-providers", s.listIdentityProviders)
	admin.Get("/identity-providers/{id:[^:/]+}", s.getIdentityProvider)
	admin.Delete("/identity-providers/{id:[^:/]+}", s.deleteIdentityProvider)
}

// identityService returns the service, or answers 503 when there is none.
func (s *Server) identityService(w http.ResponseWriter, r *http.Request) *federation.Service {
	if s.cfg.IdentityProviders == nil {
		s.problem(w, r, problem.New(problem.TypeUnavailable, "identity providers are not served by this server"))
		return nil
	}
	return s.cfg.IdentityProviders
}

func (s *Server) createIdentityProvider(w http.ResponseWriter, r *http.Request) {
	svc := s.identityService(w, r)
	if svc == nil {
		return
	}
	var req federation.CreateRequest
	if err := decodeResource(r, &req, identity.Provider{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	p, err := svc.Create(r.Context(), security(r), req)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/identity-providers/"+p.ID)
	s.writeJSON(w, r, http.StatusCreated, p)
}

func (s *Server) listIdentityProviders(w http.ResponseWriter, r *http.Request) {
	if svc := s.identityService(w, r); svc != nil {
		servePage(s, w, r, func(q store.ListQuery) (store.Page[identity.Provider], error) {
			return svc.List(r.Context(), security(r), q)
		}, asIs)
	}
}

func (s *Server) getIdentityProvider(w http.ResponseWriter, r *http.Request) {
	if svc := s.identityService(w, r); svc != nil {
		p, err := svc.Get(r.Context(), security(r), chi.URLParam(r, "id"))
		s.respond(w, r, p, err)
	}
}

func (s *Server) deleteIdentityProvider(w http.ResponseWriter, r *http.Request) {
	svc := s.identityService(w, r)
	if svc == nil {
		return
	}
	if err := svc.Delete(r.Context(), security(r), chi.URLParam(r, "id")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

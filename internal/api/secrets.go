package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/secrets"
	"github.com/larkrun/lark/internal/store"
)

// secretRoutes mounts the Secrets API (docs/secrets.md): tenant admins write, developers read
// metadata; no answer ever holds a value.
func (s *Server) secretRoutes(r chi.Router) {
	// The role each write needs is checked before its body (which holds the value) is read.
	w := r.With(s.need(auth.RoleAdmin, "changing secrets"))
	dev := r.With(s.need(auth.RoleDeveloper, "reading secrets' metadata"))
	w.Post("/secrets", s.createSecret)
	dev.Get("/secrets", s.listSecrets)
	dev.Get("/secrets/{name}", s.getSecret)
	w.Put("/secrets/{name}", s.updateSecret)
	w.Delete("/secrets/{name}", s.deleteSecret)
}

// secretsService returns the service, or answers 503 when there is none.
func (s *Server) secretsService(w http.ResponseWriter, r *http.Request) *secrets.Service {
	if s.cfg.Secrets == nil {
		s.problem(w, r, problem.New(problem.TypeUnavailable, "secrets are not configured on this server"))
		return nil
	}
	return s.cfg.Secrets
}

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsService(w, r)
	if svc == nil {
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var body secrets.Create
	if err := decodeStruct(r, &body, false); err != nil {
		s.problem(w, r, err)
		return
	}
	out, err := svc.Create(r.Context(), security(r), body)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/secrets/"+out.Name)
	s.writeJSON(w, r, http.StatusCreated, out)
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsService(w, r)
	if svc == nil {
		return
	}
	servePage(s, w, r, func(q store.ListQuery) (store.Page[secrets.Secret], error) {
		return svc.List(r.Context(), security(r), q)
	}, asIs)
}

func (s *Server) getSecret(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsService(w, r)
	if svc == nil {
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	out, err := svc.Get(r.Context(), security(r), chi.URLParam(r, "name"))
	s.respond(w, r, out, err)
}

func (s *Server) updateSecret(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsService(w, r)
	if svc == nil {
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var body secrets.Update
	if err := decodeStruct(r, &body, false); err != nil {
		s.problem(w, r, err)
		return
	}
	out, err := svc.Update(r.Context(), security(r), chi.URLParam(r, "name"), body)
	s.respond(w, r, out, err)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	svc := s.secretsService(w, r)
	if svc == nil {
		return
	}
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	if err := svc.Delete(r.Context(), security(r), chi.URLParam(r, "name")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/eventtrigger"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/trigger"
)

// triggerRoutes mounts the Trigger API (000 + 002's event trigger management).
func (s *Server) triggerRoutes(r chi.Router) {
	w := r.With(s.need(auth.RoleDeveloper, "changing triggers"))
	w.Post("/triggers", s.createTrigger)
	r.Get("/triggers", s.listTriggers)
	r.Get("/triggers/{id:[^:/]+}", s.getTrigger)
	w.Put("/triggers/{id:[^:/]+}", s.replaceTrigger)
	w.Patch("/triggers/{id:[^:/]+}", s.patchTrigger)
	w.Delete("/triggers/{id:[^:/]+}", s.deleteTrigger)
	w.Post("/triggers/{id:[^:/]+}:enable", s.enableTrigger)
	w.Post("/triggers/{id:[^:/]+}:disable", s.disableTrigger)
	r.Get("/triggers/{id:[^:/]+}/metrics", s.triggerMetrics)
	r.Get("/triggers/{id:[^:/]+}/dead-letters", s.listDeadLetters)
	w.Delete("/triggers/{id:[^:/]+}/dead-letters", s.purgeDeadLetters)
	w.Post("/triggers/{id:[^:/]+}/dead-letters:redrive", s.redriveAll)
	w.Post("/triggers/{id:[^:/]+}/dead-letters/{dl:[^:/]+}:redrive", s.redriveOne)
}

func (s *Server) createTrigger(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var spec eventtrigger.Spec
	if err := decodeResource(r, &spec, trigger.Trigger{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	t, err := s.cfg.Triggers.Create(r.Context(), security(r), spec)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/triggers/"+t.ID)
	s.writeJSON(w, r, http.StatusCreated, t)
}

func (s *Server) listTriggers(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, func(q store.ListQuery) (store.Page[trigger.Trigger], error) {
		return s.cfg.Triggers.List(r.Context(), security(r), q)
	}, asIs)
}

func (s *Server) getTrigger(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	t, err := s.cfg.Triggers.Get(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, t, err)
}

func (s *Server) replaceTrigger(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var spec eventtrigger.Spec
	if err := decodeResource(r, &spec, trigger.Trigger{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	t, err := s.cfg.Triggers.Replace(r.Context(), security(r), chi.URLParam(r, "id"), spec)
	s.respond(w, r, t, err)
}

func (s *Server) patchTrigger(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	patch, err := decodeObject(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	t, err := s.cfg.Triggers.Patch(r.Context(), security(r), chi.URLParam(r, "id"), patch,
		func(b []byte, spec *eventtrigger.Spec) error { return decodeBody(b, spec, trigger.Trigger{}) })
	s.respond(w, r, t, err)
}

func (s *Server) deleteTrigger(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	if err := s.cfg.Triggers.Delete(r.Context(), security(r), chi.URLParam(r, "id")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) enableTrigger(w http.ResponseWriter, r *http.Request) {
	if err := noBody(r); err != nil {
		s.problem(w, r, err)
		return
	}
	t, err := s.cfg.Triggers.Enable(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, t, err)
}

func (s *Server) disableTrigger(w http.ResponseWriter, r *http.Request) {
	if err := noBody(r); err != nil {
		s.problem(w, r, err)
		return
	}
	t, err := s.cfg.Triggers.Disable(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, t, err)
}

func (s *Server) triggerMetrics(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r, "window"); err != nil {
		s.problem(w, r, err)
		return
	}
	m, err := s.cfg.Triggers.Metrics(r.Context(), security(r), chi.URLParam(r, "id"), r.URL.Query().Get("window"))
	s.respond(w, r, m, err)
}

func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, func(q store.ListQuery) (store.Page[trigger.DeadLetter], error) {
		return s.cfg.Triggers.DeadLetters(r.Context(), security(r), chi.URLParam(r, "id"), q)
	}, asIs)
}

func (s *Server) purgeDeadLetters(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	n, err := s.cfg.Triggers.Purge(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, map[string]int{"purged": n}, err)
}

func (s *Server) redriveAll(w http.ResponseWriter, r *http.Request) {
	if err := noBody(r); err != nil {
		s.problem(w, r, err)
		return
	}
	out, err := s.cfg.Triggers.Redrive(r.Context(), security(r), chi.URLParam(r, "id"), nil)
	s.respond(w, r, out, err)
}

func (s *Server) redriveOne(w http.ResponseWriter, r *http.Request) {
	if err := noBody(r); err != nil {
		s.problem(w, r, err)
		return
	}
	out, err := s.cfg.Triggers.Redrive(r.Context(), security(r), chi.URLParam(r, "id"), []string{chi.URLParam(r, "dl")})
	s.respond(w, r, out, err)
}

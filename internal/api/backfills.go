package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/scheduler"
	"github.com/larkrun/lark/internal/store"
)

// backfillRoutes mounts the backfill API (004 §7 over 000's conventions).
func (s *Server) backfillRoutes(r chi.Router) {
	w := r.With(s.need(auth.RoleDeveloper, "changing schedules"))
	w.Post("/backfills", s.createBackfill)
	r.Get("/backfills", s.listBackfills)
	r.Get("/backfills/{id:[^:/]+}", s.getBackfill)
	r.Get("/backfills/{id:[^:/]+}/partitions", s.backfillPartitions)
	for _, action := range []string{scheduler.BackfillPause, scheduler.BackfillResume, scheduler.BackfillCancel, scheduler.BackfillRetry} {
		w.Post("/backfills/{id:[^:/]+}:"+action, s.controlBackfill(action))
	}
}

func (s *Server) createBackfill(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var spec scheduler.BackfillSpec
	if err := decodeResource(r, &spec, schedule.Backfill{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	b, err := s.cfg.Schedules.CreateBackfill(r.Context(), security(r), spec)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/backfills/"+b.ID)
	s.writeJSON(w, r, http.StatusCreated, b)
}

func (s *Server) listBackfills(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, func(q store.ListQuery) (store.Page[schedule.Backfill], error) {
		return s.cfg.Schedules.ListBackfills(r.Context(), security(r), q)
	}, asIs)
}

func (s *Server) getBackfill(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	b, err := s.cfg.Schedules.GetBackfill(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, b, err)
}

func (s *Server) backfillPartitions(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, func(q store.ListQuery) (store.Page[schedule.Partition], error) {
		return s.cfg.Schedules.Partitions(r.Context(), security(r), chi.URLParam(r, "id"), q)
	}, asIs)
}

// controlBackfill answers POST /backfills/{id}:<action>; an action not mounted is the router's 404.
func (s *Server) controlBackfill(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := noBody(r); err != nil {
			s.problem(w, r, err)
			return
		}
		b, err := s.cfg.Schedules.ControlBackfill(r.Context(), security(r), chi.URLParam(r, "id"), action)
		s.respond(w, r, b, err)
	}
}

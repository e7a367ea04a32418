package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/scheduler"
	"github.com/larkrun/lark/internal/store"
)

// scheduleRoutes mounts the Schedule API (000 + 002).
func (s *Server) scheduleRoutes(r chi.Router) {
	// The role each write needs is checked before its body is read (the service checks again).
	w := r.With(s.need(auth.RoleDeveloper, "changing schedules"))
	w.Post("/schedules", s.createSchedule)
	r.Get("/schedules", s.listSchedules)
	r.Get("/schedules/{id:[^:/]+}", s.getSchedule)
	w.Put("/schedules/{id:[^:/]+}", s.replaceSchedule)
	w.Patch("/schedules/{id:[^:/]+}", s.patchSchedule)
	r.Delete("/schedules/{id:[^:/]+}", s.deleteSchedule)
	w.Post("/schedules/{id:[^:/]+}:pause", s.pauseSchedule)
	w.Post("/schedules/{id:[^:/]+}:resume", s.resumeSchedule)
	r.With(s.need(auth.RoleOperator, "triggering schedules")).Post("/schedules/{id:[^:/]+}:trigger", s.triggerSchedule)
	r.Get("/schedules/{id:[^:/]+}/history", s.scheduleHistory)
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var spec scheduler.Spec
	if err := decodeResource(r, &spec, schedule.Schedule{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	sch, err := s.cfg.Schedules.Create(r.Context(), security(r), spec)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/schedules/"+sch.ID)
	s.writeJSON(w, r, http.StatusCreated, sch)
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, func(q store.ListQuery) (store.Page[schedule.Schedule], error) {
		return s.cfg.Schedules.List(r.Context(), security(r), q)
	}, asIs)
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	sch, err := s.cfg.Schedules.Get(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, sch, err)
}

func (s *Server) replaceSchedule(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var spec scheduler.Spec
	if err := decodeResource(r, &spec, schedule.Schedule{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	sch, err := s.cfg.Schedules.Replace(r.Context(), security(r), chi.URLParam(r, "id"), spec)
	s.respond(w, r, sch, err)
}

func (s *Server) patchSchedule(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	patch, err := decodeObject(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	sch, err := s.cfg.Schedules.Patch(r.Context(), security(r), chi.URLParam(r, "id"), patch,
		func(b []byte, spec *scheduler.Spec) error { return decodeBody(b, spec, schedule.Schedule{}) })
	s.respond(w, r, sch, err)
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r, "cancel_in_flight"); err != nil {
		s.problem(w, r, err)
		return
	}
	cancel, err := boolParam(r, "cancel_in_flight")
	if err != nil {
		s.problem(w, r, err)
		return
	}
	out, err := s.cfg.Schedules.Delete(r.Context(), security(r), chi.URLParam(r, "id"), cancel)
	s.respond(w, r, out, err)
}

// noBody checks an action that takes neither query parameters nor a body (an empty body, or an
// empty JSON object, is accepted).
func noBody(r *http.Request) error {
	if err := onlyParams(r); err != nil {
		return err
	}
	var body struct{}
	return decodeStruct(r, &body, true)
}

func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	if err := noBody(r); err != nil {
		s.problem(w, r, err)
		return
	}
	sch, err := s.cfg.Schedules.Pause(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, sch, err)
}

func (s *Server) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var body struct {
		CatchUpMissed bool `json:"catch_up_missed"`
	}
	if err := decodeStruct(r, &body, true); err != nil {
		s.problem(w, r, err)
		return
	}
	out, err := s.cfg.Schedules.Resume(r.Context(), security(r), chi.URLParam(r, "id"), body.CatchUpMissed)
	s.respond(w, r, out, err)
}

func (s *Server) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var body struct {
		ParamsOverride json.RawMessage `json:"params_override"`
	}
	if err := decodeStruct(r, &body, true); err != nil {
		s.problem(w, r, err)
		return
	}
	out, err := s.cfg.Schedules.Trigger(r.Context(), security(r), chi.URLParam(r, "id"), body.ParamsOverride)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/invocations/"+out.Invocation.ID)
	s.writeJSON(w, r, http.StatusAccepted, map[string]any{"schedule_id": out.ScheduleID, "run_id": out.RunID,
		"invocation": View(out.Invocation), "triggered_at": out.TriggeredAt, "triggered_by": out.TriggeredBy, "params": out.Params})
}

// scheduleHistory is GET /schedules/{id}/history: 002's run history as 000's list (items,
// page_info) plus schedule_id and next_runs. Filters: 002's status (comma-separated), since, until,
// and $filter on status, kind and scheduled_at; newest instant first unless $orderby says otherwise.
func (s *Server) scheduleHistory(w http.ResponseWriter, r *http.Request) {
	q, err := s.listQuery(r, "status", "since", "until", "next_runs")
	if err != nil {
		s.problem(w, r, err)
		return
	}
	v := r.URL.Query()
	f, err := scheduler.RunFilter(v.Get("status"), v.Get("since"), v.Get("until"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	if f != "" {
		if raw := v.Get("$filter"); raw != "" {
			f = "(" + raw + ") and " + f
		}
		if q.Filter, err = odata.ParseFilter(f); err != nil {
			s.problem(w, r, problem.BadRequest("%s", err.Error()))
			return
		}
	}
	nextN := 5
	if n := v.Get("next_runs"); n != "" {
		if nextN, err = strconv.Atoi(n); err != nil || nextN < 0 || nextN > 100 {
			s.problem(w, r, problem.BadRequest("next_runs must be an integer from 0 to 100"))
			return
		}
	}
	id := chi.URLParam(r, "id")
	h, err := s.cfg.Schedules.History(r.Context(), security(r), id, q, nextN)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	next := make([]map[string]time.Time, 0, len(h.NextRuns))
	for _, t := range h.NextRuns {
		next = append(next, map[string]time.Time{"scheduled_at": t})
	}
	items := h.Page.Items
	if items == nil {
		items = []scheduler.RunView{}
	}
	writePage(s, w, r, items, infoOf(h.Page, q.Limit), member{"schedule_id", id}, member{"next_runs", next})
}

package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/eventbus"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/store"
)

// publishEvent is POST /events: 202 {event, delivered (how many waiting workflows it resumed),
// triggered (how many triggers took it)}, or 200 with the original event and delivered 0 when the
// tenant already published this event_id (Idempotency-Replayed: true).
func (s *Server) publishEvent(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var req eventbus.PublishRequest
	if err := decodeResource(r, &req, events.Event{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	p, err := s.cfg.Events.Publish(r.Context(), security(r), req)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/events/"+p.Event.ID)
	body := map[string]any{"event": p.Event, "delivered": p.Delivered, "triggered": p.Triggered}
	if p.Replayed {
		w.Header().Set("Idempotency-Replayed", "true")
		s.writeJSON(w, r, http.StatusOK, body)
		return
	}
	s.writeJSON(w, r, http.StatusAccepted, body)
}

func (s *Server) getEvent(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	e, err := s.cfg.Events.GetEvent(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, e, err)
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, func(q store.ListQuery) (store.Page[events.Event], error) {
		return s.cfg.Events.ListEvents(r.Context(), security(r), q)
	}, asIs)
}

// eventTypeRoutes mounts the event type registry.
func (s *Server) eventTypeRoutes(r chi.Router) {
	w := r.With(s.need(auth.RoleDeveloper, "registering event types"))
	w.Post("/event-types", s.createEventType)
	r.Get("/event-types", s.listEventTypes)
	r.Get("/event-types/{id:[^:/]+}", s.getEventType)
	w.Delete("/event-types/{id:[^:/]+}", s.deleteEventType)
}

func (s *Server) createEventType(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var req eventbus.TypeRequest
	if err := decodeResource(r, &req, events.Type{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	t, err := s.cfg.Events.CreateType(r.Context(), security(r), req)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/event-types/"+t.ID)
	s.writeJSON(w, r, http.StatusCreated, t)
}

func (s *Server) listEventTypes(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, func(q store.ListQuery) (store.Page[events.Type], error) {
		return s.cfg.Events.ListTypes(r.Context(), security(r), q)
	}, asIs)
}

func (s *Server) getEventType(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	t, err := s.cfg.Events.GetType(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, t, err)
}

func (s *Server) deleteEventType(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	if err := s.cfg.Events.DeleteType(r.Context(), security(r), chi.URLParam(r, "id")); err != nil {
		s.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

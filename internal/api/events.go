package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/store"
)

// publishEvent is POST /events: 202 {event, delivered (how many waiting workflows it resumed)}, or
// 200 with the original event and delivered 0 when the tenant already published this event_id
// (Idempotency-Replayed: true).
func (s *Server) publishEvent(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var req invoke.PublishRequest
	if err := decodeResource(r, &req, events.Event{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	p, err := s.cfg.Invoke.Publish(r.Context(), security(r), req)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	w.Header().Set("Location", BasePath+"/events/"+p.Event.ID)
	body := map[string]any{"event": p.Event, "delivered": p.Delivered}
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
	e, err := s.cfg.Invoke.GetEvent(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, http.StatusOK, e, err)
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, func(q store.ListQuery) (store.Page[events.Event], error) {
		return s.cfg.Invoke.ListEvents(r.Context(), security(r), q)
	}, asIs)
}

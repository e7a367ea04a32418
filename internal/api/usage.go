package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/usage"
)

func (s *Server) tenantUsage(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	rep, err := s.cfg.Usage.Current(r.Context(), security(r), chi.URLParam(r, "tenant_id"))
	s.respond(w, r, rep, err)
}

func (s *Server) tenantUsageHistory(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r, "granularity", "start", "end"); err != nil {
		s.problem(w, r, err)
		return
	}
	v := r.URL.Query()
	h, err := s.cfg.Usage.History(r.Context(), security(r), chi.URLParam(r, "tenant_id"),
		usage.HistoryQuery{Granularity: v.Get("granularity"), Start: v.Get("start"), End: v.Get("end")})
	s.respond(w, r, h, err)
}

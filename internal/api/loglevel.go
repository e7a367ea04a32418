package api

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/problem"
)

// logLevelView is the body of GET and PUT /admin/log-level.
type logLevelView struct {
	Level string `json:"level"`
}

// logLevelRoutes mounts GET and PUT /admin/log-level: the platform operator reads and changes the
// server's log level while it runs (docs/observability.md, "Logs"). Without Config.LogLevel they
// answer 503.
func (s *Server) logLevelRoutes(r chi.Router) {
	r.With(s.operatorOnly).Get("/admin/log-level", s.getLogLevel)
	r.With(s.operatorOnly).Put("/admin/log-level", s.putLogLevel)
}

func (s *Server) getLogLevel(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	if s.cfg.LogLevel == nil {
		s.problem(w, r, problem.New(problem.TypeUnavailable, "this server's log level cannot be changed at run time"))
		return
	}
	s.writeJSON(w, r, http.StatusOK, logLevelView{Level: levelName(s.cfg.LogLevel.Level())})
}

func (s *Server) putLogLevel(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	if s.cfg.LogLevel == nil {
		s.problem(w, r, problem.New(problem.TypeUnavailable, "this server's log level cannot be changed at run time"))
		return
	}
	var v logLevelView
	if err := decodeStruct(r, &v, false); err != nil {
		s.problem(w, r, err)
		return
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(v.Level)); err != nil || v.Level == "" {
		s.problem(w, r, problem.Validation("invalid log level", []problem.Issue{{Path: "$.level", Code: "INVALID_VALUE",
			Message: "level must be debug, info, warn or error"}}))
		return
	}
	old := s.cfg.LogLevel.Level()
	s.cfg.LogLevel.Set(level)
	s.log.WarnContext(r.Context(), "log level changed", "from", levelName(old), "to", levelName(level),
		"subject_id", security(r).SubjectID)
	s.writeJSON(w, r, http.StatusOK, logLevelView{Level: levelName(level)})
}

// levelName is a level as --log-level spells it (debug, info, warn, error; offsets as DEBUG+2).
func levelName(l slog.Level) string {
	switch l {
	case slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError:
		return strings.ToLower(l.String())
	}
	return l.String()
}

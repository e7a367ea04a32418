package api

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/dagrun"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/store"
)

func (s *Server) startInvocation(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var req invoke.StartRequest
	if err := decodeResource(r, &req, RecordView{}, false); err != nil {
		s.problem(w, r, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 255 {
		s.problem(w, r, badHeader("Idempotency-Key", "at most 255 characters"))
		return
	}
	// A sync call runs on this request for up to its entrypoint's timeout_seconds: the connection's
	// read and write timeouts do not apply while it runs, and the write timeout applies again to
	// writing the answer.
	rearm := s.liftDeadlines(w, r)
	st, err := s.cfg.Invoke.Start(r.Context(), security(r), req, invoke.StartOptions{IdempotencyKey: key,
		CorrelationID: r.Header.Get("X-Correlation-Id"), TraceParent: r.Header.Get("Traceparent")})
	rearm()
	if err != nil {
		s.problem(w, r, err)
		return
	}
	body := ResultView{Record: View(st.Record), DryRun: st.DryRun, Cached: st.Cached}
	deprecationHeaders(w.Header(), st.Record)
	switch {
	case st.Replayed:
		w.Header().Set("Idempotency-Replayed", "true")
		s.writeJSON(w, r, http.StatusOK, body)
	case st.Queued || st.Unfinished:
		// Accepted async work, or a sync workflow not finished within its timeout_seconds.
		w.Header().Set("Location", BasePath+"/invocations/"+st.Record.ID)
		s.writeJSON(w, r, http.StatusAccepted, body)
	default:
		s.writeJSON(w, r, http.StatusOK, body)
	}
}

func (s *Server) getInvocation(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	rec, err := s.cfg.Invoke.Get(r.Context(), security(r), chi.URLParam(r, "id"))
	s.respond(w, r, View(rec), err)
}

func (s *Server) listInvocations(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, func(q store.ListQuery) (store.Page[invocation.Record], error) {
		return s.cfg.Invoke.List(r.Context(), security(r), q)
	},
		func(rec invocation.Record) (RecordView, error) { return View(rec), nil })
}

// TasksView is the answer of GET /invocations/{id}/tasks: a DAG run's tasks in plan order.
type TasksView struct {
	InvocationID string            `json:"invocation_id"`
	Items        []dagrun.TaskView `json:"items"`
}

// invocationTasks answers GET /invocations/{id}/tasks (a DAG run's tasks; 409 not_a_dag for any
// other invocation).
func (s *Server) invocationTasks(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	id := chi.URLParam(r, "id")
	tasks, err := s.cfg.Invoke.Tasks(r.Context(), security(r), id)
	s.respond(w, r, TasksView{InvocationID: id, Items: tasks}, err)
}

// invocationTimeline answers GET /invocations/{id}/timeline: a page of the entries in seq order
// (limit, cursor; no $filter or $orderby), with the invocation's id and its current status.
func (s *Server) invocationTimeline(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r, "limit", "cursor"); err != nil {
		s.problem(w, r, err)
		return
	}
	q, err := s.listQuery(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	rec, page, err := s.cfg.Invoke.TimelinePage(r.Context(), security(r), chi.URLParam(r, "id"), q)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	items := timelineAfter(page.StatusBefore, page.Items)
	clear(page.Items)
	writePage(s, w, r, items, infoOf(page.Page, q.Limit),
		member{"invocation_id", rec.ID}, member{"status", rec.Status})
}

type controlRequest struct {
	Action invoke.Action `json:"action"`
}

func (s *Server) controlInvocation(w http.ResponseWriter, r *http.Request) {
	if err := onlyParams(r); err != nil {
		s.problem(w, r, err)
		return
	}
	var req controlRequest
	if err := decodeStruct(r, &req, false); err != nil {
		s.problem(w, r, err)
		return
	}
	rec, created, err := s.cfg.Invoke.Control(r.Context(), security(r), chi.URLParam(r, "id"), req.Action)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	if created {
		w.Header().Set("Location", BasePath+"/invocations/"+rec.ID)
		s.writeJSON(w, r, http.StatusAccepted, View(rec))
		return
	}
	s.writeJSON(w, r, http.StatusOK, View(rec))
}

// deprecationHeaders announces an invocation of a deprecated entrypoint (the record's
// ENTRYPOINT_DEPRECATED warning): Deprecation (RFC 9745, "@" and the Unix time it was deprecated),
// Sunset (RFC 8594, an HTTP-date) when it has a sunset date, and a Link to its successor
// (rel="successor-version", RFC 5829) when it names one. A replayed or cached answer is the
// original one and carries the headers its record's warnings call for.
func deprecationHeaders(h http.Header, rec invocation.Record) {
	d, ok := rec.Deprecation()
	if !ok {
		return
	}
	at := rec.CreatedAt // deprecated no later than the invocation, when the record does not say
	if d.DeprecatedAt != nil {
		at = *d.DeprecatedAt
	}
	h.Set("Deprecation", "@"+strconv.FormatInt(at.Unix(), 10))
	if d.SunsetDate != nil {
		h.Set("Sunset", d.SunsetDate.UTC().Format(http.TimeFormat))
	}
	if d.SuccessorID != "" {
		h.Set("Link", "<"+BasePath+"/entrypoints/"+url.PathEscape(d.SuccessorID)+`>; rel="successor-version"`)
	}
}

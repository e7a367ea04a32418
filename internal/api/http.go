package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
)

const problemJSON = "application/problem+json"

// writeJSON writes v as JSON with status; a value that cannot be encoded is logged and answered
// with a 500 problem document instead.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := encodeBody(v)
	if err != nil {
		s.problem(w, r, problem.Internal(fmt.Errorf("encoding the response: %w", err)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// UnavailableRetryAfter is the Retry-After, in seconds, of a 503 answered because the store is
// unavailable.
const UnavailableRetryAfter = 2

// problem writes err as an RFC 9457 document. Unexpected errors are logged with their cause and
// answered with a generic 500.
func (s *Server) problem(w http.ResponseWriter, r *http.Request, err error) {
	var qe *store.QueryError
	var pe *problem.Error
	storeDown := false
	switch {
	case errors.As(err, &qe):
		pe = problem.BadRequest("%s", qe.Error())
	case (!errors.As(err, &pe) || pe.Status == http.StatusInternalServerError) && store.IsUnavailable(err):
		// The store is slow or down (docs/deployment.md, "Failure modes"): nothing was applied.
		// Also when a caller wrapped the store's error as an internal one (problem.Internal).
		pe = problem.New(problem.TypeUnavailable, "the store is unavailable or overloaded; retry later")
		pe.RetryAfter, storeDown = UnavailableRetryAfter, true
	default:
		pe = problem.From(err)
	}
	switch {
	case storeDown:
		// Expected while the store is away (every request then answers 503): a warning, with its
		// status, not an internal error.
		obs.Logger(r.Context()).WarnContext(r.Context(), "request refused: store unavailable", "status", pe.Status, "err", err)
	case pe.Status >= 500:
		obs.Logger(r.Context()).ErrorContext(r.Context(), "request failed", "status", pe.Status, "err", err)
	}
	if pe.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(pe.RetryAfter))
	}
	if unread(r) {
		// An error answered before the body was read (authentication, role, in-flight cap, a bad
		// header): close the connection after the answer rather than wait for a body the request
		// will not use (net/http would otherwise read it first, as slowly as the client sends it).
		// The read deadline is moved to now so that net/http does not wait for the rest of the body
		// when it closes the request either.
		w.Header().Set("Connection", "close")
		s.deadline(r, http.NewResponseController(w).SetReadDeadline(time.Now()))
	}
	if pe.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lark"`)
	}
	b, err := json.Marshal(pe.Doc(r.URL.Path, traceID(r.Context())))
	if err != nil {
		obs.Logger(r.Context()).ErrorContext(r.Context(), "encoding a problem document", "err", err)
		pe = problem.Internal(err)
		b, err = json.Marshal(pe.Doc(r.URL.Path, traceID(r.Context())))
		if err != nil {
			b = []byte(`{"type":"` + problem.TypeInternal + `","title":"Internal Error","status":500}`)
		}
	}
	w.Header().Set("Content-Type", problemJSON)
	w.WriteHeader(pe.Status)
	w.Write(append(b, '\n'))
}

func badHeader(name, want string) error {
	return problem.BadRequest("header %s: %s", name, want)
}

// respond answers 200 with v, or err as a problem document when err is not nil (the other
// statuses are written with writeJSON by the handlers that answer them).
func (s *Server) respond(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		s.problem(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, v)
}

func notFound(r *http.Request) error {
	return problem.NotFound("no route for %s %s", r.Method, r.URL.Path)
}

func methodNotAllowed(r *http.Request) error {
	return problem.New(problem.TypeMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path)
}

// recoverer turns a panic in a handler into a 500 problem; the process keeps serving.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // a recovered panic value, compared as net/http does
					panic(v)
				}
				obs.Logger(r.Context()).ErrorContext(r.Context(), "handler panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				s.problem(w, r, problem.Internal(fmt.Errorf("panic: %v", v)))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// correlate reads X-Correlation-Id (or makes one), echoes it, and puts it and a logger carrying it
// into the request context, with the request's write budget (Config.StoreWriteWait).
func (s *Server) correlate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Correlation-Id")
		if id == "" || len(id) > 128 || strings.ContainsAny(id, "\r\n") {
			id = s.cfg.IDs.New("corr")
		}
		w.Header().Set("X-Correlation-Id", id)
		ctx := obs.WithCorrelationID(r.Context(), id)
		if tid := traceID(ctx); tid != "" {
			ctx = obs.WithAttrs(ctx, s.log, "correlation_id", id, "trace_id", tid)
		} else {
			ctx = obs.WithAttrs(ctx, s.log, "correlation_id", id)
		}
		ctx = store.WithWriteWait(ctx, s.cfg.StoreWriteWait) // the request's write budget
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

// Unwrap lets http.ResponseController reach the connection (deadlines, flushing).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.MaxBody {
			s.problem(w, r, problem.New(problem.TypePayloadTooLarge, "the request body exceeds %d bytes", s.cfg.MaxBody))
			return
		}
		r.Body = &trackedBody{ReadCloser: http.MaxBytesReader(w, r.Body, s.cfg.MaxBody), empty: r.ContentLength == 0}
		next.ServeHTTP(w, r)
	})
}

// trackedBody remembers whether the request body was read to its end.
type trackedBody struct {
	io.ReadCloser
	empty bool // no body was announced
	eof   bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

// unread reports whether r carries a body nobody read to its end.
func unread(r *http.Request) bool {
	b, ok := r.Body.(*trackedBody)
	return ok && !b.empty && !b.eof
}

// authenticate resolves the bearer token; tenant callers also need their tenant enabled.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc, err := s.cfg.Tokens.Authenticate(r.Context(), bearer(r.Header.Get("Authorization")))
		if err != nil {
			s.problem(w, r, err)
			return
		}
		if !sc.Operator {
			if err := s.cfg.Tenants.RequireEnabled(r.Context(), sc.TenantID); err != nil {
				s.problem(w, r, err)
				return
			}
		}
		noteCaller(r.Context(), sc.TenantID, sc.SubjectID)
		ctx := auth.WithContext(r.Context(), sc)
		ctx = obs.WithAttrs(ctx, nil, "tenant_id", sc.TenantID, "subject_id", sc.SubjectID)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bearer returns the credentials of a Bearer Authorization header ("" for another scheme or
// none). The scheme name is case-insensitive (RFC 9110 §11.1); one or more spaces follow it.
func bearer(h string) string {
	scheme, rest, ok := strings.Cut(strings.TrimLeft(h, " "), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(rest)
}

// operatorOnly admits the platform operator only (after authenticate): 403 for tenant tokens.
func (s *Server) operatorOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !security(r).Operator {
			s.problem(w, r, problem.Forbidden("%s needs the platform operator's token", r.URL.Path))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func security(r *http.Request) auth.SecurityContext {
	sc, _ := auth.FromContext(r.Context())
	return sc
}

// readBody reads the whole body, mapping an oversized one to 413.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, problem.New(problem.TypePayloadTooLarge, "the request body exceeds %d bytes", mbe.Limit)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, problem.BadRequest("the request body was not received within the server's read timeout")
	}
	if err != nil {
		return nil, problem.BadRequest("reading the request body: %v", err)
	}
	return b, nil
}

// decodeObject reads a JSON object body with numbers kept exact.
func decodeObject(r *http.Request) (map[string]any, error) {
	b, err := readJSON(r, false)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := strictDecode(b, &m, false); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, problem.BadRequest("the body must be a JSON object")
	}
	return m, nil
}

// decodeStruct reads a JSON body that is not a resource (an action, a start request) into v,
// rejecting every unknown member at once with 422. An empty body is allowed when optional is set.
func decodeStruct(r *http.Request, v any, optional bool) error {
	return decodeResource(r, v, nil, optional)
}

func strictDecode(b []byte, v any, disallowUnknown bool) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if disallowUnknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			f = strings.Trim(f, `"`)
			return problem.Validation("unknown field", []problem.Issue{{Path: "$." + f, Code: "UNKNOWN_FIELD", Message: "unknown field '" + f + "'"}})
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			path := "$"
			if te.Field != "" {
				path += "." + te.Field
			}
			return problem.Validation("wrong type", []problem.Issue{{Path: path, Code: "SCHEMA_MISMATCH",
				Message: fmt.Sprintf("expected %s, got %s", problem.JSONKind(te.Type), te.Value)}})
		}
		var pe *time.ParseError
		if errors.As(err, &pe) {
			return problem.Validation("invalid timestamp", []problem.Issue{{Path: "$", Code: "SCHEMA_MISMATCH", Message: "timestamps must be RFC 3339"}})
		}
		return problem.BadRequest("malformed JSON: %s", msg)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return problem.BadRequest("malformed JSON: unexpected data after the top-level value")
	}
	return nil
}

// onlyParams answers 400 for any query parameter not in allowed.
func onlyParams(r *http.Request, allowed ...string) error {
	for k := range r.URL.Query() {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return problem.BadRequest("unknown query parameter %q (this endpoint takes none)", k)
			}
			return problem.BadRequest("unknown query parameter %q (allowed: %s)", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

var listParams = []string{"limit", "cursor", "$filter", "$orderby"}

// listQuery parses limit, cursor, $filter and $orderby (plus any extra parameters the endpoint
// takes); the page's byte budget is Config.MaxPageBytes.
func (s *Server) listQuery(r *http.Request, extra ...string) (store.ListQuery, error) {
	q := store.ListQuery{Limit: store.DefaultLimit, MaxBytes: s.cfg.MaxPageBytes}
	v := r.URL.Query()
	if err := onlyParams(r, append(slices.Clone(listParams), extra...)...); err != nil {
		return q, err
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > store.MaxLimit {
			return q, problem.BadRequest("limit must be an integer from 1 to %d", store.MaxLimit)
		}
		q.Limit = n
	}
	q.Cursor = v.Get("cursor")
	var err error
	if q.Filter, err = odata.ParseFilter(v.Get("$filter")); err != nil {
		return q, problem.BadRequest("%s", err.Error())
	}
	if q.OrderBy, err = odata.ParseOrderBy(v.Get("$orderby")); err != nil {
		return q, problem.BadRequest("%s", err.Error())
	}
	return q, nil
}

// pageInfo is 000's page_info of a list answer.
type pageInfo struct {
	NextCursor *string `json:"next_cursor"`
	PrevCursor *string `json:"prev_cursor"`
	HasMore    bool    `json:"has_more"`
	Limit      int     `json:"limit"`
}

// infoOf is the page_info of p, read with limit.
func infoOf[T any](p store.Page[T], limit int) pageInfo {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return pageInfo{NextCursor: opt(p.NextCursor), PrevCursor: opt(p.PrevCursor), HasMore: p.HasMore, Limit: limit}
}

func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, problem.BadRequest("%s must be true or false", name)
	}
	return b, nil
}

// servePage answers a list request: it parses the list parameters (plus extra ones), fetches the
// page and writes 000's list envelope with each item rendered by view (an empty page is []),
// streamed item by item (writePage).
func servePage[T, V any](s *Server, w http.ResponseWriter, r *http.Request, fetch func(store.ListQuery) (store.Page[T], error),
	view func(T) (V, error), extra ...string) {
	q, err := s.listQuery(r, extra...)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	page, err := fetch(q)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	items := make([]V, 0, len(page.Items))
	for _, it := range page.Items {
		v, err := view(it)
		if err != nil {
			s.problem(w, r, problem.Internal(err))
			return
		}
		items = append(items, v)
	}
	clear(page.Items) // the views hold what is written; each is dropped once written
	writePage(s, w, r, items, infoOf(page, q.Limit))
}

// asIs is the view of items the API shows as they are.
func asIs[T any](t T) (T, error) { return t, nil }

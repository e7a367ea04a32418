// Package problem defines Lark's error values and renders them as RFC 9457 problem documents.
//
// Every error that reaches an API client is a *Error carrying one of the GTS error types below, the
// HTTP status that goes with it, and optional per-field issues. Domain packages return these; the
// api package only renders them.
package problem

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
)

// Base is the root GTS error type; every concrete type below derives from it.
const Base = "gts.x.core.serverless.err.v1~"

// GTS error types. The first five come from the domain model (000); the others are Lark's additions for
// transport-level failures that 000 does not name. They live in the same family.
const (
	TypeValidation    = Base + "x.core.serverless.err.validation.v1~"
	TypeRateLimited   = Base + "x.core.serverless.err.rate_limited.v1~"
	TypeNotFound      = Base + "x.core.serverless.err.not_found.v1~"
	TypeNotActive     = Base + "x.core.serverless.err.not_active.v1~"
	TypeQuotaExceeded = Base + "x.core.serverless.err.quota_exceeded.v1~"

	TypeBadRequest       = Base + "x.core.serverless.err.bad_request.v1~"
	TypeUnauthorized     = Base + "x.core.serverless.err.unauthorized.v1~"
	TypeForbidden        = Base + "x.core.serverless.err.forbidden.v1~"
	TypeConflict         = Base + "x.core.serverless.err.conflict.v1~"
	TypePayloadTooLarge  = Base + "x.core.serverless.err.payload_too_large.v1~"
	TypeUnsupportedMedia = Base + "x.core.serverless.err.unsupported_media_type.v1~"
	TypeMethodNotAllowed = Base + "x.core.serverless.err.method_not_allowed.v1~"
	TypeUnavailable      = Base + "x.core.serverless.err.unavailable.v1~"
	TypeInternal         = Base + "x.core.serverless.err.internal.v1~"
)

// Issue is one problem with a specific field or source location.
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
}

// Error is a typed, client-safe error. Its Detail must never contain secrets.
type Error struct {
	Type       string
	Status     int
	Title      string
	Detail     string
	Issues     []Issue
	Extensions map[string]any // extra members of the problem document, e.g. "reason"
	RetryAfter int            // seconds; sets the Retry-After header when > 0
	cause      error          // internal cause, logged but never rendered
}

// Error implements error.
func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Title, e.Detail, e.cause)
	}
	return e.Title + ": " + e.Detail
}

// Unwrap returns the internal cause.
func (e *Error) Unwrap() error { return e.cause }

// With sets an extension member and returns e. The standard members (type, title, status, detail,
// instance, code, trace_id, errors) cannot be overridden.
func (e *Error) With(key string, value any) *Error {
	switch key {
	case "type", "title", "status", "detail", "instance", "code", "trace_id", "errors":
		panic("problem: extension member " + key + " shadows a standard member")
	}
	if e.Extensions == nil {
		e.Extensions = map[string]any{}
	}
	e.Extensions[key] = value
	return e
}

var titles = map[string]string{
	TypeValidation:       "Validation Error",
	TypeRateLimited:      "Rate Limit Exceeded",
	TypeNotFound:         "Not Found",
	TypeNotActive:        "Entrypoint Not Active",
	TypeQuotaExceeded:    "Quota Exceeded",
	TypeBadRequest:       "Bad Request",
	TypeUnauthorized:     "Unauthorized",
	TypeForbidden:        "Forbidden",
	TypeConflict:         "Conflict",
	TypePayloadTooLarge:  "Payload Too Large",
	TypeUnsupportedMedia: "Unsupported Media Type",
	TypeMethodNotAllowed: "Method Not Allowed",
	TypeUnavailable:      "Service Unavailable",
	TypeInternal:         "Internal Error",
}

var statuses = map[string]int{
	TypeValidation:       http.StatusUnprocessableEntity,
	TypeRateLimited:      http.StatusTooManyRequests,
	TypeNotFound:         http.StatusNotFound,
	TypeNotActive:        http.StatusConflict,
	TypeQuotaExceeded:    http.StatusTooManyRequests,
	TypeBadRequest:       http.StatusBadRequest,
	TypeUnauthorized:     http.StatusUnauthorized,
	TypeForbidden:        http.StatusForbidden,
	TypeConflict:         http.StatusConflict,
	TypePayloadTooLarge:  http.StatusRequestEntityTooLarge,
	TypeUnsupportedMedia: http.StatusUnsupportedMediaType,
	TypeMethodNotAllowed: http.StatusMethodNotAllowed,
	TypeUnavailable:      http.StatusServiceUnavailable,
	TypeInternal:         http.StatusInternalServerError,
}

// New returns an error of the given GTS type with its standard status and title.
func New(typ, format string, args ...any) *Error {
	st, ok := statuses[typ]
	if !ok {
		st = http.StatusInternalServerError
	}
	return &Error{Type: typ, Status: st, Title: titles[typ], Detail: fmt.Sprintf(format, args...)}
}

// NotFound is a 404. Cross-tenant access also answers with it, so its detail never says more than
// the caller already knows.
func NotFound(format string, args ...any) *Error { return New(TypeNotFound, format, args...) }

// Conflict is a 409 with a machine-readable reason (e.g. "already_exists", "invalid_transition").
func Conflict(reason, format string, args ...any) *Error {
	return New(TypeConflict, format, args...).With("reason", reason)
}

// Validation is a 422 with per-field issues.
func Validation(detail string, issues []Issue) *Error {
	e := New(TypeValidation, "%s", detail)
	e.Issues = issues
	return e
}

// BadRequest is a 400 (malformed JSON, bad query parameters).
func BadRequest(format string, args ...any) *Error { return New(TypeBadRequest, format, args...) }

// Forbidden is a 403.
func Forbidden(format string, args ...any) *Error { return New(TypeForbidden, format, args...) }

// Unauthorized is a 401.
func Unauthorized(format string, args ...any) *Error { return New(TypeUnauthorized, format, args...) }

// Internal wraps an unexpected error as a 500 whose detail does not leak the cause.
func Internal(cause error) *Error {
	e := New(TypeInternal, "internal error")
	e.cause = cause
	return e
}

// From converts any error into a *Error: a *Error in the chain is returned as is, anything else
// becomes Internal.
func From(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return Internal(err)
}

// Document is the RFC 9457 body.
type Document struct {
	Type     string  `json:"type"`
	Title    string  `json:"title"`
	Status   int     `json:"status"`
	Detail   string  `json:"detail,omitempty"`
	Instance string  `json:"instance,omitempty"`
	Code     string  `json:"code"`
	TraceID  string  `json:"trace_id,omitempty"`
	Errors   []Issue `json:"errors,omitempty"`
	ext      map[string]any
}

// MarshalJSON merges extension members into the object.
func (d Document) MarshalJSON() ([]byte, error) {
	type plain Document
	b, err := json.Marshal(plain(d))
	if err != nil || len(d.ext) == 0 {
		return b, err
	}
	m := map[string]any{}
	for k, v := range d.ext {
		m[k] = v
	}
	var base map[string]json.RawMessage
	if err := json.Unmarshal(b, &base); err != nil {
		return nil, err
	}
	for k, v := range base {
		m[k] = v
	}
	return json.Marshal(m)
}

// Doc renders e for the request path instance and trace id.
func (e *Error) Doc(instance, traceID string) Document {
	d := Document{Type: "gts://" + e.Type, Title: e.Title, Status: e.Status, Detail: e.Detail,
		Instance: instance, Code: e.Type, TraceID: traceID, Errors: e.Issues, ext: e.Extensions}
	if e.RetryAfter > 0 {
		if d.ext == nil {
			d.ext = map[string]any{}
		}
		d.ext["retry_after_seconds"] = e.RetryAfter
	}
	return d
}

// JSONKind names a Go type the way a JSON author would ("a string", "an integer", ...), for messages
// about a value of the wrong type: Go type names never reach clients.
func JSONKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return JSONKind(t.Elem())
	default:
		return "an object"
	}
}

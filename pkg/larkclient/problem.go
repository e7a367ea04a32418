package larkclient

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Problem is an error answer of the server: an RFC 9457 problem document (docs/api.md §2).
type Problem struct {
	// Type is the problem type URI ("gts://gts.x.core.serverless.err.v1~…").
	Type string `json:"type"`
	// Title is the type's fixed title, e.g. "Validation Error".
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence.
	Detail string `json:"detail"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
	// Code is the GTS error type id.
	Code string `json:"code,omitempty"`
	// TraceID is the request's correlation id.
	TraceID string `json:"trace_id,omitempty"`
	// Reason is the conflict reason of a 409 (already_exists, not_draft, …).
	Reason string `json:"reason,omitempty"`
	// Errors are the per-field issues.
	Errors []Issue `json:"errors,omitempty"`
	// Warnings are the validator's warnings on entrypoint problems.
	Warnings []Finding `json:"warnings,omitempty"`
	// RetryAfterSeconds is set on problems that come with Retry-After.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
	// Body is the whole document as sent (extension members included).
	Body json.RawMessage `json:"-"`
}

// Issue is one per-field problem of a Problem.
type Issue struct {
	// Path is a JSON path such as "$.params.amount".
	Path string `json:"path"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Code is the issue code (UNKNOWN_FIELD, SCHEMA_MISMATCH, UNDEFINED_NAME, …).
	Code string `json:"code,omitempty"`
	// Line and Column locate Starlark source findings (1-based), else 0.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"` // 1-based column, with Line
}

// Error renders the problem for a person: its detail, then one line per issue.
func (p *Problem) Error() string {
	var b strings.Builder
	detail := p.Detail
	if detail == "" {
		detail = p.Title
	}
	if detail == "" {
		detail = http.StatusText(p.Status)
	}
	fmt.Fprintf(&b, "%s (%d", detail, p.Status)
	if p.Reason != "" {
		fmt.Fprintf(&b, " %s", p.Reason)
	}
	b.WriteString(")")
	for _, is := range p.Errors {
		b.WriteString("\n  ")
		b.WriteString(is.Path)
		if is.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", is.Line, is.Column)
		}
		b.WriteString(": ")
		b.WriteString(is.Message)
		if is.Code != "" {
			fmt.Fprintf(&b, " [%s]", is.Code)
		}
	}
	return b.String()
}

// NotFound reports whether the problem is a 404.
func (p *Problem) NotFound() bool { return p.Status == http.StatusNotFound }

// newProblem decodes an error answer; a body that is not a problem document still gives a Problem
// with the status and the start of the body as its detail.
func newProblem(res *http.Response, body []byte) *Problem {
	p := &Problem{}
	if err := json.Unmarshal(body, p); err != nil || p.Status == 0 {
		text := strings.TrimSpace(string(body))
		if len(text) > 200 {
			text = text[:200] + "…"
		}
		if text == "" {
			text = http.StatusText(res.StatusCode)
		}
		p = &Problem{Status: res.StatusCode, Title: http.StatusText(res.StatusCode), Detail: text}
	}
	p.Status = res.StatusCode
	p.Body = append(json.RawMessage(nil), body...)
	return p
}

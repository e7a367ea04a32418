package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"
)

// errBase is the GTS base type of every runtime error (000's family).
const errBase = "gts.x.core.serverless.err.v1~"

// Error types of failed executions (000's GTS error family).
const (
	ErrTimeout       = errBase + "x.core.serverless.err.timeout.v1~"
	ErrCPULimit      = errBase + "x.core.serverless.err.cpu_limit.v1~"
	ErrMemoryLimit   = errBase + "x.core.serverless.err.memory_limit.v1~"
	ErrRuntime       = errBase + "x.core.serverless.err.runtime.v1~"
	ErrCanceled      = errBase + "x.core.serverless.err.canceled.v1~"
	ErrHTTP          = errBase + "x.core.serverless.err.http.v1~"
	ErrHTTPTransport = errBase + "x.core.serverless.err.http_transport.v1~"
	ErrValidation    = errBase + "x.core.serverless.err.validation.v1~"
	// ErrPayloadTooLarge is a value larger than its size limit: a result,
	// a step's output or input, a helper's argument (Limits.MaxPayloadBytes)
	// or the details of an error envelope (MaxErrorBytes). Non-retryable:
	// the same code produces the same value again.
	ErrPayloadTooLarge = errBase + "x.core.serverless.err.payload_too_large.v1~"
)

// Error categories: they tell the caller whether, and why, a failed
// execution may be retried.
const (
	CategoryRetryable     = "retryable"
	CategoryNonRetryable  = "non_retryable"
	CategoryResourceLimit = "resource_limit"
	CategoryTimeout       = "timeout"
	CategoryCanceled      = "canceled"
)

// validCategory reports whether c is one of the categories an error
// envelope may carry.
func validCategory(c string) bool {
	switch c {
	case CategoryRetryable, CategoryNonRetryable, CategoryResourceLimit, CategoryTimeout, CategoryCanceled:
		return true
	}
	return false
}

// Error is the typed failure of a compilation or an execution: an error
// envelope with a GTS error type id, a category, a message for people and
// JSON-ready details. Errors raised by user code (fail(), evaluation
// errors) carry details "line", "column" and "backtrace"; limit errors
// carry the limit that was exceeded.
type Error struct {
	TypeID   string         `json:"id"`
	Category string         `json:"category"`
	Message  string         `json:"message"`
	Details  map[string]any `json:"details,omitempty"`
}

// Error implements error: "<short type>: <message>", e.g. "timeout: ...".
func (e *Error) Error() string {
	if e == nil {
		return "<nil>"
	}
	return shortType(e.TypeID) + ": " + e.Message
}

// shortType returns the name of a type of 000's error family
// ("timeout" for ErrTimeout), or the type id itself.
func shortType(id string) string {
	const prefix = errBase + "x.core.serverless.err."
	if s, ok := strings.CutPrefix(id, prefix); ok {
		if s, ok := strings.CutSuffix(s, ".v1~"); ok && s != "" && !strings.Contains(s, "~") {
			return s
		}
	}
	return id
}

// Limits on the sizes of what an Error carries.
const (
	maxMessageBytes   = 4 << 10
	maxBacktraceBytes = 8 << 10
)

// MaxErrorBytes bounds the details of an error envelope given to r_exit,
// encoded as JSON (the message is cut at 4 KiB and the backtrace at 8 KiB
// on their own): larger details fail the execution with
// ErrPayloadTooLarge instead.
const MaxErrorBytes = 64 << 10

// MaxLogEntryBytes bounds the message of one log entry (print, ctx.log),
// and the encoded size of its fields: a longer message is cut, with a
// marker saying how many bytes were dropped; a field that does not fit is
// replaced by such a marker.
const MaxLogEntryBytes = 16 << 10

// truncateLog cuts a log message to MaxLogEntryBytes, saying how much was dropped.
func truncateLog(s string) string {
	if len(s) <= MaxLogEntryBytes {
		return s
	}
	marker := fmt.Sprintf("… [%d bytes dropped]", len(s))
	cut := MaxLogEntryBytes - len(marker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [%d bytes dropped]", len(s)-cut)
}

// newError returns an Error with the message truncated to maxMessageBytes.
func newError(typeID, category, format string, args ...any) *Error {
	return &Error{TypeID: typeID, Category: category, Message: truncate(fmt.Sprintf(format, args...), maxMessageBytes)}
}

// truncate cuts s to at most n bytes (on a rune boundary), marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// truncateMiddle keeps the start and the end of s (a backtrace's outermost
// and innermost frames) within n bytes.
func truncateMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const marker = "\n  ...\n"
	head := (n - len(marker)) / 2
	tail := n - len(marker) - head
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[:head] + marker + s[start:]
}

// withDetail returns e with details[key] = value.
func (e *Error) withDetail(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// addPosition records the innermost position of user code in err (an
// evaluation error) or, failing that, pos, as details line and column.
func (e *Error) addPosition(err error, pos syntax.Position) *Error {
	if p, ok := userPosition(err); ok {
		pos = p
	}
	if pos.IsValid() && pos.Line > 0 {
		e.withDetail("line", int(pos.Line))
		e.withDetail("column", int(pos.Col))
	}
	return e
}

// userPosition returns the position of the innermost Starlark frame of an
// evaluation error.
func userPosition(err error) (syntax.Position, bool) {
	var ee *starlark.EvalError
	if !errors.As(err, &ee) {
		return syntax.Position{}, false
	}
	for i := len(ee.CallStack) - 1; i >= 0; i-- {
		if pos := ee.CallStack[i].Pos; pos.IsValid() && pos.Line > 0 && pos.Filename() != "<builtin>" {
			return pos, true
		}
	}
	return syntax.Position{}, false
}

// runtimeError is the Error of a failed evaluation in user code.
func runtimeError(err error) *Error {
	msg := err.Error()
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		msg = ee.Msg
	}
	e := newError(ErrRuntime, CategoryRetryable, "%s", msg)
	if _, ok := errors.AsType[*misuseError](err); ok {
		e.TypeID, e.Category = ErrValidation, CategoryNonRetryable
	}
	e.addPosition(err, syntax.Position{})
	if ee != nil {
		e.withDetail("backtrace", truncateMiddle(ee.Backtrace(), maxBacktraceBytes))
	}
	return e
}

// internalError is the Error of a recovered panic. The panic value and the
// Go stack are deliberately not part of it: they are not the user's, and
// may contain anything.
func internalError(where string) *Error {
	return newError(ErrRuntime, CategoryRetryable, "internal interpreter error (%s)", where)
}

// httpErrorCategory is the category of an HTTP answer with a non-2xx status.
func httpErrorCategory(status int) string {
	if status == 429 || status >= 500 {
		return CategoryRetryable
	}
	return CategoryNonRetryable
}

// Package eventfilter compiles and evaluates event filters written in CEL
// (Common Expression Language, https://cel.dev).
//
// Filters select events: a durable workflow waiting in
// r_wait_event_v1(event_type_id, event_filter_query=...) resumes only on an
// event whose filter evaluates to true, and event triggers use the same
// filters. Typical filters:
//
//	payload.total > 100
//	payload.customer_id == "cust_123"
//	payload.shipping.region in ["US-CA", "US-NY"]
//	payload.total > 100 && payload.priority == "high"
//	payload.order_id != null
//
// Compile a filter once (or use Cached) and call Match for each event. Any
// evaluation error means "no match".
package eventfilter

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

const (
	// MaxExprBytes is the longest filter expression, in bytes, that Compile accepts.
	MaxExprBytes = 4096

	// CostLimit is the CEL runtime cost budget of one Match. CEL charges for
	// every operation, scaled by the size of the values involved (for example,
	// each comprehension iteration and each byte a string function scans);
	// an evaluation that exceeds the budget stops with an error.
	CostLimit = 100_000

	// MaxEvalTime bounds the wall-clock time of one Match as a backstop to
	// CostLimit. It is checked between comprehension iterations (see
	// interruptCheckFrequency), so it is never the reason a filter that fits
	// within CostLimit fails on an idle machine.
	MaxEvalTime = time.Second

	// CacheSize is the number of expressions Cached keeps.
	CacheSize = 1024

	// interruptCheckFrequency is how many comprehension iterations CEL runs
	// between checks of the evaluation context for cancellation.
	interruptCheckFrequency = 64

	// regexProgramSizeLimit bounds the compiled size of regular expressions
	// used with matches().
	regexProgramSizeLimit = 10_000
)

// Variable names visible to filter expressions.
const (
	varPayload     = "payload"
	varEventID     = "event_id"
	varEventTypeID = "event_type_id"
	varSource      = "source"
	varSubject     = "subject"
)

// Filter is a compiled, reusable, concurrency-safe filter.
type Filter struct {
	expr string
	prg  cel.Program
}

// Event is what a filter sees.
//
// ID, TypeID, Source and Subject are visible to expressions as the string
// variables event_id, event_type_id, source and subject; Payload is visible as
// payload.
type Event struct {
	ID, TypeID, Source, Subject string
	// Payload is the JSON-decoded event payload: map[string]any, []any,
	// string, bool, nil, json.Number or float64, nested arbitrarily. Numbers
	// may be json.Number (json.Decoder.UseNumber) or float64; Match converts
	// each json.Number to int64 when it is an integer that fits, else to
	// float64. Match never modifies Payload.
	Payload any
}

// Error is a compile or evaluation error.
type Error struct {
	// Expr is the filter expression the error is about.
	Expr string
	// Msg explains the error. For compile errors it is CEL's report, which
	// gives the line and column of each problem.
	Msg string
	// Line and Column locate the first problem of a compile error in Expr
	// (1-based; 0 when unknown), so that a checker can point into the source
	// the expression came from.
	Line, Column int
}

// Position is where in Expr the first problem of a compile error is (1-based line and column; 0
// when unknown).
func (e *Error) Position() (line, column int) { return e.Line, e.Column }

// maxExprInError is how much of the expression Error.Error quotes.
const maxExprInError = 120

// Error implements error.
func (e *Error) Error() string {
	expr := e.Expr
	if len(expr) > maxExprInError {
		cut := maxExprInError
		for cut > 0 && !utf8.RuneStart(expr[cut]) {
			cut--
		}
		expr = expr[:cut] + "..."
	}
	return fmt.Sprintf("event filter %q: %s", expr, e.Msg)
}

// env is the shared CEL environment; cel.Env is safe for concurrent use.
var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(varPayload, cel.DynType),
		cel.Variable(varEventID, cel.StringType),
		cel.Variable(varEventTypeID, cel.StringType),
		cel.Variable(varSource, cel.StringType),
		cel.Variable(varSubject, cel.StringType),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxExprBytes),
		cel.RegexProgramSizeLimit(regexProgramSizeLimit),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
		),
	)
})

// Compile parses and type-checks expr.
//
// Variables: payload (dyn: whatever the JSON payload is), and event_id,
// event_type_id, source, subject (string). The full CEL standard library is
// available (has(), in, size(), startsWith(), matches(), all(), exists(), ...).
// The result type must be bool (or dyn, in which case Match checks the
// result); otherwise Compile fails. An empty expression, one longer than
// MaxExprBytes, a syntax error, an undeclared variable or a type error is an
// error. All errors are *Error, with CEL's message (which gives line and
// column); Compile never panics.
//
// Numbers: integers and floating-point numbers compare across types, so
// payload.total > 100 matches a total of 150 as well as 150.5, and
// payload.count == 3 matches 3.0. Arithmetic does not mix them: when total is
// 150.5, payload.total * 2 > 100 is an error (no such overload); write
// double(payload.total) * 2.0 > 100 instead.
//
// Missing keys: selecting a key the payload does not have is an evaluation
// error, and Match reports an error (no match). This includes
// payload.order_id != null when order_id is absent: the filter is true only
// when order_id is present and not null. To test for presence use
// has(payload.order_id), and guard optional keys as in
// has(payload.priority) && payload.priority == "high". CEL's && and || ignore
// an error on one side when the other side alone decides the result, so
// payload.total > 100 || payload.vip == true matches a VIP order that has no
// total.
func Compile(expr string) (f *Filter, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, &Error{Expr: expr, Msg: fmt.Sprintf("internal error while compiling: %v", r)}
		}
	}()
	switch {
	case len(expr) == 0:
		return nil, &Error{Expr: expr, Msg: "empty expression"}
	case len(expr) > MaxExprBytes:
		return nil, &Error{Expr: expr, Msg: fmt.Sprintf("expression is %d bytes, longer than the limit of %d", len(expr), MaxExprBytes)}
	case !utf8.ValidString(expr):
		return nil, &Error{Expr: expr, Msg: "expression is not valid UTF-8"}
	}
	e, err := env()
	if err != nil {
		return nil, &Error{Expr: expr, Msg: "creating CEL environment: " + err.Error()}
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		ferr := &Error{Expr: expr, Msg: iss.String()}
		if errs := iss.Errors(); len(errs) > 0 && errs[0].Location != nil && errs[0].Location.Line() > 0 {
			ferr.Line, ferr.Column = errs[0].Location.Line(), errs[0].Location.Column()+1
		}
		return nil, ferr
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, &Error{Expr: expr, Msg: fmt.Sprintf("expression has type %s, must be bool", cel.FormatCELType(t))}
	}
	prg, err := e.Program(ast,
		cel.EvalOptions(cel.OptOptimize),
		cel.CostLimit(CostLimit),
		cel.InterruptCheckFrequency(interruptCheckFrequency),
	)
	if err != nil {
		return nil, &Error{Expr: expr, Msg: err.Error()}
	}
	return &Filter{expr: expr, prg: prg}, nil
}

// String returns the source expression.
func (f *Filter) String() string { return f.expr }

// Match evaluates the filter on e and reports whether it matches.
//
// A result that is not a bool, a missing key or field (for example
// payload.order_id on a payload without it), a type mismatch (for example
// payload.total > 100 when total is a string), exceeding CostLimit or
// MaxEvalTime, or any other evaluation failure returns (false, err) with an
// *Error that explains; callers treat errors as "no match". Match never
// panics and is safe for concurrent use.
func (f *Filter) Match(e Event) (bool, error) {
	return f.MatchContext(context.Background(), e)
}

// MatchContext is Match with a context: evaluation stops with an error when
// ctx is done (checked between comprehension iterations), as well as after
// MaxEvalTime.
func (f *Filter) MatchContext(ctx context.Context, e Event) (ok bool, err error) {
	return f.MatchPrepared(ctx, Prepare(e))
}

// Prepared is an event made ready for evaluation: its payload normalized once, for matching it
// against many filters (every trigger of its type).
type Prepared struct {
	ev      Event
	payload any
	err     error
}

// Prepare normalizes e's payload once for MatchPrepared.
func Prepare(e Event) *Prepared {
	p := &Prepared{ev: e}
	p.payload, p.err = normalize(e.Payload)
	return p
}

// MatchPrepared is MatchContext on a prepared event.
func (f *Filter) MatchPrepared(ctx context.Context, p *Prepared) (ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			ok, err = false, f.errorf("internal error while evaluating: %v", r)
		}
	}()
	if p.err != nil {
		return false, f.errorf("payload: %v", p.err)
	}
	ctx, cancel := context.WithTimeout(ctx, MaxEvalTime)
	defer cancel()
	val, _, err := f.prg.ContextEval(ctx, &activation{ev: &p.ev, payload: p.payload})
	if err != nil {
		return false, f.errorf("evaluation failed: %v", err)
	}
	b, isBool := val.(types.Bool)
	if !isBool {
		return false, f.errorf("result is %s, not bool", val.Type().TypeName())
	}
	return bool(b), nil
}

func (f *Filter) errorf(format string, args ...any) *Error {
	return &Error{Expr: f.expr, Msg: fmt.Sprintf(format, args...)}
}

// activation resolves the filter variables for one event without building a map.
type activation struct {
	ev      *Event
	payload any
}

// ResolveName implements cel.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case varPayload:
		return a.payload, true
	case varEventID:
		return a.ev.ID, true
	case varEventTypeID:
		return a.ev.TypeID, true
	case varSource:
		return a.ev.Source, true
	case varSubject:
		return a.ev.Subject, true
	}
	return nil, false
}

// Parent implements cel.Activation.
func (a *activation) Parent() cel.Activation { return nil }

// normalize returns v with every json.Number replaced by an int64 (when it is
// an integer that fits) or a float64. Maps and slices are copied only where
// they contain a json.Number; v itself is never modified.
func normalize(v any) (any, error) {
	out, _, err := normalizeValue(v)
	return out, err
}

func normalizeValue(v any) (out any, changed bool, err error) {
	switch t := v.(type) {
	case json.Number:
		n, err := numberValue(t)
		return n, true, err
	case map[string]any:
		var cp map[string]any
		for k, x := range t {
			y, ch, err := normalizeValue(x)
			if err != nil {
				return nil, false, fmt.Errorf("%s: %w", strconv.Quote(k), err)
			}
			if ch {
				if cp == nil {
					cp = maps.Clone(t)
				}
				cp[k] = y
			}
		}
		if cp == nil {
			return t, false, nil
		}
		return cp, true, nil
	case []any:
		var cp []any
		for i, x := range t {
			y, ch, err := normalizeValue(x)
			if err != nil {
				return nil, false, fmt.Errorf("[%d]: %w", i, err)
			}
			if ch {
				if cp == nil {
					cp = slices.Clone(t)
				}
				cp[i] = y
			}
		}
		if cp == nil {
			return t, false, nil
		}
		return cp, true, nil
	}
	return v, false, nil
}

// numberValue converts n to int64 when it is an integer that fits, else to float64.
func numberValue(n json.Number) (any, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, nil
	}
	s := string(n)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) || !json.Valid([]byte(s)) {
		// Not JSON number syntax: reject what ParseFloat would also accept,
		// such as "NaN", "Inf" or "0x1p3".
		return nil, fmt.Errorf("invalid number %q", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// ParseFloat returns ±Inf with a range error for huge exponents;
		// anything else is not a number.
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return f, nil
		}
		return nil, fmt.Errorf("invalid number %q", s)
	}
	return f, nil
}

// cache is a bounded LRU cache of Compile results, successes and failures alike.
type cache struct {
	mu  sync.Mutex
	max int
	ll  *list.List // of *cacheEntry, most recently used first
	m   map[string]*list.Element
}

type cacheEntry struct {
	expr string
	f    *Filter
	err  error
}

func newCache(max int) *cache {
	return &cache{max: max, ll: list.New(), m: make(map[string]*list.Element)}
}

var filterCache = newCache(CacheSize)

// Cached returns Compile(expr) through a bounded process-wide LRU cache of
// CacheSize entries, so repeated calls with the same expression return the
// same *Filter (or the same error: compile errors are cached too, as they are
// deterministic). Expressions longer than MaxExprBytes are rejected without
// being cached. Cached is safe for concurrent use.
func Cached(expr string) (*Filter, error) {
	if len(expr) > MaxExprBytes {
		return Compile(expr)
	}
	return filterCache.get(expr)
}

func (c *cache) get(expr string) (*Filter, error) {
	c.mu.Lock()
	if el, ok := c.m[expr]; ok {
		c.ll.MoveToFront(el)
		ent := el.Value.(*cacheEntry)
		c.mu.Unlock()
		return ent.f, ent.err
	}
	c.mu.Unlock()

	f, err := Compile(expr) // outside the lock: compiling takes a while

	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[expr]; ok { // another goroutine got there first; share its result
		c.ll.MoveToFront(el)
		ent := el.Value.(*cacheEntry)
		return ent.f, ent.err
	}
	c.m[expr] = c.ll.PushFront(&cacheEntry{expr: expr, f: f, err: err})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.m, last.Value.(*cacheEntry).expr)
	}
	return f, err
}

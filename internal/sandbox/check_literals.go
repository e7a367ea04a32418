package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"

	"github.com/larkrun/lark/internal/gts"
)

// checkLiterals checks the helper arguments written as literals: the retry dict of the HTTP
// helpers, the event_filter_query of r_wait_event_v1 and the event_type_id of r_emit_v1. What is
// computed at run time is checked then (a misuse: a non-retryable validation error).
func (c *checker) checkLiterals(call *syntax.CallExpr, h HelperSpec, positional []syntax.Expr) {
	switch h.Name {
	case "r_http_get_v1", "r_http_post_v1":
		switch r := argExpr(call, h, positional, "retry").(type) {
		case nil:
		case *syntax.DictExpr:
			c.checkRetry(h.Name, r)
		default:
			if id, isIdent := r.(*syntax.Ident); isLiteral(r) && (!isIdent || id.Name != "None") {
				pos, _ := r.Span()
				c.errorf(CodeInvalidArgument, pos, "%s: retry must be None or a dict such as {\"max_attempts\": 3}, not %s", h.Name, literalType(r))
			}
		}
	case "r_wait_event_v1":
		if lit, ok := argExpr(call, h, positional, "event_filter_query").(*syntax.Literal); ok && lit.Token == syntax.STRING && c.filter != nil {
			c.checkFilter(h.Name, lit)
		}
	case "r_emit_v1":
		if lit, ok := argExpr(call, h, positional, "event_type_id").(*syntax.Literal); ok && lit.Token == syntax.STRING {
			if id, err := gts.Parse(lit.Value.(string)); err != nil || !id.IsType() {
				c.errorf(CodeInvalidArgument, lit.TokenPos, "%s: event_type_id must be a GTS type id ending with ~, got %s",
					h.Name, truncate(lit.Raw, 256))
			}
		}
	}
}

// argExpr is the expression given for parameter param of a call to h (nil if none).
func argExpr(call *syntax.CallExpr, h HelperSpec, positional []syntax.Expr, param string) syntax.Expr {
	i := slices.Index(h.Params, param)
	if i < 0 {
		return nil
	}
	if i < len(positional) {
		return positional[i]
	}
	for _, a := range call.Args {
		if b, ok := a.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			if id, ok := b.X.(*syntax.Ident); ok && id.Name == param {
				return b.Y
			}
		}
	}
	return nil
}

// literalNumber is the value of an int or float literal (with an optional sign), and whether the
// expression is one; isInt tells the two apart. Non-literals are not numbers here.
func literalNumber(e syntax.Expr) (v float64, isInt, ok bool) {
	sign := 1.0
	if u, isUnary := e.(*syntax.UnaryExpr); isUnary && (u.Op == syntax.MINUS || u.Op == syntax.PLUS) {
		if u.Op == syntax.MINUS {
			sign = -1
		}
		e = u.X
	}
	lit, isLit := e.(*syntax.Literal)
	if !isLit {
		return 0, false, false
	}
	switch x := lit.Value.(type) {
	case int64:
		return sign * float64(x), true, true
	case float64:
		return sign * x, false, true
	}
	if lit.Token == syntax.INT { // a big int
		return sign * 1e300, true, true
	}
	return 0, false, false
}

// isLiteral reports whether e is a literal value whose type is known without running the code.
func isLiteral(e syntax.Expr) bool {
	switch e := e.(type) {
	case *syntax.Literal, *syntax.DictExpr, *syntax.ListExpr, *syntax.TupleExpr:
		return true
	case *syntax.Ident:
		return e.Name == "True" || e.Name == "False" || e.Name == "None"
	case *syntax.UnaryExpr:
		_, isLit := e.X.(*syntax.Literal)
		return isLit
	}
	return false
}

// literalType is the Starlark type name of literal e (isLiteral).
func literalType(e syntax.Expr) string {
	switch e := e.(type) {
	case *syntax.ListExpr:
		return "list"
	case *syntax.TupleExpr:
		return "tuple"
	case *syntax.Ident:
		if e.Name == "None" {
			return "NoneType"
		}
		return "bool"
	case *syntax.UnaryExpr:
		return literalType(e.X)
	case *syntax.Literal:
		switch e.Token {
		case syntax.STRING:
			return "string"
		case syntax.BYTES:
			return "bytes"
		case syntax.FLOAT:
			return "float"
		}
	}
	return "int"
}

// checkRetry checks a literal retry dict against what parseRetry accepts at run time.
func (c *checker) checkRetry(helper string, d *syntax.DictExpr) {
	var constant, exponential bool
	for _, entry := range d.List {
		kv, ok := entry.(*syntax.DictEntry)
		if !ok {
			continue
		}
		pos, _ := kv.Key.Span()
		key, isLit := kv.Key.(*syntax.Literal)
		if !isLit {
			continue // computed: checked at run time
		}
		name, isString := key.Value.(string)
		if !isString || key.Token != syntax.STRING || !slices.Contains(RetryKeys, name) {
			c.errorf(CodeInvalidArgument, pos, "%s: retry has no key %s (want %s)", helper, key.Raw, strings.Join(RetryKeys, ", "))
			continue
		}
		vpos, _ := kv.Value.Span()
		v, isInt, isNum := literalNumber(kv.Value)
		bad := func(want string) {
			c.errorf(CodeInvalidArgument, vpos, "%s: retry.%s must be %s", helper, name, want)
		}
		if !isNum && !isLiteral(kv.Value) {
			continue
		}
		switch name {
		case "max_attempts":
			if !isInt || v < 1 || v > maxRetryAttempts {
				bad(fmt.Sprintf("an int in 1..%d", maxRetryAttempts))
			}
		case "backoff_ms", "initial_delay_ms", "max_delay_ms":
			if !isInt || v < 0 || v > 3600000 {
				bad("an int in 0..3600000 (milliseconds)")
			}
		case "backoff_multiplier":
			if !isNum || v < 1 || v > 100 {
				bad("a number in 1..100")
			}
		}
		if name == "backoff_ms" {
			constant = true
		} else if name != "max_attempts" {
			exponential = true
		}
	}
	if constant && exponential {
		pos, _ := d.Span()
		c.errorf(CodeInvalidArgument, pos, "%s: retry.backoff_ms (a constant delay) cannot be combined with initial_delay_ms, max_delay_ms or backoff_multiplier", helper)
	}
}

// checkFilter compiles a literal event filter, reporting a problem at its place in the source.
func (c *checker) checkFilter(helper string, lit *syntax.Literal) {
	err := c.filter(lit.Value.(string))
	if err == nil {
		return
	}
	pos := lit.TokenPos
	var fe FilterError
	if errors.As(err, &fe) {
		if line, col := fe.Position(); line > 0 {
			if line == 1 {
				pos.Col += int32(quotePrefix(lit.Raw) + col - 1)
			} else {
				pos.Line += int32(line - 1)
				pos.Col = int32(col)
			}
		}
	}
	c.errorf(CodeInvalidFilter, pos, "%s: event_filter_query: %v", helper, err)
}

// quotePrefix is the length of a string literal's opening: its prefix letters and quotes.
func quotePrefix(raw string) int {
	i := strings.IndexAny(raw, `"'`)
	if i < 0 {
		return 0
	}
	if strings.HasPrefix(raw[i:], `"""`) || strings.HasPrefix(raw[i:], `'''`) {
		return i + 3
	}
	return i + 1
}

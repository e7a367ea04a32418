package sandbox

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/larkrun/lark/third_party/go.starlark.net/resolve"
	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"
)

// Diagnostic codes.
const (
	CodeSyntaxError        = "SYNTAX_ERROR"
	CodeForbiddenBuiltin   = "FORBIDDEN_BUILTIN" // 001's code: load(), exec, eval, open, ...
	CodeUndefinedName      = "UNDEFINED_NAME"
	CodeMissingMain        = "MISSING_MAIN"
	CodeBadMainSignature   = "BAD_MAIN_SIGNATURE"
	CodeUnknownHelper      = "UNKNOWN_HELPER"
	CodeHelperArity        = "HELPER_ARITY"
	CodeWorkflowOnlyHelper = "WORKFLOW_ONLY_HELPER"
	CodeUnavailableHelper  = "HELPER_NOT_AVAILABLE"
	CodeInvalidArgument    = "INVALID_ARGUMENT"
	CodeHelperOutsideStep  = "HELPER_OUTSIDE_STEP"
	CodeInvalidFilter      = "INVALID_EVENT_FILTER"
	CodeSourceTooLarge     = "SOURCE_TOO_LARGE"

	// Warnings.
	CodeMissingTimeout = "MISSING_TIMEOUT"
)

// maxHints bounds the number of "did you mean" suggestions computed for
// one source, so that a file full of undefined names stays cheap to check.
const maxHints = 100

// maxSnippetRunes bounds Diagnostic.Snippet.
const maxSnippetRunes = 200

// internalErrorPrefix starts the message of the diagnostic a recovered panic
// becomes.
const internalErrorPrefix = "internal checker error: "

// Diagnostic is one problem found by Check.
type Diagnostic struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    int    `json:"line"`                     // 1-based, 0 if unknown
	Column  int    `json:"column"`                   // 1-based (in runes), 0 if unknown
	Snippet string `json:"source_snippet,omitempty"` // the offending source line
}

// Report is the result of Check. Its slices are never nil.
type Report struct {
	Errors                 []Diagnostic `json:"errors"`
	Warnings               []Diagnostic `json:"warnings"`
	Features               []string     `json:"detected_features"` // sorted, unique
	UsesWorkflowPrimitives bool         `json:"uses_workflow_primitives"`
}

// Valid reports whether the source has no errors (warnings are allowed).
func (r Report) Valid() bool { return len(r.Errors) == 0 }

// Check runs the registration-time static checks on src. workflow says
// whether the source is a workflow (true) or a function (false); functions
// may not use workflow-only helpers. Check reports every problem it finds,
// except that parsing stops at the first syntax error. It never panics.
func Check(filename, src string, workflow bool) Report {
	return CheckWith(filename, src, CheckOptions{Workflow: workflow})
}

// CheckOptions are the settings of CheckWith.
type CheckOptions struct {
	// Workflow says whether the source is a workflow (true) or a function.
	Workflow bool
	// Filter, if set, compiles an event filter (the CEL dialect of event triggers and
	// r_wait_event_v1): the literal event_filter_query of every r_wait_event_v1 call is checked
	// with it. A *FilterError locates the problem inside the expression.
	Filter func(expr string) error
}

// FilterError is a problem at a line and column (1-based) of an event filter expression.
type FilterError interface {
	error
	Position() (line, column int)
}

// CheckWith is Check with options.
func CheckWith(filename, src string, opts CheckOptions) Report {
	c := &checker{filename: filename, src: src, workflow: opts.Workflow, filter: opts.Filter, features: map[string]bool{}, hintsLeft: maxHints}
	c.run()
	return c.report()
}

// forbiddenBuiltins are Python built-ins that Starlark, and so Lark, does not have, because they
// would reach outside the sandbox or evaluate code (001: FORBIDDEN_BUILTIN). load is a statement,
// reported where it is visited.
var forbiddenBuiltins = map[string]bool{
	"exec": true, "eval": true, "open": true, "compile": true, "__import__": true, "input": true,
	"globals": true, "locals": true, "vars": true, "exit": true, "quit": true, "help": true,
	"breakpoint": true, "memoryview": true, "setattr": true, "delattr": true,
}

type checker struct {
	filename string
	src      string
	workflow bool
	filter   func(string) error

	lines    []string // src split into lines, lazily
	errs     []Diagnostic
	warns    []Diagnostic
	features map[string]bool

	module    *resolve.Module      // set by the resolver
	stack     []syntax.Node        // ancestors of the node being visited, and itself
	hintsLeft int                  // spelling suggestions still to compute; bounds the work
	loadSpans [][2]syntax.Position // spans of load statements
	repeated  map[[2]int32]bool    // positions of repeated helper keywords already reported
}

func (c *checker) run() {
	defer func() {
		if p := recover(); p != nil {
			c.errs = append(c.errs, Diagnostic{
				Code:    CodeSyntaxError,
				Message: fmt.Sprintf("%s%v", internalErrorPrefix, p),
			})
		}
	}()

	if len(c.src) > MaxSourceBytes {
		c.errorf(CodeSourceTooLarge, syntax.Position{},
			"source is %d bytes; the limit is %d bytes", len(c.src), MaxSourceBytes)
		return
	}

	f, err := FileOptions().Parse(c.filename, c.src, 0)
	if err != nil {
		var serr syntax.Error
		if errors.As(err, &serr) {
			c.errorf(CodeSyntaxError, serr.Pos, "Starlark syntax error: %s", serr.Msg)
		} else {
			c.errorf(CodeSyntaxError, syntax.Position{}, "Starlark syntax error: %v", err)
		}
		return
	}

	// Resolve names. The resolver is told that every name it cannot find is
	// predeclared: undefined names are then found below, as identifiers
	// bound as predeclared whose name is not in PredeclaredNames. This
	// reports every use (not once per function) and avoids the resolver's
	// spelling suggestions, which sort every global for every undefined use
	// (minutes for a large file with many globals and undefined names).
	// Nothing is universal, so the set option is moot.
	var rerrs resolve.ErrorList
	if err := resolve.File(f, func(string) bool { return true }, func(string) bool { return false }); err != nil {
		if !errors.As(err, &rerrs) {
			c.errorf(CodeSyntaxError, syntax.Position{}, "%v", err)
		}
	}
	c.module, _ = f.Module.(*resolve.Module)

	for _, stmt := range f.Stmts {
		if load, ok := stmt.(*syntax.LoadStmt); ok {
			c.loadSpans = append(c.loadSpans, [2]syntax.Position{load.Load, load.Rparen})
		}
	}

	c.checkMain(f)
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil { // end of the children of the top of the stack
			c.stack = c.stack[:len(c.stack)-1]
			return false
		}
		c.stack = append(c.stack, n)
		c.visit(n)
		return true
	})

	for _, e := range rerrs {
		c.resolveError(e)
	}
}

// visit is called for every node, with c.stack holding its ancestors and itself.
func (c *checker) visit(n syntax.Node) {
	switch n := n.(type) {
	case *syntax.LoadStmt:
		c.errorf(CodeForbiddenBuiltin, n.Load, "Built-in 'load' is not allowed: code runs with the predeclared names only (load of %q)", moduleName(n))
	case *syntax.Ident:
		if b, ok := n.Binding.(*resolve.Binding); ok && b.Scope == resolve.Predeclared && !IsPredeclared(n.Name) {
			c.undefined(n)
		} else if h, ok := helperRef(n); ok {
			if h.Unavailable != "" {
				c.errorf(CodeUnavailableHelper, n.NamePos, "%s is not available: %s", h.Name, h.Unavailable)
				return
			}
			c.features[h.Feature] = true
			if h.WorkflowOnly {
				c.features[FeatureWorkflowPrimitives] = true
				if !c.workflow {
					c.errorf(CodeWorkflowOnlyHelper, n.NamePos,
						"%s may only be used in workflows, not in functions", h.Name)
				}
			}
		}
	case *syntax.CallExpr:
		if id, ok := n.Fn.(*syntax.Ident); ok {
			if h, ok := helperRef(id); ok {
				c.checkCall(n, id, h)
				c.checkInStep(id, h)
			}
		}
	}
}

func moduleName(l *syntax.LoadStmt) string {
	if l.Module != nil {
		if s, ok := l.Module.Value.(string); ok {
			return s
		}
	}
	return ""
}

// helperRef reports whether id refers to a runtime helper (and not to a
// user binding that shadows one).
func helperRef(id *syntax.Ident) (HelperSpec, bool) {
	b, ok := id.Binding.(*resolve.Binding)
	if !ok || b.Scope != resolve.Predeclared {
		return HelperSpec{}, false
	}
	i, ok := tables().helpers[id.Name]
	if !ok {
		return HelperSpec{}, false
	}
	return helperTable[i], true
}

func (c *checker) checkMain(f *syntax.File) {
	var main *syntax.DefStmt
	for _, stmt := range f.Stmts {
		if def, ok := stmt.(*syntax.DefStmt); ok && def.Name.Name == "main" {
			main = def
			break
		}
	}
	if main == nil {
		c.errorf(CodeMissingMain, syntax.Position{},
			"no top-level main function: define def main(ctx, input)")
		return
	}
	ok := len(main.Params) == 2
	for _, p := range main.Params {
		if _, plain := p.(*syntax.Ident); !plain {
			ok = false
		}
	}
	if !ok {
		params := make([]string, len(main.Params))
		for i, p := range main.Params {
			params[i] = paramString(p)
		}
		c.errorf(CodeBadMainSignature, main.Def,
			"main must take exactly two plain positional parameters, main(ctx, input); got main(%s)",
			strings.Join(params, ", "))
	}
}

func paramString(p syntax.Expr) string {
	switch p := p.(type) {
	case *syntax.Ident:
		return p.Name
	case *syntax.BinaryExpr:
		if id, ok := p.X.(*syntax.Ident); ok {
			return id.Name + "=..."
		}
	case *syntax.UnaryExpr:
		prefix := "*"
		if p.Op == syntax.STARSTAR {
			prefix = "**"
		}
		if id, ok := p.X.(*syntax.Ident); ok {
			return prefix + id.Name
		}
		return prefix
	}
	return "?"
}

// checkCall checks the arguments of a call to helper h.
func (c *checker) checkCall(call *syntax.CallExpr, id *syntax.Ident, h HelperSpec) {
	var positional []syntax.Expr
	var keywords []*syntax.Ident
	var varargs, kwargs bool
	for _, arg := range call.Args {
		switch a := arg.(type) {
		case *syntax.UnaryExpr:
			switch a.Op {
			case syntax.STAR:
				varargs = true
				continue
			case syntax.STARSTAR:
				kwargs = true
				continue
			}
		case *syntax.BinaryExpr:
			if a.Op == syntax.EQ {
				if kid, ok := a.X.(*syntax.Ident); ok {
					keywords = append(keywords, kid)
				}
				continue
			}
		}
		positional = append(positional, arg)
	}

	var sigCache string
	sig := func() string { // computed only when there is something to report
		if sigCache == "" {
			sigCache = "; signature: " + h.Signature()
		}
		return sigCache
	}
	given := map[string]bool{}
	for i := 0; i < len(positional) && i < h.MaxArgs; i++ {
		given[h.Params[i]] = true
	}
	if len(positional) > h.MaxArgs {
		pos, _ := positional[h.MaxArgs].Span()
		c.errorf(CodeHelperArity, pos, "%s() takes at most %d positional %s but %d were given%s",
			h.Name, h.MaxArgs, plural(h.MaxArgs, "argument", "arguments"), len(positional), sig())
	}
	seenKw := map[string]bool{}
	for _, kw := range keywords {
		switch {
		case seenKw[kw.Name]:
			c.errorf(CodeHelperArity, kw.NamePos, "%s() got keyword argument '%s' more than once%s",
				h.Name, kw.Name, sig())
			if c.repeated == nil {
				c.repeated = map[[2]int32]bool{}
			}
			c.repeated[[2]int32{kw.NamePos.Line, kw.NamePos.Col}] = true
		case !slices.Contains(h.Params, kw.Name):
			hint := ""
			if n := nearest(kw.Name, h.Params); n != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", n)
			}
			c.errorf(CodeHelperArity, kw.NamePos, "%s() has no parameter named '%s'%s%s",
				h.Name, kw.Name, hint, sig())
		case given[kw.Name]:
			c.errorf(CodeHelperArity, kw.NamePos, "%s() got multiple values for parameter '%s'%s",
				h.Name, kw.Name, sig())
		}
		seenKw[kw.Name] = true
		given[kw.Name] = true
	}
	// With *args or **kwargs the actual arguments are only known at run time.
	if varargs || kwargs {
		return
	}
	c.checkMissing(id, h, given, sig)
	c.checkLiterals(call, h, positional)
	if h.IO && !given["timeout_ms"] {
		c.warnf(CodeMissingTimeout, id.NamePos, "%s at line %d has no timeout_ms; the default %d s applies",
			h.Name, id.NamePos.Line, int(DefaultHelperTimeout.Seconds()))
	}
}

// checkMissing reports the required parameters of h that a call at id does not give.
func (c *checker) checkMissing(id *syntax.Ident, h HelperSpec, given map[string]bool, sig func() string) {
	var missing []string
	for _, p := range h.Params[:h.MinArgs] {
		if !given[p] {
			missing = append(missing, "'"+p+"'")
		}
	}
	if len(missing) > 0 {
		c.errorf(CodeHelperArity, id.NamePos, "%s() missing required %s %s%s",
			h.Name, plural(len(missing), "argument", "arguments"), strings.Join(missing, ", "), sig())
	}
}

// checkInStep reports a workflow's HTTP helper called in the body of main itself: there it runs
// outside any step, which the workflow runtime refuses (its result would not be journaled), so the
// run fails whenever it reaches the call. Calls in other functions are not reported: a function
// may be a step's.
func (c *checker) checkInStep(id *syntax.Ident, h HelperSpec) {
	if !c.workflow || (h.Name != "r_http_get_v1" && h.Name != "r_http_post_v1") {
		return
	}
	for i := len(c.stack) - 1; i >= 0; i-- {
		switch n := c.stack[i].(type) {
		case *syntax.LambdaExpr:
			return
		case *syntax.DefStmt:
			if n.Name.Name == "main" && i == 1 { // the top-level main (c.stack[0] is the file)
				c.errorf(CodeHelperOutsideStep, id.NamePos, "%s is called in main, outside a step: in a workflow, call HTTP helpers inside a step function (r_run_step_v1 or r_step_v1) so that their result is journaled", h.Name)
			}
			return
		}
	}
}

// resolveError turns one resolver error into a diagnostic.
func (c *checker) resolveError(e resolve.Error) {
	if c.inLoad(e.Pos) {
		return // the load statement itself is reported
	}
	if strings.HasSuffix(e.Msg, " is repeated") && c.repeated[[2]int32{e.Pos.Line, e.Pos.Col}] {
		return // reported as HELPER_ARITY
	}
	c.errorf(CodeSyntaxError, e.Pos, "%s", e.Msg)
}

// undefined reports a use of a name that is neither bound nor predeclared.
func (c *checker) undefined(id *syntax.Ident) {
	name := id.Name
	if forbiddenBuiltins[name] {
		c.errorf(CodeForbiddenBuiltin, id.NamePos, "Built-in '%s' is not allowed: code runs in a sandbox, with no file, module or code-evaluation access", name)
		return
	}
	c.hintsLeft--
	if strings.HasPrefix(name, "r_") {
		hint := ""
		if c.hintsLeft >= 0 {
			if n := nearestHelper(name); n != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", n)
			}
		}
		c.errorf(CodeUnknownHelper, id.NamePos, "unknown runtime helper '%s'%s; known: %s",
			name, hint, strings.Join(tables().helperNames, ", "))
		return
	}
	hint := ""
	if c.hintsLeft >= 0 {
		if n := nearest(name, c.visibleNames()); n != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", n)
		}
	}
	c.errorf(CodeUndefinedName, id.NamePos, "undefined name '%s'%s", name, hint)
}

// visibleNames lists the names a misspelt identifier at the top of c.stack
// may have meant: the locals of its enclosing functions, the globals and the
// predeclared names.
func (c *checker) visibleNames() []string {
	var names []string
	addLocals := func(bs []*resolve.Binding) {
		for _, b := range bs {
			if b != nil && b.First != nil {
				names = append(names, b.First.Name)
			}
		}
	}
	inFunction := false
	for _, n := range c.stack {
		var fn any
		switch n := n.(type) {
		case *syntax.DefStmt:
			fn = n.Function
		case *syntax.LambdaExpr:
			fn = n.Function
		}
		if fn, ok := fn.(*resolve.Function); ok {
			addLocals(fn.Locals)
			inFunction = true
		}
	}
	if c.module != nil {
		addLocals(c.module.Globals)
		if !inFunction {
			addLocals(c.module.Locals)
		}
	}
	return append(names, tables().predNames...)
}

// inLoad reports whether p lies within a load statement.
func (c *checker) inLoad(p syntax.Position) bool {
	// loadSpans are in source order: find the last one starting at or before p.
	i := sort.Search(len(c.loadSpans), func(i int) bool { return before(p, c.loadSpans[i][0]) })
	return i > 0 && !before(c.loadSpans[i-1][1], p)
}

func before(a, b syntax.Position) bool {
	return a.Line < b.Line || (a.Line == b.Line && a.Col < b.Col)
}

func (c *checker) errorf(code string, pos syntax.Position, format string, args ...any) {
	c.errs = append(c.errs, c.diag(code, pos, fmt.Sprintf(format, args...)))
}

func (c *checker) warnf(code string, pos syntax.Position, format string, args ...any) {
	c.warns = append(c.warns, c.diag(code, pos, fmt.Sprintf(format, args...)))
}

func (c *checker) diag(code string, pos syntax.Position, msg string) Diagnostic {
	d := Diagnostic{Code: code, Message: msg, Line: int(pos.Line), Column: int(pos.Col)}
	if d.Line < 0 {
		d.Line = 0
	}
	if d.Column < 0 {
		d.Column = 0
	}
	d.Snippet = c.snippet(d.Line)
	return d
}

// snippet returns line n (1-based) of the source, without its line ending,
// cut to maxSnippetRunes runes; "" if there is no such line.
func (c *checker) snippet(n int) string {
	if n <= 0 {
		return ""
	}
	if c.lines == nil {
		c.lines = splitLines(c.src)
	}
	if n > len(c.lines) {
		return ""
	}
	line := c.lines[n-1]
	if utf8.RuneCountInString(line) > maxSnippetRunes {
		i, count := 0, 0
		for i = range line {
			if count == maxSnippetRunes {
				break
			}
			count++
		}
		line = line[:i]
	}
	return strings.ToValidUTF8(line, "\uFFFD")
}

// splitLines splits src into lines the way the Starlark scanner counts
// them: "\n", "\r\n" and a lone "\r" each end a line.
func splitLines(src string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '\n':
			lines = append(lines, src[start:i])
			start = i + 1
		case '\r':
			lines = append(lines, src[start:i])
			if i+1 < len(src) && src[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	return append(lines, src[start:])
}

func (c *checker) report() Report {
	r := Report{
		Errors:   sortDiagnostics(c.errs),
		Warnings: sortDiagnostics(c.warns),
		Features: make([]string, 0, len(c.features)),
	}
	for f := range c.features {
		r.Features = append(r.Features, f)
	}
	sort.Strings(r.Features)
	r.UsesWorkflowPrimitives = c.features[FeatureWorkflowPrimitives]
	return r
}

// sortDiagnostics orders by line, column, code and message, drops exact
// duplicates and never returns nil.
func sortDiagnostics(ds []Diagnostic) []Diagnostic {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Message < b.Message
	})
	out := make([]Diagnostic, 0, len(ds))
	for i, d := range ds {
		if i > 0 && d == ds[i-1] {
			continue
		}
		out = append(out, d)
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// versionSuffix matches the "_v<N>" suffix of a versioned helper name.
var versionSuffix = regexp.MustCompile(`_v[0-9]+$`)

// nearestHelper suggests a helper for an unknown r_* name: the same helper
// at version 1 (r_http_get, r_http_get_v2 -> r_http_get_v1), the unversioned
// helper (r_exit_v1 -> r_exit), or a close spelling.
func nearestHelper(name string) string {
	base := versionSuffix.ReplaceAllString(name, "")
	for _, cand := range []string{base + "_v1", base} {
		if cand != name {
			if _, ok := tables().helpers[cand]; ok {
				return cand
			}
		}
	}
	return nearest(name, tables().helperNames)
}

// nearest returns the candidate closest to name by edit distance, if it is
// close enough to be a plausible misspelling (1 edit for names shorter than
// 5 bytes, 2 otherwise), else the only candidate that extends name; "" if
// there is none.
func nearest(name string, candidates []string) string {
	best, bestDist := "", 2 // accept distances < bestDist
	if len(name) >= 5 {
		bestDist = 3
	}
	for _, cand := range candidates {
		if cand == name {
			continue
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(cand), bestDist); d < bestDist {
			best, bestDist = cand, d
		}
	}
	if best == "" && len(name) >= 3 {
		// A unique candidate extending name, e.g. timeout -> timeout_ms.
		for _, cand := range candidates {
			if strings.HasPrefix(cand, name) && cand != name {
				if best != "" {
					return ""
				}
				best = cand
			}
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes), or any
// value >= limit once it is known to be at least limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

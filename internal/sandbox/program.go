package sandbox

import (
	"container/list"
	"errors"
	"slices"
	"sort"
	"sync"

	"github.com/larkrun/lark/third_party/go.starlark.net/lib/json"
	"github.com/larkrun/lark/third_party/go.starlark.net/lib/math"
	"github.com/larkrun/lark/third_party/go.starlark.net/resolve"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlarkstruct"
	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"
)

// Program is a compiled entrypoint: parsed, resolved against the names
// predeclared at run time, and checked to define main(ctx, input). It is
// immutable and safe for concurrent use by any number of Runs; each Run
// executes the top-level statements afresh, so no state is shared between
// executions.
type Program struct {
	prog     *starlark.Program
	filename string
}

// Filename returns the name the program was compiled under; it appears in
// positions and backtraces.
func (p *Program) Filename() string { return p.filename }

// functionHelpers are the r_* helpers a function may call at run time: every helper of the table
// that is neither workflow-only (Check rejects those in functions) nor unavailable. Each has an
// implementation in helperImpls (a test walks the table).
var functionHelpers = sync.OnceValue(func() []string {
	var names []string
	for _, h := range helperTable {
		if !h.WorkflowOnly && h.Unavailable == "" {
			names = append(names, h.Name)
		}
	}
	return names
})

// predeclared is the environment of every execution besides the Starlark
// universe: struct, json, math and the function helpers. Helpers find the
// state of their execution through the thread, so the dictionary is
// shared, read-only, by all executions.
var predeclared = sync.OnceValue(func() starlark.StringDict {
	d := starlark.StringDict{
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
		"json":   json.Module,
		"math":   math.Module,
	}
	for _, name := range functionHelpers() {
		d[name] = starlark.NewBuiltin(name, helperImpls[name])
	}
	return d
})

// RuntimePredeclaredNames returns, sorted, the names a function may use at
// run time: the Starlark universe, struct, json, math and the function
// helpers. It is a subset of PredeclaredNames, which also holds the helpers
// that Check knows but functions may not call.
func RuntimePredeclaredNames() []string {
	var names []string
	for name := range starlark.Universe {
		names = append(names, name)
	}
	for name := range predeclared() {
		names = append(names, name)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// Compile parses and compiles src, the source of an entrypoint, under the
// given file name. It fails with an ErrValidation *Error (with details
// line and column where known) if the source is too large, is not valid
// Starlark of Lark's dialect, uses a name that is not predeclared for
// functions, uses load, or does not define main(ctx, input) at top level.
// It never panics.
func Compile(filename, src string) (prog *Program, err error) {
	return compile(filename, src, predeclared().Has)
}

// compile is Compile with the set of predeclared names as a parameter (functions or workflows).
func compile(filename, src string, isPredeclared func(string) bool) (prog *Program, err error) {
	defer func() {
		if p := recover(); p != nil {
			prog, err = nil, internalError("compile")
		}
	}()
	if len(src) > MaxSourceBytes {
		return nil, newError(ErrValidation, CategoryNonRetryable,
			"source is %d bytes; the limit is %d bytes", len(src), MaxSourceBytes)
	}
	f, err := FileOptions().Parse(filename, src, 0)
	if err != nil {
		return nil, compileError(err)
	}
	for _, stmt := range f.Stmts {
		if load, ok := stmt.(*syntax.LoadStmt); ok {
			return nil, compileErrorAt(load.Load, "load() is not allowed")
		}
	}
	if err := checkMainDef(f); err != nil {
		return nil, err
	}
	p, err := starlark.FileProgram(f, isPredeclared)
	if err != nil {
		return nil, compileError(err)
	}
	return &Program{prog: p, filename: filename}, nil
}

// checkMainDef checks that f defines main(ctx, input) at top level.
func checkMainDef(f *syntax.File) *Error {
	for _, stmt := range f.Stmts {
		def, ok := stmt.(*syntax.DefStmt)
		if !ok || def.Name.Name != "main" {
			continue
		}
		if len(def.Params) != 2 {
			return compileErrorAt(def.Def, "main must take exactly two parameters, main(ctx, input)")
		}
		for _, p := range def.Params {
			if _, ok := p.(*syntax.Ident); !ok {
				return compileErrorAt(def.Def, "main must take exactly two plain parameters, main(ctx, input)")
			}
		}
		return nil
	}
	return newError(ErrValidation, CategoryNonRetryable, "no top-level main function: define def main(ctx, input)")
}

// compileError converts a syntax or resolver error.
func compileError(err error) *Error {
	var serr syntax.Error
	if errors.As(err, &serr) {
		return compileErrorAt(serr.Pos, "Starlark syntax error: "+serr.Msg)
	}
	var rerrs resolve.ErrorList
	if errors.As(err, &rerrs) && len(rerrs) > 0 {
		return compileErrorAt(rerrs[0].Pos, rerrs[0].Msg)
	}
	return newError(ErrValidation, CategoryNonRetryable, "%v", err)
}

func compileErrorAt(pos syntax.Position, msg string) *Error {
	e := newError(ErrValidation, CategoryNonRetryable, "%s", msg)
	if pos.Line > 0 {
		e.withDetail("line", int(pos.Line))
		e.withDetail("column", int(pos.Col))
	}
	return e
}

// Cache is a bounded LRU cache of compiled programs, safe for concurrent
// use. Concurrent misses on one key compile once. Compilation failures are
// cached too: they are as deterministic as successes.
type Cache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // of *cacheEntry, most recently used first
	items map[string]*list.Element
}

type cacheEntry struct {
	key, filename, src string
	ready              chan struct{} // closed when prog and err are set
	prog               *Program
	err                error
}

// NewCache returns a cache holding at most max programs (at least 1).
func NewCache(max int) *Cache {
	if max < 1 {
		max = 1
	}
	return &Cache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

// Get returns the program for key, compiling src on a miss. The key
// identifies an entrypoint at an exact version; a key that comes back with
// a different file name or source is treated as a miss, and the new
// compilation replaces the old one. Errors are as for Compile.
func (c *Cache) Get(key, filename, src string) (*Program, error) {
	c.mu.Lock()
	if el, ok := c.items[key]; ok {
		e := el.Value.(*cacheEntry)
		if e.src == src && e.filename == filename {
			c.ll.MoveToFront(el)
			c.mu.Unlock()
			<-e.ready
			return e.prog, e.err
		}
		c.ll.Remove(el)
		delete(c.items, key)
	}
	e := &cacheEntry{key: key, filename: filename, src: src, ready: make(chan struct{})}
	c.items[key] = c.ll.PushFront(e)
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
	c.mu.Unlock()

	prog, err := Compile(filename, src)
	e.prog = prog
	if err != nil {
		e.err = err
	}
	close(e.ready)
	return e.prog, e.err
}

// Len returns the number of programs in the cache.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Package larktest is `lark test`: it runs the test_* functions of a folder's *_test.star files
// against an in-process Lark — the real registry, invocation engine, sandbox, journal and SQLite
// store, with stubbed egress, a fake clock the harness moves, and events the test sends — so that
// functions and workflows are unit-tested in milliseconds, without a server (docs/testing.md).
package larktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/larkrun/lark/third_party/go.starlark.net/lib/json"
	"github.com/larkrun/lark/third_party/go.starlark.net/lib/math"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlarkstruct"
	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"

	"github.com/larkrun/lark/internal/manifest"
)

// Exit codes of `lark test`, as `go test`'s.
const (
	ExitPass  = 0
	ExitFail  = 1
	ExitUsage = 2
)

// DefaultTimeout bounds one test function.
const DefaultTimeout = time.Minute

// Options configure Run.
type Options struct {
	// Dir is searched recursively for *_test.star files; each file is run against the manifests
	// of its own folder.
	Dir string
	// Run, when set, selects the tests whose name it matches.
	Run *regexp.Regexp
	// Verbose lists every test, passing or not.
	Verbose bool
	// Timeout bounds each test (default DefaultTimeout).
	Timeout time.Duration
	// Out receives the report.
	Out io.Writer
}

// UsageError is a problem with the command line or with loading the tests or manifests (exit 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ExitCode is 2.
func (e *UsageError) ExitCode() int { return ExitUsage }

// ErrFailed is returned by Run when a test failed (exit 1); the report says which.
var ErrFailed = &failedError{}

type failedError struct{}

func (*failedError) Error() string { return "" }
func (*failedError) ExitCode() int { return ExitFail }

// Result counts what Run did.
type Result struct {
	Passed, Failed, Skipped int
}

// testFile is a parsed *_test.star file.
type testFile struct {
	path, rel string
	globals   starlark.StringDict
	tests     []*starlark.Function
}

// Run runs the tests under o.Dir and writes a go-test-like report to o.Out. It returns ErrFailed
// when a test failed and a *UsageError when the tests or the manifests cannot be loaded.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	st, err := os.Stat(o.Dir)
	if err != nil {
		return res, &UsageError{err}
	}
	if !st.IsDir() {
		return res, &UsageError{fmt.Errorf("%s is not a folder", o.Dir)}
	}
	byDir, err := findTests(o.Dir)
	if err != nil {
		return res, &UsageError{err}
	}
	if len(byDir) == 0 {
		return res, &UsageError{fmt.Errorf("no *_test.star files under %s", o.Dir)}
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	anyFailed := false
	for _, dir := range dirs {
		start := time.Now()
		set, err := manifest.Load(dir)
		if err != nil {
			return res, &UsageError{err}
		}
		var files []*testFile
		for _, path := range byDir[dir] {
			f, err := loadTestFile(path)
			if err != nil {
				return res, &UsageError{err}
			}
			files = append(files, f)
		}
		failed := false
		for _, f := range files {
			for _, fn := range f.tests {
				if o.Run != nil && !o.Run.MatchString(fn.Name()) {
					res.Skipped++
					continue
				}
				ok, err := runTest(ctx, o, set, f, fn)
				if err != nil {
					return res, &UsageError{err}
				}
				if ok {
					res.Passed++
				} else {
					res.Failed++
					failed = true
				}
			}
		}
		elapsed := time.Since(start).Seconds()
		if failed {
			anyFailed = true
			fmt.Fprintf(o.Out, "FAIL\t%s\t%.3fs\n", dir, elapsed)
		} else {
			fmt.Fprintf(o.Out, "ok  \t%s\t%.3fs\n", dir, elapsed)
		}
	}
	if anyFailed {
		return res, ErrFailed
	}
	return res, nil
}

// findTests maps each folder under root to its *_test.star files.
func findTests(root string) (map[string][]string, error) {
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, "_test.star") && !strings.HasPrefix(name, ".") {
			dir := filepath.Dir(path)
			out[dir] = append(out[dir], path)
		}
		return nil
	})
	return out, err
}

// predeclared is what a test file sees: the assertions, struct, json and math.
func predeclared() starlark.StringDict {
	p := assertions()
	p["struct"] = starlark.NewBuiltin("struct", starlarkstruct.Make)
	p["json"] = json.Module
	p["math"] = math.Module
	return p
}

// loadTestFile executes a test file's top level and collects its test_* functions, in the order
// they are defined.
func loadTestFile(path string) (*testFile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(src) > manifest.MaxSourceBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, manifest.MaxSourceBytes)
	}
	rel := filepath.Base(path)
	thread := &starlark.Thread{Name: rel, Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
		return nil, errors.New("load() is not available in tests")
	}}
	thread.SetMaxExecutionSteps(1 << 30)
	opts := &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}
	globals, err := starlark.ExecFileOptions(opts, thread, path, src, predeclared())
	if err != nil {
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("%s", ee.Backtrace())
		}
		return nil, err
	}
	f := &testFile{path: path, rel: rel, globals: globals}
	for name, v := range globals {
		fn, ok := v.(*starlark.Function)
		if !ok || !strings.HasPrefix(name, "test_") {
			continue
		}
		if fn.NumParams() != 1 {
			return nil, fmt.Errorf("%s: %s must take one parameter, t", fn.Position(), name)
		}
		f.tests = append(f.tests, fn)
	}
	sort.Slice(f.tests, func(i, j int) bool { return f.tests[i].Position().Line < f.tests[j].Position().Line })
	return f, nil
}

// runTest runs one test function in a fresh runtime and reports it. The error is for a runtime
// that cannot start.
func runTest(ctx context.Context, o Options, set manifest.Set, f *testFile, fn *starlark.Function) (bool, error) {
	start := time.Now()
	if o.Verbose {
		fmt.Fprintf(o.Out, "=== RUN   %s\n", fn.Name())
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rt, err := newRuntime(ctx, set)
	if err != nil {
		return false, err
	}
	defer func() {
		if err := rt.close(); err != nil {
			fmt.Fprintf(o.Out, "    warning: closing the test runtime of %s: %v\n", fn.Name(), err)
		}
	}()
	t := newTester(ctx, rt)
	thread := &starlark.Thread{Name: fn.Name()}
	stop := context.AfterFunc(ctx, func() { thread.Cancel("the test ran longer than " + o.Timeout.String()) })
	defer stop()
	cerr := callTest(thread, fn, t)
	var msgs []string
	pos := fn.Position()
	if cerr != nil {
		p, msg := describe(cerr, f.path)
		if p.IsValid() {
			pos = p
		}
		msgs = append(msgs, msg)
	}
	for _, c := range rt.http.unstubbed() {
		msgs = append(msgs, fmt.Sprintf("the code called %s %s, which no t.stub_http declares", c.Method, c.URL))
	}
	elapsed := time.Since(start).Seconds()
	if len(msgs) == 0 {
		if o.Verbose {
			fmt.Fprintf(o.Out, "--- PASS: %s (%.3fs)\n", fn.Name(), elapsed)
		}
		return true, nil
	}
	fmt.Fprintf(o.Out, "--- FAIL: %s (%s:%d) (%.3fs)\n", fn.Name(), filepath.Base(pos.Filename()), pos.Line, elapsed)
	for _, m := range msgs {
		for _, line := range strings.Split(m, "\n") {
			fmt.Fprintf(o.Out, "    %s\n", line)
		}
	}
	return false, nil
}

// callTest runs the test function; a panic (a bug of the harness or the interpreter) fails the test
// instead of ending the run.
func callTest(thread *starlark.Thread, fn *starlark.Function, t *tester) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("lark test: panic: %v", r)
		}
	}()
	_, err = starlark.Call(thread, fn, starlark.Tuple{t}, nil)
	return err
}

// describe finds where in the test file err happened and what to say: an assertion's line and
// message, or a Starlark error's innermost line in the test file and its backtrace.
func describe(err error, path string) (syntax.Position, string) {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		var f *failure
		if errors.As(ee.Unwrap(), &f) {
			return f.Pos, fmt.Sprintf("%s:%d: %s", filepath.Base(f.Pos.Filename()), f.Pos.Line, f.Msg)
		}
		var pos syntax.Position
		for i := len(ee.CallStack) - 1; i >= 0; i-- {
			if p := ee.CallStack[i].Pos; p.Filename() == path {
				pos = p
				break
			}
		}
		return pos, ee.Backtrace()
	}
	var f *failure
	if errors.As(err, &f) {
		return f.Pos, fmt.Sprintf("%s:%d: %s", filepath.Base(f.Pos.Filename()), f.Pos.Line, f.Msg)
	}
	return syntax.Position{}, err.Error()
}

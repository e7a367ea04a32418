package larktest

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"
)

// failure is a failed assertion (or a failed t.* call): where in the test file, and why.
type failure struct {
	Pos syntax.Position
	Msg string
}

func (f *failure) Error() string { return f.Msg }

// callerPos is the position of the Starlark call that called the running built-in.
func callerPos(thread *starlark.Thread) syntax.Position {
	if thread.CallStackDepth() > 1 {
		return thread.CallFrame(1).Pos
	}
	return syntax.Position{}
}

func failAt(thread *starlark.Thread, format string, args ...any) error {
	return &failure{Pos: callerPos(thread), Msg: fmt.Sprintf(format, args...)}
}

// withMsg appends the assertion's msg argument.
func withMsg(s string, msg starlark.Value) string {
	if m, ok := msg.(starlark.String); ok && m != "" {
		return s + ": " + string(m)
	}
	if msg != nil && msg != starlark.None {
		return s + ": " + msg.String()
	}
	return s
}

// assertions are the assert_* built-ins of a test file.
func assertions() starlark.StringDict {
	return starlark.StringDict{
		"assert_eq":       starlark.NewBuiltin("assert_eq", assertEq(true)),
		"assert_ne":       starlark.NewBuiltin("assert_ne", assertEq(false)),
		"assert_true":     starlark.NewBuiltin("assert_true", assertTrue),
		"assert_contains": starlark.NewBuiltin("assert_contains", assertContains),
		"assert_fails":    starlark.NewBuiltin("assert_fails", assertFails),
	}
}

func assertEq(want bool) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var got, exp starlark.Value
		var msg starlark.Value = starlark.None
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "a", &got, "b", &exp, "msg?", &msg); err != nil {
			return nil, err
		}
		eq, err := starlark.Equal(got, exp)
		if err != nil {
			return nil, failAt(thread, "%s: cannot compare %s with %s: %v", b.Name(), got.Type(), exp.Type(), err)
		}
		if eq != want {
			if want {
				return nil, failAt(thread, "%s", withMsg(fmt.Sprintf("assert_eq: got %s, want %s", short(got), short(exp)), msg))
			}
			return nil, failAt(thread, "%s", withMsg(fmt.Sprintf("assert_ne: both are %s", short(got)), msg))
		}
		return starlark.None, nil
	}
}

func assertTrue(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var cond starlark.Value
	var msg starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "cond", &cond, "msg?", &msg); err != nil {
		return nil, err
	}
	if !cond.Truth() {
		return nil, failAt(thread, "%s", withMsg(fmt.Sprintf("assert_true: %s is false", short(cond)), msg))
	}
	return starlark.None, nil
}

func assertContains(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var container, elem starlark.Value
	var msg starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "container", &container, "element", &elem, "msg?", &msg); err != nil {
		return nil, err
	}
	var found bool
	switch c := container.(type) {
	case starlark.String:
		s, ok := elem.(starlark.String)
		if !ok {
			return nil, failAt(thread, "assert_contains: looking for a %s in a string", elem.Type())
		}
		found = strings.Contains(string(c), string(s))
	default:
		v, err := starlark.Binary(syntax.IN, elem, container)
		if err != nil {
			return nil, failAt(thread, "assert_contains: %v", err)
		}
		found = bool(v.Truth())
	}
	if !found {
		return nil, failAt(thread, "%s", withMsg(fmt.Sprintf("assert_contains: %s not in %s", short(elem), short(container)), msg))
	}
	return starlark.None, nil
}

// assertFails calls fn() and requires it to fail with an error matching pattern (a regular
// expression); it returns the error's message.
func assertFails(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var fn starlark.Callable
	var pattern string
	var msg starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "fn", &fn, "pattern", &pattern, "msg?", &msg); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, failAt(thread, "assert_fails: bad pattern %q: %v", pattern, err)
	}
	_, cerr := starlark.Call(thread, fn, nil, nil)
	if cerr == nil {
		return nil, failAt(thread, "%s", withMsg(fmt.Sprintf("assert_fails: %s did not fail", fn.Name()), msg))
	}
	text := errText(cerr)
	if !re.MatchString(text) {
		return nil, failAt(thread, "%s", withMsg(fmt.Sprintf("assert_fails: the error %q does not match %q", text, pattern), msg))
	}
	return starlark.String(text), nil
}

// errText is an error's message without the Starlark backtrace.
func errText(err error) string {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		var f *failure
		if errors.As(ee.Unwrap(), &f) {
			return f.Msg
		}
		return ee.Msg
	}
	return err.Error()
}

// short renders a value for a message, cut at 500 bytes.
func short(v starlark.Value) string {
	s := v.String()
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

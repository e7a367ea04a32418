package quality

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"
)

// Limits of a custom check's execution, tighter than a function's: a check is a predicate over a
// value it is given, with no I/O.
const (
	// CustomCPU is the share of a core a custom check may use over its timeout (sandbox.Limits.CPU):
	// an infinite loop ends at its timeout or after half of it in CPU, whichever comes first.
	CustomCPU = 0.5
	// CustomMemoryMB is a custom check's allocation budget, converting its output and previous
	// values to Starlark included.
	CustomMemoryMB = 64
	// customMaxResultBytes bounds the JSON of the check's return value (a bool and a message).
	customMaxResultBytes = 16 << 10
	// maxMessageBytes bounds the message a check's result carries.
	maxMessageBytes = 1 << 10
)

// customFile is the file name custom check sources are compiled under (it appears in messages).
const customFile = "check.star"

// customMain adapts def check(output, previous) to the sandbox's entry point, main(ctx, input).
const customMain = "\n\ndef main(ctx, input):\n    return check(input[\"output\"], input[\"previous\"])\n"

// programs caches compiled custom checks by the hash of their source.
var programs = sandbox.NewCache(256)

// compileCustom compiles a custom check's source: valid Starlark of Lark's dialect that defines
// check(output, previous) at top level and no main.
func compileCustom(src string) (*sandbox.Program, error) {
	f, err := sandbox.FileOptions().Parse(customFile, src, 0)
	if err != nil {
		return nil, fmt.Errorf("syntax error: %w", err)
	}
	if err := checkDef(f); err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(src))
	prog, err := programs.Get(hex.EncodeToString(sum[:]), customFile, src+customMain)
	if err != nil {
		var serr *sandbox.Error
		if errors.As(err, &serr) && serr.Details["line"] != nil {
			return nil, fmt.Errorf("line %v: %s", serr.Details["line"], serr.Message)
		}
		return nil, err
	}
	return prog, nil
}

// checkDef requires a top-level def check(output, previous) and no def main.
func checkDef(f *syntax.File) error {
	found := false
	for _, stmt := range f.Stmts {
		def, ok := stmt.(*syntax.DefStmt)
		switch {
		case !ok:
		case def.Name.Name == "main":
			return fmt.Errorf("line %d: a custom check defines check(output, previous), not main", def.Def.Line)
		case def.Name.Name == "check":
			if len(def.Params) != 2 {
				return fmt.Errorf("line %d: check must take exactly two parameters, check(output, previous)", def.Def.Line)
			}
			found = true
		}
	}
	if !found {
		return errors.New("no top-level check function: define def check(output, previous)")
	}
	return nil
}

// runCustom runs a custom check on value, with previous (nil: None) as its second argument.
func runCustom(ctx context.Context, c Check, value, previous any, now func() time.Time) outcome {
	prog, err := compileCustom(c.Source)
	if err != nil {
		return failed(nil, "custom check does not compile: %v", err)
	}
	res, rerr := sandbox.Run(ctx, sandbox.Request{
		Program: prog,
		Input:   map[string]any{"output": value, "previous": previous},
		Info:    sandbox.Info{InvocationID: "check:" + c.Name},
		Limits: sandbox.Limits{Timeout: c.timeout(), CPU: CustomCPU, MemoryMB: CustomMemoryMB,
			MaxPayloadBytes: customMaxResultBytes},
		Host: checkHost{now: now},
	})
	if rerr != nil {
		return failed(nil, "%s", customError(rerr, c.timeout()))
	}
	return customResult(res.Output)
}

// customError says why a custom check's execution failed.
func customError(e *sandbox.Error, timeout time.Duration) string {
	switch e.TypeID {
	case sandbox.ErrTimeout:
		return fmt.Sprintf("custom check timed out after %v", timeout)
	case sandbox.ErrCPULimit:
		return fmt.Sprintf("custom check timed out: it used its CPU budget (%v of CPU)", time.Duration(CustomCPU*float64(timeout)))
	case sandbox.ErrMemoryLimit:
		return fmt.Sprintf("custom check exceeded its memory limit (%d MiB)", CustomMemoryMB)
	}
	msg := "custom check failed: " + e.Error()
	if line, ok := e.Details["line"]; ok {
		msg += fmt.Sprintf(" (line %v)", line)
	}
	return msg
}

// customResult reads check's return value: a bool, or a (bool, message) tuple.
func customResult(out any) outcome {
	switch v := out.(type) {
	case bool:
		return outcome{passed: v, message: passedOrFailed(v)}
	case []any:
		if len(v) == 2 {
			ok, isBool := v[0].(bool)
			msg, isStr := v[1].(string)
			if isBool && isStr {
				return outcome{passed: ok, message: truncate(msg, maxMessageBytes)}
			}
		}
	}
	return failed(nil, "custom check must return a bool or a tuple (bool, message)")
}

func passedOrFailed(ok bool) string {
	if ok {
		return "custom check passed"
	}
	return "custom check returned False"
}

// truncate cuts s to at most n bytes at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "") + "…"
}

// checkHost is the host of custom checks: no egress, no child invocations, no logs; the clock is
// the Runner's.
type checkHost struct{ now func() time.Time }

// noIO is the error of every HTTP call and child invocation of a custom check.
func noIO(typeID string) *sandbox.Error {
	return &sandbox.Error{TypeID: typeID, Category: sandbox.CategoryNonRetryable, Message: "a quality check has no I/O"}
}

func (checkHost) HTTP(context.Context, sandbox.HTTPRequest) (sandbox.HTTPResponse, error) {
	return sandbox.HTTPResponse{}, noIO(sandbox.ErrHTTPTransport)
}

func (checkHost) Invoke(context.Context, sandbox.InvokeRequest) (sandbox.InvokeResult, error) {
	return sandbox.InvokeResult{}, noIO(sandbox.ErrRuntime)
}

func (checkHost) Log(context.Context, string, map[string]any) {}

func (h checkHost) Now() time.Time { return h.now() }

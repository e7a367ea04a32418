// Copyright 2017 The Bazel Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package starlark_test

// Tests of the Lark patch: allocation accounting, bounded printing and
// nesting limits (see PATCHES.md).

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/larkrun/lark/third_party/go.starlark.net/lib/json"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlarkstruct"
	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"
)

var allocOpts = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, Recursion: true, GlobalReassign: true}

func execLimited(t *testing.T, src string, max int64) (*starlark.Thread, error) {
	t.Helper()
	thread := &starlark.Thread{}
	thread.SetMaxAllocBytes(max)
	predeclared := starlark.StringDict{
		"json":   json.Module,
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
	}
	_, err := starlark.ExecFileOptions(allocOpts, thread, "alloc.star", src, predeclared)
	return thread, err
}

func TestAllocLimit(t *testing.T) {
	const limit = 8 << 20
	for _, src := range []string{
		`x = "x" * (1 << 30)`,
		`x = b"x" * (1 << 30)`,
		`x = [0] * (1 << 28)`,
		`x = (0,) * (1 << 28)`,
		`x = "x"` + "\nfor i in range(40): x = x + x",
		`x = "x"` + "\nfor i in range(40): x += x",
		`x = [1]` + "\nfor i in range(40): x += x",
		`x = [1]` + "\nfor i in range(40): x.extend(x)",
		`x = [1]` + "\nfor i in range(40): x = x + x",
		`x = [i for i in range(1 << 30)]`,
		`x = {i: i for i in range(1 << 30)}`,
		`x = {}` + "\nfor i in range(1 << 30): x[i] = i",
		`x = []` + "\nfor i in range(1 << 30): x.append(i)",
		`x = []` + "\nfor i in range(1 << 30): x.insert(-1, i)",
		`x = set()` + "\nfor i in range(1 << 30): x.add(i)",
		`x = list(range(1 << 30))`,
		`x = tuple(range(1 << 30))`,
		`x = sorted(range(1 << 30))`,
		`x = reversed(range(1 << 30))`,
		`x = set(range(1 << 30))`,
		`x = dict([(i, i) for i in range(1 << 30)])`,
		`x = enumerate(range(1 << 30))`,
		`x = zip(range(1 << 30), range(1 << 30))`,
		`x = bytes(range(1 << 30))`,
		`x = max(*range(1 << 30))`,
		`x = ",".join(["x" * 1000] * 100000)`,
		`x = str(["x" * 1000] * 100000)`,
		`x = repr(["x" * 1000] * 100000)`,
		`x = "%s" % (["x" * 1000] * 100000,)`,
		`x = "{}".format(["x" * 1000] * 100000)`,
		`x = ("a" * 100000).replace("a", "b" * 1000)`,
		`x = ("," * 10000000).split(",")`,
		`x = ("\n" * 10000000).splitlines()`,
		`x = ("x" * 1000000).upper() + ("x" * 1000000).lower() + ("x" * 1000000).title() + ("x" * 10000000).capitalize()`,
		`x = json.encode(["x" * 1000] * 100000)`,
		`x = json.decode("[" + ",".join(["1"] * 2000000) + "]")`,
		`x = json.indent(json.encode([[1]] * 10000), indent=" " * 10000)`,
		`x = [1] * 100000` + "\nfor i in range(1000): x = x[1:]",
		`x = {"k%d" % i: i for i in range(100000)}` + "\ny = {}\nfor i in range(1000): y |= x\nfor i in range(1000): z = x | y",
		"def f(n): return f(n + 1)\nf(0)",
		`fail(*(["x" * 1000] * 100000))`,
		`print(["x" * 1000] * 100000)`,
		`x = struct(**{"f%d" % i: i for i in range(1000000)})`,
	} {
		thread, err := execLimited(t, src, limit)
		var ae *starlark.AllocLimitError
		if !errors.As(err, &ae) {
			t.Errorf("%s: got error %v, want an allocation limit error", src, err)
			continue
		}
		if !thread.AllocLimitExceeded() {
			t.Errorf("%s: AllocLimitExceeded is false", src)
		}
		if thread.PeakAllocBytes() > limit {
			t.Errorf("%s: peak %d exceeds the limit", src, thread.PeakAllocBytes())
		}
	}
}

func TestAllocAccounting(t *testing.T) {
	thread, err := execLimited(t, `x = "x" * 1000000`+"\ny = [0] * 1000\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := thread.AllocBytes(); got < 1000000+1000*16 || got > 1100000 {
		t.Errorf("AllocBytes = %d", got)
	}
	if thread.AllocLimitExceeded() {
		t.Error("no limit, yet exceeded")
	}

	// Call frames are charged while live only.
	thread, err = execLimited(t, "def f(n):\n  if n > 0:\n    f(n - 1)\nf(100)\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	if thread.PeakAllocBytes() < 100*starlark.AllocFrameBytes {
		t.Errorf("peak %d does not count 100 frames", thread.PeakAllocBytes())
	}
	if thread.AllocBytes() > 10*starlark.AllocFrameBytes {
		t.Errorf("frames are still charged after they return: %d", thread.AllocBytes())
	}

	// Charges are refused once the limit is exceeded, even small ones.
	thread = &starlark.Thread{}
	thread.SetMaxAllocBytes(100)
	if err := thread.AddAllocBytes(60); err != nil {
		t.Fatal(err)
	}
	if err := thread.AddAllocBytes(60); err == nil {
		t.Fatal("charge beyond the limit accepted")
	}
	if err := thread.AddAllocBytes(1); err == nil {
		t.Fatal("the limit is not sticky")
	}
	if thread.AllocBytes() != 60 {
		t.Errorf("AllocBytes = %d, want 60", thread.AllocBytes())
	}
	var nilThread *starlark.Thread
	if err := nilThread.AddAllocBytes(1 << 40); err != nil {
		t.Error("a nil thread refused a charge")
	}
}

func TestAllocUnlimitedUnchanged(t *testing.T) {
	// Without a limit, programs behave as upstream (no integer size limit).
	thread, err := execLimited(t, "x = 3\nfor i in range(22): x = x * x\ny = str([1] * 100000)\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	if thread.AllocBytes() == 0 {
		t.Error("nothing accounted")
	}
}

func TestIntLimit(t *testing.T) {
	for _, src := range []string{
		"x = 3\nfor i in range(64): x = x * x",
		"x = 1\nfor i in range(3000): x = x << 511",
		`x = int("9" * 1000000)`,
		`x = json.decode("9" * 1000000)`,
	} {
		_, err := execLimited(t, src, 1<<30)
		if err == nil || !strings.Contains(err.Error(), "too l") {
			t.Errorf("%s: got %v, want an integer size error", src, err)
		}
	}
}

func TestNestingLimits(t *testing.T) {
	deep := "l = []\nfor i in range(20000): l = [l]\n"
	deepTuple := "t = ()\nfor i in range(20000): t = (t,)\n"
	deepStruct := "s = ()\nfor i in range(20000): s = struct(a = (s,))\n"
	for _, tc := range []struct{ src, want string }{
		{deep + "x = str(l)", "nested too deeply"},
		{deep + "x = json.encode(l)", "nested too deeply"},
		{deepTuple + "x = {t: 1}", "nested too deeply"},
		{deepStruct + "x = hash(s) if False else {s: 1}", "nested too deeply"},
		{`x = json.decode("[" * 20000 + "]" * 20000)`, "nested too deeply"},
		{`x = json.decode("[" * 20000 + "]" * 20000, default = 1)`, "nested too deeply"},
	} {
		_, err := execLimited(t, tc.src, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.src, err, tc.want)
		}
	}

	// Thread-less string forms are bounded and abbreviated.
	thread := &starlark.Thread{}
	g, err := starlark.ExecFileOptions(allocOpts, thread, "x.star", deep+"big = [\"x\" * 1000] * 10000\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := g["l"].String(); !strings.Contains(s, "...") || len(s) > 3*starlark.MaxNestingDepth {
		t.Errorf("deep String() has length %d", len(s))
	}
	if s := g["big"].String(); !strings.HasSuffix(s, "...") || len(s) > 2<<20 {
		t.Errorf("big String() has length %d", len(s))
	}
}

func TestCyclicStructPrint(t *testing.T) {
	// A cycle through a struct is printed with "..." rather than recursing.
	thread := &starlark.Thread{}
	g, err := starlark.ExecFileOptions(allocOpts, thread, "x.star", "l = []\ns = struct(a = l)\nl.append(s)\nx = str(l)\n",
		starlark.StringDict{"struct": starlark.NewBuiltin("struct", starlarkstruct.Make)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(g["x"].(starlark.String)), "[struct(a = [...])]"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestLastReturnPosition(t *testing.T) {
	thread := &starlark.Thread{}
	g, err := starlark.ExecFileOptions(allocOpts, thread, "x.star", "def f(x):\n  if x:\n    return b\"x\"\n  return 2\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		arg  starlark.Value
		line int32
	}{{starlark.True, 3}, {starlark.False, 4}} {
		if _, err := starlark.Call(thread, g["f"], starlark.Tuple{tc.arg}, nil); err != nil {
			t.Fatal(err)
		}
		if got := thread.LastReturnPosition(); got.Line != tc.line {
			t.Errorf("f(%v) returned at %v, want line %d", tc.arg, got, tc.line)
		}
	}
}

func TestAllocLimitHeapBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := execLimited(t, `x = [0] * (1 << 28)`, 64<<20)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("no error")
	}
	if after.TotalAlloc-before.TotalAlloc > 16<<20 {
		t.Errorf("allocated %d bytes before refusing", after.TotalAlloc-before.TotalAlloc)
	}
}

func TestBuiltinsCountSteps(t *testing.T) {
	for _, src := range []string{
		`x = max(range(2147483647))`,
		`x = min(range(2147483647))`,
		`x = any([0] * 10) or all(range(1, 2147483647))`,
		`x = set([-1]).issubset(range(2147483647))`,
		`x = set().difference(range(2147483647))`,
		`x = sorted([(i % 7, str(i)) for i in range(100000)])`,
	} {
		thread := &starlark.Thread{}
		thread.SetMaxExecutionSteps(100000)
		_, err := starlark.ExecFileOptions(allocOpts, thread, "steps.star", src, nil)
		if err == nil || !strings.Contains(err.Error(), "too many steps") {
			t.Errorf("%s: got %v, want the step limit", src, err)
		}
	}
}

func TestEncodingAndPrintingCountSteps(t *testing.T) {
	predeclared := starlark.StringDict{"json": json.Module}
	for _, src := range []string{
		`x = json.encode([[0] * 1000] * 1000)`,
		`x = json.decode("[" + ",".join(["0"] * 100000) + "]")`,
		`x = str([[0] * 1000] * 1000)`,
		`x = "%s" % ([[0] * 1000] * 1000,)`,
	} {
		thread := &starlark.Thread{}
		thread.SetMaxExecutionSteps(100000)
		_, err := starlark.ExecFileOptions(allocOpts, thread, "steps.star", src, predeclared)
		if err == nil || !strings.Contains(err.Error(), "too many steps") {
			t.Errorf("%s: got %v, want the step limit", src, err)
		}
	}
	thread := &starlark.Thread{}
	thread.SetMaxExecutionSteps(10)
	if err := thread.AddSteps(5); err != nil {
		t.Fatalf("AddSteps(5) of 10: %v", err)
	}
	if err := thread.AddSteps(5); err == nil || thread.ExecutionSteps() != 10 {
		t.Fatalf("AddSteps to the limit: %v, %d steps", err, thread.ExecutionSteps())
	}
}

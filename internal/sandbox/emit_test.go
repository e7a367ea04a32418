package sandbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const orderType = "gts.x.core.events.event.v1~acme.shop.orders.placed.v1~"

func TestEmitFunctionBuffersEvents(t *testing.T) {
	res, rerr := exec(t, fn(
		`  r_emit_v1("`+orderType+`", {"order": input["id"], "items": [1, 2]})`,
		`  r_emit_v1(event_type_id = "`+orderType+`", payload = None)`,
		`  return r_emit_v1("`+orderType+`", "text")`), map[string]any{"id": "o-1"}, Limits{}, nil)
	require.Nil(t, rerr)
	require.Nil(t, res.Output, "r_emit_v1 returns None")
	require.Len(t, res.Emits, 3)
	require.Equal(t, orderType, res.Emits[0].TypeID)
	require.JSONEq(t, `{"order":"o-1","items":[1,2]}`, string(res.Emits[0].Payload))
	require.JSONEq(t, `{}`, string(res.Emits[1].Payload), "None is an empty object")
	require.JSONEq(t, `"text"`, string(res.Emits[2].Payload))

	// A failed execution still reports what it emitted: its caller drops it.
	res, rerr = exec(t, fn(`  r_emit_v1("`+orderType+`", {})`, `  fail("no")`), nil, Limits{}, nil)
	require.NotNil(t, rerr)
	require.Len(t, res.Emits, 1)
}

func TestEmitArgumentErrors(t *testing.T) {
	tests := []struct{ name, call, msg string }{
		{"type not a string", `r_emit_v1(1, {})`, "event_type_id must be a string, not int"},
		{"not a GTS id", `r_emit_v1("orders.placed", {})`, "event_type_id"},
		{"an instance id", `r_emit_v1("gts.x.core.events.event.v1~acme.shop.orders.placed.v1", {})`, "must be a GTS type id ending with ~"},
		{"payload not JSON", `r_emit_v1("` + orderType + `", {"f": len})`, "payload"},
		{"missing payload", `r_emit_v1("` + orderType + `")`, "missing argument for parameter payload"},
		{"unknown keyword", `r_emit_v1("` + orderType + `", {}, topic = "x")`, "unexpected keyword argument topic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, rerr := exec(t, fn("  "+tt.call), nil, Limits{}, nil)
			require.NotNil(t, rerr)
			require.Equal(t, ErrValidation, rerr.TypeID)
			require.Equal(t, CategoryNonRetryable, rerr.Category)
			require.Contains(t, rerr.Message, "r_emit_v1")
			require.Contains(t, rerr.Message, tt.msg)
			require.Equal(t, 2, rerr.Details["line"])
			require.Empty(t, res.Emits)
		})
	}
}

func TestEmitBounds(t *testing.T) {
	t.Run("payload limit", func(t *testing.T) {
		_, rerr := exec(t, fn(`  r_emit_v1("`+orderType+`", {"s": "x" * 2000})`), nil, Limits{MaxPayloadBytes: 1000}, nil)
		require.NotNil(t, rerr)
		require.Equal(t, ErrPayloadTooLarge, rerr.TypeID)
		require.Contains(t, rerr.Message, "r_emit_v1 payload")
	})
	t.Run("depth", func(t *testing.T) {
		_, rerr := exec(t, fn(`  p = {}`, `  for i in range(200):`, `    p = {"p": p}`, `  r_emit_v1("`+orderType+`", p)`), nil, Limits{}, nil)
		require.NotNil(t, rerr)
		require.Contains(t, rerr.Message, "nested more than")
	})
	t.Run("count", func(t *testing.T) {
		res, rerr := exec(t, fn(`  for i in range(`+fmt.Sprint(MaxEmits)+`):`, `    r_emit_v1("`+orderType+`", {"i": i})`,
			`  r_emit_v1("`+orderType+`", {"i": "one too many"})`), nil, Limits{}, nil)
		require.NotNil(t, rerr)
		require.Equal(t, ErrValidation, rerr.TypeID)
		require.Contains(t, rerr.Message, fmt.Sprintf("at most %d events", MaxEmits))
		require.Equal(t, 4, rerr.Details["line"])
		require.Len(t, res.Emits, MaxEmits)
	})
	t.Run("bytes", func(t *testing.T) {
		chunk := MaxEmitBytes / 4
		res, rerr := exec(t, fn(`  for i in range(5):`, fmt.Sprintf(`    r_emit_v1("%s", "x" * %d)`, orderType, chunk)), nil, Limits{}, nil)
		require.NotNil(t, rerr)
		require.Contains(t, rerr.Message, fmt.Sprintf("total at most %d bytes", MaxEmitBytes))
		require.Len(t, res.Emits, 3)
	})
}

func TestEmitStaticCheck(t *testing.T) {
	rep := Check("main.star", fn(`  r_emit_v1("`+orderType+`", {})`), false)
	require.Empty(t, rep.Errors)
	require.Contains(t, rep.Features, FeatureEventEmit)

	// A literal event_type_id that is not a GTS type id is refused at registration.
	rep = Check("main.star", fn(`  r_emit_v1(payload = {}, event_type_id = "orders.placed")`), false)
	require.Len(t, rep.Errors, 1)
	require.Equal(t, CodeInvalidArgument, rep.Errors[0].Code)
	require.Equal(t, 2, rep.Errors[0].Line)
	require.Contains(t, rep.Errors[0].Message, "event_type_id must be a GTS type id")
	// A computed one is checked when it runs.
	rep = Check("main.star", fn(`  r_emit_v1("orders" + ".placed", {})`), true)
	require.Empty(t, rep.Errors)
}

func TestEmitWorkflow(t *testing.T) {
	prog := compileWF(t, `
def bad(ctx, x):
    r_emit_v1("`+orderType+`", {"from": "failed attempt"})
    fail("broken")

def good(ctx, x):
    r_emit_v1("`+orderType+`", {"from": "step", "x": x})
    r_emit_v1("`+orderType+`", {"from": "step", "n": 2})
    return x

def main(ctx, input):
    r_emit_v1("`+orderType+`", {"from": "main"})
    r_run_step_v1("bad", bad, 1, exit_on_error = False)
    r_run_step_v1("good", good, 7)
    r_sleep(10)
    r_emit_v1("`+orderType+`", {"from": "after sleep"})
    return "done"
`)
	host := &fakeHost{}
	res, rerr := runWF(t, prog, host, nil, time.Time{})
	require.Nil(t, rerr)
	require.NotNil(t, res.Park)
	require.Len(t, res.New, 4) // emit, bad, good, sleep
	require.Equal(t, "r_emit_v1", res.New[0].Helper)
	require.True(t, res.New[0].Done)
	require.Len(t, res.New[0].Emits, 1)
	require.JSONEq(t, `{"from":"main"}`, string(res.New[0].Emits[0].Payload))
	require.Empty(t, res.New[1].Emits, "a failed step attempt's events are dropped")
	require.Len(t, res.New[2].Emits, 2, "a successful step's events go with its entry")
	require.JSONEq(t, `{"from":"step","x":7}`, string(res.New[2].Emits[0].Payload))
	require.Empty(t, res.Emits, "a workflow's events go with its journal entries")

	// Replay (as persisted: the journal keeps no events): nothing is emitted again, only the new call.
	var journal []JournalEntry
	require.NoError(t, json.Unmarshal([]byte(jsonOf(t, res.New)), &journal))
	for i := range journal {
		journal[i].Emits = nil
	}
	journal[3].Done = true
	res, rerr = runWF(t, prog, host, journal, time.Time{})
	require.Nil(t, rerr)
	require.Equal(t, "done", res.Output)
	require.Len(t, res.New, 1)
	require.Equal(t, 4, res.New[0].Seq)
	require.JSONEq(t, `{"from":"after sleep"}`, string(res.New[0].Emits[0].Payload))

	// A replay that emits something else at a recorded position is non-deterministic.
	other := compileWF(t, strings.Replace(`
def main(ctx, input):
    r_emit_v1("T", {"from": "elsewhere"})
    return 1
`, "T", orderType, 1))
	_, rerr = runWF(t, other, host, journal[:1], time.Time{})
	require.NotNil(t, rerr)
	require.Contains(t, rerr.Message, "non-deterministic")
}

func TestEmitWorkflowBoundAndCompensation(t *testing.T) {
	prog := compileWF(t, fmt.Sprintf(`
def main(ctx, input):
    for i in range(%d):
        r_emit_v1("%s", {"i": i})
    return 1
`, MaxEmits+1, orderType))
	res, rerr := runWF(t, prog, &fakeHost{}, nil, time.Time{})
	require.NotNil(t, rerr)
	require.Contains(t, rerr.Message, fmt.Sprintf("at most %d events", MaxEmits))
	require.Len(t, res.New, MaxEmits)

	prog = compileWF(t, `
def do(ctx, x):
    return x

def undo(ctx, x, out):
    r_emit_v1("`+orderType+`", {})

def main(ctx, input):
    r_step_v1("s", do, undo)(1)
    fail("end")
`)
	res, rerr = runWF(t, prog, &fakeHost{}, nil, time.Time{})
	require.NotNil(t, rerr)
	require.Len(t, res.Compensations, 1)
	require.False(t, res.Compensations[0].OK)
	require.Contains(t, res.Compensations[0].Error.Message, "r_emit_v1: cannot be called in a compensation")
}

func TestEmitFailedStepAttemptsDoNotCount(t *testing.T) {
	prog := compileWF(t, fmt.Sprintf(`
def emit_many(ctx, fail_after):
    for i in range(%d):
        r_emit_v1("%s", {"i": i})
    if fail_after:
        fail("dropped")
    return 1

def main(ctx, input):
    r_run_step_v1("bad", emit_many, True, exit_on_error = False)
    r_run_step_v1("good", emit_many, False)
    return 1
`, MaxEmits*2/3, orderType))
	res, rerr := runWF(t, prog, &fakeHost{}, nil, time.Time{})
	require.Nil(t, rerr)
	require.Len(t, res.New, 2)
	require.Empty(t, res.New[0].Emits)
	require.Len(t, res.New[1].Emits, MaxEmits*2/3, "the failed attempt's events no longer count against the bound")
}

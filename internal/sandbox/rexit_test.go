package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRExitCarriesPosition: like fail(), r_exit's error says where the run ended and how it got
// there; details the author set are kept.
func TestRExitCarriesPosition(t *testing.T) {
	src := "def stop(d):\n  r_exit({\"id\": \"gts.x.core.serverless.err.v1~vendor.app.x.no.v1~\", \"message\": \"no\", \"details\": d})\n" +
		"def main(ctx, input):\n  stop(input.get(\"d\"))\n"
	p, err := Compile("main.star", src)
	require.NoError(t, err)
	run := func(in map[string]any) *Error {
		_, e := Run(context.Background(), Request{Program: p, Input: in, Host: &fakeHost{},
			Limits: Limits{Timeout: time.Second, CPU: 0.5, MemoryMB: 16}})
		require.NotNil(t, e)
		return e
	}
	e := run(map[string]any{})
	require.Equal(t, "gts.x.core.serverless.err.v1~vendor.app.x.no.v1~", e.TypeID)
	require.Equal(t, 2, e.Details["line"])
	require.Equal(t, 9, e.Details["column"])
	require.Contains(t, e.Details["backtrace"], "main.star:4")
	require.Contains(t, e.Details["backtrace"], "in stop")
	e = run(map[string]any{"d": map[string]any{"line": "mine", "code": "X1"}})
	require.Equal(t, "mine", e.Details["line"], "the author's details win")
	require.Equal(t, "X1", e.Details["code"])
}

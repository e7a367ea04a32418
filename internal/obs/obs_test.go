package obs_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/obs"
)

// countingHandler counts WithAttrs calls: the cost WithAttrs puts off until a line is logged.
type countingHandler struct {
	slog.Handler
	withs *int
}

func (h countingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	*h.withs++
	return countingHandler{Handler: h.Handler.WithAttrs(attrs), withs: h.withs}
}

func TestWithAttrsBuildsTheLoggerOnFirstUse(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	withs := 0
	base := slog.New(countingHandler{Handler: slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}), withs: &withs})
	ctx := obs.WithAttrs(context.Background(), base, "correlation_id", "c1")
	ctx = obs.WithAttrs(ctx, nil, "tenant_id", "acme")
	require.Zero(t, withs, "nothing formatted before a line is logged")
	obs.Logger(ctx).Info("hello")
	obs.Logger(ctx).Info("again")
	require.Equal(t, 2, withs, "each level built once")
	require.Equal(t, "level=INFO msg=hello correlation_id=c1 tenant_id=acme\nlevel=INFO msg=again correlation_id=c1 tenant_id=acme\n", buf.String())
	require.Same(t, slog.Default(), obs.Logger(context.Background()))
}

func ExampleWithAttrs() {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	ctx := obs.WithAttrs(context.Background(), base, "correlation_id", "corr-1")
	obs.Logger(ctx).Warn("request refused")
	fmt.Print(buf.String())
	// Output: level=WARN msg="request refused" correlation_id=corr-1
}

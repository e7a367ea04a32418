// Package obs carries request-scoped observability data (correlation id, logger) through contexts.
package obs

import (
	"context"
	"log/slog"
)

type corrKey struct{}
type logKey struct{}

// WithCorrelationID returns ctx carrying the correlation id.
func WithCorrelationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, corrKey{}, id)
}

// CorrelationID returns the correlation id in ctx, or "".
func CorrelationID(ctx context.Context) string {
	id, _ := ctx.Value(corrKey{}).(string)
	return id
}

// WithLogger returns ctx carrying l.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, logKey{}, l)
}

// Logger returns the logger in ctx, or slog.Default().
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(logKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

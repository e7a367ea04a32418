// Package obs carries request-scoped observability data (correlation id, logger) through contexts.
package obs

import (
	"context"
	"log/slog"
	"sync"
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

// WithAttrs returns ctx carrying a logger that is base (nil: the logger of ctx, Logger) with args
// added (slog.Logger.With). The logger is built when Logger first asks for it: a request that logs
// nothing, the common case at info level, never formats its attributes.
func WithAttrs(ctx context.Context, base *slog.Logger, args ...any) context.Context {
	z := &lazyLogger{args: args, base: base}
	if base == nil {
		z.parent = ctx.Value(logKey{})
	}
	return context.WithValue(ctx, logKey{}, z)
}

// lazyLogger is WithAttrs' logger, built once on first use.
type lazyLogger struct {
	base   *slog.Logger
	parent any // the logger value of the context WithAttrs was given, when base is nil
	args   []any
	once   sync.Once
	l      *slog.Logger
}

func (z *lazyLogger) get() *slog.Logger {
	z.once.Do(func() {
		base := z.base
		if base == nil {
			base = loggerOf(z.parent)
		}
		z.l = base.With(z.args...)
	})
	return z.l
}

// Logger returns the logger in ctx, or slog.Default().
func Logger(ctx context.Context) *slog.Logger {
	return loggerOf(ctx.Value(logKey{}))
}

// loggerOf is the logger a context value under logKey stands for.
func loggerOf(v any) *slog.Logger {
	switch l := v.(type) {
	case *slog.Logger:
		return l
	case *lazyLogger:
		return l.get()
	}
	return slog.Default()
}

package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/larkrun/lark/internal/tracing"
)

// Telemetry configures the process's traces and logs (docs/observability.md).
type Telemetry struct {
	// OTLPEndpoint is the OTLP/HTTP collector spans are exported to (--otlp-endpoint); empty: the
	// standard OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variables decide, and without them tracing is
	// off (no exporter).
	OTLPEndpoint string
	// Tracing, when set, is used instead of building one from OTLPEndpoint (tests: an in-process
	// exporter). The server shuts it down on Close.
	Tracing *tracing.Tracing
	// AccessLogOff writes the access log at debug instead of info (--access-log=false).
	AccessLogOff bool
	// LogLevel is the level of the server's logger, changed at run time by PUT /admin/log-level
	// (nil: the route answers 503).
	LogLevel *slog.LevelVar
}

// newTracing is the tracer provider cfg describes.
func newTracing(ctx context.Context, cfg Config) (*tracing.Tracing, error) {
	if t := cfg.Telemetry.Tracing; t != nil {
		return t, nil
	}
	t, err := tracing.New(ctx, tracing.Config{Endpoint: cfg.Telemetry.OTLPEndpoint, Node: cfg.NodeID})
	if err != nil {
		return nil, err
	}
	if t.Enabled() {
		cfg.Logger.Info("tracing: exporting spans over OTLP/HTTP")
	}
	return t, nil
}

// shutdownTracing flushes the spans not yet exported (within 5 s) and stops the exporter.
func (s *Server) shutdownTracing() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Tracing.Shutdown(ctx); err != nil {
		s.log.Warn("tracing: flushing spans at shutdown failed", "err", err)
	}
}

package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTelemetryFlags: --otlp-endpoint (off by default, http or https only), --access-log (off by
// default: the lines at debug; LARK_ACCESS_LOG), and the logger's level as a run-time LevelVar handed to the server.
func TestTelemetryFlags(t *testing.T) {
	f, c := parsed(t)
	require.NoError(t, f.check(c))
	log, err := f.logger(false)
	require.NoError(t, err)
	cfg, err := f.config("", log)
	require.NoError(t, err)
	require.Empty(t, cfg.Telemetry.OTLPEndpoint, "tracing is off by default")
	require.True(t, cfg.Telemetry.AccessLogOff, "the access log is at debug by default")
	require.NotNil(t, cfg.Telemetry.LogLevel)
	require.Equal(t, slog.LevelInfo, cfg.Telemetry.LogLevel.Level())
	cfg.Telemetry.LogLevel.Set(slog.LevelDebug)
	require.True(t, log.Enabled(t.Context(), slog.LevelDebug), "the level changes the logger at run time")

	f, c = parsed(t, "--otlp-endpoint=http://collector:4318", "--access-log", "--log-level=warn")
	require.NoError(t, f.check(c))
	log, err = f.logger(false)
	require.NoError(t, err)
	cfg, err = f.config("", log)
	require.NoError(t, err)
	require.Equal(t, "http://collector:4318", cfg.Telemetry.OTLPEndpoint)
	require.False(t, cfg.Telemetry.AccessLogOff)
	require.Equal(t, slog.LevelWarn, cfg.Telemetry.LogLevel.Level())

	for _, bad := range []string{"collector:4318", "grpc://collector:4317", "http://"} {
		f, c = parsed(t, "--otlp-endpoint="+bad)
		require.ErrorContains(t, f.check(c), "--otlp-endpoint", bad)
	}

	t.Setenv("LARK_ACCESS_LOG", "true")
	t.Setenv("LARK_OTLP_ENDPOINT", "https://otel.example.com")
	f, c = parsed(t)
	require.NoError(t, f.check(c))
	cfg, err = f.config("", nil)
	require.NoError(t, err)
	require.False(t, cfg.Telemetry.AccessLogOff)
	require.Equal(t, "https://otel.example.com", cfg.Telemetry.OTLPEndpoint)
	t.Setenv("LARK_ACCESS_LOG", "maybe")
	f, c = parsed(t)
	require.ErrorContains(t, f.check(c), "LARK_ACCESS_LOG")
}

// TestWorkerOTLPEndpoint: lark worker takes --otlp-endpoint too, and refuses one that is not an
// http or https URL before it starts polling.
func TestWorkerOTLPEndpoint(t *testing.T) {
	c := workerCmd()
	require.NotNil(t, c.Flags().Lookup("otlp-endpoint"))
	c.SetArgs([]string{"--server", "http://127.0.0.1:1", "--token", "wk1:0123456789abcdef0123", "--otlp-endpoint", "grpc://collector:4317"})
	c.SetOut(io.Discard)
	c.SetErr(io.Discard)
	require.ErrorContains(t, c.Execute(), "--otlp-endpoint")
}

// TestWorkerServerFlags: lark worker takes a cluster's nodes comma-separated or as repeated
// --server flags, and refuses one that is not an http(s) base URL, naming it, before it polls.
func TestWorkerServerFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--server", "http://127.0.0.1:1", "--server", "lark-2:8080"},
		{"--server", "http://127.0.0.1:1,lark-2:8080"},
	} {
		c := workerCmd()
		c.SetArgs(append(args, "--token", "wk1:0123456789abcdef0123"))
		c.SetOut(io.Discard)
		c.SetErr(io.Discard)
		err := c.Execute()
		require.ErrorContains(t, err, "--server")
		require.ErrorContains(t, err, `"lark-2:8080"`)
	}
}

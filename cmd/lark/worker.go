package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/workerclient"
	"github.com/larkrun/lark/internal/workerexec"
	"github.com/larkrun/lark/internal/workerproto"
)

// workerCmd is lark worker: a remote worker that pulls function attempts from a server
// (docs/workers.md). It never opens a database.
func workerCmd() *cobra.Command {
	var token, id, logLevel, otlpEndpoint string
	var server []string
	var concurrency int
	var pollWait time.Duration
	var egressLoopback bool
	c := &cobra.Command{Use: "worker", Short: "Run a remote worker: pull function attempts from a server over HTTP and run them",
		RunE: func(c *cobra.Command, _ []string) error {
			if len(server) == 0 {
				return fmt.Errorf("--server is required")
			}
			servers, err := workerclient.ParseServers(server...)
			if err != nil {
				return fmt.Errorf("--server: %w", err)
			}
			if token == "" {
				return fmt.Errorf("--token (or LARK_WORKER_TOKEN) is required: a worker key id:secret the server accepts (--worker-key)")
			}
			keys, err := workerproto.ParseKeys(strings.Split(token, ","))
			if err != nil {
				return fmt.Errorf("--token: %w", err)
			}
			f := flags{logLevel: logLevel}
			log, err := f.logger(false)
			if err != nil {
				return err
			}
			if id == "" {
				host, _ := os.Hostname()
				id = host + "/" + idgen.UUIDv7{}.New("w")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if egressLoopback {
				log.Warn("UNSAFE: outbound requests may reach loopback addresses (--unsafe-egress-allow-loopback); tests only")
			}
			if err := tracing.ParseEndpoint(otlpEndpoint); err != nil {
				return fmt.Errorf("--otlp-endpoint: %w", err)
			}
			tr, err := tracing.New(ctx, tracing.Config{Endpoint: otlpEndpoint, Node: id})
			if err != nil {
				return err
			}
			log.Info("worker started", "worker_id", id, "servers", servers, "concurrency", concurrency, "tracing", tr.Enabled())
			starlark := workerexec.New(workerexec.Config{Egress: egress.New(egress.Options{AllowLoopback: egressLoopback}),
				TracerProvider: tr.Provider()})
			err = workerclient.New(workerclient.Config{Servers: servers, Keys: keys, WorkerID: id, Concurrency: concurrency,
				Version: "lark " + readVersion().Version, PollWait: pollWait, Logger: log, Starlark: starlark, TracerProvider: tr.Provider()}).Run(ctx)
			log.Info("worker stopped", "worker_id", id)
			flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if serr := tr.Shutdown(flushCtx); serr != nil {
				log.Warn("worker: spans not all exported", "err", serr)
			}
			return err
		}}
	var serverDefault []string
	if v := env("LARK_SERVER", ""); v != "" {
		serverDefault = []string{v}
	}
	c.Flags().StringArrayVar(&server, "server", serverDefault,
		"the server's base URL; a cluster's nodes comma-separated or as repeated flags (the worker polls each) (env LARK_SERVER)")
	c.Flags().StringVar(&token, "token", env("LARK_WORKER_TOKEN", ""), "worker key id:secret; comma-separated during a rotation, the first signs (env LARK_WORKER_TOKEN)")
	c.Flags().StringVar(&id, "id", "", "worker id (default: host name and a random suffix)")
	c.Flags().IntVar(&concurrency, "concurrency", 4, "tasks run at once")
	c.Flags().DurationVar(&pollWait, "poll-wait", 20*time.Second, "long poll wait")
	c.Flags().BoolVar(&egressLoopback, "unsafe-egress-allow-loopback", false, "TEST ONLY: let user code reach loopback addresses")
	if err := c.Flags().MarkHidden("unsafe-egress-allow-loopback"); err != nil {
		panic(err) // the flag is defined on the line above
	}
	c.Flags().StringVar(&otlpEndpoint, "otlp-endpoint", env("LARK_OTLP_ENDPOINT", ""),
		"export the worker's spans over OTLP/HTTP to this collector URL (env LARK_OTLP_ENDPOINT; the standard OTEL_EXPORTER_OTLP_* variables work too); unset: tracing off")
	c.Flags().StringVar(&logLevel, "log-level", env("LARK_LOG_LEVEL", "info"), "debug, info, warn or error")
	return c
}

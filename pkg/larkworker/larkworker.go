// Package larkworker is the Go SDK for worker-provided implementations: a Go program registers a
// handler for each adapter_ref entrypoint it implements (by its implementation.adapter_ref.definition_id)
// and runs the remote worker protocol of docs/workers.md against a Lark server, or every node of a
// cluster — long polls, signed envelopes, heartbeats, result callbacks, graceful shutdown.
// Invocations of those entrypoints are routed only to workers that serve them, with the same
// retries, limits and records as any other.
//
//	w, _ := larkworker.NewCluster([]string{"https://lark-1:8080", "https://lark-2:8080"}, "wk1:secret-of-at-least-16-bytes")
//	w.HTTPClient = client // e.g. TLS with a private CA
//	w.Handle("billing.charge", func(ctx context.Context, t larkworker.Task) (any, error) {
//		var p struct{ Amount int `json:"amount"` }
//		if err := json.Unmarshal(t.Params, &p); err != nil {
//			return nil, larkworker.NonRetryable("bad params: %v", err)
//		}
//		return map[string]any{"charged": p.Amount}, nil
//	})
//	err := w.Run(ctx) // until ctx ends (e.g. on SIGTERM)
//
// The package links neither the Starlark interpreter nor an OpenTelemetry exporter (nor gRPC):
// spans go to the TracerProvider the program gives it.
package larkworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/workerclient"
	"github.com/larkrun/lark/internal/workerproto"
)

// Task is one invocation attempt given to a handler.
type Task struct {
	InvocationID string
	TenantID     string
	// EntrypointID is the exact GTS id of the entrypoint version invoked.
	EntrypointID string
	// DefinitionID is the handler's name (adapter_ref.definition_id).
	DefinitionID string
	// Params is the invocation's params, as JSON (validated against the entrypoint's schema).
	Params json.RawMessage
	// Attempt is the logical attempt (1 for the first; more after retries).
	Attempt int
}

// HandlerFunc runs one task. It returns a JSON-encodable result, or an error: an *Error keeps its
// category (Retryable errors are retried under the entrypoint's retry policy); any other error is
// a non-retryable runtime error. ctx ends at the entrypoint's timeout, on cancellation of the
// invocation, and on shutdown.
type HandlerFunc func(ctx context.Context, t Task) (any, error)

// Error is an attempt's error as 000's error envelope: a GTS error type id, a category (one of the
// Category constants) and a message, with optional JSON-ready details.
type Error struct {
	TypeID   string         `json:"id"`
	Category string         `json:"category"`
	Message  string         `json:"message"`
	Details  map[string]any `json:"details,omitempty"`
}

// Error implements error: "<type id>: <message>".
func (e *Error) Error() string { return e.TypeID + ": " + e.Message }

// ErrRuntime is the GTS type id of a runtime error (000's error family), the type of Retryable and
// NonRetryable errors.
const ErrRuntime = workerproto.ErrRuntime

// Error categories: whether, and why, the retry policy may retry a failed attempt.
const (
	CategoryRetryable     = "retryable"
	CategoryNonRetryable  = "non_retryable"
	CategoryResourceLimit = "resource_limit"
	CategoryTimeout       = "timeout"
	CategoryCanceled      = "canceled"
)

// Retryable is a runtime error the retry policy may retry.
func Retryable(format string, args ...any) *Error {
	return &Error{TypeID: ErrRuntime, Category: CategoryRetryable, Message: fmt.Sprintf(format, args...)}
}

// NonRetryable is a runtime error that ends the invocation.
func NonRetryable(format string, args ...any) *Error {
	return &Error{TypeID: ErrRuntime, Category: CategoryNonRetryable, Message: fmt.Sprintf(format, args...)}
}

// Worker serves handlers. Configure it before Run; it is not reusable after Run returns.
type Worker struct {
	servers []string
	keys    *workerproto.Keyset
	// ID names the worker (default: host name and a random suffix).
	ID string
	// Concurrency bounds the tasks run at once (default 4).
	Concurrency int
	// Version says what the worker runs (your build's version, at most 128 bytes). GET /workers
	// shows it beside Concurrency (its "capacity"); both go with each poll to a server that takes
	// them, and not to one older than them.
	Version string
	// Logger receives the worker's logs (default slog.Default()).
	Logger *slog.Logger
	// TracerProvider records a worker.execute span per task, a child of the server's attempt
	// span, so a handler's own spans (under the ctx it is given) join the invocation's trace
	// (default: OpenTelemetry's global provider).
	TracerProvider trace.TracerProvider
	// HTTPClient sends the worker's requests (default: a client of the worker's own, without an
	// overall timeout: each request has its own, longer than the long poll). Give one for TLS with
	// a private CA or client certificates, a proxy, or a custom transport; a Timeout on it must
	// exceed the long poll's wait (20 s).
	HTTPClient *http.Client
	mu         sync.Mutex
	handlers   map[string]workerclient.Handler
}

// New returns a worker for the server at url (http://host:port or https://…) authenticated by key,
// a worker key "id:secret" the server accepts (lark serve --worker-key); several comma-separated
// during a rotation, the first signs. For a cluster, use NewCluster.
func New(url, key string) (*Worker, error) {
	if url == "" {
		return nil, errors.New("larkworker: the server URL is required")
	}
	return NewCluster([]string{url}, key)
}

// NewCluster returns a worker for the nodes of a cluster at urls, authenticated by key as for New.
// Each node hands out the attempts its own dispatcher claimed, so the worker long-polls every one
// (one poller per node, sharing the worker's Concurrency), and sends each task's heartbeats and
// result to the node that handed it out.
func NewCluster(urls []string, key string) (*Worker, error) {
	servers, err := workerclient.ParseServers(urls...)
	if err != nil {
		return nil, fmt.Errorf("larkworker: %w", err)
	}
	ks, err := workerproto.ParseKeys(strings.Split(key, ","))
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return &Worker{servers: servers, keys: ks, ID: host + "/" + idgen.UUIDv7{}.New("w"), handlers: map[string]workerclient.Handler{}}, nil
}

// Handle registers h for the adapter_ref entrypoints whose definition_id is definitionID.
func (w *Worker) Handle(definitionID string, h HandlerFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers[definitionID] = func(ctx context.Context, t workerproto.Task) (any, error) {
		var rec struct {
			Attempt int `json:"attempt"`
		}
		if err := json.Unmarshal(t.Record, &rec); err != nil {
			return nil, fmt.Errorf("larkworker: the task's record: %w", err)
		}
		v, err := h(ctx, Task{InvocationID: t.InvocationID, TenantID: t.TenantID, EntrypointID: t.EntrypointID,
			DefinitionID: t.DefinitionID, Params: t.Params, Attempt: rec.Attempt})
		var e *Error
		if errors.As(err, &e) {
			return v, &workerproto.Error{TypeID: e.TypeID, Category: e.Category, Message: e.Message, Details: e.Details}
		}
		return v, err
	}
}

// Run polls every server for tasks of the registered handlers and runs them until ctx ends; then it
// stops polling, reports the tasks still running as interrupted (eligible for retry) and returns.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	handlers := make(map[string]workerclient.Handler, len(w.handlers))
	for k, v := range w.handlers {
		handlers[k] = v
	}
	w.mu.Unlock()
	if len(handlers) == 0 {
		return errors.New("larkworker: no handler registered")
	}
	return workerclient.New(workerclient.Config{Servers: w.servers, Keys: w.keys, WorkerID: w.ID, Concurrency: w.Concurrency, Version: w.Version,
		HTTP: w.HTTPClient, Logger: w.Logger, Handlers: handlers, TracerProvider: w.TracerProvider}).Run(ctx)
}

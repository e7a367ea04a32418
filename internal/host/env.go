// Package host is the sandbox's window on the world for one execution (sandbox.Host, run.Host):
// outbound HTTP through the egress layer with the tenant's allowlist and secrets, r_invoke_v1
// children (through Children, within the execution's child budget), r_emit_v1's check, sleeps,
// logs, and the timeline entries collected for the completion's write, each bounded. For a
// workflow it also carries the activation's journal writes (EnqueueJournal, Flush,
// PersistJournal) and the spans of its steps.
package host

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/spawn"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/writer"
)

// SecretSource gives the egress layer one tenant's secrets (secrets.Service implements it). The
// sandbox never sees a value: the egress layer substitutes it after the sandbox.
type SecretSource interface {
	ForTenant(tenantID, invocationID string) egress.SecretResolver
}

// Children starts an r_invoke_v1 child of parent and runs it to its end, within ctx's deadline
// (the execution package's Executor).
type Children interface {
	StartChild(ctx context.Context, parent invocation.Record, req sandbox.InvokeRequest) (invocation.Record, error)
}

// Env is what every host of this process shares.
type Env struct {
	Clock    clock.Clock
	Egress   *egress.Client
	Secrets  SecretSource // nil refuses requests with secret references
	Catalog  *catalog.Catalog
	Writer   *writer.Writer
	Spawn    *spawn.Spawner
	Children Children
	// Publisher is the publisher of r_emit_v1's events; when it can check an event
	// (eventbus.Bus.CheckEvent), r_emit_v1 asks it first.
	Publisher writer.Publisher
	// Sleep, when set, is the wait between two attempts of an r_http_* call's retry (default: a
	// real timer).
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxChildren and MaxChildrenInFlight bound the r_invoke_v1 children of one execution (in all,
	// and running at once).
	MaxChildren, MaxChildrenInFlight int
	tracer                           trace.Tracer
	traced                           bool
}

// NewEnv returns env with its tracer (t: nil is off).
func NewEnv(env Env, t *tracing.Tracing) *Env {
	env.tracer, env.traced = t.Tracer(), t.Enabled()
	return &env
}

// New returns the host of an execution of rec, whose attempt's span spanCtx carries.
func (e *Env) New(spanCtx context.Context, rec invocation.Record) *Host {
	return &Host{env: e, rec: rec, spanCtx: spanCtx}
}

// NewCompensation returns the host of the step compensations of canceled workflow rec: its
// entries' keys are kept apart from the runs'.
func (e *Env) NewCompensation(rec invocation.Record) *Host {
	return &Host{env: e, rec: rec, keyPrefix: "compensate-"}
}

// EnqueueStart writes the invocation's start (a sync call's, held back until now) ahead of the
// run's journal writes without waiting for it: the run's first journal write and side effect wait
// for it, and the first journal write expects exactly the record it leaves.
func (h *Host) EnqueueStart(ctx context.Context, write func(tx store.Tx) (invocation.Record, error)) {
	wait := h.env.Writer.Enqueue(context.WithoutCancel(ctx), func(tx store.Tx) error {
		out, err := write(tx)
		h.mu.Lock()
		h.chain, h.chainErr = out, err
		h.mu.Unlock()
		return err
	})
	h.mu.Lock()
	h.pending, h.open = append(h.pending, wait), nil
	h.mu.Unlock()
}

// BeforeFlush makes every Flush call f first (a held start is sent there, with the entries held
// behind it); f must be safe to call repeatedly and concurrently.
func (h *Host) BeforeFlush(f func()) {
	h.mu.Lock()
	h.beforeFlush = f
	h.mu.Unlock()
}

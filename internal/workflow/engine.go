// Package workflow runs durable workflows: each activation replays the journal (completed helper
// calls return their recorded results), records new entries where the checkpointing strategy says,
// and settles how the run ends — succeeded, failed (with its on_failure compensation), or
// suspended on a timer, a child or an event. A suspended execution may stay live in memory and be
// handed the next activation without a replay (live.go). A canceled workflow's completed steps are
// compensated by a replay that runs nothing new (compensate.go).
//
// The phases of an execution (workflow.go's Activate, then its wfRun) each read on one
// screen: replay, program, generations, record, wait and park, settle, complete.
package workflow

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/admission"
	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/complete"
	"github.com/larkrun/lark/internal/host"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/running"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/spawn"
	"github.com/larkrun/lark/internal/store"
)

// Store is the store methods the engine uses: the invocation and its log, and the plain write of
// a canceled workflow's compensations.
type Store interface {
	Invocation(ctx context.Context, tenantID, id string) (invocation.Record, error)
	Events(ctx context.Context, q store.EventLogQuery) ([]invocation.Event, error)
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Config wires an Engine.
type Config struct {
	Store     Store
	Catalog   *catalog.Catalog
	Spawn     *spawn.Spawner
	Completer *complete.Completer
	// Host is the environment of the executions' hosts.
	Host *host.Env
	// Running is where executions register, for cancel and suspend to stop them.
	Running *running.Set
	// Runner checks workflows' results against their returns schemas (run.Runner.CheckOutput).
	Runner *run.Runner
	Clock  clock.Clock
	Logger *slog.Logger
	// CPU and Gate share the CPU and admit executions (see invoke.Config); AdmitWithin bounds an
	// activation's wait for admission.
	CPU         sandbox.CPUScheduler
	Gate        *admission.Gate
	AdmitWithin time.Duration
	// LiveWait is how long a suspended execution stays in memory waiting to continue without a
	// replay (default 1 min; negative: never); MaxLive bounds those executions (default 1000).
	LiveWait time.Duration
	MaxLive  int
	// MaxJournalEntries and MaxJournalBytes bound one journal (defaults 100,000 entries, 64 MiB);
	// MaxChildren bounds a journal's durable children (default 100); MaxPayloadBytes bounds results
	// and step payloads.
	MaxJournalEntries, MaxJournalBytes, MaxChildren, MaxPayloadBytes int
}

// Engine runs workflow activations.
type Engine struct {
	cfg       Config
	mu        sync.Mutex
	workflows map[string]*sandbox.Program // compiled workflows by version
	live      map[string]*liveRun         // suspended executions waiting in memory
	closing   chan struct{}
	closeOnce sync.Once
}

// programCacheMax bounds the compiled workflows kept (reaching it empties the cache).
const programCacheMax = 4096

// New returns an Engine.
func New(cfg Config) *Engine {
	if cfg.LiveWait == 0 {
		cfg.LiveWait = time.Minute
	}
	if cfg.MaxLive <= 0 {
		cfg.MaxLive = 1000
	}
	if cfg.MaxJournalEntries <= 0 {
		cfg.MaxJournalEntries = 100_000
	}
	if cfg.MaxJournalBytes <= 0 {
		cfg.MaxJournalBytes = 64 << 20
	}
	if cfg.MaxChildren <= 0 {
		cfg.MaxChildren = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Engine{cfg: cfg, workflows: map[string]*sandbox.Program{}, live: map[string]*liveRun{}, closing: make(chan struct{})}
}

// Close ends the executions waiting in memory (their invocations are suspended, durably; the next
// activation replays). Call it before closing the store.
func (s *Engine) Close() { s.closeOnce.Do(func() { close(s.closing) }) }

// complete records a run's outcome o with the follow-ups of park.
func (s *Engine) complete(ctx context.Context, rec invocation.Record, d catalog.Definition, timeline []invocation.Event,
	o outcome.Outcome, park *parking) (invocation.Record, error) {
	return s.cfg.Completer.Complete(ctx, rec, d, timeline, o, effectsOf(park))
}

func i64(v int64) *int64 { return &v }

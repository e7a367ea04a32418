// Package server wires the store, the domain services and the HTTP API into a runnable process,
// and runs it until its context ends, shutting down gracefully.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/admission"
	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/assetops"
	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/bulklane"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/console"
	"github.com/larkrun/lark/internal/cost"
	"github.com/larkrun/lark/internal/cpushare"
	"github.com/larkrun/lark/internal/dispatch"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/eventbus"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/eventtrigger"
	"github.com/larkrun/lark/internal/execution"
	"github.com/larkrun/lark/internal/federation"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/leader"
	"github.com/larkrun/lark/internal/loops"
	"github.com/larkrun/lark/internal/memlimit"
	"github.com/larkrun/lark/internal/metrics"
	"github.com/larkrun/lark/internal/natsbridge"
	"github.com/larkrun/lark/internal/natsfeed"
	"github.com/larkrun/lark/internal/oidcauth"
	"github.com/larkrun/lark/internal/registry"
	"github.com/larkrun/lark/internal/retention"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/scheduler"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/secrets"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/tenancy"
	"github.com/larkrun/lark/internal/tenant"
	"github.com/larkrun/lark/internal/tokens"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/usage"
	"github.com/larkrun/lark/internal/waits"
	"github.com/larkrun/lark/internal/wakeup"
	"github.com/larkrun/lark/internal/webhookrecv"
	"github.com/larkrun/lark/internal/workerhub"
	"github.com/larkrun/lark/internal/workerproto"
	"github.com/larkrun/lark/internal/writer"
)

// Config is what `lark serve` is configured with.
type Config struct {
	Addr       string // listen address, e.g. 127.0.0.1:8080 (port 0 picks a free one)
	DataDir    string // directory holding the SQLite database
	Store      string // "sqlite" (default), or a postgres:// URL (the PostgreSQL store, pgstore)
	AdminToken string // the platform operator's bearer token; empty disables operator access
	MaxBody    int64
	Logger     *slog.Logger
	// IdentityProvidersFile is the operator's identity provider file (JSON, docs/operations.md,
	// "Federated sign-in"), applied at start; empty: providers come from the API only.
	IdentityProvidersFile string
	// IdentityClient fetches the discovery documents and keys of platform issuers, and
	// IdentityTenantClient those of tenant-owned ones (nil: http.DefaultClient, and a client that
	// reaches public addresses only). Tests set them to trust an in-process issuer.
	IdentityClient       *http.Client
	IdentityTenantClient *http.Client
	// ConsoleOIDCIssuer and ConsoleOIDCClientID, when the issuer is set, offer sign-in with that
	// issuer on the console's login page (authorization code with PKCE, the console being a public
	// client with that client id; docs/console.md). Both are public.
	ConsoleOIDCIssuer, ConsoleOIDCClientID string
	// BlobStore is where asset outputs are written (blob.Open): a directory path or file:// URL, or
	// an s3:// URL whose credentials come from the environment. Empty: DataDir/blobs. Several nodes
	// need a shared one (S3); docs/deployment.md, "Blob store".
	BlobStore string
	// SQLiteSynchronous is the SQLite store's synchronous pragma, FULL (default) or NORMAL, in any
	// case: NORMAL in WAL mode survives a process crash but may lose the last commits on power
	// loss or an OS crash (docs/operations.md, "Data and durability").
	SQLiteSynchronous string
	// PGMaxConns bounds the PostgreSQL store's connection pool (default pgstore.DefaultMaxConns);
	// PGStatementTimeout bounds each of its statements (default pgstore.DefaultStatementTimeout);
	// PGWriters is its number of group committers (default pgstore.DefaultWriters). They apply to a
	// postgres:// Store only.
	PGMaxConns         int32
	PGStatementTimeout time.Duration
	PGWriters          int
	// PGClientTimeout bounds, on Lark's side, each operation of the PostgreSQL store on a connection
	// (default pgstore.DefaultClientTimeout; negative: none), and PGTCPTimeout how long a
	// connection's peer may stay silent (default pgstore.DefaultTCPTimeout): they bound a request
	// during a network partition (docs/deployment.md, "Failure modes").
	PGClientTimeout time.Duration
	PGTCPTimeout    time.Duration
	// StoreWriteWait bounds how long a request's write waits for the store's writer to start it
	// (default store.DefaultWriteWait; negative: no bound); past it the API answers 503 with
	// Retry-After (docs/deployment.md, "Failure modes"). The engine's own writes are not bounded.
	StoreWriteWait time.Duration
	// LeaseGrace is how long an attempt's lease outlives the attempt's timeout (default 30 s): the
	// work of a node that died mid-attempt, or whose outcome could not be written, is claimed again
	// that long after the attempt's timeout.
	LeaseGrace time.Duration
	// SyncStartDelay is invoke.Config.SyncStartDelay (how long a sync function call runs before its
	// start is written on its own; 0: the default).
	SyncStartDelay time.Duration
	// NoMigrate leaves a database whose schema is behind the binary unmigrated, and the start fails
	// telling the operator to run `lark migrate up` (default: migrate at start). A database newer
	// than the binary fails the start either way.
	NoMigrate bool
	// DrainTimeout bounds how long in-flight requests may take to finish on shutdown (default
	// DefaultDrainTimeout). Serve returns ErrDrainTimeout when it runs out.
	DrainTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's headers (default DefaultReadHeaderTimeout).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included, from its first byte (default
	// DefaultReadTimeout). The sync invocation route lifts it once its body is read.
	ReadTimeout time.Duration
	// WriteTimeout bounds a handler's time to answer, from the end of the request's headers
	// (default api.DefaultWriteTimeout). The sync invocation route lifts it while the call runs (it
	// is bounded by the entrypoint's timeout_seconds) and sets it again for writing the answer.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its next request (default
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header block (default DefaultMaxHeaderBytes); net/http
	// answers a larger one with 431 itself.
	MaxHeaderBytes int
	// MaxInFlight caps one tenant's requests in flight at once (default api.DefaultMaxInFlight).
	MaxInFlight int
	// MaxPageBytes is the byte budget of a list page (default store.DefaultPageBytes; api.Config).
	MaxPageBytes int
	// MaxInFlightBytes caps the request bodies one tenant has in flight at once (default
	// api.DefaultMaxInFlightBytes; negative: no cap; see api.Config.MaxInFlightBytes).
	MaxInFlightBytes int64
	// BulkBytes and BulkWait are api.Config's: bodies over BulkBytes are served one at a time per
	// tenant, each waiting at most BulkWait for its turn (0: the defaults).
	BulkBytes int64
	BulkWait  time.Duration
	// Workers bounds concurrent async executions in this process (default 64).
	Workers int
	// RemoteWorkers sends async function attempts to remote workers (lark worker) instead of
	// running them here; WorkerKeys authenticates the worker routes (nil: no worker routes, and
	// RemoteWorkers is refused). HeartbeatInterval and HeartbeatTimeout are the workers'
	// (defaults 30 s and 5 min).
	RemoteWorkers                       bool
	WorkerKeys                          *workerproto.Keyset
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// WorkerKeyTenants binds worker keys to tenants (workerhub.Bindings: a key it names takes only
	// its tenants' tasks; ParseWorkerKeyTenants reads the flag's form).
	WorkerKeyTenants workerhub.Bindings
	// DispatchPoll is the dispatcher's longest sleep between two claims when nothing woke it (default
	// 1 s): the fallback for work queued by another node whose wake-up was lost.
	DispatchPoll time.Duration
	// SyncPoll is how often a request waiting for a sync workflow's end reads the store (default
	// 1 s): the fallback for an end committed by another node whose notification was lost.
	SyncPoll time.Duration
	// UnsafeEgressAllowLoopback lets user code reach 127.0.0.0/8 and ::1. TEST ONLY: end-to-end
	// tests point r_http_* at httptest servers with it. Every other address rule still applies.
	UnsafeEgressAllowLoopback bool
	// EgressTransport, when set, carries user code's outbound HTTP instead of the network
	// (egress.Options.Transport): `lark test` stubs upstreams with it. Never set in a server.
	EgressTransport http.RoundTripper
	// Sleep, when set, is the wait between two attempts of an r_http_* call's retry
	// (invoke.Config.Sleep): `lark test` moves its fake clock with it. Never set in a server.
	Sleep func(ctx context.Context, d time.Duration) error
	// Clock is the time source of every service and the dispatcher (default: the real clock).
	// Tests inject a clock.Fake to move durable timers and timeouts forward.
	Clock clock.Clock
	// Pricing prices executions and invocations (cost attribution); nil prices everything at 0.
	Pricing *cost.Pricing
	// RetentionInterval is the time between two passes of the retention job (default 5 min).
	RetentionInterval time.Duration
	// MetricsPublic serves GET /metrics without authentication (default: the operator's token only).
	MetricsPublic bool
	// MetricsMaxLabelSets caps the label sets of each metric family (default metrics.DefaultMaxLabelSets).
	MetricsMaxLabelSets int
	// MaxPayloadBytes bounds params, results, workflow step inputs and outputs, helper arguments
	// and event payloads, encoded as JSON (default invoke.DefaultMaxPayloadBytes, 2 MiB; see
	// invoke.Config.MaxPayloadBytes).
	MaxPayloadBytes int
	// CPUSlots is how many Starlark executions interpret at once, their CPU shared fairly between
	// tenants (cpushare): 0 is DefaultCPUSlots, a negative value runs executions unscheduled.
	CPUSlots int
	// CPUNice, 1 to 19, is the nice value the threads interpreting in those slots run at, below the
	// rest of the server (cpushare.Scheduler.LowerPriority); the Go scheduler then gets the slots on
	// top of its usual processors (GOMAXPROCS, unless set in the environment). 0 leaves priorities
	// alone. Where the process may lower a priority but not restore it, each execution runs on a
	// thread of its own; where it may not lower one, the server logs why and runs without.
	CPUNice int
	// MemoryLimit is the process's memory limit in bytes (--memory-limit): Go's soft memory limit
	// never exceeds it, and execution memory is budgeted from it. 0: GOMEMLIMIT when set, else
	// memlimit.DefaultFraction of the cgroup's limit or of the machine's memory.
	MemoryLimit int64
	// ExecutionMemory bounds the memory all running executions may reserve, in bytes
	// (--execution-memory; default: half of MemoryLimit). TenantExecutionMemory bounds one tenant's
	// share (default: DefaultTenantMemoryPerSlot per CPU slot, at most ExecutionMemory). docs/deployment.md, "Sizing".
	ExecutionMemory, TenantExecutionMemory int64
	// NATS configures the optional NATS JetStream bridge (natsbridge: events mirrored to subjects,
	// triggers fed by subjects); an empty URL leaves it off.
	NATS natsbridge.Config
	// Keyring is the master key that seals tenant secrets and webhook secrets at rest
	// (LARK_MASTER_KEY or --master-key-file). nil disables secrets: the /secrets routes answer 503,
	// requests that refer to a secret fail, and webhook triggers whose authentication needs a secret
	// are refused with 503. With several keys ("NEW,OLD"), New rewraps every value sealed under an
	// older one before serving (docs/secrets.md, rotation).
	Keyring *keyring.Keyring
	// AllowUnreadableSecrets lets the server start although stored tenant or webhook secrets are
	// sealed under a master key that is not configured (or do not open under theirs): each is
	// logged, and stays unreadable until it is set again. Without it such a start stops with an
	// error naming how many and which keys (docs/operations.md, "A wrong or lost master key").
	AllowUnreadableSecrets bool
	// NodeID names this process among the nodes sharing a PostgreSQL store: in the leader lease and
	// in its work leases (default leader.NodeID(): host, pid and a random suffix).
	NodeID string
	// LeaderTTL is how long a leader lease claim holds (default leader.DefaultTTL), LeaderRenew the
	// time between two claims (default leader.DefaultRenew, at most LeaderTTL/3). A dead leader is
	// replaced within LeaderTTL + LeaderRenew. Both apply to a postgres:// Store only: on SQLite the
	// single node always leads.
	LeaderTTL, LeaderRenew time.Duration
	// LeaseWatch is how often the node checks that the executions running on it still hold their
	// leases, stopping those canceled, suspended or taken over elsewhere (default
	// execution.DefaultLeaseWatch).
	LeaseWatch time.Duration
	// TrustedProxies are the proxies whose X-Forwarded-For the webhook receiver believes
	// (--trusted-proxies); empty: the TCP peer is the sender.
	TrustedProxies []netip.Prefix
	// Telemetry configures traces and logs (telemetry.go): the OTLP endpoint, the access log, the
	// run-time log level.
	Telemetry Telemetry
}

// Defaults of the HTTP server's limits (docs/operations.md, "HTTP limits").
const (
	DefaultDrainTimeout      = 30 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
)

// ErrDrainTimeout is returned by Serve when requests were still in flight DrainTimeout after
// shutdown began: their connections were closed, so their clients saw no answer.
var ErrDrainTimeout = errors.New("drain timed out: requests still in flight were cut off")

// withDefaults fills the zero limits of cfg.
func withDefaults(cfg Config) Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.DrainTimeout, DefaultDrainTimeout)
	def(&cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&cfg.ReadTimeout, DefaultReadTimeout)
	def(&cfg.WriteTimeout, api.DefaultWriteTimeout)
	def(&cfg.IdleTimeout, DefaultIdleTimeout)
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = api.DefaultMaxInFlight
	}
	return cfg
}

// Server is a running Lark process.
type Server struct {
	cfg      Config
	Store    store.Store
	Tenants  *tenancy.Service
	Tokens   *tokens.Service
	Registry *registry.Service
	Invoke   *invoke.Service
	Metrics  *metrics.Metrics
	// IdentityProviders manages the OIDC issuers whose JWTs authenticate callers.
	IdentityProviders *federation.Service
	// WorkerHub is the remote worker service (nil without Config.WorkerKeys).
	WorkerHub *workerhub.Service
	// Claims is the claim stage that feeds the dispatcher (tests claim through it directly).
	Claims *dispatch.StoreClaimer
	// Gate admits executions (runnable per tenant, memory); memory keeps Go's soft memory limit.
	Gate     *admission.Gate
	memory   *memlimit.Tracker
	dispatch *dispatch.Dispatcher
	// Schedules manages and fires schedules; Serve runs its firing loop (tests call FireDue).
	Schedules *scheduler.Service
	// Webhooks manages webhook triggers and receives their deliveries.
	Webhooks *webhookrecv.Service
	// Events is the events service (publishing, event types).
	Events *eventbus.Bus
	// Triggers manages event triggers; Serve runs its batch flusher (tests call FlushDue).
	Triggers *eventtrigger.Service
	handler  http.Handler
	log      *slog.Logger

	// Retention is the retention maintenance job; Serve runs it (tests call RunOnce).
	Retention *retention.Job
	// Secrets keeps the tenants' secrets (disabled without Config.Keyring).
	Secrets *secrets.Service
	// Leader is the leader election on a shared (PostgreSQL) store; nil on an exclusive one, where
	// this node always runs the singleton loops.
	Leader *leader.Elector
	// hub carries wake-ups between the nodes of a shared store (nil on an exclusive one).
	hub *wakeup.Hub
	// bridge and feed exist with Config.NATS: events mirrored to subjects, triggers fed by them.
	bridge *natsbridge.Bridge
	feed   *natsfeed.Feed
	// Tracing is the process's tracer provider (off unless Config.Telemetry configures an endpoint).
	Tracing *tracing.Tracing
	// Blobs is the blob store of Config.BlobStore, opened at start: the DAG engine commits asset
	// outputs to it, the Assets API reads (and, on a rejection, deletes) them.
	Blobs blob.Store
}

// OpenBlobs opens the configured blob store: Config.BlobStore, or DataDir/blobs by default.
func OpenBlobs(cfg Config) (blob.Store, error) {
	url := cfg.BlobStore
	if url == "" {
		url = filepath.Join(cfg.DataDir, "blobs")
	}
	st, err := blob.Open(url, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("--blob-store: %w", err)
	}
	return st, nil
}

// OpenStore opens the configured store.
func OpenStore(ctx context.Context, cfg Config) (store.Store, error) {
	switch {
	case cfg.Store == "" || cfg.Store == "sqlite":
		st, err := sqlstore.OpenSQLite(ctx, filepath.Join(cfg.DataDir, sqlstore.DefaultFile),
			sqlstore.Options{Synchronous: cfg.SQLiteSynchronous, NoMigrate: cfg.NoMigrate})
		if err == nil {
			warnOpenDataDir(cfg)
		}
		return st, err
	case pgstore.IsURL(cfg.Store):
		st, err := pgstore.Open(ctx, cfg.Store, pgstore.Options{MaxConns: cfg.PGMaxConns, StatementTimeout: cfg.PGStatementTimeout,
			Writers: cfg.PGWriters, NoMigrate: cfg.NoMigrate, ClientTimeout: cfg.PGClientTimeout, TCPTimeout: cfg.PGTCPTimeout})
		if err != nil {
			return nil, fmt.Errorf("--store: PostgreSQL: %w", err)
		}
		return st, nil
	default:
		return nil, fmt.Errorf("--store: want sqlite or a postgres:// URL, got %q", cfg.Store)
	}
}

// warnOpenDataDir logs a warning when others than its owner may list or enter the data directory:
// the database files are 0600, but the directory's listing and any file put there later are not.
// Lark does not refuse to start (a mounted volume may not let it choose the mode); it does not change
// a directory it did not create.
func warnOpenDataDir(cfg Config) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	dir := cfg.DataDir
	if dir == "" {
		dir = "."
	}
	st, err := os.Stat(dir)
	if err != nil {
		log.Warn("data directory: cannot read its mode", "dir", dir, "err", err)
		return
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		log.Warn("data directory is accessible to other users; chmod 700 it", "dir", dir, "mode", fmt.Sprintf("%04o", perm))
	}
}

// New opens the store and the blob store and builds every service. When a step after the store
// opened fails, New closes what it opened and returns that step's error.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg = withDefaults(cfg)
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	blobs, err := OpenBlobs(cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	s, err := buildServer(ctx, cfg, st, blobs)
	if err != nil {
		st.Close()
		_ = blobs.Close()
		return nil, err
	}
	return s, nil
}

// buildServer builds every service over the open store st, phase by phase: the schemas, the
// clock and the node's name, the services that need only the store, the tracing, the execution
// path, the event-driven services, retention, the cluster wiring and the HTTP handler. On an error
// the caller closes st and blobs.
func buildServer(ctx context.Context, cfg Config, st store.Store, blobs blob.Store) (*Server, error) {
	schemas, err := schema.New()
	if err != nil {
		return nil, fmt.Errorf("built-in schemas: %w", err)
	}
	var c clock.Clock = clock.Real{}
	if cfg.Clock != nil {
		c = cfg.Clock
	}
	ids := idgen.UUIDv7{}
	if cfg.NodeID == "" {
		cfg.NodeID = leader.NodeID()
	}
	s := &Server{cfg: cfg, Store: st, Blobs: blobs, log: cfg.Logger,
		Tenants: tenancy.NewService(st, c, ids),
		Tokens:  tokens.NewService(st, c, ids, cfg.AdminToken, tenant.ValidID),
	}
	if err := s.wireIdentity(ctx, c, ids); err != nil {
		return nil, err
	}
	if s.Tracing, err = newTracing(ctx, cfg); err != nil {
		return nil, err
	}
	bulk := bulklane.New()
	if err := s.wireExecution(ctx, schemas, c, ids, bulk); err != nil {
		return nil, err
	}
	if err := s.wireEvents(ctx, schemas, c, ids); err != nil {
		return nil, err
	}
	s.Retention = retention.New(st, retention.Options{Interval: cfg.RetentionInterval, Clock: c, Logger: cfg.Logger,
		Failed: s.Metrics.MaintenanceFailure, Passed: s.Metrics.RetentionPassed})
	s.wireCluster(c)
	apiHandler := s.apiHandler(c, ids, bulk)
	// The web console (docs/console.md) at /console; everything else is the API.
	var copts console.Options
	if cfg.ConsoleOIDCIssuer != "" {
		copts.OIDC = &console.OIDC{Issuer: cfg.ConsoleOIDCIssuer, ClientID: cfg.ConsoleOIDCClientID}
	}
	if s.handler, err = console.WrapWith(apiHandler, copts); err != nil {
		return nil, err
	}
	return s, nil
}

// wireIdentity builds federated sign-in: the JWT verifier behind the tokens service, the identity
// provider service, and the operator's provider file.
func (s *Server) wireIdentity(ctx context.Context, c clock.Clock, ids idgen.Generator) error {
	v := oidcauth.New(s.Store, oidcauth.Options{Client: s.cfg.IdentityClient, TenantClient: s.cfg.IdentityTenantClient, Clock: c})
	s.Tokens.WithFederated(v)
	s.IdentityProviders = federation.NewService(s.Store, c, ids, v)
	if s.cfg.IdentityProvidersFile == "" {
		return nil
	}
	return s.IdentityProviders.LoadFile(ctx, s.cfg.IdentityProvidersFile)
}

// wireExecution builds the execution path in dependency order: the metrics (fed by the bulk lanes
// bulk), the secrets, the remote workers, the invocation service and its admission, the worker
// metrics, the dispatcher, and, on an exclusive store, the recovery of the leases a previous run
// left.
func (s *Server) wireExecution(ctx context.Context, schemas *schema.Registry, c clock.Clock, ids idgen.Generator, bulk *bulklane.Lanes) error {
	s.wireMetrics(c, bulk)
	s.Registry = registry.NewService(s.Store, schemas, c, ids, s.Metrics)
	if err := s.wireSecrets(ctx, c, ids); err != nil {
		return err
	}
	remote, err := s.wireWorkerHub(schemas, c)
	if err != nil {
		return err
	}
	if err := s.openNATS(ctx, c); err != nil {
		return err
	}
	s.wireInvoke(schemas, c, ids, remote)
	if err := s.registerWorkerMetrics(); err != nil {
		return err
	}
	s.wireDispatch(s.cfg, c)
	if s.Store.Exclusive() {
		if _, err := s.Invoke.Runner().RecoverLeases(ctx); err != nil {
			return fmt.Errorf("recover leases: %w", err)
		}
	}
	return nil
}

// wireMetrics builds the metrics: over the store, the dispatcher's slots, the admission gate's
// stats and the requests waiting in the bulk lanes bulk (the dispatcher and the gate are built
// later; the metrics read them when scraped). The registry reports its quota checks to them.
func (s *Server) wireMetrics(c clock.Clock, bulk *bulklane.Lanes) {
	s.Metrics = metrics.New(metrics.Options{Source: s.Store, Clock: c, Logger: s.cfg.Logger, MaxLabelSets: s.cfg.MetricsMaxLabelSets,
		Slots: func() (int, int) { return s.dispatch.Slots() }, Admission: func() admission.Stats { return s.Gate.Stats() },
		BulkWaiting: bulk.Waiting, NATS: s.natsStats()})
}

// natsStats reads the NATS bridge's mirror counters for the metrics (nil without NATS; the bridge,
// opened after the metrics, is read at scrape time).
func (s *Server) natsStats() func() metrics.NATSStats {
	if s.cfg.NATS.URL == "" {
		return nil
	}
	return func() metrics.NATSStats {
		b := s.bridge
		if b == nil {
			return metrics.NATSStats{}
		}
		return metrics.NATSStats{Mirrored: b.Mirrored(), Duplicates: b.Duplicates(), Dropped: b.Dropped(), Queued: int64(b.Queued())}
	}
}

// wireSecrets builds the secrets service and, with a master key, rewraps the values sealed under
// an older key; without one it warns that secrets are disabled.
func (s *Server) wireSecrets(ctx context.Context, c clock.Clock, ids idgen.Generator) error {
	s.Secrets = secrets.New(s.Store, secrets.Options{Keyring: s.cfg.Keyring, Clock: c, IDs: ids, Logger: s.cfg.Logger})
	if s.cfg.Keyring == nil {
		s.cfg.Logger.Warn("no master key (LARK_MASTER_KEY or --master-key-file): tenant secrets are disabled; the /secrets routes answer 503")
		return nil
	}
	st, err := s.Secrets.Rewrap(ctx)
	if err != nil {
		return fmt.Errorf("secrets: master key rotation: %w", err)
	}
	return s.unreadableSecrets("tenant secrets", st.Unknown+st.Failed)
}

// unreadableSecrets is the one rule for stored secrets the configured master keys cannot open
// (tenant and webhook secrets alike): the start stops, unless Config.AllowUnreadableSecrets, when
// it goes on with an error logged (each secret was logged with its key id already).
func (s *Server) unreadableSecrets(what string, n int) error {
	if n == 0 {
		return nil
	}
	if !s.cfg.AllowUnreadableSecrets {
		return fmt.Errorf("%s: %d stored values cannot be opened with the configured master key (%s): "+
			"the key is wrong or an older one is missing; the log names each value's key_id. Configure the key they were "+
			"sealed with (LARK_MASTER_KEY=\"CURRENT,OLD\"), or start with --allow-unreadable-secrets to serve without them",
			what, n, strings.Join(s.cfg.Keyring.KeyIDs(), ", "))
	}
	s.cfg.Logger.Error("starting with unreadable secrets (--allow-unreadable-secrets): they stay unreadable until set again",
		"secrets", what, "count", n, "configured_key_ids", s.cfg.Keyring.KeyIDs())
	return nil
}

// wireWorkerHub checks the remote worker settings and, with a worker keyset, builds the remote
// worker service; it returns the remote the invocation service sends attempts to (nil without
// one).
func (s *Server) wireWorkerHub(schemas *schema.Registry, c clock.Clock) (execution.Remote, error) {
	cfg := &s.cfg
	if cfg.RemoteWorkers && cfg.WorkerKeys == nil {
		return nil, fmt.Errorf("--remote-workers needs a worker key (--worker-key)")
	}
	if cfg.HeartbeatInterval > 0 && cfg.HeartbeatTimeout > 0 && cfg.HeartbeatInterval >= cfg.HeartbeatTimeout {
		return nil, fmt.Errorf("--worker-heartbeat-interval (%v) must be shorter than --worker-heartbeat-timeout (%v)", cfg.HeartbeatInterval, cfg.HeartbeatTimeout)
	}
	var remote execution.Remote
	if cfg.WorkerKeys != nil {
		s.WorkerHub = workerhub.New(workerhub.Config{Functions: cfg.RemoteWorkers, HeartbeatInterval: cfg.HeartbeatInterval,
			HeartbeatTimeout: cfg.HeartbeatTimeout, Runner: &run.Runner{Schemas: schemas, Clock: c}, Clock: c, Logger: cfg.Logger, Secrets: s.Secrets,
			Bindings: cfg.WorkerKeyTenants, Node: cfg.NodeID, Store: s.Store})
		remote = s.WorkerHub
	}
	return remote, nil
}

// wakeQueued wakes this node's dispatcher and the other nodes' (through the cluster's hub, when
// there is one) after a write that queued work.
func (s *Server) wakeQueued() {
	s.dispatch.Wake()
	s.announce()
}

// announce wakes the other nodes' dispatchers, when the store is shared and carries wake-ups.
func (s *Server) announce() {
	if s.hub != nil {
		s.hub.Announce()
	}
}

// announceStop tells the other nodes to stop invocation id's execution (wakeup.Hub.Stop).
func (s *Server) announceStop(id string) {
	if s.hub != nil {
		s.hub.Stop(id)
	}
}

// announceFinished tells the other nodes that sync invocation id ended (wakeup.Hub.Finished).
func (s *Server) announceFinished(id string) {
	if s.hub != nil {
		s.hub.Finished(id)
	}
}

// invocationEnded records, in the transaction that ended rec, what the triggers keep of the
// invocations they started (eventtrigger.Service.InvocationEnded).
func (s *Server) invocationEnded(tx store.Tx, rec invocation.Record) error {
	if s.Triggers == nil {
		return nil // nothing has ended before the triggers exist
	}
	return s.Triggers.InvocationEnded(tx, rec)
}

// wireInvoke builds the CPU scheduler, the admission gate (which wakes the dispatcher when room
// frees up) with its memory tracker, the events service, and the invocation service over them.
// The services built later that the invocation service tells of its writes (the dispatcher, the
// cluster's wake-up hub, the triggers) are reached through the Server's fields at call time.
func (s *Server) wireInvoke(schemas *schema.Registry, c clock.Clock, ids idgen.Generator, remote execution.Remote) {
	cfg := &s.cfg
	cpu := cpuScheduler(cfg.CPUSlots, cfg.CPUNice, cfg.Logger)
	s.memory, s.Gate = admissionOf(*cfg, cpu, func() { s.dispatch.Wake() })
	// The events service delivers events to waiting workflows and, through its subscribers (the
	// triggers, wired later), starts invocations; r_emit_v1's events go through it.
	s.Events = eventbus.New(eventbus.Config{Store: s.Store, Schemas: schemas, Waits: waits.Delivery{Wake: s.wakeQueued}, Clock: c, IDs: ids,
		Logger: cfg.Logger, MaxPayloadBytes: cfg.MaxPayloadBytes, Mirror: s.mirror(), Observer: s.Metrics})
	s.Invoke = invoke.NewService(invoke.Config{Remote: remote, Gate: s.Gate, Store: s.Store, Schemas: schemas, Programs: sandbox.NewCache(1024), Secrets: s.Secrets,
		Egress: egress.New(egress.Options{AllowLoopback: cfg.UnsafeEgressAllowLoopback, Transport: cfg.EgressTransport}), Clock: c, IDs: ids, Logger: cfg.Logger,
		Node: cfg.NodeID, Pricing: cfg.Pricing, Observer: s.Metrics, Tracing: s.Tracing, MaxPayloadBytes: cfg.MaxPayloadBytes, Sleep: cfg.Sleep,
		CPU: cpu, SyncPoll: cfg.SyncPoll, LeaseGrace: cfg.LeaseGrace, SyncStartDelay: cfg.SyncStartDelay, Publisher: s.Events, Blobs: s.Blobs,
		Wake: func() { s.dispatch.Wake() }, Announce: s.announce, AnnounceFinished: s.announceFinished, AnnounceStop: s.announceStop, EndHook: writer.EndHookFunc(s.invocationEnded)})
}

// registerWorkerMetrics registers the remote worker service's collectors with the metrics (none
// without the service).
func (s *Server) registerWorkerMetrics() error {
	if s.WorkerHub != nil {
		for _, col := range s.WorkerHub.Collectors() {
			if err := s.Metrics.Registry().Register(col); err != nil {
				return fmt.Errorf("worker metrics: %w", err)
			}
		}
	}
	return nil
}

// wireEvents builds the event-driven services over the invocation service: the scheduler, the
// NATS bridge and feed (with Config.NATS), the triggers and the webhooks, and connects them to
// each other and to the events service.
func (s *Server) wireEvents(ctx context.Context, schemas *schema.Registry, c clock.Clock, ids idgen.Generator) error {
	cfg := &s.cfg
	s.Schedules = scheduler.New(s.Store, s.Invoke, scheduler.Options{Clock: c, IDs: ids, Logger: cfg.Logger,
		Failed: s.Metrics.MaintenanceFailure, FireLag: s.Metrics.FireLag, Tracer: s.Tracing.Tracer(), Announce: s.announce})
	s.Triggers = eventtrigger.New(s.Store, s.Invoke, eventtrigger.Options{Clock: c, IDs: ids, Logger: cfg.Logger, Failed: s.Metrics.MaintenanceFailure, Observer: s.Metrics,
		Feeds: s.natsFeeds(), Tracer: s.Tracing.Tracer(), Announce: s.announce})
	s.Events.Subscribe(s.Triggers)
	return s.wireWebhooks(ctx, schemas, c, ids)
}

// openNATS opens the NATS bridge when Config.NATS names a server (before the events service,
// which mirrors committed events through it).
func (s *Server) openNATS(ctx context.Context, c clock.Clock) error {
	if s.cfg.NATS.URL == "" {
		return nil
	}
	ncfg := s.cfg.NATS
	ncfg.Clock, ncfg.Logger = c, s.cfg.Logger
	var err error
	if s.bridge, err = natsbridge.Open(ctx, ncfg); err != nil {
		return fmt.Errorf("--nats: %w", err)
	}
	return nil
}

// natsFeeds is the trigger feed over the NATS bridge, publishing through the events service: the
// feeds the triggers subscribe through (nil without NATS).
func (s *Server) natsFeeds() eventtrigger.Feeds {
	if s.bridge == nil {
		return nil
	}
	s.feed = natsfeed.New(s.bridge, s.Events, s.cfg.Logger, s.Tracing.Tracer())
	s.feed.SetObserver(s.Metrics)
	return s.feed
}

// mirror is the events service's mirror: the NATS bridge's, when there is one.
func (s *Server) mirror() func(context.Context, events.Event) {
	if s.bridge == nil {
		return nil
	}
	return s.bridge.Mirror
}

// wireWebhooks builds the webhook service and rewraps the stored webhook secrets under the
// current master key.
func (s *Server) wireWebhooks(ctx context.Context, schemas *schema.Registry, c clock.Clock, ids idgen.Generator) error {
	cfg := &s.cfg
	s.Webhooks = webhookrecv.New(s.Store, s.Invoke, webhookrecv.Options{Clock: c, IDs: ids, Logger: cfg.Logger, Keyring: cfg.Keyring, Schemas: schemas,
		Secrets: s.Secrets, Observer: s.Metrics})
	st, err := webhookrecv.RewrapSecrets(ctx, s.Store, cfg.Keyring, cfg.Logger)
	if err != nil {
		return fmt.Errorf("rewrap webhook secrets under the current master key: %w", err)
	}
	if st.Rewrapped > 0 {
		cfg.Logger.Info("webhook secrets rewrapped under the current master key", "count", st.Rewrapped)
	}
	return s.unreadableSecrets("webhook secrets", st.Unreadable)
}

// wireCluster, on a shared store, builds the leader election and, when the store carries
// wake-ups, the hub that passes them between nodes; the services announce their work through it.
func (s *Server) wireCluster(c clock.Clock) {
	cfg := &s.cfg
	if !s.Store.Exclusive() {
		s.Leader = leader.New(s.Store, leader.Options{Holder: cfg.NodeID, TTL: cfg.LeaderTTL, Renew: cfg.LeaderRenew, Clock: c, Logger: cfg.Logger})
		if t, ok := s.Store.(wakeup.Transport); ok {
			s.hub = wakeup.New(t, wakeup.Options{Node: cfg.NodeID, Logger: cfg.Logger,
				Local: []func(){s.dispatch.Wake, s.Schedules.WakeLocal, s.Triggers.WakeLocal}, Finished: s.Invoke.WakeFinished,
				Stop: s.Invoke.StopLocal})
		}
	}
}

// apiHandler builds the API server over the services and returns its handler; bulk are the bulk
// lanes its requests go through (the metrics count their waiting requests).
func (s *Server) apiHandler(c clock.Clock, ids idgen.Generator, bulk *bulklane.Lanes) http.Handler {
	cfg := &s.cfg
	st := s.Store
	return api.New(api.Config{Tokens: s.Tokens, IdentityProviders: s.IdentityProviders, Tenants: s.Tenants, Registry: s.Registry, Invoke: s.Invoke,
		Usage: usage.NewService(st, s.Tenants, c, cfg.Pricing.Currency()), Schedules: s.Schedules, Secrets: s.Secrets, Webhooks: s.Webhooks,
		TrustedProxies: cfg.TrustedProxies, StoreWriteWait: cfg.StoreWriteWait, Events: s.Events, Triggers: s.Triggers, Audit: st, Ready: st,
		IDs: ids, Logger: cfg.Logger, MaxBody: cfg.MaxBody, Metrics: s.Metrics.Handler(), MetricsPublic: cfg.MetricsPublic,
		MaxInFlight: cfg.MaxInFlight, MaxInFlightBytes: cfg.MaxInFlightBytes,
		BulkBytes: cfg.BulkBytes, BulkWait: cfg.BulkWait, Bulk: bulk, WriteTimeout: cfg.WriteTimeout, WorkerHub: s.WorkerHub, WorkerKeys: cfg.WorkerKeys, WorkerClock: c, WorkerNonces: workerNonces{st},
		Tracing: s.Tracing, HTTPMetrics: s.Metrics, AccessLogOff: cfg.Telemetry.AccessLogOff, LogLevel: cfg.Telemetry.LogLevel,
		MaxPageBytes: cfg.MaxPageBytes, Assets: assetops.New(st, s.Blobs, assetops.Options{Clock: c, IDs: ids, Logger: cfg.Logger})}).Handler()
}

// workerNonces is the store as the worker routes' durable nonce memory (api.NonceStore).
type workerNonces struct{ st store.Store }

// UseNonce implements api.NonceStore.
func (n workerNonces) UseNonce(ctx context.Context, nonce string, expires time.Time) (bool, error) {
	var fresh bool
	err := n.st.Update(ctx, func(tx store.Tx) error {
		var err error
		fresh, err = tx.UseNonce(nonce, expires)
		return err
	})
	return fresh, err
}

// Handler is the HTTP handler (for tests that serve it themselves).
func (s *Server) Handler() http.Handler { return s.handler }

// RunDispatcher runs the async dispatcher until ctx ends and its running attempts finish. Serve
// runs it; tests that serve Handler themselves call it.
func (s *Server) RunDispatcher(ctx context.Context) { s.dispatch.Run(ctx) }

// Wake makes the dispatcher look for runnable work now (tests call it after moving a fake clock).
func (s *Server) Wake() { s.dispatch.Wake() }

// Listen binds the configured address.
func (s *Server) Listen() (net.Listener, error) {
	return net.Listen("tcp", s.cfg.Addr)
}

// HTTPServer returns the http.Server Serve runs: the handler with the configured timeouts and
// header limit.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s.handler, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, ReadTimeout: s.cfg.ReadTimeout,
		WriteTimeout: s.cfg.WriteTimeout, IdleTimeout: s.cfg.IdleTimeout, MaxHeaderBytes: s.cfg.MaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
}

// Serve serves on ln until ctx ends, then stops accepting, lets in-flight requests finish (bounded
// by DrainTimeout), drains queued writes and closes the store. A clean drain returns nil; requests
// still in flight after DrainTimeout are cut off and Serve returns ErrDrainTimeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := s.HTTPServer()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	dctx, stopDispatch := context.WithCancel(context.Background())
	dispatched := make(chan struct{})
	go func() { s.RunDispatcher(dctx); close(dispatched) }()
	// The singletons (under the leader lease on a shared store) and the wake-up hub: on shutdown
	// the leader stops its singletons and releases its lease, so another node takes over within
	// one renewal period.
	lctx, stopSingletons := context.WithCancel(context.Background())
	singletons := make(chan struct{})
	go func() { s.RunSingletons(lctx); close(singletons) }()
	hubbed := make(chan struct{})
	go func() { s.PerNode().Run(lctx); close(hubbed) }()
	if err := s.StartNATSFeed(ctx); err != nil {
		s.log.Error("natsfeed: subscribing the NATS-fed triggers", "err", err)
	}
	s.log.Info("lark serving", "addr", ln.Addr().String(), "store", storeName(s.cfg.Store), "blob_store", fmt.Sprint(s.Blobs))
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	s.log.Info("shutting down")
	// A node that stops first leaves the leadership (another node takes the singletons over at
	// once, and this one neither takes the lease nor fires schedules while it drains) and stops
	// claiming work; what it runs goes on.
	stopSingletons()
	stopDispatch()
	if s.WorkerHub != nil {
		s.WorkerHub.Close() // long polls answer now instead of holding the drain
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	shutErr := hs.Shutdown(sctx)
	if errors.Is(shutErr, context.DeadlineExceeded) {
		s.log.Error("shutdown: requests still in flight after the drain timeout are cut off", "drain_timeout", s.cfg.DrainTimeout.String())
		shutErr = errors.Join(ErrDrainTimeout, hs.Close())
	}
	select {
	case <-dispatched:
	case <-sctx.Done():
		s.log.Warn("shutdown: attempts still running; they keep their leases and are reclaimed after restart")
	}
	<-singletons // each stops at its next batch (one transaction at most); then the lease is released
	<-hubbed
	s.closeBridge()
	s.Invoke.Close()
	s.shutdownTracing()
	closeErr := errors.Join(s.Store.Close(), s.Blobs.Close())
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	s.log.Info("stopped")
	return errors.Join(serveErr, shutErr, closeErr)
}

// Singletons are the background loops that run on the leader only (internal/loops): schedule
// firing and backfill driving, retention, and the trigger batch flusher.
func (s *Server) Singletons() loops.Group {
	return loops.Group{Logger: s.log, Loops: []loops.Loop{
		{Name: "schedules", Run: s.Schedules.Run},
		{Name: "retention", Run: s.Retention.Run},
		{Name: "trigger-flusher", Run: s.Triggers.Run},
	}}
}

// RunSingletons runs the singleton loops until ctx ends: at once on an exclusive store (the single
// node always leads), else while this node holds the leader lease, stopping them (cancelled, waited
// for) whenever it loses it and releasing it when ctx ends. Serve runs it.
func (s *Server) RunSingletons(ctx context.Context) {
	g := s.Singletons()
	if s.Leader == nil {
		g.Run(ctx)
		return
	}
	s.Leader.Run(ctx, g.Run)
}

// PerNode are the background loops besides the dispatcher that run on every node: the wake-up
// hub (on a shared store), the lease check of the executions running here, the writing of the
// trigger metrics this node buffered, and the records of the remote workers it sees.
func (s *Server) PerNode() loops.Group {
	return loops.Group{Logger: s.log, Loops: []loops.Loop{
		{Name: "wake-ups", Run: s.RunWakeups},
		{Name: "lease-watch", Run: func(ctx context.Context) { s.Invoke.Runner().WatchLeases(ctx, s.cfg.LeaseWatch) }},
		{Name: "trigger-metrics", Run: s.Triggers.RunMetrics},
		{Name: "memory-limit", Run: s.memory.Run},
		{Name: "worker-records", Run: s.runWorkerRecords},
	}}
}

// runWorkerRecords writes the remote workers this node sees (workerhub.Service.RunRecorder), until
// ctx ends; without remote workers it only waits.
func (s *Server) runWorkerRecords(ctx context.Context) {
	if s.WorkerHub == nil {
		<-ctx.Done()
		return
	}
	s.WorkerHub.RunRecorder(ctx)
}

// RunWakeups sends this node's wake-ups to the other nodes and wakes its loops on theirs, until ctx
// ends (Serve runs it; on an exclusive store it only waits for ctx).
func (s *Server) RunWakeups(ctx context.Context) {
	if s.hub != nil {
		s.hub.Run(ctx)
		return
	}
	<-ctx.Done()
}

// StartNATSFeed subscribes the triggers fed by NATS subjects and follows their changes (Serve
// calls it; tests that serve Handler themselves call it). Without Config.NATS it does nothing.
func (s *Server) StartNATSFeed(ctx context.Context) error {
	if s.feed == nil {
		return nil
	}
	return s.feed.Start(ctx, s.Store)
}

// closeBridge stops the NATS-fed triggers' subscriptions and closes the bridge (mirroring what is
// queued, within its bound).
func (s *Server) closeBridge() {
	if s.feed != nil {
		s.feed.Close()
	}
	if s.bridge != nil {
		if err := s.bridge.Close(); err != nil {
			s.log.Warn("closing the NATS bridge", "err", err)
		}
	}
}

// Close releases the store without serving (for tests and failed starts).
func (s *Server) Close() error {
	s.closeBridge()
	s.Invoke.Close()
	s.shutdownTracing()
	return errors.Join(s.Store.Close(), s.Blobs.Close())
}

func storeName(s string) string {
	if s == "" {
		return "sqlite"
	}
	if i := strings.Index(s, "://"); i >= 0 {
		return s[:i]
	}
	return s
}

// baseProcs is the Go scheduler's processors as the process started (GOMAXPROCS: the cores, or
// the container's CPU limit), before cpuScheduler adds the CPU slots to them.
var baseProcs = runtime.GOMAXPROCS(0)

// wireDispatch builds the claim stage and the dispatcher over s.Invoke. With local executions the
// claim takes what this process can start soon (s.Gate.Room); functions sent to remote workers are
// bounded by the workers' own concurrency and leases instead.
func (s *Server) wireDispatch(cfg Config, c clock.Clock) {
	claims := s.Invoke.ClaimConfig()
	if !cfg.RemoteWorkers {
		claims.Room = s.Gate.Room
	}
	s.Claims = dispatch.NewStoreClaimer(claims)
	s.dispatch = dispatch.New(s.Claims, s.Invoke.Runner(), dispatch.Options{Slots: cfg.Workers, Poll: cfg.DispatchPoll, Clock: c, Logger: cfg.Logger})
}

// admissionOf is the admission gate of cfg's execution limits (per tenant: twice the CPU slots
// runnable at once; memory budgets from MemoryLimit) and the tracker that keeps Go's soft memory
// limit with it. onRoom wakes the dispatcher.
func admissionOf(cfg Config, cpu sandbox.CPUScheduler, onRoom func()) (*memlimit.Tracker, *admission.Gate) {
	limit := cfg.MemoryLimit
	if limit <= 0 {
		if set := debug.SetMemoryLimit(-1); set != math.MaxInt64 {
			limit = set // GOMEMLIMIT
		} else {
			d, _ := memlimit.Detect()
			limit = memlimit.Default(d)
		}
	}
	tracker := memlimit.New(memlimit.Options{Limit: limit})
	slots := cfg.CPUSlots
	if slots <= 0 {
		slots = DefaultCPUSlots()
	}
	execMem := cfg.ExecutionMemory
	if execMem <= 0 {
		execMem = limit / 2
	}
	tenantMem := cfg.TenantExecutionMemory
	if tenantMem <= 0 {
		tenantMem = min(int64(slots)*DefaultTenantMemoryPerSlot, execMem)
	}
	runnable := 2 * slots
	if cpu == nil {
		runnable = 0 // unscheduled executions: no CPU to share, no runnable bound
	}
	return tracker, admission.New(admission.Options{Runnable: runnable, Memory: execMem, TenantMemory: tenantMem,
		OnRoom: onRoom, OnReserved: tracker.Reserved})
}

// DefaultTenantMemoryPerSlot is one tenant's execution memory per CPU slot by default: what a
// tenant can use well at once is bounded by the CPU it can get.
const DefaultTenantMemoryPerSlot = 192 << 20

// DefaultCPUSlots is the default Config.CPUSlots: the cores less one (at least one), so that a core
// stays for HTTP, the database and the Go runtime when executions are CPU-bound (a busy process
// whose every P interprets polls the network only every 10 ms).
func DefaultCPUSlots() int { return max(min(runtime.NumCPU(), baseProcs)-1, 1) }

// cpuScheduler is the CPU sharing of Config.CPUSlots and CPUNice (nil: none). With lowered
// priorities it gives the Go scheduler a processor per slot on top of baseProcs, so that threads
// interpreting at the low priority never hold the processors the server's own work needs (the
// OS, not the Go scheduler, then decides by priority who gets a core).
func cpuScheduler(slots, nice int, log *slog.Logger) sandbox.CPUScheduler {
	switch {
	case slots < 0:
		return nil
	case slots == 0:
		slots = DefaultCPUSlots()
	}
	s := cpushare.New(slots)
	if nice == 0 {
		return s
	}
	if err := s.LowerPriority(nice); err != nil {
		log.Warn("executions interpret at the server's priority, so CPU-bound user code slows the API down more", "err", err)
		return s
	}
	if s.OwnThreads() {
		log.Info("the process may lower a thread's priority but not restore it (no CAP_SYS_NICE): executions run on worker threads that stay at the low priority (docs/operations.md, --cpu-nice)")
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(baseProcs + slots)
	}
	return s
}

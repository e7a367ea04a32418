// Command lark is the Lark serverless runtime: `lark serve` runs it, `lark dev` runs it with a dev
// tenant and token for local use.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/cli"
	"github.com/larkrun/lark/internal/console"
	"github.com/larkrun/lark/internal/cost"
	"github.com/larkrun/lark/internal/cpushare"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/larktest"
	"github.com/larkrun/lark/internal/leader"
	"github.com/larkrun/lark/internal/metrics"
	"github.com/larkrun/lark/internal/natsbridge"
	"github.com/larkrun/lark/internal/retention"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/tracing"
	"github.com/larkrun/lark/internal/workerhub"
	"github.com/larkrun/lark/internal/workerproto"
)

func main() {
	if err := root().Execute(); err != nil {
		if msg := err.Error(); msg != "" { // lark test reports its failures itself
			fmt.Fprintln(os.Stderr, "lark:", msg)
		}
		os.Exit(cli.ExitCode(err))
	}
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

type flags struct {
	addr, data, store, logLevel string
	sqliteSynchronous           string
	maxBody                     int64
	maxInFlightBytes, bulkBytes int64
	workers                     int
	remoteWorkers               bool
	workerKeys                  []string
	workerKeyTenants            []string
	heartbeatInterval           time.Duration
	heartbeatTimeout            time.Duration
	retention                   time.Duration
	egressLoopback              bool
	cpuProfile                  string
	memProfile                  string
	pricing                     string
	blobStore                   string
	metricsPublic               bool
	metricsMaxLabelSets         int
	drainTimeout                time.Duration
	readHeaderTimeout           time.Duration
	readTimeout                 time.Duration
	writeTimeout                time.Duration
	idleTimeout                 time.Duration
	maxHeaderBytes              int
	maxInFlight                 int
	maxPageBytes                int
	maxPayloadBytes             int
	cpuSlots                    int
	memoryLimitMB               int64
	executionMemoryMB           int64
	tenantExecutionMemoryMB     int64
	cpuNice                     int
	pgMaxConns                  int32
	pgWriters                   int
	pgStatementTimeout          time.Duration
	pgClientTimeout             time.Duration
	pgTCPTimeout                time.Duration
	storeWriteWait              time.Duration
	leaseGrace                  time.Duration
	syncStartDelay              time.Duration
	nats                        string
	masterKeyFile               string
	allowUnreadableSecrets      bool
	trustedProxies              string
	identityProviders           string
	consoleOIDCIssuer           string
	consoleOIDCClientID         string
	nodeID                      string
	leaderTTL                   time.Duration
	leaderRenew                 time.Duration
	noMigrate                   bool
	otlpEndpoint                string
	accessLog                   bool
	logLevelVar                 *slog.LevelVar
}

// bind defines the serve flags on c, group by group (pflag lists them sorted by name).
func (f *flags) bind(c *cobra.Command) {
	f.bindServerFlags(c)
	f.bindLimitFlags(c)
	f.bindStoreFlags(c)
	f.bindExecutionFlags(c)
	f.bindTelemetryFlags(c)
}

// bindServerFlags defines the HTTP server's flags: the listen address, the request size and time
// limits, the drain on shutdown and the trusted proxies.
func (f *flags) bindServerFlags(c *cobra.Command) {
	c.Flags().StringVar(&f.addr, "addr", env("LARK_ADDR", "127.0.0.1:8080"), "listen address (env LARK_ADDR)")
	c.Flags().Int64Var(&f.maxBody, "max-body", 1<<20, "maximum request body in bytes")
	c.Flags().DurationVar(&f.drainTimeout, "drain-timeout", server.DefaultDrainTimeout,
		"on SIGTERM/SIGINT, how long in-flight requests may take to finish; past it they are cut off and the exit code is 1")
	c.Flags().DurationVar(&f.readHeaderTimeout, "read-header-timeout", server.DefaultReadHeaderTimeout, "time to read a request's headers")
	c.Flags().DurationVar(&f.readTimeout, "read-timeout", server.DefaultReadTimeout, "time to read a whole request, body included")
	c.Flags().DurationVar(&f.writeTimeout, "write-timeout", api.DefaultWriteTimeout,
		"time to answer a request from the end of its headers (a sync invocation is exempt while it runs)")
	c.Flags().DurationVar(&f.idleTimeout, "idle-timeout", server.DefaultIdleTimeout, "time a keep-alive connection may wait for its next request")
	c.Flags().IntVar(&f.maxHeaderBytes, "max-header-bytes", server.DefaultMaxHeaderBytes, "maximum size of a request's headers (larger → 431)")
	c.Flags().StringVar(&f.identityProviders, "identity-providers", env("LARK_IDENTITY_PROVIDERS", ""),
		"JSON file of OIDC issuers whose JWTs authenticate callers, applied at start (env LARK_IDENTITY_PROVIDERS; docs/operations.md, Federated sign-in)")
	c.Flags().StringVar(&f.consoleOIDCIssuer, "console-oidc-issuer", env("LARK_CONSOLE_OIDC_ISSUER", ""),
		"issuer (a registered identity provider) the web console offers sign-in with, authorization code + PKCE (env LARK_CONSOLE_OIDC_ISSUER; docs/console.md)")
	c.Flags().StringVar(&f.consoleOIDCClientID, "console-oidc-client-id", env("LARK_CONSOLE_OIDC_CLIENT_ID", "lark-console"),
		"the console's public client id at --console-oidc-issuer, one of the provider's audiences (env LARK_CONSOLE_OIDC_CLIENT_ID)")
	c.Flags().StringVar(&f.trustedProxies, "trusted-proxies", env("LARK_TRUSTED_PROXIES", ""),
		"comma-separated CIDRs of reverse proxies whose X-Forwarded-For the webhook receiver believes; unset: the TCP peer is the sender (env LARK_TRUSTED_PROXIES)")
}

// bindLimitFlags defines the flags that bound what tenants use: requests and bodies in flight,
// bulky requests, list pages, payloads, CPU slots and execution memory.
func (f *flags) bindLimitFlags(c *cobra.Command) {
	c.Flags().IntVar(&f.maxInFlight, "max-in-flight", api.DefaultMaxInFlight,
		"requests one tenant may have in flight at once (over it → 429 rate_limited)")
	c.Flags().Int64Var(&f.maxInFlightBytes, "max-in-flight-bytes", api.DefaultMaxInFlightBytes,
		"bytes of request bodies one tenant may have in flight at once, by declared length (over it → 429 rate_limited; a tenant's only request is always admitted; -1: no cap)")
	c.Flags().Int64Var(&f.bulkBytes, "bulk-bytes", api.DefaultBulkBytes,
		"declared body length past which a request is bulky: a tenant's bulky requests are read, checked and answered one at a time, so one tenant's large payloads occupy one core at most (-1: off)")
	c.Flags().IntVar(&f.maxPageBytes, "max-page-bytes", store.DefaultPageBytes,
		"byte budget of a list page: a page ends before the item that would take it over (at least one item), with a cursor to continue")
	c.Flags().IntVar(&f.maxPayloadBytes, "max-payload-bytes", invoke.DefaultMaxPayloadBytes,
		"largest params, result, workflow step input or output, helper argument and event payload, in bytes of JSON (env LARK_MAX_PAYLOAD_BYTES)")
	c.Flags().IntVar(&f.cpuSlots, "cpu-slots", 0,
		"Starlark executions interpreting at once, shared fairly between tenants (0: the cores less one, at least 1; -1: no sharing) (env LARK_CPU_SLOTS)")
	c.Flags().IntVar(&f.cpuNice, "cpu-nice", cpushare.DefaultNice,
		"nice value (1-19) of the threads interpreting user code, below the API and the database; 0 keeps the server's priority (env LARK_CPU_NICE)")
	c.Flags().Int64Var(&f.memoryLimitMB, "memory-limit-mb", 0,
		"the process's memory limit in MiB: Go's soft memory limit stays under it and execution memory is budgeted from it (0: GOMEMLIMIT if set, else 3/4 of the cgroup's or the machine's memory) (env LARK_MEMORY_LIMIT_MB)")
	c.Flags().Int64Var(&f.executionMemoryMB, "execution-memory-mb", 0,
		"memory all running executions may reserve at once, in MiB (0: half the memory limit) (env LARK_EXECUTION_MEMORY_MB)")
	c.Flags().Int64Var(&f.tenantExecutionMemoryMB, "tenant-execution-memory-mb", 0,
		"memory one tenant's running executions may reserve at once, in MiB (0: 192 per CPU slot) (env LARK_TENANT_EXECUTION_MEMORY_MB)")
}

// bindStoreFlags defines the store's flags: which store, its migration, SQLite's durability, the
// PostgreSQL pool and timeouts, write waits, leases, retention, and the node's place among the
// nodes sharing a PostgreSQL store.
func (f *flags) bindStoreFlags(c *cobra.Command) {
	c.Flags().StringVar(&f.data, "data", env("LARK_DATA", "./lark-data"), "data directory; the SQLite database lives inside (env LARK_DATA)")
	c.Flags().StringVar(&f.store, "store", env("LARK_STORE", "sqlite"), "store: sqlite, or a postgres:// URL (env LARK_STORE)")
	c.Flags().StringVar(&f.blobStore, "blob-store", env("LARK_BLOB_STORE", ""),
		"where asset outputs are stored: a directory (file:///path), or s3://BUCKET/PREFIX?endpoint=HOST:PORT&region=R&secure=false with credentials in "+
			"LARK_S3_ACCESS_KEY/LARK_S3_SECRET_KEY or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; several nodes need S3 (default file://<data>/blobs) (env LARK_BLOB_STORE)")
	c.Flags().BoolVar(&f.noMigrate, "no-migrate", false,
		"do not apply pending schema migrations at start: a database behind this binary stops the start (run lark migrate up first); one newer always does")
	c.Flags().StringVar(&f.sqliteSynchronous, "sqlite-synchronous", env("LARK_SQLITE_SYNCHRONOUS", "full"),
		"SQLite's synchronous setting: full survives power loss, normal only a process crash (env LARK_SQLITE_SYNCHRONOUS)")
	c.Flags().Int32Var(&f.pgMaxConns, "pg-max-conns", pgstore.DefaultMaxConns,
		"PostgreSQL store: connections in this process's pool (each lark process sharing the database has its own)")
	c.Flags().IntVar(&f.pgWriters, "pg-writers", pgstore.DefaultWriters,
		"PostgreSQL store: group committers, each writing on a connection of its own from the pool (the dispatcher's claims and outcomes spread over them, other writes use the first)")
	c.Flags().DurationVar(&f.pgStatementTimeout, "pg-statement-timeout", pgstore.DefaultStatementTimeout,
		"PostgreSQL store: longest a statement may run before the server cancels it (a statement_timeout in the URL wins)")
	c.Flags().DurationVar(&f.pgClientTimeout, "pg-client-timeout", pgstore.DefaultClientTimeout,
		"PostgreSQL store: longest Lark waits on its side for one operation (a connection, a read, a transaction) before giving up on the connection; bounds a request's 503 when the database stops answering (a network partition); negative: no bound")
	c.Flags().DurationVar(&f.pgTCPTimeout, "pg-tcp-timeout", pgstore.DefaultTCPTimeout,
		"PostgreSQL store: how long a connection's peer may stay silent before the connection is ended (TCP keepalives, and TCP_USER_TIMEOUT on Linux, on both ends); negative: the operating system's defaults")
	c.Flags().DurationVar(&f.storeWriteWait, "store-write-wait", store.DefaultWriteWait,
		"longest a write waits for the store's writer to start it before the API answers 503 with Retry-After")
	c.Flags().DurationVar(&f.syncStartDelay, "sync-start-delay", invoke.DefaultSyncStartDelay,
		"how long a sync function call runs before its start is written on its own; a call that ends sooner is written once, start and outcome together (negative: write every start at once)")
	c.Flags().DurationVar(&f.leaseGrace, "lease-grace", 30*time.Second,
		"how long an attempt's lease outlives its timeout: the work of a node that died mid-attempt, or could not write the outcome, is run again that long after the attempt's timeout")
	c.Flags().DurationVar(&f.retention, "retention-interval", retention.DefaultInterval, "time between two passes of the retention job (purges history and audit events past each tenant's retention)")
	c.Flags().StringVar(&f.nodeID, "node-id", env("LARK_NODE_ID", ""),
		"this node's name among the lark serve processes sharing a PostgreSQL store (default: host, pid and a random suffix) (env LARK_NODE_ID)")
	c.Flags().DurationVar(&f.leaderTTL, "leader-ttl", leader.DefaultTTL,
		"PostgreSQL store: how long a leader lease claim holds; a dead leader is replaced within leader-ttl + leader-renew")
	c.Flags().DurationVar(&f.leaderRenew, "leader-renew", leader.DefaultRenew,
		"PostgreSQL store: time between two leader lease claims (at most leader-ttl/3)")
}

// bindExecutionFlags defines the flags of running user code and what it reaches: local and remote
// workers, pricing, egress, the NATS bridge and the master key of secrets.
func (f *flags) bindExecutionFlags(c *cobra.Command) {
	c.Flags().IntVar(&f.workers, "workers", 64, "concurrent async executions in this process")
	c.Flags().BoolVar(&f.remoteWorkers, "remote-workers", false, "run async function attempts in remote workers (lark worker) instead of here; needs --worker-key")
	c.Flags().StringArrayVar(&f.workerKeyTenants, "worker-key-tenants", nil, "kid=tenant1,tenant2: the worker key kid takes, reports on and resolves secrets for those tenants' tasks only (repeatable; a key not named takes every tenant's)")
	c.Flags().StringArrayVar(&f.workerKeys, "worker-key", nil, "a worker key id:secret (secret at least 16 bytes) accepted on the worker routes; repeat during a rotation, the first one signs (env LARK_WORKER_KEYS, comma-separated)")
	c.Flags().DurationVar(&f.heartbeatInterval, "worker-heartbeat-interval", 30*time.Second, "how often remote workers heartbeat")
	c.Flags().DurationVar(&f.heartbeatTimeout, "worker-heartbeat-timeout", 5*time.Minute, "how long without a heartbeat before a remote worker's tasks are given up and their leases left to expire")
	c.Flags().StringVar(&f.pricing, "pricing", env("LARK_PRICING", ""), "JSON pricing file for cost attribution; unset prices everything at 0 (env LARK_PRICING)")
	c.Flags().BoolVar(&f.egressLoopback, "unsafe-egress-allow-loopback", false, "TEST ONLY: let user code reach loopback addresses")
	_ = c.Flags().MarkHidden("unsafe-egress-allow-loopback")
	c.Flags().StringVar(&f.nats, "nats", env("LARK_NATS_URL", ""),
		"NATS server URL (nats://host:4222; a comma-separated list for a cluster) of the JetStream bridge: events mirrored to subjects, triggers fed by subjects; empty: off (env LARK_NATS_URL)")
	c.Flags().StringVar(&f.masterKeyFile, "master-key-file", env("LARK_MASTER_KEY_FILE", ""),
		"file holding the master key that seals tenant secrets (base64 32-byte keys, comma-separated, the first sealing); "+
			"or set the key itself in LARK_MASTER_KEY; without either, secrets are disabled (env LARK_MASTER_KEY_FILE)")
	c.Flags().BoolVar(&f.allowUnreadableSecrets, "allow-unreadable-secrets", false,
		"start although stored tenant or webhook secrets cannot be opened with the master key (a lost key): they stay unreadable until set again; "+
			"without it such a start stops (env LARK_ALLOW_UNREADABLE_SECRETS)")
}

// bindTelemetryFlags defines the flags of what the server tells about itself: the log level, the
// access log, the metrics, trace export and the profiles lark bench takes.
func (f *flags) bindTelemetryFlags(c *cobra.Command) {
	c.Flags().StringVar(&f.logLevel, "log-level", env("LARK_LOG_LEVEL", "info"), "debug, info, warn or error (env LARK_LOG_LEVEL)")
	c.Flags().BoolVar(&f.accessLog, "access-log", false, "write one info line per HTTP request (false: at debug level, 5xx answers at warn) (env LARK_ACCESS_LOG)")
	c.Flags().BoolVar(&f.metricsPublic, "metrics-public", false,
		"serve GET /metrics without authentication (it names every tenant; default: the operator's token only) (env LARK_METRICS_PUBLIC)")
	c.Flags().IntVar(&f.metricsMaxLabelSets, "metrics-max-label-sets", metrics.DefaultMaxLabelSets,
		"label sets each metric family keeps before folding new ones into __other__ (env LARK_METRICS_MAX_LABEL_SETS)")
	c.Flags().StringVar(&f.otlpEndpoint, "otlp-endpoint", env("LARK_OTLP_ENDPOINT", ""),
		"export traces over OTLP/HTTP to this collector URL, e.g. http://collector:4318 (env LARK_OTLP_ENDPOINT; the standard OTEL_EXPORTER_OTLP_* variables work too); unset: tracing off")
	c.Flags().StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (for lark bench)")
	_ = c.Flags().MarkHidden("cpuprofile")
	c.Flags().StringVar(&f.memProfile, "memprofile", "", "write an allocation profile of the whole run to this file at exit (for lark bench)")
	_ = c.Flags().MarkHidden("memprofile")
}

// config is the server configuration the flags describe (the pricing file is read here, so that a
// bad one stops the start).
func (f *flags) config(admin string, log *slog.Logger) (server.Config, error) {
	cfg := server.Config{Addr: f.addr, DataDir: f.data, Store: f.store, BlobStore: f.blobStore, NoMigrate: f.noMigrate, SQLiteSynchronous: f.sqliteSynchronous,
		PGMaxConns: f.pgMaxConns, PGStatementTimeout: f.pgStatementTimeout, PGWriters: f.pgWriters, PGClientTimeout: f.pgClientTimeout, PGTCPTimeout: f.pgTCPTimeout, StoreWriteWait: f.storeWriteWait, LeaseGrace: f.leaseGrace, SyncStartDelay: f.syncStartDelay, AdminToken: admin, MaxBody: f.maxBody, Logger: log, IdentityProvidersFile: f.identityProviders,
		ConsoleOIDCIssuer: f.consoleOIDCIssuer, ConsoleOIDCClientID: f.consoleOIDCClientID,
		Workers: f.workers, UnsafeEgressAllowLoopback: f.egressLoopback, RetentionInterval: f.retention,
		MetricsPublic: f.metricsPublic, MetricsMaxLabelSets: f.metricsMaxLabelSets,
		DrainTimeout: f.drainTimeout, ReadHeaderTimeout: f.readHeaderTimeout, ReadTimeout: f.readTimeout,
		WriteTimeout: f.writeTimeout, IdleTimeout: f.idleTimeout, MaxHeaderBytes: f.maxHeaderBytes, MaxInFlight: f.maxInFlight, MaxInFlightBytes: f.maxInFlightBytes, BulkBytes: f.bulkBytes,
		MaxPayloadBytes: f.maxPayloadBytes, CPUSlots: f.cpuSlots, CPUNice: f.cpuNice,
		MemoryLimit: f.memoryLimitMB << 20, ExecutionMemory: f.executionMemoryMB << 20, TenantExecutionMemory: f.tenantExecutionMemoryMB << 20,
		RemoteWorkers: f.remoteWorkers, HeartbeatInterval: f.heartbeatInterval, HeartbeatTimeout: f.heartbeatTimeout,
		NodeID: f.nodeID, LeaderTTL: f.leaderTTL, LeaderRenew: f.leaderRenew,
		Telemetry: server.Telemetry{OTLPEndpoint: f.otlpEndpoint, AccessLogOff: !f.accessLog, LogLevel: f.logLevelVar}}
	cfg.MaxPageBytes = f.maxPageBytes
	keys := f.workerKeys
	if v := os.Getenv("LARK_WORKER_KEYS"); len(keys) == 0 && v != "" {
		keys = strings.Split(v, ",")
	}
	if len(keys) > 0 {
		ks, err := workerproto.ParseKeys(keys)
		if err != nil {
			return cfg, fmt.Errorf("--worker-key: %w", err)
		}
		cfg.WorkerKeys = ks
	}
	if len(f.workerKeyTenants) > 0 {
		b, err := workerhub.ParseBindings(f.workerKeyTenants)
		if err != nil {
			return cfg, fmt.Errorf("--worker-key-tenants: %w", err)
		}
		cfg.WorkerKeyTenants = b
	}
	if f.nats != "" {
		cfg.NATS = natsbridge.Config{URL: f.nats, Logger: log}
	}
	kr, err := server.LoadMasterKey(os.Getenv("LARK_MASTER_KEY"), f.masterKeyFile)
	if err != nil {
		return cfg, err
	}
	cfg.Keyring, cfg.AllowUnreadableSecrets = kr, f.allowUnreadableSecrets
	proxies, err := parseCIDRs(f.trustedProxies)
	if err != nil {
		return cfg, fmt.Errorf("--trusted-proxies: %w", err)
	}
	cfg.TrustedProxies = proxies
	if f.pricing != "" {
		p, err := cost.Load(f.pricing)
		if err != nil {
			return cfg, fmt.Errorf("--pricing: %w", err)
		}
		cfg.Pricing = p
	}
	return cfg, nil
}

// parseCIDRs reads a comma-separated list of CIDRs or single addresses.
func parseCIDRs(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR or an IP address", part)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// typedEnv maps flags to the environment variables that set them when the command line does not.
var typedEnv = []struct{ flag, env string }{
	{"metrics-public", "LARK_METRICS_PUBLIC"},
	{"metrics-max-label-sets", "LARK_METRICS_MAX_LABEL_SETS"},
	{"max-payload-bytes", "LARK_MAX_PAYLOAD_BYTES"},
	{"cpu-slots", "LARK_CPU_SLOTS"},
	{"cpu-nice", "LARK_CPU_NICE"},
	{"memory-limit-mb", "LARK_MEMORY_LIMIT_MB"},
	{"execution-memory-mb", "LARK_EXECUTION_MEMORY_MB"},
	{"tenant-execution-memory-mb", "LARK_TENANT_EXECUTION_MEMORY_MB"},
	{"access-log", "LARK_ACCESS_LOG"},
	{"allow-unreadable-secrets", "LARK_ALLOW_UNREADABLE_SECRETS"},
}

// check applies typedEnv (a malformed value is an error, never ignored) and validates the flags.
func (f *flags) check(c *cobra.Command) error {
	for _, e := range typedEnv {
		v, ok := os.LookupEnv(e.env)
		if !ok || v == "" || c.Flags().Changed(e.flag) {
			continue
		}
		if err := c.Flags().Set(e.flag, v); err != nil {
			return fmt.Errorf("%s: %w", e.env, err)
		}
	}
	switch strings.ToLower(f.sqliteSynchronous) {
	case "full", "normal":
		f.sqliteSynchronous = strings.ToUpper(f.sqliteSynchronous)
	default:
		return fmt.Errorf("--sqlite-synchronous must be full or normal, got %q", f.sqliteSynchronous)
	}
	if f.cpuSlots < -1 {
		return fmt.Errorf("--cpu-slots must be -1, 0 or positive, got %d", f.cpuSlots)
	}
	if f.memoryLimitMB < 0 || f.executionMemoryMB < 0 || f.tenantExecutionMemoryMB < 0 {
		return fmt.Errorf("--memory-limit-mb, --execution-memory-mb and --tenant-execution-memory-mb must be 0 or positive")
	}
	if f.cpuNice < 0 || f.cpuNice > 19 {
		return fmt.Errorf("--cpu-nice must be 0 to 19, got %d", f.cpuNice)
	}
	if f.maxPayloadBytes < 1 {
		return fmt.Errorf("--max-payload-bytes must be at least 1, got %d", f.maxPayloadBytes)
	}
	if f.metricsMaxLabelSets < 1 {
		return fmt.Errorf("--metrics-max-label-sets must be at least 1, got %d", f.metricsMaxLabelSets)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"drain-timeout", f.drainTimeout}, {"read-header-timeout", f.readHeaderTimeout}, {"read-timeout", f.readTimeout},
		{"write-timeout", f.writeTimeout}, {"idle-timeout", f.idleTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("--%s must be positive, got %v", d.name, d.v)
		}
	}
	if f.maxHeaderBytes < 4096 {
		return fmt.Errorf("--max-header-bytes must be at least 4096, got %d", f.maxHeaderBytes)
	}
	if f.maxInFlight < 1 {
		return fmt.Errorf("--max-in-flight must be at least 1, got %d", f.maxInFlight)
	}
	if f.maxPageBytes < 1 {
		return fmt.Errorf("--max-page-bytes must be at least 1, got %d", f.maxPageBytes)
	}
	if err := checkNATSURL(f.nats); err != nil {
		return fmt.Errorf("--nats: %w", err)
	}
	if err := tracing.ParseEndpoint(f.otlpEndpoint); err != nil {
		return fmt.Errorf("--otlp-endpoint: %w", err)
	}
	return nil
}

// checkNATSURL accepts "" (the bridge is off) or a comma-separated list of nats://, tls://, ws://
// or wss:// URLs with a host, so that a typo stops the start instead of reconnecting for ever.
func checkNATSURL(list string) error {
	if list == "" {
		return nil
	}
	for _, s := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("%q: the scheme must be nats, tls, ws or wss", s)
		}
		if u.Host == "" {
			return fmt.Errorf("%q has no host", s)
		}
	}
	return nil
}

func (f *flags) logger(text bool) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	// The level can be changed while the server runs (PUT /admin/log-level).
	f.logLevelVar = new(slog.LevelVar)
	f.logLevelVar.Set(level)
	opts := &slog.HandlerOptions{Level: f.logLevelVar}
	if text {
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
}

// startProfile starts a CPU profile when --cpuprofile is set; the returned func stops and writes
// it, and writes the allocation profile when --memprofile is set.
func (f *flags) startProfile() (func(), error) {
	stop := func() {}
	if f.cpuProfile != "" {
		out, err := os.Create(f.cpuProfile)
		if err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			out.Close()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		stop = func() { pprof.StopCPUProfile(); out.Close() }
	}
	if f.memProfile == "" {
		return stop, nil
	}
	return func() {
		stop()
		if out, err := os.Create(f.memProfile); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(out, 0)
			out.Close()
		}
	}, nil
}

func root() *cobra.Command {
	cmd := &cobra.Command{Use: "lark", Short: "Lark: a multi-tenant serverless runtime for Starlark functions and workflows",
		SilenceUsage: true, SilenceErrors: true}
	cmd.AddCommand(serveCmd(), devCmd(), workerCmd())
	cmd.AddCommand(benchCmd(), benchEchoCmd())
	cmd.AddCommand(versionCmd())
	cmd.Version = readVersion().String()
	cmd.SetVersionTemplate("{{.Version}}\n")
	cmd.AddCommand(cli.Commands()...)
	cmd.AddCommand(larktest.Command())
	cmd.AddCommand(migrateCmd(), backupCmd(), restoreCmd())
	cmd.AddCommand(adminCmd())
	return cmd
}

func serveCmd() *cobra.Command {
	var f flags
	c := &cobra.Command{Use: "serve", Short: "Run the runtime (API, dispatcher, executors)",
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(c); err != nil {
				return err
			}
			tuneGC()
			log, err := f.logger(false)
			if err != nil {
				return err
			}
			admin := os.Getenv("LARK_ADMIN_TOKEN")
			if admin == "" {
				log.Warn("LARK_ADMIN_TOKEN is not set: operator endpoints (tenants, tokens for any tenant) are unavailable")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			stopProfile, err := f.startProfile()
			if err != nil {
				return err
			}
			defer stopProfile()
			cfg, err := f.config(admin, log)
			if err != nil {
				return err
			}
			srv, err := server.New(ctx, cfg)
			if err != nil {
				return err
			}
			ln, err := srv.Listen()
			if err != nil {
				srv.Close()
				return err
			}
			return srv.Serve(ctx, ln)
		}}
	f.bind(c)
	return c
}

func devCmd() *cobra.Command {
	var f flags
	c := &cobra.Command{Use: "dev", Short: "Run the runtime locally with a dev tenant and printed tokens (loopback only)",
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(c); err != nil {
				return err
			}
			tuneGC()
			log, err := f.logger(true)
			if err != nil {
				return err
			}
			host, _, err := net.SplitHostPort(f.addr)
			if err != nil {
				return fmt.Errorf("--addr: %w", err)
			}
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				return fmt.Errorf("lark dev listens on loopback only (got %s); use lark serve with LARK_ADMIN_TOKEN elsewhere", f.addr)
			}
			if err := os.MkdirAll(f.data, 0o700); err != nil {
				return err
			}
			creds, err := server.LoadOrCreateDevAdmin(f.data)
			if err != nil {
				return err
			}
			if os.Getenv("LARK_MASTER_KEY") == "" && f.masterKeyFile == "" {
				// The dev server seals secrets under a key of its own, kept beside its database.
				if f.masterKeyFile, err = server.LoadOrCreateDevMasterKey(f.data); err != nil {
					return err
				}
			}
			admin := creds.AdminToken
			if v := os.Getenv("LARK_ADMIN_TOKEN"); v != "" {
				admin = v // this run only; the saved token is kept for later runs
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := f.config(admin, log)
			if err != nil {
				return err
			}
			srv, err := server.New(ctx, cfg)
			if err != nil {
				return err
			}
			if err := srv.ProvisionDev(ctx, &creds); err != nil {
				srv.Close()
				return err
			}
			ln, err := srv.Listen()
			if err != nil {
				srv.Close()
				return err
			}
			devBanner(c.OutOrStdout(), devInfo{tenant: creds.TenantID, data: f.data,
				url: "http://" + ln.Addr().String(), token: creds.Token, adminToken: admin})
			return srv.Serve(ctx, ln)
		}}
	f.bind(c)
	return c
}

// devInfo is what the lark dev banner tells: the dev tenant, the data directory, the server's URL
// and the two tokens.
type devInfo struct {
	tenant, data, url, token, adminToken string
}

// devBanner prints the lark dev banner once the server listens: the export lines (tests and
// users paste them; keep their form), the lark login line, and the web console's URL.
func devBanner(w io.Writer, d devInfo) {
	fmt.Fprintf(w, strings.TrimLeft(`
Lark dev server (tenant %q, data in %s)
  export LARK_URL=%s
  export LARK_TOKEN=%s
  export LARK_ADMIN_TOKEN=%s
Or save them for the lark client commands: lark login --server %s --token %s
Web console: %s%s/ (sign in with LARK_TOKEN)
`, "\n"), d.tenant, d.data, d.url, d.token, d.adminToken, d.url, d.token, d.url, console.Path)
}

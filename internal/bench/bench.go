// Package bench is `lark bench`: it starts Lark as a child process on a fresh data directory per
// scenario, drives it over HTTP like a client would, measures throughput, latency percentiles and
// the child's CPU and peak RSS, and compares each scenario with a baseline measured in the same
// run (a bare Go JSON handler for sync, raw SQLite writes in the same database file for async).
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Scenario names, in the order they run.
var (
	// Available scenarios.
	Available = []string{"sync", "sync-instr", "sync-oidc", "async", "coldstart", "workflow10", "dag", "sleepers", "cron10k", "events", "scale"}
	// Pending scenarios and the features they wait for.
	Pending = map[string]string{}
	// All is every scenario name in table order.
	All = []string{"sync", "sync-instr", "sync-oidc", "async", "coldstart", "workflow10", "dag", "sleepers", "cron10k", "events", "heartbeat", "scale"}
)

// Goals from the issue.
const (
	SyncRatioGoal    = 0.30 // sync req/s ÷ echo req/s ≥
	SyncP99RatioGoal = 2.0  // sync p99 ÷ echo p99 ≤
	AsyncRatioGoal   = 0.40 // async burn-down inv/s ÷ raw SQLite lifecycles/s ≥
	AsyncPGRatioGoal = 0.60 // on PostgreSQL: async burn-down inv/s ÷ raw SKIP LOCKED lifecycles/s ≥
	// AsyncCPUGoalMs is async's server CPU per invocation on SQLite, in ms (≤).
	AsyncCPUGoalMs = 0.35
	// AsyncPGCPUGoalMs is async's CPU per invocation on PostgreSQL, server and backends, in ms (≤).
	AsyncPGCPUGoalMs = 0.6
	// AsyncPGRowsGoal is the rows PostgreSQL writes (inserted, updated, deleted) per async
	// invocation (≤).
	AsyncPGRowsGoal   = 4.0
	ColdStartMedianMs = 5.0 // median register + activate + first result ≤
)

// The PostgreSQL raw baseline's shape: as many workers as `lark serve`'s default --workers (the
// dispatcher's concurrency), each claiming up to PGRawClaim rows per transaction.
const (
	PGRawWorkers = 64
	PGRawClaim   = 10
)

// BenchStoreWriteWait is the --store-write-wait of every server the harness starts.
const BenchStoreWriteWait = "60s"

// Options configure a run (the flags of `lark bench`). A zero size takes the Scale preset's value,
// else the default (Defaults).
type Options struct {
	Scenarios []string `json:"scenarios"`
	// Scale is a preset of the sizes: "" (the defaults), ScaleSmall or ScaleFull (see Presets).
	Scale string `json:"scale,omitempty"`
	Out   string `json:"out"`
	Store string `json:"store"`
	// SQLiteSynchronous is passed to each server child as --sqlite-synchronous, and the async
	// scenario's raw-SQLite baseline uses it too: FULL (default) or NORMAL.
	SQLiteSynchronous string        `json:"sqlite_synchronous"`
	ProfileDir        string        `json:"profile_dir,omitempty"`
	Duration          time.Duration `json:"-"`
	Warmup            time.Duration `json:"-"`
	Clients           int           `json:"clients"`
	// InstrN sync requests are counted by sync-instr after InstrWarmup uncounted ones.
	InstrN       int `json:"instr_n"`
	InstrWarmup  int `json:"instr_warmup"`
	AsyncN       int `json:"async_n"`
	AsyncClients int `json:"async_clients"`
	ColdStartN   int `json:"coldstart_n"`
	// ColdStartMax bounds the coldstart loop's time.
	ColdStartMax time.Duration `json:"-"`
	// BurnDownMax is the least time a burn-down is allowed from its first submission; a slow
	// submission raises it (BurnDownLimit).
	BurnDownMax time.Duration `json:"-"`
	// Workflow10N async 10-step workflows from Workflow10Clients starters, then (first)
	// Workflow10Serial sync ones one at a time.
	Workflow10N       int `json:"workflow10_n"`
	Workflow10Clients int `json:"workflow10_clients"`
	Workflow10Serial  int `json:"workflow10_serial"`
	// DAGRuns async runs of a wide DAG (a root, DAGWidth tasks, a join) and as many of a deep one
	// (a chain of DAGDepth tasks), each shape after as many plain invocations as its runs have tasks.
	DAGWidth int `json:"dag_width"`
	DAGDepth int `json:"dag_depth"`
	DAGRuns  int `json:"dag_runs"`
	// SleepersN workflows sleeping SleepersSleep each; the lag comes from the timelines of
	// SleepersLagSample of them, evenly spaced over the submission order (default
	// DefaultSleepersLagSample: reading 100,000 timelines would take longer than the sleep).
	SleepersN         int           `json:"sleepers_n"`
	SleepersSleep     time.Duration `json:"-"`
	SleepersLagSample int           `json:"sleepers_lag_sample"`
	// Cron10kN schedules with expression Cron10kExpr; Cron10kFires instants are measured.
	Cron10kN     int    `json:"cron10k_n"`
	Cron10kExpr  string `json:"cron10k_expr"`
	Cron10kFires int    `json:"cron10k_fires"`
	// EventsN events are published to EventsTriggers triggers with CEL filters.
	EventsN        int `json:"events_n"`
	EventsTriggers int `json:"events_triggers"`
	// ScaleN finished invocations of the bench tenant fill the scale scenario's store (and a tenth
	// as many in two other tenants); ScaleCalls GETs measure each filter.
	ScaleN     int `json:"scale_n"`
	ScaleCalls int `json:"scale_calls"`
	// ServerArgs are extra flags for `lark serve` (e.g. --workers 128).
	ServerArgs []string `json:"server_args,omitempty"`

	// The durations, in seconds, for the JSON file.
	DurationS      float64 `json:"duration_s"`
	WarmupS        float64 `json:"warmup_s"`
	ColdStartMaxS  float64 `json:"coldstart_max_s"`
	BurnDownMaxS   float64 `json:"burn_down_max_s"`
	SleepersSleepS float64 `json:"sleepers_sleep_s"`
}

// Scale presets.
const (
	// ScaleSmall runs every scenario in well under a minute in all (CI): the figures check that
	// the harness and the server work, not the goals.
	ScaleSmall = "small"
	// ScaleFull is the sizes: the defaults, with 100,000 sleepers.
	ScaleFull = "full"
)

// Presets are the sizes of each Scale; a field a preset leaves zero takes the default.
var Presets = map[string]Options{
	ScaleSmall: {Duration: time.Second, InstrN: 200, InstrWarmup: 20, AsyncN: 2000, ColdStartN: 50, Workflow10N: 200, Workflow10Serial: 20,
		DAGRuns: 20, SleepersN: 500, SleepersSleep: 3 * time.Second, Cron10kN: 200, Cron10kExpr: "*/2 * * * * *", Cron10kFires: 2,
		EventsN: 1000, ScaleN: 20_000, ScaleCalls: 20},
	ScaleFull: {SleepersN: 100_000},
}

// DefaultSleepersLagSample is how many sleepers' timelines the lag is read from by default.
const DefaultSleepersLagSample = 10_000

// DefaultSleepersSleep is the sleepers' sleep up to 10,000 of them; each one above adds
// sleepPerSleeper, so that every workflow is parked before the first is due (on a 2-core machine
// 100,000 took about 100 s to submit and more to park, with other work on the machine: 290 s).
const (
	DefaultSleepersSleep = 20 * time.Second
	sleepPerSleeper      = 3 * time.Millisecond
)

// BurnDownFactor is how many times the time its submission took a burn-down may take, at least.
const BurnDownFactor = 4

// BurnDownLimit is how long a burn-down of n invocations submitted at submitRate per second may
// take from the first submission: floor (--burn-down-max), or BurnDownFactor times the time the
// submissions take at that rate when that is longer. A machine slow to accept them is slow to
// run them too: 100,000 submissions at 456/s take 219 s, so their burn-down gets 877 s.
func BurnDownLimit(n int, submitRate float64, floor time.Duration) time.Duration {
	if n <= 0 || submitRate <= 0 {
		return floor
	}
	scaled := time.Duration(BurnDownFactor * float64(n) / submitRate * float64(time.Second))
	return max(floor, scaled)
}

// preset fills the zero sizes of o from its Scale's preset.
func (o *Options) preset() {
	p, ok := Presets[o.Scale]
	if !ok {
		return
	}
	setInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setDur := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	setDur(&o.Duration, p.Duration)
	setInt(&o.InstrN, p.InstrN)
	setInt(&o.InstrWarmup, p.InstrWarmup)
	setInt(&o.AsyncN, p.AsyncN)
	setInt(&o.ColdStartN, p.ColdStartN)
	setInt(&o.Workflow10N, p.Workflow10N)
	setInt(&o.Workflow10Clients, p.Workflow10Clients)
	setInt(&o.Workflow10Serial, p.Workflow10Serial)
	setInt(&o.DAGWidth, p.DAGWidth)
	setInt(&o.DAGDepth, p.DAGDepth)
	setInt(&o.DAGRuns, p.DAGRuns)
	setInt(&o.SleepersN, p.SleepersN)
	setDur(&o.SleepersSleep, p.SleepersSleep)
	setInt(&o.Cron10kN, p.Cron10kN)
	setInt(&o.Cron10kFires, p.Cron10kFires)
	setInt(&o.EventsN, p.EventsN)
	setInt(&o.EventsTriggers, p.EventsTriggers)
	setInt(&o.ScaleN, p.ScaleN)
	setInt(&o.ScaleCalls, p.ScaleCalls)
	if o.Cron10kExpr == "" {
		o.Cron10kExpr = p.Cron10kExpr
	}
}

// Defaults fills unset options: from the Scale preset, then from the defaults.
func (o *Options) Defaults() {
	o.preset()
	if len(o.Scenarios) == 0 {
		o.Scenarios = slices.Clone(All)
	}
	if o.Store == "" {
		o.Store = "sqlite"
	}
	o.SQLiteSynchronous = strings.ToUpper(o.SQLiteSynchronous)
	if o.SQLiteSynchronous == "" {
		o.SQLiteSynchronous = "FULL"
	}
	o.syncDefaults()
	if o.AsyncN <= 0 {
		o.AsyncN = 100_000
	}
	if o.AsyncClients <= 0 {
		o.AsyncClients = 32
	}
	if o.ColdStartN <= 0 {
		o.ColdStartN = 200
	}
	if o.ColdStartMax <= 0 {
		o.ColdStartMax = 60 * time.Second
	}
	if o.BurnDownMax <= 0 {
		o.BurnDownMax = 4 * time.Minute
	}
	if o.Workflow10N <= 0 {
		o.Workflow10N = 5000
	}
	if o.Workflow10Clients <= 0 {
		o.Workflow10Clients = 50
	}
	if o.Workflow10Serial <= 0 {
		o.Workflow10Serial = 200
	}
	o.dagDefaults()
	if o.SleepersN <= 0 {
		o.SleepersN = 10_000
	}
	if o.SleepersSleep <= 0 {
		o.SleepersSleep = DefaultSleepersSleep + time.Duration(max(o.SleepersN-10_000, 0))*sleepPerSleeper
	}
	if o.SleepersLagSample <= 0 {
		o.SleepersLagSample = DefaultSleepersLagSample
	}
	if o.Cron10kN <= 0 {
		o.Cron10kN = 10_000
	}
	if o.Cron10kExpr == "" {
		o.Cron10kExpr = "* * * * *"
	}
	if o.Cron10kFires <= 0 {
		o.Cron10kFires = 2
	}
	if o.EventsN <= 0 {
		o.EventsN = 20_000
	}
	if o.EventsTriggers <= 0 {
		o.EventsTriggers = 100
	}
	if o.ScaleN <= 0 {
		o.ScaleN = 1_000_000
	}
	if o.ScaleCalls <= 0 {
		o.ScaleCalls = 100
	}
	o.SleepersSleepS = o.SleepersSleep.Seconds()
	o.DurationS, o.WarmupS = o.Duration.Seconds(), o.Warmup.Seconds()
	o.ColdStartMaxS, o.BurnDownMaxS = o.ColdStartMax.Seconds(), o.BurnDownMax.Seconds()
}

// syncDefaults fills the closed loops' sizes (sync, sync-oidc) and sync-instr's.
func (o *Options) syncDefaults() {
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Warmup <= 0 {
		o.Warmup = min(2*time.Second, o.Duration/5)
	}
	if o.Clients <= 0 {
		o.Clients = 64
	}
	if o.InstrN <= 0 {
		o.InstrN = DefaultInstrN
	}
	if o.InstrWarmup <= 0 {
		o.InstrWarmup = DefaultInstrWarmup
	}
}

// Validate checks scenario names, the scale, the store and its settings.
func (o *Options) Validate() error {
	if _, ok := Presets[o.Scale]; !ok && o.Scale != "" {
		return fmt.Errorf("--scale: want %s or %s, got %q", ScaleSmall, ScaleFull, o.Scale)
	}
	if o.SQLiteSynchronous != "FULL" && o.SQLiteSynchronous != "NORMAL" {
		return fmt.Errorf("--sqlite-synchronous: want full or normal, got %q", o.SQLiteSynchronous)
	}
	for _, a := range o.ServerArgs {
		if strings.HasPrefix(a, "--sqlite-synchronous") {
			return errors.New("--server-arg: use lark bench's own --sqlite-synchronous, which also sets the raw-SQLite baseline of async")
		}
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(All, s) {
			return fmt.Errorf("--scenarios: unknown scenario %q (known: %s)", s, strings.Join(All, ", "))
		}
	}
	if o.DAGWidth > DAGMaxWidth {
		return fmt.Errorf("--dag-width: at most %d (the join depends on every middle task; docs/dag.md), got %d", DAGMaxWidth, o.DAGWidth)
	}
	if o.DAGDepth > DAGMaxTasks {
		return fmt.Errorf("--dag-depth: at most %d (a DAG's tasks; docs/dag.md), got %d", DAGMaxTasks, o.DAGDepth)
	}
	if o.Store != "sqlite" && !isPostgres(o.Store) {
		return fmt.Errorf("--store: want sqlite or a postgres:// URL, got %q", o.Store)
	}
	return nil
}

// Runner runs scenarios against children of one lark binary.
type Runner struct {
	Bin  string    // the lark binary (os.Executable() for `lark bench`)
	Opts Options   // with defaults applied
	Log  io.Writer // progress lines
}

const (
	startTimeout = 30 * time.Second // until a child announces its address
	stopTimeout  = 60 * time.Second // SIGTERM until exit
	// wrappedStartTimeout is startTimeout for a child under valgrind, tens of times slower.
	wrappedStartTimeout = 5 * time.Minute
)

// Run runs the selected scenarios in table order and returns the report; a scenario's failure is
// recorded in its row, not returned (only a context cancellation stops the run early).
func Run(ctx context.Context, bin string, o Options, log io.Writer) (*Report, error) {
	o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = io.Discard
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("--profile-dir: %w", err)
		}
	}
	r := &Runner{Bin: bin, Opts: o, Log: log}
	rep := &Report{Timestamp: time.Now().UTC(), Machine: DescribeMachine(), Options: o}
	rep.Options.Store = redactStore(o.Store)
	start := time.Now()
	for _, name := range All {
		if !slices.Contains(o.Scenarios, name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		var s Scenario
		switch name {
		case "sync":
			s = r.Sync(ctx)
		case "sync-instr":
			s = r.SyncInstr(ctx)
		case "sync-oidc":
			s = r.SyncOIDC(ctx)
		case "async":
			s = r.Async(ctx)
		case "coldstart":
			s = r.ColdStart(ctx)
		case "workflow10":
			s = r.Workflow10(ctx)
		case "dag":
			s = r.DAG(ctx)
		case "sleepers":
			s = r.Sleepers(ctx)
		case "cron10k":
			s = r.Cron10k(ctx)
		case "events":
			s = r.Events(ctx)
		case "heartbeat":
			s = r.Heartbeats(ctx)
		case "scale":
			s = r.Scale(ctx)
		default:
			s = Scenario{Name: name, Status: StatusNotAvailable, Note: Pending[name], Result: ResultNA}
		}
		if ctx.Err() != nil && s.Status != StatusNotAvailable {
			s = failed(s, errors.New("interrupted"))
		}
		if s.Status == StatusFailed {
			s.Result = ResultFail
			r.logf("%s FAILED: %s", name, oneLine(s.Error))
		}
		rep.Scenarios = append(rep.Scenarios, s)
	}
	rep.TotalS = time.Since(start).Seconds()
	return rep, ctx.Err()
}

// redactStore hides a password in a store URL (the report is meant to be shared).
func redactStore(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

func (r *Runner) logf(format string, args ...any) {
	fmt.Fprintf(r.Log, "bench: "+format+"\n", args...)
}

func (r *Runner) profilePath(name string) string {
	if r.Opts.ProfileDir == "" {
		return ""
	}
	return filepath.Join(r.Opts.ProfileDir, name+".pprof")
}

// lark is one `lark serve` child with the bench tenant provisioned.
type lark struct {
	*Child
	api      *API
	token    string // admin of BenchTenant
	operator string // the platform operator's token
	dataDir  string
	profile  string
	// pg is the scenario's own database or schema when the store is PostgreSQL (nil on SQLite); pg0 are
	// PostgreSQL's counters before the server started.
	pg  *pgSchema
	pg0 pgCounters
	// args and env are the child's, for restart; wrap runs it under another program.
	args, env, wrap []string
	conns           int
}

// startLark starts `lark serve` on a fresh data directory with a random operator token,
// provisions the bench tenant and returns it with a keep-alive client for conns callers.
func (r *Runner) startLark(ctx context.Context, scenario string, conns int, extra ...string) (*lark, error) {
	return r.startLarkEnv(ctx, scenario, conns, nil, extra...)
}

// startLarkEnv is startLark with env added to the child's environment.
func (r *Runner) startLarkEnv(ctx context.Context, scenario string, conns int, env []string, extra ...string) (*lark, error) {
	return r.startLarkWith(ctx, scenario, conns, env, nil, extra...)
}

// startLarkWith is startLarkEnv with the child run under wrap (a command and its arguments, e.g.
// valgrind's), when not empty.
func (r *Runner) startLarkWith(ctx context.Context, scenario string, conns int, env, wrap []string, extra ...string) (*lark, error) {
	dir, err := os.MkdirTemp("", "lark-bench-"+scenario+"-")
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	operator := "bench-operator-" + hex.EncodeToString(secret)
	l := &lark{dataDir: dir, operator: operator, wrap: wrap}
	if wrap == nil {
		l.profile = r.profilePath(scenario) // a CPU profile's SIGPROF stops a server under callgrind
	}
	storeArg := r.Opts.Store
	if isPostgres(storeArg) {
		if l.pg, err = newPGSchema(ctx, storeArg, scenario); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		storeArg = l.pg.url
		if l.pg0, err = l.pg.read(ctx); err != nil {
			l.dropSchema()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("read pg_stat counters: %w", err)
		}
	}
	// The scenarios drive the server at saturation on purpose; the API's write budget would turn
	// the queue that builds up into 503s (docs/deployment.md), so it is lifted to a minute here (a
	// --server-arg=--store-write-wait=… given by the caller comes later and wins).
	args := []string{"serve", "--addr", "127.0.0.1:0", "--data", dir, "--store", storeArg,
		"--sqlite-synchronous", r.Opts.SQLiteSynchronous, "--store-write-wait", BenchStoreWriteWait}
	if l.profile != "" {
		args = append(args, "--cpuprofile", l.profile, "--memprofile", strings.TrimSuffix(l.profile, ".pprof")+".allocs.pprof")
	}
	args = append(append(args, extra...), r.Opts.ServerArgs...)
	l.args, l.env, l.conns = args, childEnv(append([]string{"LARK_ADMIN_TOKEN=" + operator}, env...)...), conns
	if err := r.serve(l, scenario); err != nil {
		l.dropSchema()
		os.RemoveAll(dir)
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if l.token, err = l.api.Provision(pctx, operator); err != nil {
		l.discard()
		return nil, err
	}
	return l, nil
}

// serve starts l's child (again, after stop: on the same data directory and store).
func (r *Runner) serve(l *lark, scenario string) error {
	bin, args, timeout := r.Bin, l.args, startTimeout
	if len(l.wrap) > 0 {
		bin, args, timeout = l.wrap[0], append(append(slices.Clone(l.wrap[1:]), r.Bin), l.args...), wrappedStartTimeout
	}
	child, err := StartChild("lark serve ("+scenario+")", bin, args, l.env, timeout)
	if err != nil {
		return err
	}
	l.Child = child
	l.api = &API{URL: "http://" + child.Addr, Client: NewHTTPClient(l.conns)}
	return nil
}

// stop stops the child and returns its usage; the data directory stays until discard.
func (l *lark) stop() (Usage, error) {
	l.api.Client.CloseIdleConnections()
	return l.Stop(stopTimeout)
}

// discard kills the child if it still runs and removes its data directory and its PostgreSQL
// schema.
func (l *lark) discard() {
	l.api.Client.CloseIdleConnections()
	l.Kill()
	os.RemoveAll(l.dataDir)
	l.dropSchema()
}

// dropSchema drops the scenario's PostgreSQL database or schema, if it has one.
func (l *lark) dropSchema() {
	if l.pg == nil {
		return
	}
	if err := l.pg.drop(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: drop schema %s: %v\n", l.pg.name, err)
	}
	l.pg = nil
}

// storeWrites reads what PostgreSQL counted since the server started (call it after the server
// stopped: its backends flush their statistics when they exit); nil on SQLite.
func (l *lark) storeWrites(ctx context.Context, per string, units int) (*StoreWrites, error) {
	if l.pg == nil {
		return nil, nil
	}
	if err := l.pg.settle(ctx); err != nil {
		return nil, err
	}
	c, err := l.pg.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat counters: %w", err)
	}
	return storeWrites(l.pg0, c, per, units, l.pg.db), nil
}

package invoke_test

// Benchmarks of invocation execution, in process, each on a real SQLite store in a temporary
// directory with the default synchronous=FULL (every accepted invocation and every outcome is
// fsynced before it is acknowledged):
//
//   - BenchmarkSyncCalculateTaxHTTP: sync calculate_tax invocations through the whole HTTP stack
//     (server.New behind httptest, keep-alive client, 64 concurrent callers), compared with a bare
//     JSON echo handler behind the same setup measured in the same function.
//   - BenchmarkColdStart: register + activate a new entrypoint and run its first sync invocation.
//   - BenchmarkAsyncBurnDown: enqueue N async invocations, then time a real dispatcher running them
//     all to a terminal status. With -benchtime 1x, N is burnDownFixedN (100k).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/bench"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/dispatch"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/registry"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/tenancy"
	"github.com/larkrun/lark/internal/tokens"
)

const (
	benchClients     = 64     // concurrent HTTP callers
	echoRequests     = 2000   // requests per round of the in-benchmark echo baseline
	echoRounds       = 3      // rounds of the echo baseline; the median is reported
	burnDownFixedN   = 100000 // invocations of BenchmarkAsyncBurnDown under -benchtime 1x
	burnDownEnqueuer = 64     // goroutines calling Start while enqueuing
	burnDownSlots    = 64     // dispatcher slots (the server's default --workers)
	benchAPI         = "/api/serverless-runtime/v1"
)

// taxBody is the README's calculate_tax registration without its rate limit (shared with the bench
// harness).
var taxBody = string(bench.UnlimitedTaxDefinition(bench.TaxID))

// --- HTTP ---

// latencies records one duration per request, by request index, from many goroutines.
type latencies []time.Duration

// p99 is the 99th percentile (nearest rank).
func (l latencies) p99() time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[int(math.Ceil(0.99*float64(len(s))))-1]
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// keepAliveClient keeps one idle connection per concurrent caller.
func keepAliveClient(ts *httptest.Server) *http.Client {
	tr := ts.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = 2*benchClients, 2*benchClients, 0
	tr.DisableKeepAlives = false
	return &http.Client{Transport: tr}
}

// benchPost sends one POST and reads the whole answer (so that the connection is reused); check
// inspects a 200 answer's body.
func benchPost(c *http.Client, url, token string, body []byte, check func([]byte) error) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: HTTP %d: %s", url, res.StatusCode, b)
	}
	if check != nil {
		return check(b)
	}
	return nil
}

// hammer sends n requests from benchClients goroutines sharing one counter and returns the
// wall-clock time and each request's latency. The first error stops it.
func hammer(n int, send func() error) (time.Duration, latencies, error) {
	lat := make(latencies, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	start := time.Now()
	for w := 0; w < benchClients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first.Load() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				t0 := time.Now()
				if err := send(); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if p := first.Load(); p != nil {
		return elapsed, lat, *p
	}
	return elapsed, lat, nil
}

// echoBaseline measures a bare JSON echo handler (it reads the request body and writes it back as
// application/json) behind the same httptest + client setup, at the same concurrency: echoRounds
// rounds of echoRequests requests after warming every connection; the round with the median
// throughput is the baseline (one round of 2000 requests on a small machine is noisy).
func echoBaseline(b *testing.B, body []byte) (float64, time.Duration) {
	b.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(in)
	}))
	defer ts.Close()
	c := keepAliveClient(ts)
	defer c.CloseIdleConnections()
	send := func() error { return benchPost(c, ts.URL, "", body, nil) }
	_, _, err := hammer(benchClients, send)
	require.NoError(b, err)
	type round struct {
		rps float64
		p99 time.Duration
	}
	rounds := make([]round, echoRounds)
	for i := range rounds {
		elapsed, lat, err := hammer(echoRequests, send)
		require.NoError(b, err)
		rounds[i] = round{float64(echoRequests) / elapsed.Seconds(), lat.p99()}
	}
	slices.SortFunc(rounds, func(x, y round) int { return cmp.Compare(x.rps, y.rps) })
	m := rounds[len(rounds)/2]
	return m.rps, m.p99
}

// BenchmarkSyncCalculateTaxHTTP: POST /invocations of the README's calculate_tax in sync mode
// through server.New's handler (authentication, resolution, params validation, durable created +
// started record, sandbox run, durable outcome), 64 callers over keep-alive connections.
func BenchmarkSyncCalculateTaxHTTP(b *testing.B) {
	ctx := context.Background()
	srv, err := server.New(ctx, server.Config{DataDir: b.TempDir(), AdminToken: "bench-operator",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(b, err)
	ts := httptest.NewServer(srv.Handler())
	defer func() {
		ts.Close()
		require.NoError(b, srv.Close())
	}()
	op := auth.SecurityContext{SubjectID: tokens.OperatorSubject, Operator: true}
	_, err = srv.Tenants.Enable(ctx, op, "bench", []byte(`{}`))
	require.NoError(b, err)
	tk, err := srv.Tokens.CreateToken(ctx, op, tokens.CreateTokenRequest{TenantID: "bench", SubjectID: "bench",
		Roles: []auth.Role{auth.RoleAdmin}})
	require.NoError(b, err)
	tok := tk.Secret

	c := keepAliveClient(ts)
	defer c.CloseIdleConnections()
	setup := func(method, path string, body []byte, want int) {
		req, err := http.NewRequest(method, ts.URL+benchAPI+path, bytes.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := c.Do(req)
		require.NoError(b, err)
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(b, want, res.StatusCode, "%s %s: %s", method, path, out)
	}
	taxID := fnPrefix + "calculate_tax.v1~"
	setup(http.MethodPost, "/entrypoints", []byte(taxBody), http.StatusCreated)
	setup(http.MethodPost, "/entrypoints/"+taxID+":status", []byte(`{"action":"activate","release_notes":"bench"}`), http.StatusOK)

	body := fmt.Appendf(nil, `{"entrypoint_id":%q,"mode":"sync","params":{"invoice_id":"INV-1001","amount":100}}`, taxID)
	url := ts.URL + benchAPI + "/invocations"
	succeeded := []byte(`"status":"succeeded"`)
	send := func() error {
		return benchPost(c, url, tok, body, func(b []byte) error {
			if !bytes.Contains(b, succeeded) {
				return fmt.Errorf("not succeeded: %s", b)
			}
			return nil
		})
	}

	echoRPS, echoP99 := echoBaseline(b, body)
	_, _, err = hammer(benchClients, send) // open every connection, compile the program
	require.NoError(b, err)

	b.ReportAllocs()
	b.ResetTimer()
	elapsed, lat, err := hammer(b.N, send)
	b.StopTimer()
	require.NoError(b, err)
	rps, p99 := float64(b.N)/elapsed.Seconds(), lat.p99()
	b.ReportMetric(rps, "req/s")
	b.ReportMetric(millis(p99), "p99_ms")
	b.ReportMetric(echoRPS, "echo_req/s")
	b.ReportMetric(millis(echoP99), "echo_p99_ms")
	b.ReportMetric(rps/echoRPS, "x_vs_echo")
	b.ReportMetric(float64(p99)/float64(echoP99), "p99_vs_echo")
	if st, ok := srv.Store.(interface{ CommitStats() (uint64, uint64) }); ok {
		batches, writes := st.CommitStats()
		if batches > 0 {
			b.ReportMetric(float64(writes)/float64(batches), "writes/commit")
		}
	}
}

// --- services ---

// benchRig is the invocation services on a real SQLite store with a real clock (the dispatcher sleeps
// on it), tenant "acme" enabled to call any host.
type benchRig struct {
	store *sqlstore.Store
	reg   *registry.Service
	svc   *invoke.Service
	// wake is the dispatcher's wake-up, once a benchmark builds one (the service's Config.Wake).
	wake atomic.Pointer[func()]
}

func newBenchRig(b *testing.B) *benchRig {
	b.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlstore.Options{}) // synchronous=FULL
	require.NoError(b, err)
	b.Cleanup(func() { st.Close() })
	schemas, err := schema.New()
	require.NoError(b, err)
	c, ids := clock.Real{}, idgen.UUIDv7{}
	_, err = tenancy.NewService(st, c, ids).Enable(context.Background(), operatorSC, "acme",
		[]byte(`{"governance":{"allowed_outbound_domains":["*"]}}`))
	require.NoError(b, err)
	r := &benchRig{store: st, reg: registry.NewService(st, schemas, c, ids, nil)}
	r.svc = invoke.NewService(invoke.Config{Store: st, Schemas: schemas, Programs: sandbox.NewCache(1024),
		Egress: egress.New(egress.Options{}), Clock: c, IDs: ids, Wake: func() {
			if w := r.wake.Load(); w != nil {
				(*w)()
			}
		}})
	return r
}

// benchFunction is a registration body like invoke_test's e.fn: a tenant-owned function, sync and async,
// no retries, 5 s timeout.
func benchFunction(name, source, defaultMode string) map[string]any {
	body := map[string]any{
		"entrypoint_id": fnPrefix + name + ".v1~", "title": name, "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{"invocation": map[string]any{"supported": []any{"sync", "async"}, "default": defaultMode},
			"retry":  map[string]any{"max_attempts": 1},
			"limits": map[string]any{"timeout_seconds": 5}},
		"implementation": map[string]any{"adapter": schema.StarlarkAdapter, "kind": "code",
			"code": map[string]any{"language": "starlark", "source": source}},
	}
	// The registry sees what the API's decoder produces: numbers as json.Number.
	raw, err := json.Marshal(body)
	if err != nil {
		panic(err) // maps of strings and numbers: cannot happen
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		panic(err)
	}
	return m
}

// registerActive registers and activates body as dev (developer of acme).
func (r *benchRig) registerActive(body map[string]any) (entrypoint.Entrypoint, error) {
	ep, _, err := r.reg.Register(context.Background(), dev, body)
	if err != nil {
		return ep, err
	}
	return r.reg.ChangeStatus(context.Background(), dev, ep.ID, registry.StatusRequest{Action: entrypoint.ActionActivate})
}

// BenchmarkColdStart: per op, register and activate a new function (a unique GTS id, so nothing
// is cached: definition, schema, compiled program) and run its first sync invocation through the
// services. ms_to_first_result is the mean of the whole sequence.
func BenchmarkColdStart(b *testing.B) {
	r := newBenchRig(b)
	const src = "def main(ctx, input):\n  return {\"tax\": input.amount * 0.1, \"total\": input.amount * 1.1}\n"
	bodies := make([]map[string]any, b.N)
	for i := range bodies {
		bodies[i] = benchFunction(fmt.Sprintf("cold_%07d", i), src, "sync")
	}
	params := json.RawMessage(`{"amount": 100}`)
	var register, activate, first time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		ep, _, err := r.reg.Register(context.Background(), dev, bodies[i])
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := r.reg.ChangeStatus(context.Background(), dev, ep.ID, registry.StatusRequest{Action: entrypoint.ActionActivate}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		st, err := r.svc.Start(context.Background(), bob, invoke.StartRequest{EntrypointID: ep.GTSID, Params: params}, invoke.StartOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if st.Record.Status != invocation.StatusSucceeded {
			b.Fatalf("first invocation of %s: %s %+v", ep.GTSID, st.Record.Status, st.Record.Error)
		}
		t3 := time.Now()
		register, activate, first = register+t1.Sub(t0), activate+t2.Sub(t1), first+t3.Sub(t2)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(millis(b.Elapsed())/n, "ms_to_first_result")
	b.ReportMetric(millis(register)/n, "register_ms")
	b.ReportMetric(millis(activate)/n, "activate_ms")
	b.ReportMetric(millis(first)/n, "first_invoke_ms")
}

// burnDownN is b.N, or burnDownFixedN when the benchmarks run with -benchtime 1x (b.N is 1 then;
// it is also 1 in the probe run before any fixed -benchtime Nx, which stays 1).
func burnDownN(b *testing.B) int {
	if f := flag.Lookup("test.benchtime"); f != nil && f.Value.String() == "1x" {
		return burnDownFixedN
	}
	return b.N
}

// BenchmarkAsyncBurnDown: enqueue N trivial async invocations with Start (64 concurrent callers,
// untimed: reported as enqueue/s), then run a real dispatcher (64 slots) until every one is
// terminal (timed: invocations/s). Each run claims (started, lease) and completes (succeeded) every
// invocation in its own group-committed transactions.
func BenchmarkAsyncBurnDown(b *testing.B) {
	r := newBenchRig(b)
	n := burnDownN(b)
	ep, err := r.registerActive(benchFunction("burn_down", "def main(ctx, input):\n  return {\"ok\": True}\n", "async"))
	require.NoError(b, err)
	ctx := context.Background()

	b.StopTimer()
	enqStart := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var enqErr atomic.Pointer[error]
	for w := 0; w < burnDownEnqueuer; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for enqErr.Load() == nil && next.Add(1) <= int64(n) {
				st, err := r.svc.Start(ctx, bob, invoke.StartRequest{EntrypointID: ep.GTSID, Mode: "async"}, invoke.StartOptions{})
				if err == nil && !st.Queued {
					err = fmt.Errorf("not queued: %+v", st)
				}
				if err != nil {
					enqErr.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if p := enqErr.Load(); p != nil {
		b.Fatal(*p)
	}
	enqueue := time.Since(enqStart)
	inFlight, err := r.store.CountTenantInFlight(ctx, "acme")
	require.NoError(b, err)
	require.Equal(b, int64(n), inFlight, "all queued")

	d := dispatch.New(dispatch.NewStoreClaimer(r.svc.ClaimConfig()), r.svc.Runner(), dispatch.Options{Slots: burnDownSlots})
	wake := d.Wake
	r.wake.Store(&wake)
	dctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	b.ResetTimer()
	b.StartTimer()
	start := time.Now()
	go func() { d.Run(dctx); close(done) }()
	// Done when nothing is queued or leased any more: NextDue is two indexed min() lookups, cheap
	// enough to poll (a count over the in-flight index would compete for the CPUs).
	for {
		due, err := r.store.NextDue(ctx, time.Time{})
		require.NoError(b, err)
		if due == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	stop()
	<-done
	left, err := r.store.CountTenantInFlight(ctx, "acme")
	require.NoError(b, err)
	require.Zero(b, left, "nothing queued or leased, yet invocations are in flight")

	// Every invocation must have succeeded, or the rate would not mean what it says.
	filter, err := odata.ParseFilter("status ne 'succeeded'")
	require.NoError(b, err)
	page, err := r.svc.List(ctx, bob, store.ListQuery{Filter: filter, Limit: 5})
	require.NoError(b, err)
	if len(page.Items) > 0 {
		var bad []string
		for _, it := range page.Items {
			bad = append(bad, fmt.Sprintf("%s %s %+v", it.ID, it.Status, it.Error))
		}
		b.Fatalf("invocations that did not succeed, e.g.:\n%s", strings.Join(bad, "\n"))
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "invocations/s")
	b.ReportMetric(float64(n)/enqueue.Seconds(), "enqueue/s")
	b.ReportMetric(float64(n), "invocations")
}

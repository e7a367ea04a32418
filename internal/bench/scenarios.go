package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// failed marks s failed with err (joined to any earlier error) and returns it.
func failed(s Scenario, err error) Scenario {
	s.Status = StatusFailed
	if s.Error != "" {
		s.Error += "; "
	}
	s.Error += err.Error()
	return s
}

// Sync: the README's calculate_tax invoked in sync mode over HTTP by Clients concurrent callers for
// Duration (after Warmup), against EchoHandler in its own process, driven the same way.
func (r *Runner) Sync(ctx context.Context) Scenario {
	s := Scenario{Name: "sync", Status: StatusOK, Unit: "req/s"}
	o := r.Opts

	// The baseline first: `lark bench-echo`, same client, same requests (headers and body).
	r.logf("sync: echo baseline, %d clients, %v warm-up + %v", o.Clients, o.Warmup, o.Duration)
	echo, err := r.runEcho(ctx)
	s.Baseline = echo
	if err != nil {
		return failed(s, fmt.Errorf("echo baseline: %w", err))
	}

	r.logf("sync: lark, %d clients, %v warm-up + %v", o.Clients, o.Warmup, o.Duration)
	l, err := r.startLark(ctx, "sync", o.Clients)
	if err != nil {
		return failed(s, err)
	}
	defer l.discard()
	s.Profile = l.profile
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = l.api.Register(sctx, l.token, UnlimitedTaxDefinition(TaxID))
	if err == nil {
		err = l.api.Activate(sctx, l.token, TaxID)
	}
	cancel()
	if err != nil {
		return failed(s, fmt.Errorf("register calculate_tax: %w", err))
	}
	win := newWindow(l.Pid(), l.pg)
	writes := &commitWrites{l: l}
	res := Load{Workers: o.Clients, Warmup: o.Warmup, Duration: o.Duration,
		Mark: func(phase string) { win.mark(phase); writes.mark(ctx, phase) },
		Do:   func(ctx context.Context) error { return l.api.InvokeSync(ctx, l.token, TaxSyncRequest) }}.Run(ctx)
	s.Sync = writes.perCall(res.Requests)
	usage, stopErr := l.stop()
	usage.CPUWindowS, _ = win.serverCPU()
	s.Process, s.ClientCPUS = &usage, win.clientCPU()
	s.Throughput, s.Latency = res.Throughput, &res.Latency
	s.Errors, s.ErrorSamples = res.Errors, res.ErrorSamples
	s.CPU, s.MachineLoad = win.perUnit("request", res.Requests), win.machineLoad()
	s.CPU.Compare(echo.CPUPerUnitMs, "")

	if echo.Throughput > 0 {
		s.Ratio = s.Throughput / echo.Throughput
	}
	if echo.Latency != nil && echo.Latency.P99Ms > 0 {
		s.P99Ratio = s.Latency.P99Ms / echo.Latency.P99Ms
	}
	s.Goals = []Goal{
		{Name: "ratio", Target: fmt.Sprintf("≥ %.2f", SyncRatioGoal), Value: s.Ratio, Met: s.Ratio >= SyncRatioGoal},
		{Name: "p99_ratio", Target: fmt.Sprintf("≤ %g×", SyncP99RatioGoal), Value: s.P99Ratio, Met: s.P99Ratio > 0 && s.P99Ratio <= SyncP99RatioGoal},
	}
	if s.Sync != nil {
		s.Goals = append(s.Goals, Goal{Name: "writes", Target: fmt.Sprintf("≤ %.2f per call", SyncWritesGoal),
			Value: s.Sync.DurableWritesPerCall, Met: s.Sync.DurableWritesPerCall <= SyncWritesGoal})
	}
	s.Result = goalsResult(s.Goals)
	if res.Errors > 0 {
		s = failed(s, fmt.Errorf("%d of %d sync invocations failed", res.Errors, res.Errors+res.Requests))
	}
	if stopErr != nil {
		s = failed(s, stopErr)
	}
	if res.Requests == 0 && s.Status == StatusOK {
		s = failed(s, errors.New("no request completed in the measured window"))
	}
	r.logf("sync: %s (echo %s), p99 %s (echo %s)", rate(s.Throughput, "req/s"), rate(echo.Throughput, "req/s"),
		msCell(s.Latency.P99Ms), msCell(echo.Latency.P99Ms))
	return s
}

// runEcho measures the echo baseline in a `lark bench-echo` child.
func (r *Runner) runEcho(ctx context.Context) (*Baseline, error) {
	o := r.Opts
	bl := &Baseline{Name: "echo", Unit: "req/s", Profile: r.profilePath("sync-echo")}
	args := []string{"bench-echo", "--addr", "127.0.0.1:0"}
	if bl.Profile != "" {
		args = append(args, "--cpuprofile", bl.Profile)
	}
	child, err := StartChild("lark bench-echo", r.Bin, args, childEnv(), startTimeout)
	if err != nil {
		return bl, err
	}
	defer child.Kill()
	api := &API{URL: "http://" + child.Addr, Client: NewHTTPClient(o.Clients)}
	// The same token shape as Lark's, so that both sides parse the same header bytes.
	token := "lark_" + strings.Repeat("x", 43)
	win := newWindow(child.Pid(), nil)
	res := Load{Workers: o.Clients, Warmup: o.Warmup, Duration: o.Duration, Mark: win.mark,
		Do: func(ctx context.Context) error {
			_, _, err := api.Call(ctx, http.MethodPost, "/invocations", token, TaxSyncRequest, http.StatusOK)
			return err
		}}.Run(ctx)
	api.Client.CloseIdleConnections()
	usage, stopErr := child.Stop(stopTimeout)
	usage.CPUWindowS, _ = win.serverCPU()
	bl.Process, bl.ClientCPUS = &usage, win.clientCPU()
	bl.Throughput, bl.Latency, bl.Errors = res.Throughput, &res.Latency, res.Errors
	if c := win.perUnit("request", res.Requests); c != nil {
		bl.CPUPerUnitMs = c.TotalMs
	}
	switch {
	case res.Errors > 0:
		return bl, fmt.Errorf("%d requests failed, e.g. %s", res.Errors, strings.Join(res.ErrorSamples, "; "))
	case stopErr != nil:
		return bl, stopErr
	case res.Requests == 0:
		return bl, errors.New("no request completed in the measured window")
	}
	return bl, nil
}

// goalsResult is PASS when every goal is met, else MISS.
func goalsResult(goals []Goal) string {
	if len(goals) == 0 {
		return ResultNA
	}
	for _, g := range goals {
		if !g.Met {
			return ResultMiss
		}
	}
	return ResultPass
}

// Async: AsyncN invocations of a trivial function submitted up front (AsyncClients at a time)
// while the server's dispatcher runs them; the throughput is AsyncN ÷ the time from the first
// submission until none is queued or running. The baseline writes the same number of
// invocation-shaped rows through the same lifecycle straight into the same SQLite file, after
// the server has stopped.
func (r *Runner) Async(ctx context.Context) Scenario {
	o := r.Opts
	s := Scenario{Name: "async", Status: StatusOK, Unit: "inv/s"}
	a := &AsyncDetail{N: o.AsyncN, SubmitClients: o.AsyncClients}
	s.Async = a
	r.logf("async: %d invocations, %d submitting clients", o.AsyncN, o.AsyncClients)
	l, err := r.startLark(ctx, "async", o.AsyncClients)
	if err != nil {
		return failed(s, err)
	}
	defer l.discard()
	s.Profile = l.profile
	if err := registerNoop(ctx, l); err != nil {
		return failed(s, err)
	}

	win := openWindow(l)
	first := time.Now()
	res, lastID := submitAsync(ctx, l, o.AsyncClients, o.AsyncN, noopAsyncRequest)
	submitted := time.Now()
	a.SubmitS, a.SubmitRate, a.Submit = res.WindowS, res.Throughput, res.Latency
	s.Latency = &a.Submit
	s.Errors, s.ErrorSamples = res.Errors, res.ErrorSamples
	limit := BurnDownLimit(o.AsyncN, a.SubmitRate, o.BurnDownMax)
	a.LimitS = limit.Seconds()
	r.logf("async: submitted in %.1f s (%s); waiting for the burn-down (at most %v after the first submission)",
		a.SubmitS, rate(a.SubmitRate, "req/s"), limit.Round(time.Second))

	// Done when nothing is queued or running. First wait for the last accepted invocation (a
	// point lookup: cheap), then list the unfinished ones until there are none (the list is
	// cheap once few remain).
	done, err := r.waitBurnDown(ctx, l, lastID, first.Add(limit))
	win.close()
	s.ClientCPUS = win.clientCPU()
	s.CPU, s.MachineLoad = win.perUnit("invocation", res.Requests), win.machineLoad()
	if err != nil {
		s = failed(s, fmt.Errorf("burn-down: %w", err))
	} else {
		a.BurnDownS, a.DrainS = done.Sub(first).Seconds(), max(done.Sub(submitted).Seconds(), 0)
		s.Throughput = float64(res.Requests) / a.BurnDownS
		if bad, err := r.notSucceeded(ctx, l); err != nil {
			s = failed(s, fmt.Errorf("check outcomes: %w", err))
		} else if len(bad) > 0 {
			a.NotSucceeded = len(bad)
			s = failed(s, fmt.Errorf("invocations that did not succeed, e.g. %s", strings.Join(bad, "; ")))
		}
	}
	if m, err := l.metrics(ctx, "lark_groupcommit_batch_size_count", "lark_groupcommit_batch_size_sum",
		"lark_groupcommit_batch_duration_seconds_sum", "lark_groupcommit_reruns_total"); err == nil {
		a.Commit = &CommitFigures{Batches: int64(m[0]), Writes: int64(m[1]), SecondsS: m[2], Reruns: int64(m[3])}
	} else {
		r.logf("async: no group-commit figures: %v", err)
	}
	usage, stopErr := l.stop()
	usage.CPUWindowS, _ = win.serverCPU()
	s.Process = &usage
	if res.Errors > 0 {
		s = failed(s, fmt.Errorf("%d of %d submissions failed", res.Errors, o.AsyncN))
	}
	if stopErr != nil {
		s = failed(s, stopErr)
	}
	if s.Status == StatusOK {
		r.logf("async: %s over %.1f s", rate(s.Throughput, "inv/s"), a.BurnDownS)
	}

	// The baseline, in the database the server has just closed.
	if l.pg != nil {
		return r.asyncPGBaseline(ctx, l, s, res.Requests, stopErr)
	}
	return r.asyncSQLiteBaseline(ctx, l, s, res.Requests, stopErr)
}

// asyncSQLiteBaseline completes the async row on SQLite: the raw lifecycles of as many rows in the
// SQLite file the server has just closed, and the goals.
func (r *Runner) asyncSQLiteBaseline(ctx context.Context, l *lark, s Scenario, accepted int64, stopErr error) Scenario {
	o := r.Opts
	bl := &Baseline{Name: "raw SQLite", Unit: "lifecycles/s"}
	if o.SQLiteSynchronous != "FULL" {
		bl.Name += " (synchronous=" + o.SQLiteSynchronous + ")"
	}
	s.Baseline = bl
	if stopErr != nil || s.Status == StatusFailed && accepted == 0 {
		s.Result = ResultNA
		return s
	}
	r.logf("async: raw SQLite baseline, %d rows", o.AsyncN)
	raw, err := RawLifecycles(ctx, filepath.Join(l.dataDir, "lark.db"), o.SQLiteSynchronous, o.AsyncN, 1000)
	if err != nil {
		s = failed(s, err)
	} else {
		bl.Raw, bl.Throughput = &raw, raw.LifecycleRate
		bl.Process = &Usage{CPUS: raw.CPUS, WallS: raw.TotalS} // this process's CPU while it wrote
		if raw.Rows > 0 {
			bl.CPUPerUnitMs = raw.CPUS * 1000 / float64(raw.Rows)
			s.CPU.Compare(bl.CPUPerUnitMs, "this process's CPU while it wrote the rows, SQLite running in it")
		}
		if raw.LifecycleRate > 0 {
			s.Ratio = s.Throughput / raw.LifecycleRate
		}
		r.logf("async: raw %s", rate(raw.LifecycleRate, "lifecycles/s"))
	}
	if s.Ratio > 0 {
		s.Goals = append([]Goal{{Name: "ratio", Target: fmt.Sprintf("≥ %.2f", AsyncRatioGoal), Value: s.Ratio, Met: s.Ratio >= AsyncRatioGoal}},
			cpuGoal(s.CPU, AsyncCPUGoalMs, "server")...)
		s.Result = goalsResult(s.Goals)
	} else {
		s.Result = ResultNA // no raw baseline: nothing to compare with
	}
	return s
}

// cpuGoal is the goal on a scenario's CPU per unit (c.TotalMs: the server's, plus PostgreSQL's
// backends' where they were read), none when it was not measured.
func cpuGoal(c *CPUPerUnit, maxMs float64, what string) []Goal {
	if c == nil || c.TotalMs <= 0 {
		return nil
	}
	return []Goal{{Name: "cpu_ms_per_" + c.Unit, Target: fmt.Sprintf("≤ %g ms %s CPU/%s", maxMs, what, c.Unit), Value: c.TotalMs, Met: c.TotalMs <= maxMs}}
}

// asyncPGBaseline completes the async row on PostgreSQL: the writes PostgreSQL counted per
// invocation, then the raw SKIP LOCKED claim-and-complete loop of the same number of rows in the
// scenario's schema, as many workers as the server's default dispatcher concurrency.
func (r *Runner) asyncPGBaseline(ctx context.Context, l *lark, s Scenario, accepted int64, stopErr error) Scenario {
	o := r.Opts
	w, err := l.storeWrites(ctx, "invocation", o.AsyncN)
	if err != nil {
		return failed(s, err)
	}
	s.StoreWrites = w
	bl := &Baseline{Name: "raw PostgreSQL SKIP LOCKED", Unit: "lifecycles/s"}
	s.Baseline = bl
	if stopErr != nil || s.Status == StatusFailed && accepted == 0 {
		s.Result = ResultNA
		return s
	}
	r.logf("async: raw PostgreSQL baseline, %d rows, %d workers claiming %d", o.AsyncN, PGRawWorkers, PGRawClaim)
	win := newWindow(os.Getpid(), l.pg)
	raw, err := RawPGLifecycles(ctx, l.pg.url, o.AsyncN, 1000, PGRawWorkers, PGRawClaim, win.mark)
	if err != nil {
		return failed(s, err)
	}
	bl.PGRaw, bl.Throughput = &raw, raw.LifecycleRate
	bl.Process = &Usage{CPUS: raw.CPUS, WallS: raw.TotalS}
	if c := win.perUnit("lifecycle", int64(raw.Rows)); c != nil {
		bl.CPUPerUnitMs = c.TotalMs
		note := "this process's CPU while it ran the loop, and its backends'"
		if c.BackendsS == nil {
			note = "this process's CPU while it ran the loop; backends " + c.BackendsNote
		}
		s.CPU.Compare(bl.CPUPerUnitMs, note)
	}
	r.logf("async: raw %s", rate(raw.LifecycleRate, "lifecycles/s"))
	if raw.LifecycleRate > 0 && s.Throughput > 0 {
		s.Ratio = s.Throughput / raw.LifecycleRate
		s.Goals = []Goal{{Name: "ratio", Target: fmt.Sprintf("≥ %.2f", AsyncPGRatioGoal), Value: s.Ratio, Met: s.Ratio >= AsyncPGRatioGoal}}
		if w != nil {
			s.Goals = append(s.Goals, Goal{Name: "rows_per_invocation", Target: fmt.Sprintf("≤ %g rows/inv", AsyncPGRowsGoal),
				Value: w.RowsPer, Met: w.RowsPer <= AsyncPGRowsGoal})
		}
		s.Goals = append(s.Goals, cpuGoal(s.CPU, AsyncPGCPUGoalMs, "server + PG")...)
		s.Result = goalsResult(s.Goals)
	} else {
		s.Result = ResultNA
	}
	return s
}

// submitAsync starts n async invocations with body from workers concurrent clients and returns
// the load result and the id of the last invocation accepted (what waitBurnDown looks up first).
func submitAsync(ctx context.Context, l *lark, workers, n int, body []byte) (LoadResult, string) {
	res, ids := submitIDs(ctx, l, workers, n, body)
	if len(ids) == 0 {
		return res, ""
	}
	return res, ids[len(ids)-1]
}

// submitIDs starts n async invocations with body from workers concurrent clients and returns the
// load result and the ids accepted, in the order their answers came.
func submitIDs(ctx context.Context, l *lark, workers, n int, body []byte) (LoadResult, []string) {
	var mu sync.Mutex
	ids := make([]string, 0, n)
	res := Load{Workers: workers, Count: int64(n), Do: func(ctx context.Context) error {
		_, b, err := l.api.Call(ctx, http.MethodPost, "/invocations", l.token, body, http.StatusAccepted)
		if err != nil {
			return err
		}
		id, err := invocationID(b)
		if err != nil {
			return err
		}
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
		return nil
	}}.Run(ctx)
	return res, ids
}

// commitWrites reads the group committer's writes (lark_groupcommit_batch_size_sum) when a
// window opens and closes.
type commitWrites struct {
	l          *lark
	start, end float64
}

func (c *commitWrites) mark(ctx context.Context, phase string) {
	m, err := c.l.metrics(ctx, "lark_groupcommit_batch_size_sum")
	switch {
	case err != nil:
	case phase == "end":
		c.end = m[0]
	default:
		c.start = m[0]
	}
}

// perCall is the window's writes ÷ calls (nil when either is missing).
func (c *commitWrites) perCall(calls int64) *SyncDetail {
	if calls <= 0 || c.end <= c.start {
		return nil
	}
	return &SyncDetail{DurableWritesPerCall: (c.end - c.start) / float64(calls)}
}

// waitBurnDown polls until no invocation of the bench tenant is queued or running and returns when
// it saw that.
func (r *Runner) waitBurnDown(ctx context.Context, l *lark, lastID string, deadline time.Time) (time.Time, error) {
	const every = 20 * time.Millisecond
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	wait := func() error {
		select {
		case <-ctx.Done():
			return fmt.Errorf("still unfinished invocations at the time limit (%s)", deadline.Format(time.TimeOnly))
		case <-tick.C:
			return nil
		}
	}
	if lastID != "" {
		for {
			_, b, err := l.api.Call(ctx, http.MethodGet, "/invocations/"+lastID, l.token, nil, http.StatusOK)
			if err != nil {
				if ctx.Err() != nil {
					return time.Time{}, wait()
				}
				return time.Time{}, err
			}
			st, err := statusOf(b)
			if err != nil {
				return time.Time{}, err
			}
			if st != "queued" && st != "running" {
				break
			}
			if err := wait(); err != nil {
				return time.Time{}, err
			}
		}
	}
	for {
		left, err := l.api.listInvocations(ctx, l.token, "status in ('queued','running')", 1)
		if err != nil {
			if ctx.Err() != nil {
				return time.Time{}, wait()
			}
			return time.Time{}, err
		}
		if len(left) == 0 {
			return time.Now(), nil
		}
		if err := wait(); err != nil {
			return time.Time{}, err
		}
	}
}

// ColdStart: ColdStartN times (or until ColdStartMax), sequentially, register calculate_tax under
// a new GTS id, activate it and run its first sync invocation; the figure is the total per
// iteration.
func (r *Runner) ColdStart(ctx context.Context) Scenario {
	o := r.Opts
	s := Scenario{Name: "coldstart", Status: StatusOK, Unit: "/s"}
	r.logf("coldstart: %d iterations (at most %v)", o.ColdStartN, o.ColdStartMax)
	l, err := r.startLark(ctx, "coldstart", 1)
	if err != nil {
		return failed(s, err)
	}
	defer l.discard()
	s.Profile = l.profile
	total, reg, act, call := NewRecorder(0), NewRecorder(0), NewRecorder(0), NewRecorder(0)
	var errs errorLog
	win := openWindow(l)
	start := time.Now()
	iterations := 0
	for i := 0; i < o.ColdStartN && time.Since(start) < o.ColdStartMax && ctx.Err() == nil; i++ {
		iterations++
		id := fmt.Sprintf("%svendor.app.bench.cold_%06d.v1~", fnPrefix, i)
		body := UnlimitedTaxDefinition(id)
		req := []byte(`{"entrypoint_id": "` + id + `", "mode": "sync", "params": {"invoice_id": "inv_001", "amount": 100}}`)
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t0 := time.Now()
		err := l.api.Register(ictx, l.token, body)
		t1 := time.Now()
		if err == nil {
			err = l.api.Activate(ictx, l.token, id)
		}
		t2 := time.Now()
		if err == nil {
			err = l.api.InvokeSync(ictx, l.token, req)
		}
		t3 := time.Now()
		cancel()
		if err != nil {
			if errs.add(err) >= 20 {
				break
			}
			continue
		}
		reg.Add(t1.Sub(t0))
		act.Add(t2.Sub(t1))
		call.Add(t3.Sub(t2))
		total.Add(t3.Sub(t0))
	}
	elapsed := time.Since(start)
	win.close()
	s.ClientCPUS = win.clientCPU()
	usage, stopErr := l.stop()
	usage.CPUWindowS, _ = win.serverCPU()
	s.Process = &usage
	sum := total.Summary()
	s.CPU, s.MachineLoad = win.perUnit("iteration", sum.Count), win.machineLoad()
	s.Latency = &sum
	s.ColdStart = &ColdStartDetail{Iterations: iterations, Register: reg.Summary(), Activate: act.Summary(), FirstCall: call.Summary()}
	if elapsed > 0 {
		s.Throughput = float64(sum.Count) / elapsed.Seconds()
	}
	s.Goals = []Goal{{Name: "median_ms", Target: fmt.Sprintf("≤ %g ms", ColdStartMedianMs), Value: sum.P50Ms,
		Met: sum.Count > 0 && sum.P50Ms <= ColdStartMedianMs}}
	s.Result = goalsResult(s.Goals)
	s.Errors, s.ErrorSamples = errs.n.Load(), errs.samples
	if s.Errors > 0 {
		s = failed(s, fmt.Errorf("%d of %d iterations failed", s.Errors, iterations))
	}
	if stopErr != nil {
		s = failed(s, stopErr)
	}
	if sum.Count == 0 && s.Status == StatusOK {
		s = failed(s, errors.New("no iteration completed"))
	}
	r.logf("coldstart: median %s, p99 %s over %d iterations", msCell(sum.P50Ms), msCell(sum.P99Ms), sum.Count)
	return s
}

// registerNoop registers and activates the no-op function (NoopID).
func registerNoop(ctx context.Context, l *lark) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := l.api.Register(sctx, l.token, noopDefinition)
	if err == nil {
		err = l.api.Activate(sctx, l.token, NoopID)
	}
	if err != nil {
		return fmt.Errorf("register the no-op function: %w", err)
	}
	return nil
}

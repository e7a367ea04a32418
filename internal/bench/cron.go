package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/larkrun/lark/internal/cron"
)

// Goals of cron10k (issue "Schedules and backfills").
const (
	Cron10kLagP99Goal = 500.0 // ms, p99 of recorded_at − scheduled_at ≤
	Cron10kCoresGoal  = 0.5   // server CPU seconds per second over the firing periods ≤
)

// Cron10kDetail is the cron10k scenario's own figures.
type Cron10kDetail struct {
	N       int    `json:"n"`
	Expr    string `json:"expression"`
	Fires   int    `json:"fires"`
	Clients int    `json:"clients"`
	// CreateS is how long creating the N schedules took.
	CreateS float64 `json:"create_s"`
	// First and Last are the measured instants; the CPU window is Fires whole periods from one
	// second before First.
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
	WindowS float64   `json:"window_s"`
	// Cores is the server's CPU seconds over the window ÷ its length (firing and running the runs).
	Cores float64 `json:"cores"`
	// Runs counts the measured instants that started a run; Missing those with none (each of the N
	// schedules should have one per measured instant).
	Runs    int `json:"runs"`
	Missing int `json:"missing"`
	// Lag is how late each measured run's invocation was durably queued and runnable:
	// max(recorded_at, scheduled_at) − scheduled_at (runs of allow schedules are recorded ahead of
	// their instant and runnable from it on).
	Lag Summary `json:"lag"`
	// StartLag is started_at − scheduled_at of the runs that had started when the histories were
	// read: when the dispatcher began running them (bounded by execution throughput, not firing).
	StartLag Summary `json:"start_lag"`
	// FetchS is how long reading the N histories took.
	FetchS float64 `json:"fetch_s"`
}

// Cron10k measures schedule firing: Cron10kN schedules with expression Cron10kExpr (every minute
// by default) on the no-op function; over Cron10kFires instants, the fire lag of every run (from
// the schedules' histories) and the server's CPU.
func (r *Runner) Cron10k(ctx context.Context) Scenario {
	o := r.Opts
	s := Scenario{Name: "cron10k", Status: StatusOK}
	const clients = 32
	d := &Cron10kDetail{N: o.Cron10kN, Expr: o.Cron10kExpr, Fires: o.Cron10kFires, Clients: clients}
	s.Cron10k = d
	times, err := cron.ParseCron(d.Expr, time.UTC)
	if err != nil {
		return failed(s, fmt.Errorf("cron expression: %w", err))
	}
	r.logf("cron10k: %d schedules %q, %d instants measured", d.N, d.Expr, d.Fires)
	l, err := r.startLark(ctx, "cron10k", clients)
	if err != nil {
		return failed(s, err)
	}
	defer l.discard()
	s.Profile = l.profile
	if err := registerNoop(ctx, l); err != nil {
		return failed(s, err)
	}

	var k atomic.Int64
	t0 := time.Now()
	res := Load{Workers: clients, Count: int64(d.N), Do: func(ctx context.Context) error {
		i := k.Add(1) - 1
		body, err := json.Marshal(map[string]any{"schedule_id": fmt.Sprintf("cron%05d", i), "entrypoint_id": NoopID,
			"expression": map[string]string{"kind": "cron", "value": d.Expr}})
		if err != nil {
			return err
		}
		_, _, err = l.api.Call(ctx, http.MethodPost, "/schedules", l.token, body, http.StatusCreated)
		return err
	}}.Run(ctx)
	d.CreateS = time.Since(t0).Seconds()
	s.Errors, s.ErrorSamples = res.Errors, res.ErrorSamples
	if res.Errors > 0 {
		return failed(s, fmt.Errorf("%d schedule creations failed", res.Errors))
	}

	// The measured instants: the first one at least a second away, and the next Fires-1.
	d.First = times.Next(time.Now().Add(time.Second))
	d.Last = d.First
	for range d.Fires - 1 {
		d.Last = times.Next(d.Last)
	}
	end := times.Next(d.Last).Add(-time.Second) // the window covers Fires whole periods
	r.logf("cron10k: created in %.1f s; measuring %s … %s", d.CreateS, d.First.Format(time.TimeOnly), d.Last.Format(time.TimeOnly))
	if !sleepUntil(ctx, d.First.Add(-time.Second)) {
		return failed(s, ctx.Err())
	}
	win := openWindow(l)
	w0 := time.Now()
	if !sleepUntil(ctx, end) {
		return failed(s, ctx.Err())
	}
	win.close()
	d.WindowS = time.Since(w0).Seconds()
	cpu, cpuOK := win.serverCPU()
	if cpuOK && d.WindowS > 0 {
		d.Cores = cpu / d.WindowS
	}
	s.MachineLoad = win.machineLoad()

	// The lag of every measured run, from the histories.
	lag, startLag := NewRecorder(0), NewRecorder(0)
	var runs, missing atomic.Int64
	k.Store(0)
	q := url.Values{"since": {d.First.Format(time.RFC3339)}, "until": {d.Last.Add(time.Second).Format(time.RFC3339)},
		"$filter": {"kind eq 'scheduled'"}, "limit": {"200"}, "next_runs": {"0"}}.Encode()
	t1 := time.Now()
	fres := Load{Workers: clients, Count: int64(d.N), Do: func(ctx context.Context) error {
		i := k.Add(1) - 1
		_, b, err := l.api.Call(ctx, http.MethodGet, fmt.Sprintf("/schedules/cron%05d/history?%s", i, q), l.token, nil, http.StatusOK)
		if err != nil {
			return err
		}
		var h struct {
			Items []struct {
				ScheduledAt  time.Time  `json:"scheduled_at"`
				RecordedAt   time.Time  `json:"recorded_at"`
				StartedAt    *time.Time `json:"started_at"`
				InvocationID string     `json:"invocation_id"`
			} `json:"items"`
		}
		if err := json.Unmarshal(b, &h); err != nil {
			return err
		}
		got := 0
		for _, it := range h.Items {
			if it.InvocationID == "" {
				continue
			}
			got++
			lag.Add(max(it.RecordedAt.Sub(it.ScheduledAt), 0))
			if it.StartedAt != nil {
				startLag.Add(max(it.StartedAt.Sub(it.ScheduledAt), 0))
			}
		}
		runs.Add(int64(got))
		missing.Add(int64(max(d.Fires-got, 0)))
		return nil
	}}.Run(ctx)
	d.FetchS = time.Since(t1).Seconds()
	d.Runs, d.Missing = int(runs.Load()), int(missing.Load())
	if d.WindowS > 0 {
		s.Throughput, s.Unit = float64(d.Runs)/d.WindowS, "runs/s"
	}
	d.Lag, d.StartLag = lag.Summary(), startLag.Summary()
	s.Latency = &d.Lag
	s.Errors += fres.Errors
	s.ErrorSamples = append(s.ErrorSamples, fres.ErrorSamples...)
	usage, stopErr := l.stop()
	usage.CPUWindowS = cpu
	s.Process = &usage
	s.CPU = win.perUnit("run", int64(d.Runs))
	s.Goals = []Goal{
		{Name: "fire_lag_p99_ms", Target: fmt.Sprintf("≤ %g ms", Cron10kLagP99Goal), Value: d.Lag.P99Ms,
			Met: d.Lag.Count > 0 && d.Lag.P99Ms <= Cron10kLagP99Goal},
		{Name: "cores", Target: fmt.Sprintf("≤ %g", Cron10kCoresGoal), Value: d.Cores, Met: d.Cores > 0 && d.Cores <= Cron10kCoresGoal},
	}
	s.Result = goalsResult(s.Goals)
	switch {
	case fres.Errors > 0:
		s = failed(s, fmt.Errorf("%d history reads failed", fres.Errors))
	case d.Missing > 0:
		s = failed(s, fmt.Errorf("%d of %d instants started no run", d.Missing, d.N*d.Fires))
	case stopErr != nil:
		s = failed(s, stopErr)
	}
	return s
}

// sleepUntil sleeps until t or until ctx ends (false).
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

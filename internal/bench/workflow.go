package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/larkrun/lark/internal/invocation"
)

// wfPrefix is the GTS prefix of workflow entrypoints.
const wfPrefix = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~"

// Workflow ids of the workflow10 and sleepers scenarios.
const (
	Workflow10ID = wfPrefix + "vendor.app.bench.workflow10.v1~"
	SleeperID    = wfPrefix + "vendor.app.bench.sleeper.v1~"
)

// Goals from the issue.
const (
	Workflow10StepsGoal = 20_000.0 // steps/s from 50 concurrent starters ≥ (issue 36)
	Workflow10P50Goal   = 1.2      // ms, p50 of one serial 10-step workflow ≤ (issue 36)
	SleepersLagP99Goal  = 1000.0   // ms, p99 of finished_at − due ≤
	SleepersRSSGoalMiB  = 300.0    // MiB, the server's RSS while every workflow sleeps ≤
)

// Workflow10Steps is the number of steps of the workflow10 workflow.
const Workflow10Steps = 10

// Workflow10Source is the workflow10 program: steps trivial steps, each returning its input.
func Workflow10Source(steps int) string {
	var b strings.Builder
	b.WriteString("def s(ctx, input):\n  return input\n\ndef main(ctx, input):\n")
	for i := range steps {
		fmt.Fprintf(&b, "  r_run_step_v1(\"s%d\", s, %d)\n", i, i)
	}
	b.WriteString("  return {\"ok\": True}\n")
	return b.String()
}

// SleeperSource is the sleepers program: one durable timer of sleepMs, then return.
func SleeperSource(sleepMs int64) string {
	return fmt.Sprintf("def main(ctx, input):\n  r_sleep(%d)\n  return {\"ok\": True}\n", sleepMs)
}

// WorkflowDefinition is a registration body of workflow id running source: sync and async (async
// by default), no retries, the minimal traits.workflow.
func WorkflowDefinition(id, source string) []byte {
	def := map[string]any{
		"entrypoint_id": id,
		"title":         "bench workflow",
		"owner":         map[string]any{"owner_type": "tenant"},
		"schema":        map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []string{"sync", "async"}, "default": "async"},
			"retry":      map[string]any{"max_attempts": 1},
			"limits":     map[string]any{"timeout_seconds": 30},
			"workflow": map[string]any{
				"compensation":        map[string]any{"on_failure": nil, "on_cancel": nil},
				"checkpointing":       map[string]any{"strategy": "automatic"},
				"max_suspension_days": 30,
			},
		},
		"implementation": map[string]any{
			"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
			"code": map[string]any{"language": "starlark", "source": source},
		},
	}
	b, err := json.Marshal(def)
	if err != nil {
		panic("bench: the workflow definition does not encode: " + err.Error()) // maps of strings and numbers
	}
	return b
}

func startRequest(id, mode string) []byte {
	return []byte(`{"entrypoint_id": "` + id + `", "mode": "` + mode + `", "params": {}}`)
}

// Workflow10Detail is the workflow10 scenario's breakdown.
type Workflow10Detail struct {
	Steps int `json:"steps_per_workflow"`
	// Concurrent part: N async starts from Clients starters; BurnDownS from the first start to
	// the moment none is queued or running.
	N          int     `json:"n"`
	Clients    int     `json:"clients"`
	SubmitS    float64 `json:"submit_s"`
	Submit     Summary `json:"submit_latency"`
	BurnDownS  float64 `json:"burn_down_s"`
	StepsPerS  float64 `json:"steps_per_s"`
	WorkflowsS float64 `json:"workflows_per_s"`
	// Serial part: SerialN sync starts one after the other (after SerialWarmup uncounted ones).
	SerialN      int     `json:"serial_n"`
	SerialWarmup int     `json:"serial_warmup"`
	Serial       Summary `json:"serial_latency"`
	NotSucceeded int     `json:"not_succeeded"`
}

// SleepersDetail is the sleepers scenario's breakdown.
type SleepersDetail struct {
	N       int     `json:"n"`
	SleepS  float64 `json:"sleep_s"`
	Clients int     `json:"clients"`
	SubmitS float64 `json:"submit_s"`
	Submit  Summary `json:"submit_latency"`
	// ParkedS: from the first submission until none was queued or running (all suspended).
	ParkedS float64 `json:"parked_s"`
	// ParkedBeforeDue is false when some sleep was due before all were parked.
	ParkedBeforeDue bool `json:"parked_before_due"`
	// DoneS: from the first submission until none was queued, running or suspended.
	DoneS float64 `json:"done_s"`
	// RSS of the server: before any submission, and while every workflow slept (VmRSS of
	// /proc/PID/status sampled every RSSEveryMs between ParkedS and the first due time).
	IdleRSSKiB      int64   `json:"idle_rss_kib"`
	SleepRSSMaxKiB  int64   `json:"sleeping_rss_max_kib"`
	SleepRSSMeanKiB int64   `json:"sleeping_rss_mean_kib"`
	RSSSamples      int     `json:"sleeping_rss_samples"`
	RSSEveryMs      float64 `json:"rss_every_ms"`
	// Lag: finished_at − the sleep's due time (the suspended event's details.until), from the
	// timelines of LagSampled workflows (evenly spaced over the submission order).
	LagSampled   int     `json:"lag_sampled"`
	LagFetchS    float64 `json:"lag_fetch_s"`
	Lag          Summary `json:"lag"`
	NotSucceeded int     `json:"not_succeeded"`
}

// Workflow10: (a) Workflow10N async starts of a 10-step workflow from Workflow10Clients starters,
// steps/s = 10 × N ÷ (first start → none queued or running); (b) Workflow10Serial sync starts one
// at a time, p50/p99 of the whole workflow.
func (r *Runner) Workflow10(ctx context.Context) Scenario {
	o := r.Opts
	s := Scenario{Name: "workflow10", Status: StatusOK, Unit: "steps/s"}
	d := &Workflow10Detail{Steps: Workflow10Steps, N: o.Workflow10N, Clients: o.Workflow10Clients,
		SerialN: o.Workflow10Serial, SerialWarmup: 10}
	s.Workflow10 = d
	r.logf("workflow10: %d serial sync workflows, then %d async from %d starters", d.SerialN, d.N, d.Clients)
	l, err := r.startLark(ctx, "workflow10", o.Workflow10Clients)
	if err != nil {
		return failed(s, err)
	}
	defer l.discard()
	s.Profile = l.profile
	if err := r.registerActivate(ctx, l, Workflow10ID, Workflow10Source(Workflow10Steps)); err != nil {
		return failed(s, err)
	}
	win := openWindow(l)

	// (b) serial, first, on the fresh database.
	var errs errorLog
	d.Serial = serialWorkflows(ctx, l, d.SerialWarmup, d.SerialN, &errs)
	s.Latency = &d.Serial
	r.logf("workflow10: serial p50 %s, p99 %s", msCell(d.Serial.P50Ms), msCell(d.Serial.P99Ms))

	// (a) concurrent async starts.
	asyncReq := startRequest(Workflow10ID, "async")
	first := time.Now()
	res, lastID := submitAsync(ctx, l, d.Clients, d.N, asyncReq)
	d.SubmitS, d.Submit = res.WindowS, res.Latency
	done, err := r.waitBurnDown(ctx, l, lastID, first.Add(BurnDownLimit(d.N, res.Throughput, o.BurnDownMax)))
	win.close()
	s.ClientCPUS = win.clientCPU()
	// Every workflow of the window (warm-up, serial, concurrent) counts.
	steps := int64(Workflow10Steps * (d.SerialWarmup + d.SerialN + int(res.Requests)))
	s.CPU, s.MachineLoad = win.perUnit("step", steps), win.machineLoad()
	if err != nil {
		s = failed(s, fmt.Errorf("burn-down: %w", err))
	} else {
		d.BurnDownS = done.Sub(first).Seconds()
		d.WorkflowsS = float64(res.Requests) / d.BurnDownS
		d.StepsPerS = d.WorkflowsS * Workflow10Steps
		s.Throughput = d.StepsPerS
		if bad, err := r.notSucceeded(ctx, l); err != nil {
			s = failed(s, fmt.Errorf("check outcomes: %w", err))
		} else if len(bad) > 0 {
			d.NotSucceeded = len(bad)
			s = failed(s, fmt.Errorf("workflows that did not succeed, e.g. %s", strings.Join(bad, "; ")))
		}
	}
	usage, stopErr := l.stop()
	usage.CPUWindowS, _ = win.serverCPU()
	s.Process = &usage
	// Every workflow of the scenario (warm-up, serial, concurrent) counts: the writes cover them all.
	if w, err := l.storeWrites(ctx, "step", int(steps)); err != nil {
		s = failed(s, err)
	} else {
		s.StoreWrites = w
	}
	s.Goals = []Goal{
		{Name: "steps_per_s", Target: fmt.Sprintf("≥ %s", group(int64(Workflow10StepsGoal))), Value: d.StepsPerS, Met: d.StepsPerS >= Workflow10StepsGoal},
		{Name: "p50_ms", Target: fmt.Sprintf("≤ %g ms", Workflow10P50Goal), Value: d.Serial.P50Ms, Met: d.Serial.Count > 0 && d.Serial.P50Ms <= Workflow10P50Goal},
	}
	s.Result = goalsResult(s.Goals)
	s.Errors, s.ErrorSamples = errs.n.Load()+res.Errors, append(errs.samples, res.ErrorSamples...)
	if errs.n.Load() > 0 {
		s = failed(s, fmt.Errorf("%d of %d serial workflows failed", errs.n.Load(), d.SerialWarmup+d.SerialN))
	}
	if res.Errors > 0 {
		s = failed(s, fmt.Errorf("%d of %d async starts failed", res.Errors, d.N))
	}
	if stopErr != nil {
		s = failed(s, stopErr)
	}
	if s.Status == StatusOK && (d.Serial.Count == 0 || res.Requests == 0) {
		s = failed(s, errors.New("no workflow completed"))
	}
	r.logf("workflow10: %s (%d workflows in %.1f s)", rate(d.StepsPerS, "steps/s"), res.Requests, d.BurnDownS)
	return s
}

// serialWorkflows runs warmup then n sync 10-step workflows one after the other and summarises the
// latency of the n; it stops after 20 failures (counted in errs).
func serialWorkflows(ctx context.Context, l *lark, warmup, n int, errs *errorLog) Summary {
	syncReq := startRequest(Workflow10ID, "sync")
	serial := NewRecorder(0)
	for i := 0; i < warmup+n && ctx.Err() == nil; i++ {
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t0 := time.Now()
		err := l.api.InvokeSync(ictx, l.token, syncReq)
		el := time.Since(t0)
		cancel()
		if err != nil {
			if errs.add(err) >= 20 {
				break
			}
			continue
		}
		if i >= warmup {
			serial.Add(el)
		}
	}
	return serial.Summary()
}

// Sleepers: SleepersN async workflows that each r_sleep(SleepersSleep) then return; the server's
// RSS while all sleep, and the wake-up lag (finished_at − due) from their timelines.
func (r *Runner) Sleepers(ctx context.Context) Scenario {
	o := r.Opts
	s := Scenario{Name: "sleepers", Status: StatusOK}
	const clients = 32
	d := &SleepersDetail{N: o.SleepersN, SleepS: o.SleepersSleep.Seconds(), Clients: clients, RSSEveryMs: 200}
	s.Sleepers = d
	r.logf("sleepers: %d workflows sleeping %v each", d.N, o.SleepersSleep)
	l, err := r.startLark(ctx, "sleepers", clients)
	if err != nil {
		return failed(s, err)
	}
	defer l.discard()
	s.Profile = l.profile
	if err := r.registerActivate(ctx, l, SleeperID, SleeperSource(o.SleepersSleep.Milliseconds())); err != nil {
		return failed(s, err)
	}
	if kib, err := procRSS(l.Pid()); err == nil {
		d.IdleRSSKiB = kib
	}
	win := openWindow(l)

	// RSS sampler for the whole run; the sleeping window is cut out afterwards.
	samples, stopSampling := sampleRSS(ctx, l.Pid(), time.Duration(d.RSSEveryMs)*time.Millisecond)
	defer stopSampling()

	first := time.Now()
	res, ids := submitIDs(ctx, l, clients, d.N, startRequest(SleeperID, "async"))
	d.SubmitS, d.Submit = res.WindowS, res.Latency
	s.Errors, s.ErrorSamples = res.Errors, res.ErrorSamples
	firstDue := first.Add(o.SleepersSleep)
	r.logf("sleepers: submitted in %.1f s; waiting until all are parked", d.SubmitS)

	parked, err := r.waitNone(ctx, l, "status in ('queued','running')", 100*time.Millisecond,
		first.Add(BurnDownLimit(d.N, res.Throughput, o.BurnDownMax)))
	if err != nil {
		return failed(s, fmt.Errorf("waiting for the workflows to park: %w", err))
	}
	d.ParkedS = parked.Sub(first).Seconds()
	d.ParkedBeforeDue = parked.Before(firstDue)
	r.logf("sleepers: all parked after %.1f s; waiting for the wake-ups", d.ParkedS)
	done, err := r.waitNone(ctx, l, "status in ('queued','running','suspended')", 100*time.Millisecond, firstDue.Add(o.BurnDownMax))
	stopSampling()
	win.close()
	s.CPU, s.MachineLoad = win.perUnit("workflow", res.Requests), win.machineLoad()
	if err != nil {
		return failed(s, fmt.Errorf("waiting for the wake-ups: %w", err))
	}
	d.DoneS = done.Sub(first).Seconds()
	d.SleepRSSMaxKiB, d.SleepRSSMeanKiB, d.RSSSamples = rssWindow(*samples, parked, firstDue)
	if bad, err := r.notSucceeded(ctx, l); err != nil {
		s = failed(s, fmt.Errorf("check outcomes: %w", err))
	} else if len(bad) > 0 {
		d.NotSucceeded = len(bad)
		s = failed(s, fmt.Errorf("workflows that did not succeed, e.g. %s", strings.Join(bad, "; ")))
	}

	// Lag, from the timelines of a sample.
	sample := evenSample(ids, o.SleepersLagSample)
	t0 := time.Now()
	var lres LoadResult
	d.Lag, lres = sleepLags(ctx, l, sample)
	d.LagFetchS, d.LagSampled = time.Since(t0).Seconds(), len(sample)
	s.Latency = &d.Lag
	s.ClientCPUS = win.clientCPU()
	usage, stopErr := l.stop()
	usage.CPUWindowS, _ = win.serverCPU()
	s.Process = &usage
	s = finishSleepers(s, d, res, lres, stopErr)
	r.logf("sleepers: lag p50 %s, p99 %s; RSS while sleeping %.0f MiB (idle %.0f MiB)",
		msCell(d.Lag.P50Ms), msCell(d.Lag.P99Ms), float64(d.SleepRSSMaxKiB)/1024, float64(d.IdleRSSKiB)/1024)
	return s
}

// finishSleepers sets the sleepers row's goals and fails it for the starts (res) or timeline reads
// (lres) that failed, a server that did not stop cleanly, or no wake-up measured.
func finishSleepers(s Scenario, d *SleepersDetail, res, lres LoadResult, stopErr error) Scenario {
	rss := float64(d.SleepRSSMaxKiB) / 1024
	s.Goals = []Goal{{Name: "lag_p99_ms", Target: fmt.Sprintf("≤ %g ms", SleepersLagP99Goal), Value: d.Lag.P99Ms,
		Met: d.Lag.Count > 0 && d.Lag.P99Ms <= SleepersLagP99Goal},
		{Name: "sleeping_rss_mib", Target: fmt.Sprintf("≤ %g MiB", SleepersRSSGoalMiB), Value: rss,
			Met: d.RSSSamples > 0 && rss <= SleepersRSSGoalMiB}}
	s.Result = goalsResult(s.Goals)
	if res.Errors > 0 {
		s = failed(s, fmt.Errorf("%d of %d starts failed", res.Errors, d.N))
	}
	if lres.Errors > 0 {
		s.Errors += lres.Errors
		s.ErrorSamples = append(s.ErrorSamples, lres.ErrorSamples...)
		s = failed(s, fmt.Errorf("%d of %d timelines unreadable", lres.Errors, d.LagSampled))
	}
	if stopErr != nil {
		s = failed(s, stopErr)
	}
	if s.Status == StatusOK && d.Lag.Count == 0 {
		s = failed(s, errors.New("no wake-up measured"))
	}
	return s
}

// registerActivate registers and activates workflow id running source.
func (r *Runner) registerActivate(ctx context.Context, l *lark, id, source string) error {
	return registerDefinition(ctx, l, id, WorkflowDefinition(id, source))
}

// notSucceeded lists up to 5 invocations of the bench tenant that did not succeed.
func (r *Runner) notSucceeded(ctx context.Context, l *lark) ([]string, error) {
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return l.api.listInvocations(vctx, l.token, "status ne 'succeeded'", 5)
}

// waitNone polls the list with filter every `every` until it is empty, and returns when it saw that.
func (r *Runner) waitNone(ctx context.Context, l *lark, filter string, every time.Duration, deadline time.Time) (time.Time, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		left, err := l.api.listInvocations(ctx, l.token, filter, 1)
		if err != nil {
			if ctx.Err() != nil {
				return time.Time{}, fmt.Errorf("still invocations with %s at the deadline", filter)
			}
			return time.Time{}, err
		}
		if len(left) == 0 {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("still invocations with %s at the deadline", filter)
		case <-time.After(every):
		}
	}
}

// SleepLag reads a sleeper's timeline: due is the first timer suspension's details.until and
// finished the `at` of its succeeded event.
func SleepLag(timeline []byte) (due, finished time.Time, err error) {
	var tl struct {
		Items []struct {
			At        time.Time       `json:"at"`
			EventType string          `json:"event_type"`
			Details   json.RawMessage `json:"details"`
		} `json:"items"`
	}
	if err := json.Unmarshal(timeline, &tl); err != nil {
		return due, finished, fmt.Errorf("timeline: %w", err)
	}
	for _, it := range tl.Items {
		switch it.EventType {
		case "suspended":
			var d invocation.Suspended // the event's Data (a suspend control action's reads as one without until)
			if err := json.Unmarshal(it.Details, &d); err != nil {
				return due, finished, fmt.Errorf("timeline: %w", err)
			}
			if due.IsZero() && d.Until != nil && !d.Until.IsZero() {
				due = *d.Until
			}
		case "succeeded":
			finished = it.At
		}
	}
	switch {
	case due.IsZero():
		return due, finished, errors.New("timeline: no suspended event with details.until")
	case finished.IsZero():
		return due, finished, errors.New("timeline: no succeeded event")
	}
	return due, finished, nil
}

// ParseVmRSS reads VmRSS (KiB) from a /proc/PID/status document.
func ParseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS: %w", err)
		}
		if len(f) > 1 && f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS: unit %q", f[1])
		}
		return n, nil
	}
	return 0, errors.New("no VmRSS line")
}

// procRSS is a running process's resident set size in KiB, from /proc/PID/status.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return ParseVmRSS(b)
}

type rssSample struct {
	At  time.Time
	KiB int64
}

// rssWindow is the maximum and mean of the samples taken in [from, to], and how many there were.
func rssWindow(samples []rssSample, from, to time.Time) (maxKiB, meanKiB int64, n int) {
	var sum int64
	for _, s := range samples {
		if s.At.Before(from) || s.At.After(to) {
			continue
		}
		n++
		sum += s.KiB
		maxKiB = max(maxKiB, s.KiB)
	}
	if n > 0 {
		meanKiB = sum / int64(n)
	}
	return maxKiB, meanKiB, n
}

// evenSample picks at most n items of ids, evenly spaced (all of them when n ≤ 0 or n ≥ len).
func evenSample(ids []string, n int) []string {
	if n <= 0 || n >= len(ids) {
		return ids
	}
	out := make([]string, n)
	for i := range out {
		out[i] = ids[i*len(ids)/n]
	}
	return out
}

// sampleRSS samples pid's RSS every period until stop is called (stop waits for the sampler; it may
// be called more than once); the samples are complete once it has returned.
func sampleRSS(ctx context.Context, pid int, period time.Duration) (samples *[]rssSample, stop func()) {
	samples = new([]rssSample)
	sampCtx, cancel := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			if kib, err := procRSS(pid); err == nil {
				*samples = append(*samples, rssSample{At: time.Now(), KiB: kib})
			}
			select {
			case <-sampCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return samples, func() { cancel(); <-sampled }
}

// sleepLags reads the timelines of the sleepers sample, 16 at a time, and summarises their
// wake-up lags (finished_at − due).
func sleepLags(ctx context.Context, l *lark, sample []string) (Summary, LoadResult) {
	lag := NewRecorder(0)
	var k atomic.Int64
	res := Load{Workers: 16, Count: int64(len(sample)), Do: func(ctx context.Context) error {
		id := sample[k.Add(1)-1]
		_, b, err := l.api.Call(ctx, http.MethodGet, "/invocations/"+id+"/timeline?limit=200", l.token, nil, http.StatusOK)
		if err != nil {
			return err
		}
		due, fin, err := SleepLag(b)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		lag.Add(max(fin.Sub(due), 0))
		return nil
	}}.Run(ctx)
	return lag.Summary(), res
}

package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/larkrun/lark/pkg/larkworker"
)

// The heartbeat scenario's shape.
const (
	// HeartbeatTasks tasks of a worker-provided implementation are held open by one in-process
	// worker (pkg/larkworker) for HeartbeatHold each.
	HeartbeatTasks = 16
	HeartbeatHold  = 5 * time.Second
	// HeartbeatInterval is the measured server's heartbeat interval; the control server's is
	// HeartbeatControlInterval, so that its worker sends none while it holds the same tasks.
	HeartbeatInterval        = 50 * time.Millisecond
	HeartbeatControlInterval = time.Hour
	// HeartbeatRowsGoal bounds the rows written per heartbeat (a heartbeat that wrote would be ≥ 1).
	HeartbeatRowsGoal = 0.05
	// HeartbeatID is the worker-provided entrypoint the scenario runs.
	HeartbeatID           = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.bench.hold.v1~"
	heartbeatDefinitionID = "bench.hold"
)

// HeartbeatDetail is the heartbeat scenario's breakdown: the same tasks held as long on two
// servers, one whose worker heartbeats every IntervalMS and a control one whose worker never does;
// what PostgreSQL counted on the first beyond the control, per heartbeat, is what heartbeats cost.
type HeartbeatDetail struct {
	Tasks      int     `json:"tasks"`
	HoldS      float64 `json:"hold_s"`
	IntervalMS int64   `json:"interval_ms"`
	// Heartbeats and TaskReports are the measured server's counters (lark_worker_heartbeats_total,
	// lark_worker_heartbeat_tasks_total); ControlHeartbeats the control's.
	Heartbeats        int64 `json:"heartbeats"`
	TaskReports       int64 `json:"task_reports"`
	ControlHeartbeats int64 `json:"control_heartbeats"`
	// ServerCountedWrites is lark_worker_heartbeat_writes_total: the writes the server attributes
	// to heartbeats (0 by design: they are kept in memory).
	ServerCountedWrites int64        `json:"server_counted_writes"`
	Writes              *StoreWrites `json:"writes"`
	ControlWrites       *StoreWrites `json:"control_writes"`
	// CommitsPerHeartbeat and RowsPerHeartbeat are (measured − control) ÷ Heartbeats.
	CommitsPerHeartbeat float64 `json:"commits_per_heartbeat"`
	RowsPerHeartbeat    float64 `json:"rows_per_heartbeat"`
}

// Heartbeats measures the database writes of remote workers' heartbeats, on PostgreSQL (whose
// counters are exact): two servers in databases of their own each run HeartbeatTasks tasks that an
// in-process worker holds for HeartbeatHold; the first asks for a heartbeat every
// HeartbeatInterval, the control every hour. Everything else being the same, the difference of
// what PostgreSQL counted, per heartbeat, is what a heartbeat writes.
func (r *Runner) Heartbeats(ctx context.Context) Scenario {
	s := Scenario{Name: "heartbeat", Status: StatusOK, Unit: "heartbeats/s"}
	if !isPostgres(r.Opts.Store) {
		s.Status, s.Result = StatusNotAvailable, ResultNA
		s.Note = "needs --store postgres://… (PostgreSQL's counters measure the writes)"
		return s
	}
	d := &HeartbeatDetail{Tasks: HeartbeatTasks, HoldS: HeartbeatHold.Seconds(), IntervalMS: HeartbeatInterval.Milliseconds()}
	s.Heartbeats = d
	r.logf("heartbeat: %d tasks held %.0f s by a worker, heartbeat every %v; control: the same without heartbeats", d.Tasks, d.HoldS, HeartbeatInterval)
	m, err := r.heartbeatPhase(ctx, "heartbeat", HeartbeatInterval)
	if err != nil {
		return failed(s, err)
	}
	c, err := r.heartbeatPhase(ctx, "heartbeat-control", HeartbeatControlInterval)
	if err != nil {
		return failed(s, fmt.Errorf("control: %w", err))
	}
	d.Heartbeats, d.TaskReports, d.ServerCountedWrites, d.Writes = m.heartbeats, m.taskReports, m.serverWrites, m.writes
	d.ControlHeartbeats, d.ControlWrites = c.heartbeats, c.writes
	s.Throughput = float64(m.heartbeats) / m.windowS
	if d.Heartbeats == 0 {
		return failed(s, errors.New("the worker sent no heartbeat"))
	}
	heartbeatCPU(&s, m, c)
	rows := func(w *StoreWrites) int64 { return w.RowsInserted + w.RowsUpdated + w.RowsDeleted }
	d.CommitsPerHeartbeat = float64(m.writes.Commits-c.writes.Commits) / float64(d.Heartbeats)
	d.RowsPerHeartbeat = float64(rows(m.writes)-rows(c.writes)) / float64(d.Heartbeats)
	s.Goals = []Goal{{Name: "rows per heartbeat", Target: fmt.Sprintf("≤ %.2f", HeartbeatRowsGoal), Value: d.RowsPerHeartbeat,
		Met: d.RowsPerHeartbeat <= HeartbeatRowsGoal}}
	s.Result = goalsResult(s.Goals)
	r.logf("heartbeat: %d heartbeats (%d task reports): %.3f commits and %.3f rows per heartbeat beyond the control", d.Heartbeats,
		d.TaskReports, d.CommitsPerHeartbeat, d.RowsPerHeartbeat)
	return s
}

// heartbeatCPU sets s's CPU per heartbeat (the heartbeating server's, and its backends') beside the
// control server's CPU over the same number of heartbeats, and the machine's load from the start of
// the first phase to the end of the control.
func heartbeatCPU(s *Scenario, m, c heartbeatRun) {
	s.CPU = m.win.perUnit("heartbeat", m.heartbeats)
	if ctl := c.win.perUnit("heartbeat", m.heartbeats); ctl != nil {
		s.CPU.Compare(ctl.TotalMs, "the control server's CPU (no heartbeats, the same tasks held) ÷ the same heartbeats")
	}
	if a, b := m.win.machineLoad(), c.win.machineLoad(); a != nil && b != nil {
		s.MachineLoad = &MachineLoad{CPUs: a.CPUs, Start: a.Start, End: b.End}
	}
}

type heartbeatRun struct {
	heartbeats, taskReports, serverWrites int64
	windowS                               float64
	writes                                *StoreWrites
	win                                   *window
}

// heartbeatPhase runs the tasks on a server whose workers heartbeat every interval.
func (r *Runner) heartbeatPhase(ctx context.Context, name string, interval time.Duration) (heartbeatRun, error) {
	var out heartbeatRun
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return out, err
	}
	key := "hb1:" + hex.EncodeToString(secret)
	// The timeout only has to outlast a late heartbeat: a task given up and handed out again would
	// be held twice (on a loaded machine, 2 × a 50 ms interval was not enough).
	l, err := r.startLark(ctx, name, 4, "--worker-key", key, "--worker-heartbeat-interval", interval.String(),
		"--worker-heartbeat-timeout", max(2*interval, 5*time.Second).String())
	if err != nil {
		return out, err
	}
	defer l.discard()
	def := fmt.Appendf(nil, `{"entrypoint_id":%q,"title":"hold","schema":{"params":{"type":"object"}},
		"traits":{"invocation":{"supported":["async"],"default":"async"},"limits":{"timeout_seconds":60},"retry":{"max_attempts":1}},
		"implementation":{"adapter":"gts.x.core.serverless.adapter.worker.v1~","kind":"adapter_ref","adapter_ref":{"definition_id":%q}}}`,
		HeartbeatID, heartbeatDefinitionID)
	if err := l.api.Register(ctx, l.token, def); err != nil {
		return out, fmt.Errorf("register: %w", err)
	}
	if err := l.api.Activate(ctx, l.token, HeartbeatID); err != nil {
		return out, fmt.Errorf("activate: %w", err)
	}
	w, err := larkworker.New(l.api.URL, key)
	if err != nil {
		return out, err
	}
	w.Concurrency = HeartbeatTasks
	w.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	var held atomic.Int64
	w.Handle(heartbeatDefinitionID, func(ctx context.Context, _ larkworker.Task) (any, error) {
		held.Add(1)
		select {
		case <-time.After(HeartbeatHold):
		case <-ctx.Done():
		}
		return map[string]any{"ok": true}, nil
	})
	wctx, stopWorker := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopWorker()
		return <-wdone
	}
	defer func() {
		if err := stop(); err != nil {
			r.logf("%s: worker: %v", name, err)
		}
	}()
	out.win = openWindow(l)
	start := time.Now()
	body := fmt.Appendf(nil, `{"entrypoint_id":%q,"mode":"async","params":{}}`, HeartbeatID)
	for i := range HeartbeatTasks {
		if _, _, err := l.api.Call(ctx, http.MethodPost, "/invocations", l.token, body, http.StatusAccepted); err != nil {
			return out, fmt.Errorf("start %d: %w", i, err)
		}
	}
	if _, err := r.waitBurnDown(ctx, l, "", time.Now().Add(HeartbeatHold+time.Minute)); err != nil {
		return out, err
	}
	out.win.close()
	out.windowS = time.Since(start).Seconds()
	if n := held.Load(); n != HeartbeatTasks {
		return out, fmt.Errorf("the worker held %d tasks, not %d", n, HeartbeatTasks)
	}
	if bad, err := r.notSucceeded(ctx, l); err != nil || len(bad) > 0 {
		return out, fmt.Errorf("invocations that did not succeed: %v %v", bad, err) //nolint:errorlint // err may be nil (bad is not empty): %w would print %!w(<nil>)
	}
	counters, err := l.metrics(ctx, "lark_worker_heartbeats_total", "lark_worker_heartbeat_tasks_total", "lark_worker_heartbeat_writes_total")
	if err != nil {
		return out, err
	}
	out.heartbeats, out.taskReports, out.serverWrites = int64(counters[0]), int64(counters[1]), int64(counters[2])
	if err := stop(); err != nil {
		return out, fmt.Errorf("worker: %w", err)
	}
	if _, err := l.stop(); err != nil {
		return out, err
	}
	if out.writes, err = l.storeWrites(ctx, "heartbeat", int(out.heartbeats)); err != nil {
		return out, err
	}
	return out, nil
}

// metrics reads the named counters (without labels) from the server's /metrics, as the operator.
func (l *lark) metrics(ctx context.Context, names ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.api.URL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.operator)
	resp, err := l.api.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	out := make([]float64, len(names))
	found := make([]bool, len(names))
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for i, n := range names {
			if name == n {
				f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
				if err != nil {
					return nil, fmt.Errorf("/metrics %s: %w", n, err)
				}
				out[i], found[i] = f, true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for i, ok := range found {
		if !ok {
			return nil, fmt.Errorf("/metrics has no %s", names[i])
		}
	}
	return out, nil
}

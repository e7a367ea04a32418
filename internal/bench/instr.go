package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SyncInstrRatioGoal is the sync-instr goal: instructions per sync request ÷ the echo baseline's ≤.
const SyncInstrRatioGoal = 5.0

// Defaults of the sync-instr scenario: measured requests, after warm-up ones.
const (
	DefaultInstrN      = 2000
	DefaultInstrWarmup = 200
)

// callgrindEnv is what a Go program needs to run under callgrind 3.19: no asynchronous preemption
// (callgrind asserts on the signal) and no RDTSCP (an instruction it does not know). And one P:
// callgrind runs one thread at a time, so a thread that waits for another by spinning (the
// runtime's background sweeper waiting for a sweep in progress, its lock spins) spins until
// valgrind switches threads, which made the count of the same build move by 15 % from run to run;
// with one P such waits are rare and short, for the baseline and for Lark alike.
var callgrindEnv = []string{"GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off", "GOMAXPROCS=1"}

// InstructionsDetail is the sync-instr scenario's breakdown: instructions counted by callgrind
// over a fixed number of sync requests, Lark's and the echo baseline's.
type InstructionsDetail struct {
	Tool     string `json:"tool"`
	Requests int    `json:"requests"`
	Warmup   int    `json:"warmup"`
	Clients  int    `json:"clients"`
	// Total is every instruction of the server over the measured requests (all its threads);
	// PerRequest is Total ÷ Requests.
	Total              int64   `json:"instructions"`
	PerRequest         float64 `json:"instructions_per_request"`
	BaselineTotal      int64   `json:"baseline_instructions"`
	BaselinePerRequest float64 `json:"baseline_instructions_per_request"`
	// Ratio is PerRequest ÷ BaselinePerRequest (lower is better).
	Ratio float64 `json:"ratio"`
	// DurableTotal is the instructions of the durable echo (DurableEcho: the bare handler plus
	// the one write a durable sync call needs) over the same requests; DurablePerRequest is per
	// request, and DurableRatio is PerRequest ÷ DurablePerRequest: what Lark adds to that floor.
	DurableTotal      int64   `json:"durable_echo_instructions,omitempty"`
	DurablePerRequest float64 `json:"durable_echo_instructions_per_request,omitempty"`
	DurableRatio      float64 `json:"durable_echo_ratio,omitempty"`
	// Split is Total by InstrGroups (CallgrindSplit); Shares, the same per request.
	Split  map[string]int64 `json:"-"`
	Shares []InstrShare     `json:"shares,omitempty"`
}

// callgrindTools finds valgrind and callgrind_control, or says what is missing.
func callgrindTools() (valgrind, control string, err error) {
	valgrind, err1 := exec.LookPath("valgrind")
	control, err2 := exec.LookPath("callgrind_control")
	if err1 != nil || err2 != nil {
		return "", "", errors.New("skipped: valgrind not found (Debian/Ubuntu: apt-get install valgrind)")
	}
	return valgrind, control, nil
}

// SyncInstr: InstrWarmup then InstrN sync calculate_tax requests from Clients callers, against the
// echo baseline and then Lark, each server under callgrind; the figure is the instructions the
// server executed over the InstrN requests (counters zeroed after the warm-up, dumped after the
// last answer) per request. Skipped when valgrind is missing.
func (r *Runner) SyncInstr(ctx context.Context) Scenario {
	s := Scenario{Name: "sync-instr", Status: StatusOK, Unit: "instructions/req"}
	valgrind, control, err := callgrindTools()
	if err != nil {
		s.Status, s.Note, s.Result = StatusNotAvailable, err.Error(), ResultNA
		return s
	}
	o := r.Opts
	d := &InstructionsDetail{Tool: "callgrind", Requests: o.InstrN, Warmup: o.InstrWarmup, Clients: o.Clients}
	s.Instructions = d
	// With --profile-dir the callgrind files stay there (callgrind_annotate reads them); otherwise
	// they go with a temporary directory.
	dir := o.ProfileDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "lark-bench-callgrind-"); err != nil {
			return failed(s, err)
		}
		defer os.RemoveAll(dir)
	}
	wrap := func(name string) []string {
		return []string{valgrind, "--tool=callgrind", "--log-file=" + filepath.Join(dir, "sync-instr-"+name+".log"),
			"--callgrind-out-file=" + filepath.Join(dir, "sync-instr-"+name+".callgrind")}
	}
	r.logf("sync-instr: echo baseline under callgrind, %d + %d requests, %d clients", d.Warmup, d.Requests, d.Clients)
	s.Baseline = &Baseline{Name: "echo", Unit: "instructions/req"}
	if d.BaselineTotal, err = r.echoInstructions(ctx, wrap("echo"), control, filepath.Join(dir, "sync-instr-echo.callgrind")); err != nil {
		return failed(s, fmt.Errorf("echo baseline: %w", err))
	}
	r.logf("sync-instr: durable echo under callgrind, %d + %d requests, %d clients", d.Warmup, d.Requests, d.Clients)
	db, err := os.MkdirTemp("", "lark-bench-durable-echo-")
	if err != nil {
		return failed(s, err)
	}
	defer os.RemoveAll(db)
	if d.DurableTotal, err = r.echoInstructions(ctx, wrap("durable-echo"), control, filepath.Join(dir, "sync-instr-durable-echo.callgrind"),
		"--durable", db); err != nil {
		return failed(s, fmt.Errorf("durable echo: %w", err))
	}
	r.logf("sync-instr: lark under callgrind, %d + %d requests, %d clients", d.Warmup, d.Requests, d.Clients)
	l, err := r.startLarkWith(ctx, "sync-instr", o.Clients, callgrindEnv, wrap("lark"))
	if err != nil {
		return failed(s, err)
	}
	defer l.discard()
	if err := registerTax(ctx, l); err != nil {
		return failed(s, err)
	}
	win := openWindow(l)
	d.Total, d.Split, err = r.countInstructions(ctx, control, l.Pid(), filepath.Join(dir, "sync-instr-lark.callgrind"),
		func(ctx context.Context) error { return l.api.InvokeSync(ctx, l.token, TaxSyncRequest) })
	win.close()
	s.MachineLoad = win.machineLoad()
	// No SIGTERM: callgrind 3.19 asserts on a signal a Go program handles, so both children are
	// killed once their counters are dumped (the deferred discard), and their exit is not checked.
	if err != nil {
		return failed(s, err)
	}
	return finishSyncInstr(s, d)
}

// finishSyncInstr computes the per-request figures, the ratio and the goal.
func finishSyncInstr(s Scenario, d *InstructionsDetail) Scenario {
	if d.Requests > 0 {
		d.PerRequest = float64(d.Total) / float64(d.Requests)
		d.BaselinePerRequest = float64(d.BaselineTotal) / float64(d.Requests)
	}
	if d.BaselinePerRequest > 0 {
		d.Ratio = d.PerRequest / d.BaselinePerRequest
	}
	if d.Requests > 0 && d.DurableTotal > 0 {
		d.DurablePerRequest = float64(d.DurableTotal) / float64(d.Requests)
		d.DurableRatio = d.PerRequest / d.DurablePerRequest
	}
	if d.Split != nil {
		d.Shares = instrShares(d.Split, d.Requests, d.BaselinePerRequest)
	}
	s.Goals = []Goal{{Name: "instructions_ratio", Target: fmt.Sprintf("≤ %g×", SyncInstrRatioGoal), Value: d.Ratio,
		Met: d.Ratio > 0 && d.Ratio <= SyncInstrRatioGoal}}
	if s.Status != StatusFailed {
		s.Result = goalsResult(s.Goals)
	}
	return s
}

// registerTax registers and activates calculate_tax (TaxID) without limits.
func registerTax(ctx context.Context, l *lark) error {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := l.api.Register(sctx, l.token, UnlimitedTaxDefinition(TaxID))
	if err == nil {
		err = l.api.Activate(sctx, l.token, TaxID)
	}
	if err != nil {
		return fmt.Errorf("register calculate_tax: %w", err)
	}
	return nil
}

// echoInstructions runs `lark bench-echo` (with flags) under wrap and counts its instructions.
func (r *Runner) echoInstructions(ctx context.Context, wrap []string, control, out string, flags ...string) (int64, error) {
	args := append(append(slices.Clone(wrap[1:]), r.Bin), "bench-echo", "--addr", "127.0.0.1:0")
	args = append(args, flags...)
	child, err := StartChild("lark bench-echo (callgrind)", wrap[0], args, childEnv(callgrindEnv...), wrappedStartTimeout)
	if err != nil {
		return 0, err
	}
	defer child.Kill()
	api := &API{URL: "http://" + child.Addr, Client: NewHTTPClient(r.Opts.Clients)}
	token := "lark_" + strings.Repeat("x", 43) // as in runEcho
	n, _, err := r.countInstructions(ctx, control, child.Pid(), out, func(ctx context.Context) error {
		_, _, err := api.Call(ctx, http.MethodPost, "/invocations", token, TaxSyncRequest, http.StatusOK)
		return err
	})
	api.Client.CloseIdleConnections()
	return n, err // the deferred Kill ends it (see SyncInstr)
}

// countInstructions sends the warm-up requests, zeroes the callgrind counters of pid, sends the
// measured requests, dumps the counters and returns their total and its split (CallgrindSplit).
func (r *Runner) countInstructions(ctx context.Context, control string, pid int, out string, do func(context.Context) error) (int64, map[string]int64, error) {
	o := r.Opts
	run := func(n int) error {
		res := Load{Workers: min(o.Clients, n), Count: int64(n), Do: do}.Run(ctx)
		if res.Errors > 0 {
			return fmt.Errorf("%d of %d requests failed, e.g. %s", res.Errors, n, strings.Join(res.ErrorSamples, "; "))
		}
		return ctx.Err()
	}
	if err := run(o.InstrWarmup); err != nil {
		return 0, nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := callgrindControl(ctx, control, "--zero", pid); err != nil {
		return 0, nil, err
	}
	if err := run(o.InstrN); err != nil {
		return 0, nil, err
	}
	if err := callgrindControl(ctx, control, "--dump=measured", pid); err != nil {
		return 0, nil, err
	}
	b, err := os.ReadFile(out + ".1") // the first dump of the run
	if err != nil {
		return 0, nil, fmt.Errorf("callgrind dump: %w", err)
	}
	total, err := CallgrindTotal(bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	split, err := CallgrindSplit(bytes.NewReader(b))
	return total, split, err
}

// callgrindControl sends a command to the callgrind run of pid and waits for it to be done.
func callgrindControl(ctx context.Context, control, command string, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, control, command, strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("callgrind_control %s %d: %w: %s", command, pid, err, b)
	}
	if !strings.Contains(string(b), "OK") {
		return fmt.Errorf("callgrind_control %s %d: %s", command, pid, strings.TrimSpace(string(b)))
	}
	return nil
}

// CallgrindTotal reads the instruction total of a callgrind profile (its "summary:" or "totals:"
// line, the first event being Ir).
func CallgrindTotal(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		v, ok := strings.CutPrefix(line, "summary:")
		if !ok {
			v, ok = strings.CutPrefix(line, "totals:")
		}
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0, fmt.Errorf("callgrind profile: empty %q", line)
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("callgrind profile: no summary or totals line")
}

// instrCell formats instructions per request ("1,383,164 instr/req").
func instrCell(v float64) string { return group(int64(v+0.5)) + " instr/req" }

// instrDetails is sync-instr's line under the table.
func instrDetails(d *InstructionsDetail) []string {
	if d == nil || d.Total == 0 {
		return nil
	}
	out := []string{fmt.Sprintf("sync-instr: %s counted %s instructions of the server over %d sync requests (after %d warm-up, %d clients): %s; echo %s; %.2f×",
		d.Tool, group(d.Total), d.Requests, d.Warmup, d.Clients, instrCell(d.PerRequest), instrCell(d.BaselinePerRequest), d.Ratio)}
	if d.DurablePerRequest > 0 {
		out = append(out, fmt.Sprintf("sync-instr: durable echo (echo plus each call's row and three events, group-committed to SQLite, synchronous=FULL) %s, %.2f× echo; Lark ÷ durable echo %.2f×",
			instrCell(d.DurablePerRequest), d.DurablePerRequest/d.BaselinePerRequest, d.DurableRatio))
	}
	if len(d.Shares) > 0 {
		parts := make([]string, 0, len(d.Shares))
		for _, sh := range d.Shares {
			parts = append(parts, fmt.Sprintf("%s %s (%.2f×)", sh.Group, group(int64(math.Round(sh.PerRequest))), sh.OfBaseline))
		}
		out = append(out, "sync-instr: Lark's instructions per request by what ran them (each function's own; × echo's whole request): "+strings.Join(parts, ", "))
	}
	return out
}

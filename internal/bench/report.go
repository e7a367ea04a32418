package bench

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scenario statuses.
const (
	StatusOK           = "ok"
	StatusFailed       = "failed"        // an error: the figures are not to be trusted
	StatusNotAvailable = "not_available" // the feature it measures is not built yet
)

// Results of a scenario's goals.
const (
	ResultPass = "PASS"
	ResultMiss = "MISS"
	ResultNA   = "n/a"
	ResultFail = "FAILED"
)

// Report is everything one `lark bench` run measured; it is written as the JSON file.
type Report struct {
	Timestamp time.Time  `json:"timestamp"`
	Machine   Machine    `json:"machine"`
	Options   Options    `json:"options"`
	Scenarios []Scenario `json:"scenarios"`
	// TotalS is the wall time of the whole run.
	TotalS float64 `json:"total_s"`
}

// Failed lists the scenarios that errored.
func (r *Report) Failed() []string {
	var out []string
	for _, s := range r.Scenarios {
		if s.Status == StatusFailed {
			out = append(out, s.Name)
		}
	}
	return out
}

// Scenario is one row of the table, with every raw figure behind it.
type Scenario struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
	// Error says why a failed scenario failed; Errors counts failed requests.
	Error        string   `json:"error,omitempty"`
	Errors       int64    `json:"errors"`
	ErrorSamples []string `json:"error_samples,omitempty"`

	Throughput float64  `json:"throughput"`
	Unit       string   `json:"unit,omitempty"` // of Throughput, e.g. "req/s"
	Latency    *Summary `json:"latency,omitempty"`
	Process    *Usage   `json:"process,omitempty"`
	// ClientCPUS is the CPU time of the bench process (the load generator) in the measured window.
	ClientCPUS float64 `json:"client_cpu_window_s,omitempty"`
	// CPU is the server's CPU per unit of work in the measured window, beside the baseline's.
	CPU *CPUPerUnit `json:"cpu_per_unit,omitempty"`
	// MachineLoad is /proc/loadavg as the measured window opened and closed.
	MachineLoad *MachineLoad `json:"machine_load,omitempty"`

	Baseline *Baseline `json:"baseline,omitempty"`
	// Ratio is Throughput ÷ Baseline.Throughput; P99Ratio (sync) is Latency.P99 ÷ Baseline's p99.
	Ratio    float64 `json:"ratio,omitempty"`
	P99Ratio float64 `json:"p99_ratio,omitempty"`
	Goals    []Goal  `json:"goals,omitempty"`
	Result   string  `json:"result"`

	Async      *AsyncDetail      `json:"async,omitempty"`
	ColdStart  *ColdStartDetail  `json:"coldstart,omitempty"`
	Workflow10 *Workflow10Detail `json:"workflow10,omitempty"`
	Sleepers   *SleepersDetail   `json:"sleepers,omitempty"`
	Cron10k    *Cron10kDetail    `json:"cron10k,omitempty"`
	Events     *EventsDetail     `json:"events,omitempty"`
	// Heartbeats is the heartbeat scenario's breakdown.
	Heartbeats *HeartbeatDetail `json:"heartbeats,omitempty"`
	// DAG is the dag scenario's breakdown.
	DAG *DAGDetail `json:"dag,omitempty"`
	// Scale is the scale scenario's breakdown.
	Scale *ScaleDetail `json:"scale,omitempty"`
	// Instructions is the sync-instr scenario's breakdown.
	Instructions *InstructionsDetail `json:"instructions,omitempty"`
	// Sync is the sync scenario's breakdown.
	Sync *SyncDetail `json:"sync,omitempty"`
	// SyncOIDC is the sync-oidc scenario's breakdown.
	SyncOIDC *SyncOIDCDetail `json:"sync_oidc,omitempty"`
	Profile  string          `json:"cpu_profile,omitempty"`
	// StoreWrites is what PostgreSQL counted (async, workflow10 on a PostgreSQL store).
	StoreWrites *StoreWrites `json:"store_writes,omitempty"`
}

// Baseline is what a scenario is compared with.
type Baseline struct {
	Name       string   `json:"name"`
	Throughput float64  `json:"throughput"`
	Unit       string   `json:"unit"`
	Latency    *Summary `json:"latency,omitempty"`
	Process    *Usage   `json:"process,omitempty"`
	ClientCPUS float64  `json:"client_cpu_window_s,omitempty"`
	// CPUPerUnitMs is the baseline's CPU per unit of work (its process's, and its PostgreSQL
	// backends' when it has them), in milliseconds.
	CPUPerUnitMs float64 `json:"cpu_ms_per_unit,omitempty"`
	Errors       int64   `json:"errors"`
	Profile      string  `json:"cpu_profile,omitempty"`
	Note         string  `json:"note,omitempty"`
	// Raw is the async baseline's breakdown (SQLite); PGRaw on PostgreSQL.
	Raw   *RawResult   `json:"raw,omitempty"`
	PGRaw *PGRawResult `json:"raw_postgres,omitempty"`
}

// Goal is one target of a scenario.
type Goal struct {
	Name   string  `json:"name"`   // e.g. "ratio", "p99_ratio", "median_ms"
	Target string  `json:"target"` // e.g. "≥ 0.30"
	Value  float64 `json:"value"`
	Met    bool    `json:"met"`
}

// AsyncDetail is the async scenario's breakdown.
type AsyncDetail struct {
	N int `json:"n"`
	// Submission: N POSTs (202) at SubmitClients concurrency.
	SubmitClients int     `json:"submit_clients"`
	SubmitS       float64 `json:"submit_s"`
	SubmitRate    float64 `json:"submit_per_s"`
	Submit        Summary `json:"submit_latency"`
	// BurnDownS runs from the first submission to the moment none is queued or running.
	BurnDownS float64 `json:"burn_down_s"`
	// DrainS is the part of BurnDownS after the last submission was accepted.
	DrainS float64 `json:"drain_after_submit_s"`
	// LimitS is the time the burn-down was allowed, from the first submission (BurnDownLimit).
	LimitS float64 `json:"limit_s"`
	// NotSucceeded counts invocations that ended in another status (they make the scenario fail).
	NotSucceeded int `json:"not_succeeded"`
	// Commit are the server's group-commit figures over its life (lark_groupcommit_*), when it
	// reported them.
	Commit *CommitFigures `json:"group_commit,omitempty"`
}

// CommitFigures are a server's group commits: how many batches, how many writes they carried,
// the seconds they took in all (from the start of each batch's transaction to its commit), and how
// many batches ran a second time (lark_groupcommit_reruns_total).
type CommitFigures struct {
	Batches  int64   `json:"batches"`
	Writes   int64   `json:"writes"`
	SecondsS float64 `json:"seconds"`
	Reruns   int64   `json:"reruns"`
}

// ColdStartDetail is the coldstart scenario's breakdown, per phase.
type ColdStartDetail struct {
	Iterations int     `json:"iterations"`
	Register   Summary `json:"register"`
	Activate   Summary `json:"activate"`
	FirstCall  Summary `json:"first_invocation"`
}

// Machine describes where the figures come from.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	MemMiB    int64  `json:"mem_mib,omitempty"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"go_version"`
	Kernel    string `json:"kernel,omitempty"`
}

// String is a one-line description.
func (m Machine) String() string {
	parts := []string{fmt.Sprintf("%d CPU", m.CPUs)}
	if m.CPUModel != "" {
		parts[0] += " " + m.CPUModel
	}
	if m.MemMiB > 0 {
		parts = append(parts, fmt.Sprintf("%.1f GiB RAM", float64(m.MemMiB)/1024))
	}
	os := m.GOOS + "/" + m.GOARCH
	if m.Kernel != "" {
		os += " (kernel " + m.Kernel + ")"
	}
	return strings.Join(append(parts, os, m.GoVersion), ", ")
}

// DescribeMachine reads this machine's description (Linux details from /proc when present).
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(f)
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				m.MemMiB = kb / 1024
				break
			}
		}
		f.Close()
	}
	return m
}

// cpuModel is the first "model name" (x86) or "Model"/"CPU part" description in /proc/cpuinfo.
func cpuModel(r io.Reader) string {
	sc := bufio.NewScanner(r)
	var fallback string
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name":
			return v
		case "Model", "Hardware":
			if fallback == "" {
				fallback = v
			}
		}
	}
	return fallback
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteJSONFile writes the report to path.
func (r *Report) WriteJSONFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Markdown columns.
var tableHeader = []string{"scenario", "throughput", "p50", "p99", "CPU s", "peak RSS MiB", "CPU/unit", "load", "baseline",
	"ratio", "CPU/unit ratio", "goal", "result"}

// The table's columns by name (indexes into tableHeader).
const (
	colName = iota
	colThroughput
	colP50
	colP99
	colCPU
	colRSS
	colCPUUnit
	colLoad
	colBaseline
	colRatio
	colCPURatio
	colGoal
	colResult
)

// rightAligned are the table's numeric columns.
var rightAligned = []int{colThroughput, colP50, colP99, colCPU, colRSS, colCPUUnit, colLoad, colRatio, colCPURatio}

// WriteMarkdown writes the table, then a few lines of detail per scenario.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	row := func(cells ...string) {
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	row(tableHeader...)
	sep := make([]string, len(tableHeader))
	for i := range sep {
		sep[i] = "---"
		if slices.Contains(rightAligned, i) {
			sep[i] = "---:"
		}
	}
	row(sep...)
	for _, s := range r.Scenarios {
		row(scenarioCells(s)...)
		if bl := s.Baseline; bl != nil && s.Status != StatusNotAvailable {
			row(baselineCells(s)...)
		}
	}
	b.WriteString("\n")
	for _, s := range r.Scenarios {
		for _, line := range details(s) {
			b.WriteString("- " + line + "\n")
		}
	}
	if r.Machine.CPUs > 0 {
		fmt.Fprintf(&b, "\nMachine: %s. Run: %s, %.0f s in total.\n", r.Machine, r.Timestamp.UTC().Format(time.RFC3339), r.TotalS)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func scenarioCells(s Scenario) []string {
	c := make([]string, len(tableHeader))
	c[colName], c[colResult] = s.Name, s.Result
	if s.Status == StatusNotAvailable {
		c[colThroughput] = cmp.Or(s.Note, "not available yet")
		c[colResult] = ResultNA
		return c
	}
	c[colThroughput] = rate(s.Throughput, s.Unit)
	if s.Throughput == 0 {
		c[colThroughput] = "—"
	}
	if s.Instructions != nil {
		c[colThroughput] = instrCell(s.Instructions.PerRequest)
	}
	if s.Latency != nil {
		c[colP50], c[colP99] = msCell(s.Latency.P50Ms), msCell(s.Latency.P99Ms)
	}
	if s.Process != nil {
		c[colCPU], c[colRSS] = fmt.Sprintf("%.1f", s.Process.CPUS), fmt.Sprintf("%.0f", s.Process.PeakRSSMiB())
	}
	c[colCPUUnit], c[colLoad] = cpuUnitCell(s.CPU), s.MachineLoad.Cell()
	if s.CPU != nil && s.CPU.Ratio > 0 {
		c[colCPURatio] = fmt.Sprintf("%.2f×", s.CPU.Ratio)
	}
	if bl := s.Baseline; bl != nil {
		c[colBaseline] = bl.Name + ": " + rate(bl.Throughput, bl.Unit)
		if bl.Latency != nil && s.P99Ratio > 0 {
			c[colBaseline] += ", p99 " + msCell(bl.Latency.P99Ms)
		}
		if s.Instructions != nil {
			c[colBaseline] = bl.Name + ": " + instrCell(s.Instructions.BaselinePerRequest)
		}
		if s.Ratio > 0 {
			c[colRatio] = fmt.Sprintf("%.3f", s.Ratio)
		}
		if s.P99Ratio > 0 {
			c[colRatio] += fmt.Sprintf("; p99 %.1f×", s.P99Ratio)
		}
		if d := s.Instructions; d != nil && d.Ratio > 0 {
			c[colRatio] = fmt.Sprintf("%.2f× instructions", d.Ratio)
		}
	}
	var goals []string
	for _, g := range s.Goals {
		goals = append(goals, goalText(g))
	}
	c[colGoal] = strings.Join(goals, "; ")
	if s.Status == StatusFailed {
		c[colResult] = ResultFail
	}
	return c
}

// baselineCells is the row under s for its baseline.
func baselineCells(s Scenario) []string {
	bl := s.Baseline
	c := make([]string, len(tableHeader))
	c[colName], c[colThroughput] = "↳ baseline: "+bl.Name, rate(bl.Throughput, bl.Unit)
	if s.Instructions != nil {
		c[colThroughput] = instrCell(s.Instructions.BaselinePerRequest)
	}
	if bl.Latency != nil {
		c[colP50], c[colP99] = msCell(bl.Latency.P50Ms), msCell(bl.Latency.P99Ms)
	}
	if bl.Process != nil {
		c[colCPU] = fmt.Sprintf("%.1f", bl.Process.CPUS)
		if bl.Process.MaxRSSKiB > 0 {
			c[colRSS] = fmt.Sprintf("%.0f", bl.Process.PeakRSSMiB())
		}
	}
	if s.CPU != nil && bl.CPUPerUnitMs > 0 {
		c[colCPUUnit] = cpuMsCell(bl.CPUPerUnitMs) + "/" + unitAbbrev(s.CPU.Unit)
	}
	return c
}

// cpuUnitCell is the CPU/unit cell: the total per unit, and the PostgreSQL backends' share of it
// ("1.30 ms/inv (PG 0.420 ms)"), or "PG n/a" when they could not be read.
func cpuUnitCell(c *CPUPerUnit) string {
	if c == nil {
		return ""
	}
	cell := cpuMsCell(c.TotalMs) + "/" + unitAbbrev(c.Unit)
	switch {
	case c.BackendsMs != nil:
		cell += " (PG " + cpuMsCell(*c.BackendsMs) + ")"
	case strings.HasPrefix(c.BackendsNote, "n/a"):
		cell += " (PG n/a)"
	}
	return cell
}

// unitAbbrev shortens the units of the CPU/unit column.
func unitAbbrev(unit string) string {
	switch unit {
	case "request":
		return "req"
	case "invocation":
		return "inv"
	case "iteration":
		return "iter"
	case "workflow":
		return "wf"
	}
	return unit
}

// cpuMsCell formats CPU milliseconds with three significant digits down to a microsecond.
func cpuMsCell(v float64) string {
	if v >= 1 || v == 0 {
		return msCell(v)
	}
	return fmt.Sprintf("%.3f ms", v)
}

// cpuDetails is the line on a scenario's CPU per unit and the machine's load.
func cpuDetails(s Scenario) []string {
	var parts []string
	if c := s.CPU; c != nil {
		p := fmt.Sprintf("CPU per %s in the measured window (%d): server %s", c.Unit, c.Units, cpuMsCell(c.ServerMs))
		switch {
		case c.BackendsMs != nil:
			p += fmt.Sprintf(" + PostgreSQL backends %s = %s", cpuMsCell(*c.BackendsMs), cpuMsCell(c.TotalMs))
		case c.BackendsNote != "":
			p += "; PostgreSQL backends " + c.BackendsNote
		}
		if c.BaselineMs > 0 {
			p += fmt.Sprintf("; baseline %s", cpuMsCell(c.BaselineMs))
			if c.BaselineNote != "" {
				p += " (" + c.BaselineNote + ")"
			}
			p += fmt.Sprintf(": %.2f×", c.Ratio)
		}
		parts = append(parts, p)
	}
	if m := s.MachineLoad; m != nil {
		parts = append(parts, fmt.Sprintf("load average %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end (%d/%d runnable), %d CPUs",
			m.Start.One, m.Start.Five, m.Start.Fifteen, m.End.One, m.End.Five, m.End.Fifteen, m.End.Runnable, m.End.Threads, m.CPUs))
	}
	if len(parts) == 0 {
		return nil
	}
	return []string{s.Name + ": " + strings.Join(parts, "; ")}
}

func goalText(g Goal) string {
	switch g.Name {
	case "ratio":
		return "ratio " + g.Target
	case "p99_ratio":
		return "p99 " + g.Target + " echo"
	case "median_ms":
		return "median " + g.Target
	case "steps_per_s":
		return g.Target + " steps/s"
	case "p50_ms":
		return "p50 " + g.Target
	case "lag_p99_ms":
		return "lag p99 " + g.Target
	case "instructions_ratio":
		return "instructions " + g.Target + " echo"
	}
	return g.Name + " " + g.Target
}

// details are the report's lines under the table for s: its failure, then each scenario's
// breakdown.
func details(s Scenario) []string {
	out := failureDetails(s)
	if s.Status == StatusNotAvailable {
		return out
	}
	if s.Name == "sync" && s.Latency != nil && s.Baseline != nil && s.Baseline.Latency != nil {
		out = append(out, fmt.Sprintf("sync: %d requests in %.1f s; Lark p50/p99 %s/%s vs echo %s/%s; server CPU in the window %.1f s (Lark) vs %.1f s (echo), load generator %.1f s vs %.1f s",
			s.Latency.Count, windowOf(s), msCell(s.Latency.P50Ms), msCell(s.Latency.P99Ms),
			msCell(s.Baseline.Latency.P50Ms), msCell(s.Baseline.Latency.P99Ms),
			cpuWindow(s.Process), cpuWindow(s.Baseline.Process), s.ClientCPUS, s.Baseline.ClientCPUS))
	}
	out = append(out, cpuDetails(s)...)
	out = append(out, instrDetails(s.Instructions)...)
	out = append(out, asyncDetails(s)...)
	if s.Sync != nil {
		out = append(out, fmt.Sprintf("sync: %.3f durable writes per call (the group committer's writes over the window ÷ its calls)", s.Sync.DurableWritesPerCall))
	}
	out = append(out, syncOIDCDetails(s.SyncOIDC)...)
	if c := s.ColdStart; c != nil {
		out = append(out, fmt.Sprintf("coldstart: %d iterations; p50/p99 register %s/%s, activate %s/%s, first sync invocation %s/%s",
			c.Iterations, msCell(c.Register.P50Ms), msCell(c.Register.P99Ms), msCell(c.Activate.P50Ms), msCell(c.Activate.P99Ms),
			msCell(c.FirstCall.P50Ms), msCell(c.FirstCall.P99Ms)))
	}
	if w := s.Workflow10; w != nil {
		out = append(out, fmt.Sprintf("workflow10: %d-step workflows; %d async starts from %d starters (submitted in %.1f s, p50/p99 %s/%s), all done %.1f s after the first: %s, %s; p50/p99 in the table: %d serial sync workflows (after %d warm-up), mean %s",
			w.Steps, w.N, w.Clients, w.SubmitS, msCell(w.Submit.P50Ms), msCell(w.Submit.P99Ms), w.BurnDownS,
			rate(w.WorkflowsS, "workflows/s"), rate(w.StepsPerS, "steps/s"), w.SerialN, w.SerialWarmup, msCell(w.Serial.MeanMs)))
	}
	if sl := s.Sleepers; sl != nil {
		parked := "all parked before the first was due"
		if !sl.ParkedBeforeDue {
			parked = "NOT all parked before the first was due (lengthen the sleep)"
		}
		out = append(out, fmt.Sprintf("sleepers: %d workflows sleeping %.0f s; submitted in %.1f s (%d clients, p50/p99 %s/%s), all suspended after %.1f s (%s), all done after %.1f s; server RSS while sleeping max %.0f MiB, mean %.0f MiB (%d samples; idle before %.0f MiB)",
			sl.N, sl.SleepS, sl.SubmitS, sl.Clients, msCell(sl.Submit.P50Ms), msCell(sl.Submit.P99Ms), sl.ParkedS, parked, sl.DoneS,
			float64(sl.SleepRSSMaxKiB)/1024, float64(sl.SleepRSSMeanKiB)/1024, sl.RSSSamples, float64(sl.IdleRSSKiB)/1024))
		out = append(out, fmt.Sprintf("sleepers: p50/p99 in the table = wake-up lag (succeeded event − the suspended event's details.until) from the timelines of %d workflows (read in %.1f s); max %s",
			sl.LagSampled, sl.LagFetchS, msCell(sl.Lag.MaxMs)))
	}
	if c := s.Cron10k; c != nil {
		out = append(out, fmt.Sprintf("cron10k: %d schedules %q created in %.1f s (%d clients); instants %s … %s (%d each): %d runs, %d missing; server CPU %.2f cores over %.0f s (firing and running them); p50/p99 in the table = fire lag (max(recorded_at, scheduled_at) − scheduled_at: the run durably queued and runnable), max %s; start lag (started_at − scheduled_at, dispatcher throughput) p50/p99 %s/%s; histories read in %.1f s",
			c.N, c.Expr, c.CreateS, c.Clients, c.First.Format(time.TimeOnly), c.Last.Format(time.TimeOnly), c.Fires, c.Runs, c.Missing,
			c.Cores, c.WindowS, msCell(c.Lag.MaxMs), msCell(c.StartLag.P50Ms), msCell(c.StartLag.P99Ms), c.FetchS))
	}
	if w := s.StoreWrites; w != nil {
		out = append(out, fmt.Sprintf("%s: PostgreSQL counted %d commits (%s) and %d rows inserted, %d updated, %d deleted in the scenario's tables: %.2f commits and %.1f rows written per %s (%d)",
			s.Name, w.Commits, commitsScope(w), w.RowsInserted, w.RowsUpdated, w.RowsDeleted, w.CommitsPer, w.RowsPer, w.Per, w.Units))
	}
	if h := s.Heartbeats; h != nil && h.Writes != nil && h.ControlWrites != nil {
		rows := func(w *StoreWrites) int64 { return w.RowsInserted + w.RowsUpdated + w.RowsDeleted }
		out = append(out, fmt.Sprintf("heartbeat: %d tasks held %.0f s by one worker; heartbeat every %d ms: %d heartbeats carrying %d task reports, PostgreSQL counted %d commits and %d rows; control (no heartbeats, %d sent): %d commits and %d rows; per heartbeat beyond the control: %.3f commits, %.3f rows; the server counted %d heartbeat writes",
			h.Tasks, h.HoldS, h.IntervalMS, h.Heartbeats, h.TaskReports, h.Writes.Commits, rows(h.Writes), h.ControlHeartbeats,
			h.ControlWrites.Commits, rows(h.ControlWrites), h.CommitsPerHeartbeat, h.RowsPerHeartbeat, h.ServerCountedWrites))
	}
	if e := s.Events; e != nil {
		out = append(out, fmt.Sprintf("events: %d events to %d triggers with CEL filters (each event matches one), %d clients: accepted %s in %.1f s (p50/p99 in the table), all %d invocations ended after %.1f s: %s delivered; CEL %.1f µs per event (%.0f ns per filter)",
			e.N, e.Triggers, e.Clients, rate(e.AcceptRate, "events/s"), e.AcceptS, e.Triggered, e.DeliverS, rate(e.DeliverRate, "events/s"),
			e.CELMicrosPerEvent, e.CELNanosPerFilter))
	}
	out = append(out, dagDetails(s.DAG)...)
	return append(out, scaleDetails(s.Scale)...)
}

// failureDetails says why a failed scenario failed, with its error samples.
func failureDetails(s Scenario) []string {
	if s.Status != StatusFailed {
		return nil
	}
	msg := s.Error
	if msg == "" {
		msg = fmt.Sprintf("%d failed requests", s.Errors)
	}
	out := []string{fmt.Sprintf("**%s FAILED**: %s", s.Name, oneLine(msg))}
	for _, e := range s.ErrorSamples {
		out = append(out, fmt.Sprintf("%s error: %s", s.Name, oneLine(e)))
	}
	return out
}

// asyncDetails is the async scenario's breakdown: submission, burn-down, commits and baseline.
func asyncDetails(s Scenario) []string {
	a := s.Async
	if a == nil {
		return nil
	}
	var out []string
	out = append(out, fmt.Sprintf("async: %d invocations; submitted in %.1f s (%s, %d clients, p50/p99 %s/%s); all done %.1f s after the first submission (%.1f s after the last)",
		a.N, a.SubmitS, rate(a.SubmitRate, "req/s"), a.SubmitClients, msCell(a.Submit.P50Ms), msCell(a.Submit.P99Ms), a.BurnDownS, a.DrainS))
	if c := a.Commit; c != nil && c.Batches > 0 {
		out = append(out, fmt.Sprintf("async: the server's group commits: %d batches of %.1f writes on average, %.2f ms each; %d run again",
			c.Batches, float64(c.Writes)/float64(c.Batches), 1000*c.SecondsS/float64(c.Batches), c.Reruns))
	}
	if bl := s.Baseline; bl != nil && bl.Raw != nil {
		out = append(out, fmt.Sprintf("async baseline: %d rows in the same SQLite file, %d-row transactions: insert %s, update→running %s, update→succeeded %s; one lifecycle = 1 insert + 2 updates",
			bl.Raw.Rows, bl.Raw.BatchRows, rate(bl.Raw.InsertRate, "rows/s"), rate(bl.Raw.RunningRate, "rows/s"), rate(bl.Raw.SucceededRate, "rows/s")))
	} else if bl != nil && bl.PGRaw != nil {
		p := bl.PGRaw
		out = append(out, fmt.Sprintf("async baseline: %d rows in the scenario's PostgreSQL database (or schema), inserted %d per statement in %.1f s, then %d workers each claiming up to %d (SELECT … FOR UPDATE SKIP LOCKED, mark running, commit; mark succeeded, commit) in %.1f s; one lifecycle = 1 insert + 2 updates",
			p.Rows, p.BatchRows, p.InsertS, p.Workers, p.ClaimRows, p.ProcessS))
	} else if bl != nil && bl.Note != "" {
		out = append(out, "async baseline: "+bl.Note)
	}
	return out
}

// SyncDetail is the sync scenario's breakdown.
type SyncDetail struct {
	// DurableWritesPerCall is the group committer's writes over the measured window ÷ its calls
	// (lark_groupcommit_batch_size_sum): 1 when each call's start and outcome are one write.
	DurableWritesPerCall float64 `json:"durable_writes_per_call"`
}

// SyncWritesGoal is the most durable writes a sync call may cost on average.
const SyncWritesGoal = 1.05

// syncOIDCDetails is sync-oidc's server CPU per request with each token.
func syncOIDCDetails(d *SyncOIDCDetail) []string {
	if d == nil {
		return nil
	}
	return []string{fmt.Sprintf("sync-oidc: %d windows per token (Lark, OIDC, OIDC, Lark); server CPU per request %s with the OIDC token, %s with a Lark token (%.3f)",
		d.Windows, msCell(d.OIDCCPUPerReqMs), msCell(d.LarkCPUPerReqMs), d.CPURatio)}
}

// commitsScope says what a StoreWrites' commit count covers.
func commitsScope(w *StoreWrites) string {
	if strings.Contains(w.CommitsSource, "own database") {
		return "its own database, reads included"
	}
	return "the whole database, other clients and reads included"
}

func windowOf(s Scenario) float64 {
	if s.Throughput <= 0 || s.Latency == nil {
		return 0
	}
	return float64(s.Latency.Count) / s.Throughput
}

func cpuWindow(u *Usage) float64 {
	if u == nil {
		return 0
	}
	return u.CPUWindowS
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// rate formats a throughput: thousands separated, no decimals from 100 up.
func rate(v float64, unit string) string {
	var n string
	switch {
	case v >= 99.95: // would print as 100.0
		n = group(int64(v + 0.5))
	case v >= 9.995:
		n = fmt.Sprintf("%.1f", v)
	default:
		n = fmt.Sprintf("%.2f", v)
	}
	if unit != "" {
		n += " " + unit
	}
	return n
}

func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// msCell formats milliseconds with three significant digits.
func msCell(v float64) string {
	switch {
	case v >= 99.95:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 9.995:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

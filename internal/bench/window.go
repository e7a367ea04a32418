package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// CPUPerUnit is what a scenario's unit of work cost in CPU inside its measured window: the
// server's own CPU (its /proc/PID/stat), plus on PostgreSQL its backends' when they can be read,
// and the baseline's the same way. Unlike throughput, it barely moves when other work shares the
// machine.
type CPUPerUnit struct {
	// Unit is what is counted: "request", "invocation", "step", "task", "event", ….
	Unit  string `json:"unit"`
	Units int64  `json:"units"`
	// ServerS is the server's CPU seconds in the window, ServerMs the milliseconds per unit.
	ServerS  float64 `json:"server_cpu_s"`
	ServerMs float64 `json:"server_ms_per_unit"`
	// BackendsS and BackendsMs are the PostgreSQL backends' (nil on SQLite, or when they could not
	// be read: BackendsNote says why).
	BackendsS    *float64 `json:"pg_backends_cpu_s,omitempty"`
	BackendsMs   *float64 `json:"pg_backends_ms_per_unit,omitempty"`
	BackendsNote string   `json:"pg_backends_note,omitempty"`
	// TotalMs is ServerMs plus BackendsMs when there is one.
	TotalMs float64 `json:"total_ms_per_unit"`
	// BaselineMs is the baseline's CPU per unit, counted the same way (process, and backends when
	// it has them); Ratio is TotalMs ÷ BaselineMs (lower is better).
	BaselineMs   float64 `json:"baseline_ms_per_unit,omitempty"`
	BaselineNote string  `json:"baseline_note,omitempty"`
	Ratio        float64 `json:"ratio,omitempty"`
}

// NewCPUPerUnit divides the CPU seconds of a window by its units; backends is nil when there are
// none to count (SQLite) or they could not be read (note says why). It returns nil without units.
func NewCPUPerUnit(unit string, units int64, serverS float64, backends *float64, note string) *CPUPerUnit {
	if units <= 0 {
		return nil
	}
	c := &CPUPerUnit{Unit: unit, Units: units, ServerS: serverS, ServerMs: serverS * 1000 / float64(units), BackendsNote: note}
	c.TotalMs = c.ServerMs
	if backends != nil {
		ms := *backends * 1000 / float64(units)
		c.BackendsS, c.BackendsMs = backends, &ms
		c.TotalMs += ms
		c.BackendsNote = ""
	}
	return c
}

// Compare sets the baseline's CPU per unit (milliseconds) and the ratio; a zero baseline leaves
// the ratio unset.
func (c *CPUPerUnit) Compare(baselineMs float64, note string) {
	if c == nil {
		return
	}
	c.BaselineMs, c.BaselineNote = baselineMs, note
	if baselineMs > 0 {
		c.Ratio = c.TotalMs / baselineMs
	}
}

// LoadAvg is one reading of /proc/loadavg.
type LoadAvg struct {
	One     float64 `json:"load1"`
	Five    float64 `json:"load5"`
	Fifteen float64 `json:"load15"`
	// Runnable and Threads are the kernel's scheduling entities running or runnable, and in all.
	Runnable int `json:"runnable"`
	Threads  int `json:"threads"`
}

// ParseLoadAvg reads the contents of /proc/loadavg ("0.52 0.58 0.59 2/467 12345").
func ParseLoadAvg(s string) (LoadAvg, error) {
	f := strings.Fields(s)
	if len(f) < 4 {
		return LoadAvg{}, fmt.Errorf("loadavg: %d fields in %q", len(f), s)
	}
	var l LoadAvg
	var errs [5]error
	l.One, errs[0] = strconv.ParseFloat(f[0], 64)
	l.Five, errs[1] = strconv.ParseFloat(f[1], 64)
	l.Fifteen, errs[2] = strconv.ParseFloat(f[2], 64)
	run, all, ok := strings.Cut(f[3], "/")
	if !ok {
		return LoadAvg{}, fmt.Errorf("loadavg: no runnable/threads in %q", s)
	}
	l.Runnable, errs[3] = strconv.Atoi(run)
	l.Threads, errs[4] = strconv.Atoi(all)
	if err := errors.Join(errs[:]...); err != nil {
		return LoadAvg{}, fmt.Errorf("loadavg %q: %w", s, err)
	}
	return l, nil
}

// MachineLoad is the machine's load when a scenario's measured window opened and when it closed.
type MachineLoad struct {
	CPUs  int     `json:"cpus"`
	Start LoadAvg `json:"start"`
	End   LoadAvg `json:"end"`
}

// Cell is the table's "load" cell: the 1-minute load average at the start and end of the window,
// over the CPUs ("1.2→3.4 /2").
func (m *MachineLoad) Cell() string {
	if m == nil {
		return ""
	}
	return fmt.Sprintf("%.1f→%.1f /%d", m.Start.One, m.End.One, m.CPUs)
}

// readLoadAvg reads /proc/loadavg.
func readLoadAvg() (LoadAvg, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return LoadAvg{}, err
	}
	return ParseLoadAvg(string(b))
}

// window is a scenario's measured window: a process's CPU (/proc/PID/stat), its PostgreSQL
// backends' CPU (pg non-nil), this process's CPU and the machine's load, read as the window opens
// and as it closes. Its mark method fits Load.Mark.
type window struct {
	pid int
	pg  *pgSchema

	cpu    [2]float64
	cpuErr [2]error
	self   [2]float64
	load   [2]LoadAvg
	loadOK [2]bool
	pgCPU  [2]map[int]float64
	pgErr  error
}

// newWindow measures pid, and the backends of pg's connections when pg is not nil.
func newWindow(pid int, pg *pgSchema) *window { return &window{pid: pid, pg: pg} }

// openWindow opens a window on l's server at once.
func openWindow(l *lark) *window {
	w := newWindow(l.Pid(), l.pg)
	w.open()
	return w
}

// mark opens the window on "measure" and closes it on any other phase (Load.Mark).
func (w *window) mark(phase string) {
	if phase == "measure" {
		w.read(0)
	} else {
		w.read(1)
	}
}

func (w *window) open()  { w.read(0) }
func (w *window) close() { w.read(1) }

func (w *window) read(i int) {
	w.cpu[i], w.cpuErr[i] = procCPU(w.pid)
	w.self[i] = selfCPU()
	if l, err := readLoadAvg(); err == nil {
		w.load[i], w.loadOK[i] = l, true
	}
	if w.pg != nil && w.pgErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		w.pgCPU[i], w.pgErr = w.pg.backendCPU(ctx)
		cancel()
	}
}

// serverCPU is the process's CPU seconds in the window; ok is false when it could not be read.
func (w *window) serverCPU() (float64, bool) {
	if w.cpuErr[0] != nil || w.cpuErr[1] != nil {
		return 0, false
	}
	return w.cpu[1] - w.cpu[0], true
}

// clientCPU is this process's CPU seconds in the window (the load generator's).
func (w *window) clientCPU() float64 { return w.self[1] - w.self[0] }

// backends is the PostgreSQL backends' CPU seconds in the window, or nil and why not ("" on
// SQLite).
func (w *window) backends() (*float64, string) {
	switch {
	case w.pg == nil:
		return nil, ""
	case w.pgErr != nil:
		return nil, "n/a: " + w.pgErr.Error()
	}
	v := BackendsDelta(w.pgCPU[0], w.pgCPU[1])
	return &v, ""
}

// machineLoad is the load at both ends of the window, nil when /proc/loadavg is unreadable.
func (w *window) machineLoad() *MachineLoad {
	if !w.loadOK[0] || !w.loadOK[1] {
		return nil
	}
	return &MachineLoad{CPUs: runtime.NumCPU(), Start: w.load[0], End: w.load[1]}
}

// perUnit is the window's CPU per unit (nil when the server's CPU could not be read).
func (w *window) perUnit(unit string, units int64) *CPUPerUnit {
	cpu, ok := w.serverCPU()
	if !ok {
		return nil
	}
	b, note := w.backends()
	return NewCPUPerUnit(unit, units, cpu, b, note)
}

// BackendsDelta is the CPU the backends spent between two readings (pid → CPU seconds): for a
// backend in both, the difference; for one that appeared, all of its CPU. A backend that exited
// in between is lost (the server's pools keep theirs open).
func BackendsDelta(before, after map[int]float64) float64 {
	var sum float64
	for pid, c := range after {
		sum += c - before[pid]
	}
	return max(sum, 0)
}

// backendCPU reads the CPU seconds of each backend serving the scenario's connections (those with
// its application_name), from /proc/<pid>/stat: it needs the database on this machine, in the same
// PID namespace.
func (s *pgSchema) backendCPU(ctx context.Context) (map[int]float64, error) {
	if !localDatabase(s.base) {
		return nil, errors.New("the database is not on this machine")
	}
	conn, err := s.statsConn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, s.name)
	if err != nil {
		return nil, err
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			rows.Close()
			return nil, err
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make(map[int]float64, len(pids))
	for _, pid := range pids {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			return nil, fmt.Errorf("backend %d is not a postgres process of this machine's /proc (a container?)", pid)
		}
		c, err := procCPU(pid)
		if err != nil {
			continue // it exited since
		}
		out[pid] = c
	}
	return out, nil
}

// localDatabase reports whether a postgres:// URL names a server on this machine (loopback or a
// Unix socket).
func localDatabase(dbURL string) bool {
	u, err := url.Parse(dbURL)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if h := u.Query().Get("host"); h != "" {
		host = h
	}
	if host == "" || host == "localhost" || strings.HasPrefix(host, "/") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

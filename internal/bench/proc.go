package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ParseServingAddr reads one stderr line of `lark serve` or `lark bench-echo` and returns the
// listening address when the line is the JSON log record announcing it:
// {"time":…,"level":"INFO","msg":"lark serving","addr":"127.0.0.1:PORT",…}.
func ParseServingAddr(line []byte) (string, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return "", false
	}
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Addr == "" {
		return "", false
	}
	if rec.Msg != "lark serving" && rec.Msg != EchoServingMsg {
		return "", false
	}
	return rec.Addr, true
}

// stderrTail is a child's stderr: it announces the serving address once and keeps the last
// lines for error messages.
type stderrTail struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	addr    chan string
	found   bool
}

const tailLines = 40

func (s *stderrTail) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		line := s.partial[:i]
		if !s.found {
			if addr, ok := ParseServingAddr(line); ok {
				s.found = true
				s.addr <- addr // buffered, written once
			}
		}
		s.lines = append(s.lines, string(line))
		if len(s.lines) > tailLines {
			s.lines = s.lines[len(s.lines)-tailLines:]
		}
		s.partial = s.partial[i+1:]
	}
	return len(p), nil
}

func (s *stderrTail) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(append(s.lines, string(s.partial)), "\n")
}

// Usage is a child process's resource use over its whole life, from wait4's rusage.
type Usage struct {
	UserS     float64 `json:"user_s,omitempty"`
	SysS      float64 `json:"sys_s,omitempty"`
	CPUS      float64 `json:"cpu_s"`                 // user + sys
	MaxRSSKiB int64   `json:"max_rss_kib,omitempty"` // peak resident set size
	WallS     float64 `json:"wall_s"`                // start to exit
	// CPUWindowS is the CPU time spent inside the measured window only (Linux: /proc/PID/stat),
	// which leaves out start-up, provisioning, warm-up and shutdown.
	CPUWindowS float64 `json:"cpu_window_s,omitempty"`
}

// PeakRSSMiB is MaxRSSKiB in MiB.
func (u Usage) PeakRSSMiB() float64 { return float64(u.MaxRSSKiB) / 1024 }

// Child is a running child process (`lark serve` or `lark bench-echo`) whose stderr announced the
// address it listens on.
type Child struct {
	Name    string
	Addr    string
	cmd     *exec.Cmd
	stderr  *stderrTail
	started time.Time
	done    chan struct{} // closed once reaped
	waitErr error
	exited  time.Time
}

// StartChild runs bin with args and env and waits (up to startTimeout) for its stderr to announce
// the listening address.
func StartChild(name, bin string, args, env []string, startTimeout time.Duration) (*Child, error) {
	c := &Child{Name: name, stderr: &stderrTail{addr: make(chan string, 1)}, done: make(chan struct{})}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env = env
	c.cmd.Stdout = c.stderr // neither child writes to stdout; keep anything it does with stderr
	c.cmd.Stderr = c.stderr
	c.cmd.WaitDelay = 5 * time.Second
	c.cmd.SysProcAttr = childSysProcAttr()
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	c.started = time.Now()
	go func() {
		c.waitErr = c.cmd.Wait()
		c.exited = time.Now()
		close(c.done)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case c.Addr = <-c.stderr.addr:
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("%s exited before announcing its address (%v):\n%s", name, c.waitErr, c.stderr) //nolint:errorlint // waitErr is nil after a clean exit: %w would print %!w(<nil>)
	case <-timer.C:
		c.Kill()
		return nil, fmt.Errorf("%s did not announce its address within %v:\n%s", name, startTimeout, c.stderr)
	}
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Stderr is the tail of the child's stderr.
func (c *Child) Stderr() string { return c.stderr.String() }

// Stop sends SIGTERM and waits up to timeout for the child to exit (then kills it), and returns its
// resource use. A child that exited early, failed, or had to be killed is an error (the usage is
// still returned when known).
func (c *Child) Stop(timeout time.Duration) (Usage, error) {
	select {
	case <-c.done:
		return c.usage(), fmt.Errorf("%s exited before it was stopped (%v):\n%s", c.Name, c.waitErr, c.stderr) //nolint:errorlint // waitErr is nil after a clean exit: %w would print %!w(<nil>)
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return Usage{}, fmt.Errorf("%s: SIGTERM: %w", c.Name, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		c.Kill()
		return c.usage(), fmt.Errorf("%s did not exit within %v of SIGTERM; killed:\n%s", c.Name, timeout, c.stderr)
	}
	if c.waitErr != nil {
		return c.usage(), fmt.Errorf("%s: %w:\n%s", c.Name, c.waitErr, c.stderr)
	}
	return c.usage(), nil
}

// Kill kills the child if it still runs and waits until it is reaped (for error paths).
func (c *Child) Kill() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Kill()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
	}
}

func (c *Child) usage() Usage {
	select {
	case <-c.done:
	default:
		return Usage{} // not reaped (a kill that did not take): nothing to read
	}
	u := Usage{WallS: c.exited.Sub(c.started).Seconds()}
	if c.cmd.ProcessState != nil {
		rusageOf(c.cmd.ProcessState, &u)
	}
	return u
}

// childEnv is the environment for children: this process's, without LARK_* variables (which
// would change what the child does: LARK_STORE, LARK_DATA, ...), plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LARK_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

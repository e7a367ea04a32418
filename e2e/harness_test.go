// Package e2e runs the real lark binary: it builds it once, starts `lark dev` on loopback with a
// temporary data directory, and drives it over HTTP (and through the README's shell blocks).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	apiBase      = "/api/serverless-runtime/v1"
	startTimeout = 30 * time.Second // until the export lines are printed
	stopTimeout  = 30 * time.Second // SIGTERM until exit
	killTimeout  = 10 * time.Second // SIGKILL until reaped
	httpTimeout  = 10 * time.Second // one HTTP request
)

// larkBin is the binary built by TestMain; moduleRoot is the repository root.
var larkBin, moduleRoot string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !bytes.Contains(b, []byte("module github.com/larkrun/lark\n")) {
		fmt.Fprintf(os.Stderr, "e2e: %s is not the lark module root (go.mod: %v)\n", root, err)
		return 1
	}
	moduleRoot = root
	dir, err := os.MkdirTemp("", "lark-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	larkBin = filepath.Join(dir, "lark")
	goTool, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the go tool is needed to build the binary:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-o", larkBin, "./cmd/lark")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/lark: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// lockedBuffer is an io.Writer safe for the exec copier goroutine and the test to share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// exportWriter collects stdout and signals ready once the three export lines have been printed.
type exportWriter struct {
	lockedBuffer
	once  sync.Once
	ready chan struct{}
	vars  map[string]string
}

var exportNames = []string{"LARK_URL", "LARK_TOKEN", "LARK_ADMIN_TOKEN"}

func (w *exportWriter) Write(p []byte) (int, error) {
	n, err := w.lockedBuffer.Write(p)
	w.mu.Lock()
	out := w.buf.String()
	w.mu.Unlock()
	vars := map[string]string{}
	// Only complete lines count: a write may end in the middle of one.
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		for _, line := range strings.Split(out[:i], "\n") {
			if kv, ok := strings.CutPrefix(strings.TrimSpace(line), "export "); ok {
				if k, v, ok := strings.Cut(kv, "="); ok {
					vars[k] = v
				}
			}
		}
	}
	complete := true
	for _, k := range exportNames {
		if vars[k] == "" {
			complete = false
		}
	}
	if complete {
		w.once.Do(func() {
			w.vars = vars
			close(w.ready)
		})
	}
	return n, err
}

// larkProc is one running `lark dev`.
type larkProc struct {
	t          testing.TB
	DataDir    string
	URL        string
	Token      string
	AdminToken string

	cmd     *exec.Cmd
	stdout  *exportWriter
	stderr  *lockedBuffer
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // valid after done
}

// larkEnv is the caller's environment without LARK_* variables (LARK_ADMIN_TOKEN, LARK_STORE, ...
// would change what `lark dev` does).
func larkEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LARK_") {
			env = append(env, kv)
		}
	}
	return env
}

// startLark starts `lark dev` on a free loopback port with dataDir (and any extra flags, e.g.
// --workers) and waits for its export lines. The process is always reaped in t.Cleanup; its output
// goes to the test log if the test failed.
func startLark(t testing.TB, dataDir string, extra ...string) *larkProc {
	t.Helper()
	return startLarkEnv(t, dataDir, nil, extra...)
}

// startLarkEnv is startLark with env added to the process's environment (e.g. LARK_FAILPOINT).
func startLarkEnv(t testing.TB, dataDir string, env []string, extra ...string) *larkProc {
	t.Helper()
	require.NotEmpty(t, larkBin, "the lark binary was not built (TestMain)")
	p := &larkProc{t: t, DataDir: dataDir,
		stdout: &exportWriter{ready: make(chan struct{})}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(larkBin, append([]string{"dev", "--addr", "127.0.0.1:0", "--data", dataDir}, extra...)...)
	p.cmd.Env = append(larkEnv(), env...)
	p.cmd.Stdout = p.stdout
	p.cmd.Stderr = p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	require.NoError(t, p.cmd.Start())
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			select {
			case <-p.done:
			case <-time.After(killTimeout):
				t.Errorf("lark (pid %d) not reaped %v after SIGKILL", p.cmd.Process.Pid, killTimeout)
			}
		}
		if t.Failed() {
			p.dump()
		}
	})

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-p.stdout.ready:
	case <-p.done:
		t.Fatalf("lark dev exited before printing its export lines: %v", p.waitErr)
	case <-timer.C:
		t.Fatalf("lark dev printed no export lines within %v", startTimeout)
	}
	v := p.stdout.vars
	p.URL, p.Token, p.AdminToken = v["LARK_URL"], v["LARK_TOKEN"], v["LARK_ADMIN_TOKEN"]
	require.True(t, strings.HasPrefix(p.URL, "http://127.0.0.1:"), "LARK_URL %q is not on 127.0.0.1", p.URL)
	require.True(t, strings.HasPrefix(p.Token, "lark_"), "LARK_TOKEN %q", p.Token)
	require.True(t, strings.HasPrefix(p.AdminToken, "lark_"), "LARK_ADMIN_TOKEN %q", p.AdminToken)
	return p
}

func (p *larkProc) dump() {
	p.t.Logf("lark (data %s) stdout:\n%s", p.DataDir, p.stdout.String())
	p.t.Logf("lark (data %s) stderr:\n%s", p.DataDir, p.stderr.String())
}

// Stop sends SIGTERM and waits for a clean exit (code 0).
func (p *larkProc) Stop() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGTERM))
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.t.Fatalf("lark did not exit within %v of SIGTERM", stopTimeout)
	}
	if p.waitErr != nil || p.cmd.ProcessState.ExitCode() != 0 {
		p.t.Fatalf("lark exited uncleanly after SIGTERM: %v (exit code %d)", p.waitErr, p.cmd.ProcessState.ExitCode())
	}
}

// Kill sends SIGKILL (no graceful shutdown) and waits until the process is reaped.
func (p *larkProc) Kill() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Kill())
	timer := time.NewTimer(killTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.t.Fatalf("lark not reaped within %v of SIGKILL", killTimeout)
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(p.t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"lark should have died of SIGKILL, got %v", p.cmd.ProcessState)
}

// response is one HTTP answer, read completely.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) String() string {
	return fmt.Sprintf("%d %s: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
}

var httpClient = &http.Client{Timeout: httpTimeout}

// do sends a request to the server; token "" sends none, body nil sends none.
func (p *larkProc) do(method, path, token string, body []byte) response {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, rd)
	require.NoError(p.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := httpClient.Do(req)
	require.NoError(p.t, err, "%s %s", method, path)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(p.t, err, "%s %s: reading the body", method, path)
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// requireJSON asserts status and a JSON content type and decodes the body into v (if non-nil).
func requireJSON(t testing.TB, r response, status int, v any) {
	t.Helper()
	require.Equal(t, status, r.Status, "%s", r)
	require.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"), "content type: %s", r)
	if v != nil {
		require.NoError(t, json.Unmarshal(r.Body, v), "%s", r)
	}
}

// problemDoc is the part of an RFC 9457 document the tests look at.
type problemDoc struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Reason string `json:"reason"`
}

// requireProblem asserts an application/problem+json answer with the given status.
func requireProblem(t testing.TB, r response, status int) problemDoc {
	t.Helper()
	require.Equal(t, status, r.Status, "%s", r)
	require.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json"), "content type: %s", r)
	var d problemDoc
	require.NoError(t, json.Unmarshal(r.Body, &d), "%s", r)
	require.Equal(t, status, d.Status, "problem status: %s", r)
	require.NotEmpty(t, d.Type, "problem type: %s", r)
	require.NotEmpty(t, d.Title, "problem title: %s", r)
	return d
}

// listAll pages through a list endpoint (bounded) and returns every item as raw JSON.
func (p *larkProc) listAll(path, token string) []json.RawMessage {
	p.t.Helper()
	var items []json.RawMessage
	cursor := ""
	for page := 0; ; page++ {
		require.Less(p.t, page, 100, "%s: too many pages", path)
		q := "?limit=200"
		if strings.Contains(path, "?") {
			q = "&limit=200"
		}
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		var body struct {
			Items    []json.RawMessage `json:"items"`
			PageInfo struct {
				NextCursor *string `json:"next_cursor"`
				HasMore    bool    `json:"has_more"`
			} `json:"page_info"`
		}
		requireJSON(p.t, p.do(http.MethodGet, path+q, token, nil), http.StatusOK, &body)
		require.NotNil(p.t, body.Items, "%s: items must be an array", path)
		items = append(items, body.Items...)
		if !body.PageInfo.HasMore {
			return items
		}
		require.NotNil(p.t, body.PageInfo.NextCursor, "%s: has_more without next_cursor", path)
		cursor = *body.PageInfo.NextCursor
	}
}

// waitAllTerminal lists every invocation until each id in accepted is present and terminal and
// returns the listing decoded as T. It fails the test at once if an accepted id is missing (lost
// work), and when deadline has passed since since with some still pending; progress, if not nil,
// is called with the pending count on every poll that is not the last.
func waitAllTerminal[T any](t *testing.T, p *larkProc, accepted []string, since time.Time, deadline time.Duration, progress func(pending int)) map[string]T {
	t.Helper()
	for {
		byID := map[string]T{}
		status := map[string]string{}
		for _, raw := range p.listAll(apiBase+"/invocations", p.Token) {
			var it T
			var head struct {
				ID     string `json:"invocation_id"`
				Status string `json:"status"`
			}
			require.NoError(t, json.Unmarshal(raw, &it))
			require.NoError(t, json.Unmarshal(raw, &head))
			byID[head.ID] = it
			status[head.ID] = head.Status
		}
		var lost, pending []string
		for _, id := range accepted {
			st, ok := status[id]
			switch {
			case !ok:
				lost = append(lost, id)
			case !terminalStatuses[st]:
				pending = append(pending, id+"="+st)
			}
		}
		require.Empty(t, lost, "accepted (202) invocations missing after the crash: %d of %d", len(lost), len(accepted))
		if len(pending) == 0 {
			return byID
		}
		if time.Since(since) > deadline {
			sort.Strings(pending)
			t.Fatalf("%d accepted invocations not terminal %v after the restart, e.g. %v", len(pending), deadline, pending[:min(10, len(pending))])
		}
		if progress != nil {
			progress(len(pending))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

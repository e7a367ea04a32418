package e2e

// Helpers for the execution end-to-end tests: starting `lark dev` with extra flags, and HTTP calls
// that return their error instead of failing the test (safe from any goroutine, and usable against
// a server that is being killed).

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startLarkArgs is startLark with extra command-line flags after `lark dev --addr 127.0.0.1:0
// --data dataDir` (e.g. --workers, --unsafe-egress-allow-loopback). The process is reaped in
// t.Cleanup; its output goes to the test log if the test failed.
func startLarkArgs(t testing.TB, dataDir string, extra ...string) *larkProc {
	t.Helper()
	require.NotEmpty(t, larkBin, "the lark binary was not built (TestMain)")
	p := &larkProc{t: t, DataDir: dataDir,
		stdout: &exportWriter{ready: make(chan struct{})}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	args := append([]string{"dev", "--addr", "127.0.0.1:0", "--data", dataDir}, extra...)
	p.cmd = exec.Command(larkBin, args...)
	p.cmd.Env = larkEnv()
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
		t.Fatalf("lark dev %v exited before printing its export lines: %v", extra, p.waitErr)
	case <-timer.C:
		t.Fatalf("lark dev %v printed no export lines within %v", extra, startTimeout)
	}
	v := p.stdout.vars
	p.URL, p.Token, p.AdminToken = v["LARK_URL"], v["LARK_TOKEN"], v["LARK_ADMIN_TOKEN"]
	require.True(t, strings.HasPrefix(p.URL, "http://127.0.0.1:"), "LARK_URL %q is not on 127.0.0.1", p.URL)
	require.True(t, strings.HasPrefix(p.Token, "lark_"), "LARK_TOKEN %q", p.Token)
	require.True(t, strings.HasPrefix(p.AdminToken, "lark_"), "LARK_ADMIN_TOKEN %q", p.AdminToken)
	return p
}

// poolClient is a keep-alive client that keeps up to n idle connections to one host (the default
// transport keeps 2, so concurrent callers would keep opening new connections).
func poolClient(n int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = n, n
	return &http.Client{Transport: tr, Timeout: httpTimeout}
}

// try sends one request like do, but returns transport errors instead of failing the test, so it
// may run on any goroutine and against a server that is dying.
func (p *larkProc) try(c *http.Client, method, path, token string, body []byte) (response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

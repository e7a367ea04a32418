package e2e

// The hostile tenant: every finding of the review in which one tenant tried to exhaust, stall or
// corrupt the shared server, reproduced against the real binary (docs/security.md has the limits
// these tests hold the server to). The noisy neighbour is in noisy_test.go.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// nested is a JSON value nested depth arrays deep.
func nested(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

// timelineBytes reads every page of an invocation's timeline and returns its total size and text.
func (p *larkProc) timelineBytes(t *testing.T, token, id string) (int, string) {
	t.Helper()
	var all strings.Builder
	cursor := ""
	for page := 0; page < 100; page++ {
		q := url.Values{"limit": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := p.do(http.MethodGet, apiBase+"/invocations/"+id+"/timeline?"+q.Encode(), token, nil)
		var out struct {
			PageInfo struct {
				NextCursor *string `json:"next_cursor"`
				HasMore    bool    `json:"has_more"`
			} `json:"page_info"`
		}
		requireJSON(t, r, http.StatusOK, &out)
		all.Write(r.Body)
		if !out.PageInfo.HasMore || out.PageInfo.NextCursor == nil {
			return all.Len(), all.String()
		}
		cursor = *out.PageInfo.NextCursor
	}
	t.Fatal("timeline: too many pages")
	return 0, ""
}

func TestHostileTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("hostile tenant: runs bombs against the server; skipped with -short")
	}
	p := startLark(t, t.TempDir(), "--unsafe-egress-allow-loopback", "--read-timeout", "2s")
	p.tenant(t, "mallory")
	p.tenant(t, "alice")
	adm := p.token(t, "mallory", "mallory-admin", "admin")
	viewer := p.token(t, "mallory", "mallory-viewer", "viewer")

	t.Run("1 results and conversions are charged and bounded", func(t *testing.T) {
		id := p.register(t, adm, fnSpec{id: fnPrefix + "vendor.app.hostile.result_bomb.v1~",
			src: "def main(ctx, input):\n  return [\"x\" * 1000000] * 200\n", limits: map[string]any{"memory_mb": 16}})
		r := p.invoke(t, adm, id, "sync", nil)
		rec := record(t, r, http.StatusOK)
		require.NotEqual(t, "succeeded", rec.Status, "%s", r)
		require.Equal(t, errType("payload_too_large"), rec.Error.TypeID, "%s", r)
		require.Less(t, len(r.Body), 64<<10, "no 200 MB result stored or returned")
		require.NotNil(t, rec.Observability.Metrics.MaxMemoryUsedMB)
		require.LessOrEqual(t, *rec.Observability.Metrics.MaxMemoryUsedMB, int64(16))
		require.Greater(t, *rec.Observability.Metrics.MaxMemoryUsedMB, int64(1), "the conversion is charged")

		echo := p.register(t, adm, fnSpec{id: fnPrefix + "vendor.app.hostile.input_bomb.v1~",
			src: "def main(ctx, input):\n  return [input] * 1000\n", limits: map[string]any{"memory_mb": 512}})
		r = p.invoke(t, adm, echo, "sync", map[string]any{"blob": strings.Repeat("y", 900<<10)})
		rec = record(t, r, http.StatusOK)
		require.Contains(t, []string{errType("payload_too_large"), errType("memory_limit")}, rec.Error.TypeID, "%s", r.Body[:min(len(r.Body), 2000)])
		require.Less(t, len(r.Body), 2<<20)
	})

	t.Run("2 logs and exit messages are bounded", func(t *testing.T) {
		id := p.register(t, adm, fnSpec{id: fnPrefix + "vendor.app.hostile.log_flood.v1~",
			src:    "def main(ctx, input):\n  for i in range(100000):\n    ctx.log(\"L\" * 100000)\n",
			limits: map[string]any{"memory_mb": 512, "timeout_seconds": 30}})
		rec := record(t, p.invoke(t, adm, id, "sync", nil), http.StatusOK)
		size, text := p.timelineBytes(t, adm, rec.ID)
		require.Less(t, size, 3<<20, "the timeline stays small (it was 200 MB)")
		require.Contains(t, text, "log entries dropped", "the dropped entries are counted")

		exit := p.register(t, adm, fnSpec{id: fnPrefix + "vendor.app.hostile.exit_bomb.v1~",
			src:    "def main(ctx, input):\n  r_exit({\"message\": \"M\" * 100000000, \"category\": \"non_retryable\"})\n",
			limits: map[string]any{"memory_mb": 512}})
		r := p.invoke(t, adm, exit, "sync", nil)
		rec = record(t, r, http.StatusOK)
		require.NotNil(t, rec.Error, "%s", r)
		require.LessOrEqual(t, len(rec.Error.Message), 8<<10, "the stored message is capped")
		require.Less(t, len(r.Body), 64<<10)
	})

	t.Run("3 deep JSON is refused everywhere", func(t *testing.T) {
		id := p.register(t, adm, fnSpec{id: fnPrefix + "vendor.app.hostile.echo.v1~", src: "def main(ctx, input):\n  return {}\n"})
		body := fmt.Sprintf(`{"entrypoint_id": %q, "mode": "sync", "params": {"x": %s}}`, id, nested(1000))
		d := requireProblem(t, p.do(http.MethodPost, apiBase+"/invocations", adm, []byte(body)), http.StatusBadRequest)
		require.Contains(t, d.Detail, "nested")
		ev := fmt.Sprintf(`{"event_type_id": "gts.x.core.events.event.v1~vendor.app.x.deep.v1~", "payload": {"x": %s}}`, nested(1000))
		requireProblem(t, p.do(http.MethodPost, apiBase+"/events", adm, []byte(ev)), http.StatusBadRequest)
		// A result nested past the stored limit fails the execution; nothing deep is stored.
		deep := p.register(t, adm, fnSpec{id: fnPrefix + "vendor.app.hostile.deep_result.v1~",
			src: "def main(ctx, input):\n  v = {}\n  for i in range(500):\n    v = {\"a\": v}\n  return v\n"})
		rec := record(t, p.invoke(t, adm, deep, "sync", nil), http.StatusOK)
		require.NotEqual(t, "succeeded", rec.Status)
		require.Contains(t, rec.Error.Message, "levels deep")
	})

	t.Run("4 schema compilation is bounded", func(t *testing.T) {
		// allOf nested 40 deep (80 levels of JSON, within the body limit), each level also
		// carrying a wide sibling, to 36 KB: compiling it cost a minute of CPU.
		wide := `{"allOf":[` + strings.TrimSuffix(strings.Repeat(`{"type":"object","minProperties":0},`, 20), ",") + `]}`
		schema := `{"type":"object"}`
		for depth := 0; depth < 40 || len(schema) < 36<<10; depth++ {
			if depth < 40 {
				schema = `{"allOf":[` + schema + `,` + wide + `]}`
			} else {
				schema = strings.Replace(schema, `{"type":"object"}`, `{"type":"object"},`+wide, 1)
			}
		}
		var sch any
		require.NoError(t, json.Unmarshal([]byte(schema), &sch))
		body := map[string]any{
			"entrypoint_id": fnPrefix + "vendor.app.hostile.schema_bomb.v1~", "title": "bomb",
			"schema": map[string]any{"params": sch},
			"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
				"code": map[string]any{"language": "starlark", "source": "def main(ctx, input):\n  return {}\n"}},
		}
		start := time.Now()
		r := p.do(http.MethodPost, apiBase+"/entrypoints:validate", adm, mustJSON(t, body))
		took := time.Since(start)
		require.Less(t, took, 10*time.Second, "refused before compiling (it took 60 s)")
		require.Contains(t, string(r.Body), "SCHEMA_TOO_COMPLEX", "%s", r)
	})

	t.Run("5 slow clients are cut off, and refused before their body", func(t *testing.T) {
		addr := strings.TrimPrefix(p.URL, "http://")
		send := func(token, body string) (string, time.Duration) {
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			require.NoError(t, err)
			defer conn.Close()
			start := time.Now()
			_, err = fmt.Fprintf(conn, "POST %s/invocations HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				apiBase, addr, token, len(body)+1000, body[:1])
			require.NoError(t, err)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return "error: " + err.Error(), time.Since(start)
			}
			return line, time.Since(start)
		}
		// A viewer may not start invocations: answered at once, without waiting for the body.
		line, took := send(viewer, `{"entrypoint_id": "x"}`)
		require.Contains(t, line, "403", "%q", line)
		require.Less(t, took, 5*time.Second)
		// An operator's body that never completes is cut off by the read timeout (2 s here).
		line, took = send(adm, `{"entrypoint_id": "x"}`)
		require.Less(t, took, 10*time.Second, "the connection is not held forever (%q)", line)
		require.NotContains(t, line, "200")
	})

	t.Run("6 fan-out stays within the child budget", func(t *testing.T) {
		child := p.register(t, adm, fnSpec{id: fnPrefix + "vendor.app.hostile.child.v1~", src: "def main(ctx, input):\n  return {}\n"})
		parent := p.register(t, adm, fnSpec{id: fnPrefix + "vendor.app.hostile.fanout.v1~",
			src:    fmt.Sprintf("def main(ctx, input):\n  rs = r_await_all([r_invoke_v1(%q, {}) for i in range(1000)])\n  return {\"ok\": len([r for r in rs if r.ok])}\n", child),
			limits: map[string]any{"memory_mb": 16, "cpu": 0.1, "timeout_seconds": 30}})
		r := p.invoke(t, adm, parent, "sync", nil)
		rec := record(t, r, http.StatusOK)
		require.Equal(t, "succeeded", rec.Status, "%s", r.Body[:min(len(r.Body), 2000)])
		require.JSONEq(t, `{"ok": 100}`, string(rec.Result))
		items := p.listAll(apiBase+"/invocations?"+url.Values{"$filter": {"entrypoint_id eq '" + child + "'"}}.Encode(), adm)
		require.Len(t, items, 100, "only the budget's children were started")
	})

	t.Run("7 long built-ins stop at the deadline and are billed", func(t *testing.T) {
		id := p.register(t, adm, fnSpec{id: fnPrefix + "vendor.app.hostile.encode_bomb.v1~",
			src:    "def main(ctx, input):\n  return {\"n\": len(json.encode([[0] * 10000] * 10000))}\n",
			limits: map[string]any{"timeout_seconds": 2, "memory_mb": 512, "cpu": 1.0}})
		start := time.Now()
		rec := record(t, p.invoke(t, adm, id, "sync", nil), http.StatusOK)
		took := time.Since(start)
		require.Less(t, took, 8*time.Second, "a 2 s limit (it ran 7.9 s, 21.7 s under load)")
		require.Contains(t, []string{errType("timeout"), errType("cpu_limit")}, rec.Error.TypeID)
		require.NotNil(t, rec.Observability.Metrics.CPUTimeMS)
		require.Greater(t, *rec.Observability.Metrics.CPUTimeMS, int64(0), "the encoder's work is billed")
	})

	t.Run("8 trailing data is refused and the audit log stays readable", func(t *testing.T) {
		requireProblem(t, p.do(http.MethodPatch, apiBase+"/tenants/mallory/serverless-runtime", p.AdminToken, []byte(`{}{}`)), http.StatusBadRequest)
		requireProblem(t, p.do(http.MethodPost, apiBase+"/tenants/mallory/serverless-runtime:enable", p.AdminToken, []byte(`{}{}`)), http.StatusBadRequest)
		requireJSON(t, p.do(http.MethodGet, apiBase+"/audit-events", adm, nil), http.StatusOK, nil)
	})

	t.Run("9 a user's private entrypoint, invocations and schedules stay theirs", func(t *testing.T) {
		u1 := p.token(t, "alice", "u1", "developer")
		u2 := p.token(t, "alice", "u2", "developer")
		admin := p.token(t, "alice", "alice-admin", "admin")
		id := p.register(t, u1, fnSpec{id: fnPrefix + "vendor.app.alice.private.v1~", owner: "user",
			src: "def main(ctx, input):\n  return {\"secret\": input.secret}\n"})
		rec := record(t, p.invoke(t, u1, id, "sync", map[string]any{"secret": "s3cr3t"}), http.StatusOK)
		require.Equal(t, "succeeded", rec.Status)
		requireProblem(t, p.do(http.MethodGet, apiBase+"/invocations/"+rec.ID, u2, nil), http.StatusNotFound)
		requireProblem(t, p.do(http.MethodGet, apiBase+"/invocations/"+rec.ID+"/timeline", u2, nil), http.StatusNotFound)
		requireProblem(t, p.do(http.MethodPost, apiBase+"/invocations/"+rec.ID+":control", u2, []byte(`{"action": "replay"}`)), http.StatusNotFound)
		list := p.do(http.MethodGet, apiBase+"/invocations", u2, nil)
		require.NotContains(t, string(list.Body), "s3cr3t")
		requireJSON(t, p.do(http.MethodGet, apiBase+"/invocations/"+rec.ID, admin, nil), http.StatusOK, nil)

		sch := map[string]any{"schedule_id": "u1-nightly", "entrypoint_id": id, "execution_context": "user",
			"expression": map[string]any{"kind": "cron", "value": "0 3 * * *"}, "input_overrides": map[string]any{"secret": "x"}}
		requireJSON(t, p.do(http.MethodPost, apiBase+"/schedules", u1, mustJSON(t, sch)), http.StatusCreated, nil)
		r := p.do(http.MethodPost, apiBase+"/schedules/u1-nightly:trigger", u2, []byte(`{"params_override": {"secret": "mine"}}`))
		require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, r.Status, "%s", r)
	})

	t.Run("10 the smaller ones", func(t *testing.T) {
		requireProblem(t, p.do(http.MethodGet, apiBase+"/tenants/mallory/usage/history?end=9999-12-31T23:59:59Z", adm, nil), http.StatusUnprocessableEntity)
		// The Bearer scheme is case-insensitive.
		req, err := http.NewRequest(http.MethodGet, p.URL+apiBase+"/entrypoints", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "bearer "+adm)
		res, err := httpClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		// Invalid UTF-8 in a JSON string is refused, not replaced.
		requireProblem(t, p.do(http.MethodPost, apiBase+"/events", adm,
			[]byte("{\"event_type_id\": \"gts.x.core.events.event.v1~vendor.app.x.utf.v1~\", \"payload\": {\"s\": \"\xff\xfe\"}}")), http.StatusBadRequest)
		// The database files are the process's alone.
		for _, name := range []string{"lark.db", "lark.db-wal"} {
			st, err := os.Stat(filepath.Join(p.DataDir, name))
			if os.IsNotExist(err) {
				continue
			}
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), name)
		}
	})
}

// TestDrainExitsZero: SIGTERM while a long sync call runs lets it finish, answers it, and exits 0.
func TestDrainExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops the server; skipped with -short")
	}
	var hits atomic.Int64
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(upstream.Close)
	p := startLark(t, t.TempDir(), "--unsafe-egress-allow-loopback", "--drain-timeout", "20s")
	id := p.register(t, p.Token, fnSpec{id: fnPrefix + "vendor.app.drain.slow.v1~",
		src:    fmt.Sprintf("def main(ctx, input):\n  r_await(r_http_get_v1(%q, timeout_ms=20000))\n  return {\"ok\": True}\n", upstream.URL),
		limits: map[string]any{"timeout_seconds": 30}})
	answered := make(chan response, 1)
	go func() {
		r, err := p.try(poolClient(1), http.MethodPost, apiBase+"/invocations", p.Token,
			mustJSON(t, map[string]any{"entrypoint_id": id, "mode": "sync", "params": map[string]any{}}))
		if err != nil {
			r = response{Status: -1, Body: []byte(err.Error())}
		}
		answered <- r
	}()
	deadline := time.Now().Add(20 * time.Second)
	for hits.Load() == 0 {
		require.True(t, time.Now().Before(deadline), "the sync call did not reach the upstream")
		time.Sleep(5 * time.Millisecond)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		p.Stop() // SIGTERM; fails the test unless the exit code is 0
	}()
	// The drain has begun once the server stops accepting connections; the call is still in flight.
	fresh := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		res, err := fresh.Get(p.URL + "/healthz")
		if err != nil {
			break
		}
		res.Body.Close()
		require.True(t, time.Now().Before(deadline), "the server kept accepting connections after SIGTERM")
	}
	close(release)
	r := <-answered
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	<-stopped
}

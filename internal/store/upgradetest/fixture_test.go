package upgradetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/store"
)

const (
	apiBase     = "/api/serverless-runtime/v1"
	tenantID    = "acme"
	fnPrefix    = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~"
	helloFn     = fnPrefix + "vendor.app.upgrade.hello.v1~"
	secretFn    = fnPrefix + "vendor.app.upgrade.secret.v1~"
	secretValue = "UPGRADE-CANARY-5c1e9a"
	scheduleID  = "nightly"
)

// upstream records the X-Api-Key headers it receives (where the secret function sends the secret).
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	keys []string
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.keys = append(u.keys, r.Header.Get("X-Api-Key"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) received(v string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Contains(u.keys, v)
}

// running is a server started in-process.
type running struct {
	url  string
	srv  *server.Server
	stop func()
}

// start runs a server on cfg (SQLite data directory or postgres:// store) with the operator token
// "op", the test keyring and loopback egress (for the upstream).
func start(t *testing.T, cfg server.Config, kr *keyring.Keyring) running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Addr, cfg.AdminToken, cfg.Keyring, cfg.UnsafeEgressAllowLoopback = "127.0.0.1:0", "op", kr, true
	cfg.PGMaxConns = 4
	srv, err := server.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("start a server: %v", err)
	}
	ln, err := srv.Listen()
	if err != nil {
		cancel()
		require.NoError(t, srv.Close())
		t.Fatalf("listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "the server stops cleanly")
		case <-time.After(30 * time.Second):
			t.Fatal("the server did not stop")
		}
	}
	t.Cleanup(stop)
	return running{url: "http://" + ln.Addr().String(), srv: srv, stop: stop}
}

// call sends a JSON request and returns the status and body.
func (r running) call(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, r.url+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	require.NoError(t, err)
	return resp.StatusCode, b
}

// must is call requiring status want; it decodes the answer into out when out is not nil.
func (r running) must(t *testing.T, want int, method, path, token string, body, out any) {
	t.Helper()
	status, b := r.call(t, method, path, token, body)
	require.Equal(t, want, status, "%s %s: %s", method, path, b)
	if out != nil {
		require.NoError(t, json.Unmarshal(b, out), "%s %s: %s", method, path, b)
	}
}

func (r running) register(t *testing.T, token, id, src string) {
	t.Helper()
	r.must(t, http.StatusCreated, http.MethodPost, apiBase+"/entrypoints", token, map[string]any{
		"entrypoint_id": id, "title": "upgrade probe", "owner": map[string]any{"owner_type": "tenant"},
		"schema": map[string]any{"params": map[string]any{"type": "object"}},
		"traits": map[string]any{
			"invocation": map[string]any{"supported": []any{"sync", "async"}, "default": "sync"},
			"limits":     map[string]any{"timeout_seconds": 10, "memory_mb": 64, "cpu": 0.5},
			"retry":      map[string]any{"max_attempts": 1},
		},
		"implementation": map[string]any{"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
			"code": map[string]any{"language": "starlark", "source": src}},
	}, nil)
	r.must(t, http.StatusOK, http.MethodPost, apiBase+"/entrypoints/"+url.PathEscape(id)+":status", token,
		map[string]any{"action": "activate"}, nil)
}

// invoke runs a sync invocation and returns its record's id and status.
func (r running) invoke(t *testing.T, token, id string, params map[string]any) (string, string) {
	t.Helper()
	var rec struct {
		ID     string `json:"invocation_id"`
		Status string `json:"status"`
		Record *struct {
			ID     string `json:"invocation_id"`
			Status string `json:"status"`
		} `json:"record"`
	}
	r.must(t, http.StatusOK, http.MethodPost, apiBase+"/invocations", token,
		map[string]any{"entrypoint_id": id, "mode": "sync", "params": params}, &rec)
	if rec.Record != nil {
		return rec.Record.ID, rec.Record.Status
	}
	return rec.ID, rec.Status
}

// fixture is what populate wrote, and how the reference store reads it.
type fixture struct {
	token     string
	succeeded string // an invocation that succeeded
	failed    string // one that failed
	// Read back from the reference database through the store.
	records  map[string]invocation.Record
	events   map[string][]invocation.Event
	schedule schedule.Schedule
	secret   store.Secret
}

// populate fills a running server with a tenant, a token, a secret, two functions (one sends the
// secret to up), invocations with their events (a success, a failure, one that used the secret)
// and a schedule.
func populate(t *testing.T, r running, up *upstream) fixture {
	t.Helper()
	var f fixture
	r.must(t, http.StatusOK, http.MethodPost, apiBase+"/tenants/"+tenantID+"/serverless-runtime:enable", "op",
		map[string]any{"governance": map[string]any{"allowed_outbound_domains": []string{"*"}}}, nil)
	var tk struct {
		Token string `json:"token"`
	}
	r.must(t, http.StatusCreated, http.MethodPost, apiBase+"/tokens", "op",
		map[string]any{"tenant_id": tenantID, "subject_id": "acme-admin", "roles": []string{"admin"}}, &tk)
	f.token = tk.Token
	r.must(t, http.StatusCreated, http.MethodPost, apiBase+"/secrets", f.token,
		map[string]any{"name": "api_key", "value": secretValue, "allowed_hosts": []string{"127.0.0.1"}}, nil)
	r.register(t, f.token, helloFn, "def main(ctx, input):\n    if input.get(\"fail\"):\n        fail(\"asked to fail\")\n    return {\"hello\": input.get(\"name\", \"world\")}\n")
	r.register(t, f.token, secretFn, fmt.Sprintf("def main(ctx, input):\n    r = r_await(r_http_get_v1(%q, headers={\"X-Api-Key\": \"{{secret:api_key}}\"}, timeout_ms=5000))\n    return {\"status\": r.response.status_code}\n", up.URL))
	var status string
	f.succeeded, status = r.invoke(t, f.token, helloFn, map[string]any{"name": "upgrade"})
	require.Equal(t, "succeeded", status)
	f.failed, status = r.invoke(t, f.token, helloFn, map[string]any{"fail": true})
	require.Contains(t, []string{"failed", "dead_lettered"}, status)
	_, status = r.invoke(t, f.token, secretFn, map[string]any{})
	require.Equal(t, "succeeded", status)
	require.True(t, up.received(secretValue), "the secret reached the upstream")
	r.must(t, http.StatusCreated, http.MethodPost, apiBase+"/schedules", f.token, map[string]any{
		"schedule_id": scheduleID, "entrypoint_id": helloFn, "expression": map[string]any{"kind": "cron", "value": "0 3 * * *"}}, nil)
	return f
}

// readBack reads the fixture's data through the store st into f (the reference), or checks that
// st holds the same (an upgraded database): tables reports which of the fixture's tables the
// database had before its upgrade.
func readBack(t *testing.T, st store.Store, f *fixture, tables map[string]bool, reference bool) {
	t.Helper()
	ctx := context.Background()
	if reference {
		f.records, f.events = map[string]invocation.Record{}, map[string][]invocation.Event{}
	}
	if tables["invocations"] {
		for _, id := range []string{f.succeeded, f.failed} {
			rec, err := st.Invocation(ctx, tenantID, id)
			require.NoError(t, err, "invocation %s", id)
			evs, err := st.Events(ctx, store.EventLogQuery{TenantID: tenantID, InvocationID: id, Limit: 1000})
			require.NoError(t, err)
			if reference {
				f.records[id], f.events[id] = rec, evs
				require.NotEmpty(t, evs, "the invocation has events")
				continue
			}
			require.Equal(t, f.records[id], rec, "invocation %s reads the same after the upgrade", id)
			if tables["invocation_events"] {
				require.Equal(t, f.events[id], evs, "invocation %s's events read the same after the upgrade", id)
			}
		}
	}
	if tables["schedules"] {
		sch, err := st.Schedule(ctx, tenantID, scheduleID)
		require.NoError(t, err)
		if reference {
			f.schedule = sch
		} else {
			require.Equal(t, f.schedule, sch, "the schedule reads the same after the upgrade")
		}
	}
	if tables["secrets"] {
		sec, err := st.Secret(ctx, tenantID, "api_key")
		require.NoError(t, err)
		if reference {
			f.secret = sec
		} else {
			require.Equal(t, f.secret, sec, "the secret's metadata reads the same after the upgrade")
		}
	}
}

// serves starts a server on the upgraded database and uses what the version had: the token
// authenticates, the invocations, their timelines, the entrypoint and the schedule are served,
// a new invocation runs (the write path), and the secret is still usable with the same key.
func serves(t *testing.T, cfg server.Config, kr *keyring.Keyring, f fixture, tables map[string]bool, up *upstream) {
	t.Helper()
	r := start(t, cfg, kr)
	defer r.stop()
	r.must(t, http.StatusOK, http.MethodGet, "/readyz", "", nil, nil)
	if !tables["tokens"] {
		return
	}
	if tables["invocations"] {
		for id, want := range map[string]string{f.succeeded: "succeeded", f.failed: string(f.records[f.failed].Status)} {
			var rec struct {
				Status string `json:"status"`
			}
			r.must(t, http.StatusOK, http.MethodGet, apiBase+"/invocations/"+id, f.token, nil, &rec)
			require.Equal(t, want, rec.Status, "invocation %s", id)
			var tl struct {
				Items []json.RawMessage `json:"items"`
			}
			r.must(t, http.StatusOK, http.MethodGet, apiBase+"/invocations/"+id+"/timeline?limit=200", f.token, nil, &tl)
			require.NotEmpty(t, tl.Items, "invocation %s's timeline", id)
		}
	}
	if tables["entrypoints"] {
		r.must(t, http.StatusOK, http.MethodGet, apiBase+"/entrypoints/"+url.PathEscape(helloFn), f.token, nil, nil)
		_, status := r.invoke(t, f.token, helloFn, map[string]any{"name": "after"})
		require.Equal(t, "succeeded", status, "a new invocation runs on the upgraded database")
	}
	if tables["schedules"] {
		r.must(t, http.StatusOK, http.MethodGet, apiBase+"/schedules/"+scheduleID, f.token, nil, nil)
	}
	if tables["secrets"] {
		up.mu.Lock()
		up.keys = nil
		up.mu.Unlock()
		_, status := r.invoke(t, f.token, secretFn, map[string]any{})
		require.Equal(t, "succeeded", status)
		require.True(t, up.received(secretValue), "the secret is still readable with the same master key")
	}
}

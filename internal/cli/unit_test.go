package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/pkg/larkclient"
)

// TestLoginProfiles: login checks the token, writes the config with mode 0600, keeps several
// profiles and makes the last one current; flags and environment override the profile.
func TestLoginProfiles(t *testing.T) {
	srv := startServer(t)
	cfgPath := filepath.Join(t.TempDir(), "sub", "config.yaml")
	t.Setenv("LARK_CONFIG", cfgPath)
	for _, k := range []string{"LARK_SERVER", "LARK_URL", "LARK_TOKEN", "LARK_PROFILE"} {
		t.Setenv(k, "")
	}

	r := run(t, "invocations", "list")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, "lark login --server URL --token TOKEN")

	r = run(t, "login", "--server", srv.URL, "--token", "lark_wrong")
	require.Equal(t, ExitAPI, r.code)
	require.Contains(t, r.stderr, "invalid bearer token")
	_, err := os.Stat(cfgPath)
	require.ErrorIs(t, err, os.ErrNotExist, "a refused token is not saved")

	r = run(t, "login", "--server", srv.URL, "--token", srv.Token, "--profile", "local")
	require.Equal(t, 0, r.code, r.stderr)
	st, err := os.Stat(cfgPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	r = run(t, "invocations", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "INVOCATION")

	// A second profile pointing nowhere becomes current: commands now fail with a network error...
	cfg, _, err := loadConfig()
	require.NoError(t, err)
	cfg.Profiles["down"] = Profile{Server: "http://127.0.0.1:1", Token: "x"}
	cfg.Current = "down"
	require.NoError(t, saveConfig(cfgPath, cfg))
	r = run(t, "invocations", "list")
	require.Equal(t, ExitAPI, r.code, r.stderr)
	// ...unless --profile, or LARK_SERVER and LARK_TOKEN, pick the working one.
	require.Equal(t, 0, run(t, "invocations", "list", "--profile", "local").code)
	t.Setenv("LARK_SERVER", srv.URL)
	t.Setenv("LARK_TOKEN", srv.Token)
	require.Equal(t, 0, run(t, "invocations", "list").code)
	r = run(t, "invocations", "list", "--profile", "nope")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, `no profile "nope"`)

	r = run(t, "login")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "local")
	require.Regexp(t, `(?m)^\*\s+down`, r.stdout, "the current profile is starred")
}

func TestExitCode(t *testing.T) {
	require.Equal(t, 0, ExitCode(nil))
	require.Equal(t, ExitFailed, ExitCode(failed("x")))
	require.Equal(t, ExitUsage, ExitCode(usageErr("x")))
	require.Equal(t, ExitAPI, ExitCode(fmt.Errorf("wrapped: %w", &larkclient.Problem{Status: http.StatusNotFound})))
	require.Equal(t, ExitUsage, ExitCode(errors.New(`unknown command "x" for "lark"`)))
	require.Equal(t, ExitFailed, ExitCode(errors.New("anything else")))
}

func TestSubset(t *testing.T) {
	dec := func(s string) any {
		var v any
		require.NoError(t, unmarshalNumbers([]byte(s), &v))
		return v
	}
	server := dec(`{"a": 2.0, "b": {"c": [1, 2], "d": true}, "extra": 1}`)
	require.True(t, subset(dec(`{"a": 2, "b": {"c": [1, 2]}}`), server, nil), "defaults the server adds are not compared")
	require.False(t, subset(dec(`{"b": {"c": [1]}}`), server, nil), "arrays compare whole")
	require.False(t, subset(dec(`{"a": 3}`), server, nil))
	require.True(t, subset(dec(`{"a": 3}`), server, map[string]bool{"a": true}))
	require.False(t, subset(dec(`{"new": 1}`), server, nil))
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"x": null}`), &m))
	require.True(t, subset(m, server, nil), "a null member the server leaves out is equal")
}

// TestDeployKeyedResources: schedules and webhooks found by name, triggers by id; a changed one
// is replaced, an unchanged one left alone.
func TestDeployKeyedResources(t *testing.T) {
	srv := startServer(t)
	t.Setenv("LARK_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("LARK_SERVER", srv.URL)
	t.Setenv("LARK_TOKEN", srv.Token)
	dir := t.TempDir()
	for _, f := range []string{"calculate_tax.yaml", "calculate_tax.star"} {
		b, err := os.ReadFile(filepath.Join("testdata", "project", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	ep := "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.billing.tax.calculate_tax.v1~"
	schedule := func(cron string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "hourly.yaml"), []byte("kind: schedule\nname: hourly tax\nentrypoint_id: "+ep+
			"\nexpression: {kind: cron, value: \""+cron+"\"}\ninput_overrides: {amount: 1}\n"), 0o644))
	}
	schedule("0 * * * *")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hook.json"), []byte(`{"kind": "webhook", "name": "payments hook",
	  "entrypoint_id": "`+ep+`", "authentication": {"type": "none"}}`), 0o644))

	r := run(t, "deploy", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `schedule\s+hourly tax\s+create`, r.stdout)
	require.Regexp(t, `webhook\s+payments hook\s+create`, r.stdout)
	require.Contains(t, r.stdout, "created webhook whk_")

	r = run(t, "deploy", dir)
	require.Contains(t, r.stdout, "Nothing to deploy", r.stdout)

	schedule("30 * * * *")
	r = run(t, "deploy", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `schedule\s+hourly tax\s+update\s+sch_`, r.stdout)
	require.Regexp(t, `webhook\s+payments hook\s+unchanged`, r.stdout)
	r = run(t, "schedules", "list")
	require.Contains(t, r.stdout, "30 * * * *")
	require.Equal(t, 1, strings.Count(r.stdout, "hourly tax"), "updated, not created twice")
}

// TestTail: tail prints each invocation created after it started, once per status it sees, until
// it is interrupted (a normal end, exit 0).
func TestTail(t *testing.T) {
	srv := startServer(t)
	t.Setenv("LARK_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("LARK_SERVER", srv.URL)
	t.Setenv("LARK_TOKEN", srv.Token)
	require.Equal(t, 0, run(t, "deploy", "testdata/project").code)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan result, 1)
	go func() { done <- runTo(ctx, &out, &errOut, "tail") }()
	var ids []string
	for i := range 2 {
		r := run(t, "invoke", "calculate_tax", "-p", fmt.Sprintf(`{"amount": %d}`, i))
		require.Equal(t, 0, r.code, r.stderr)
		ids = append(ids, strings.Fields(r.stdout)[0])
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), ids[0]+"  succeeded") || !strings.Contains(out.String(), ids[1]+"  succeeded") {
		require.True(t, time.Now().Before(deadline), "tail printed:\n%s%s", out.String(), errOut.String())
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	r := <-done
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, ids[0]+"  succeeded"), "each status once")
}

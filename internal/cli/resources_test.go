package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/internal/workerproto"
)

// withMasterKey gives the test server a master key (secrets and webhook secrets need one).
func withMasterKey(t *testing.T) func(*server.Config) {
	return func(cfg *server.Config) {
		file, err := server.LoadOrCreateDevMasterKey(cfg.DataDir)
		require.NoError(t, err)
		cfg.Keyring, err = server.LoadMasterKey("", file)
		require.NoError(t, err)
	}
}

// useServer points the CLI at srv through the environment.
func useServer(t *testing.T, srv testServer) {
	t.Setenv("LARK_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("LARK_SERVER", srv.URL)
	t.Setenv("LARK_TOKEN", srv.Token)
	t.Setenv("LARK_URL", "")
	t.Setenv("LARK_PROFILE", "")
}

// runIn is run with stdin.
func runIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut syncBuffer
	root := newRoot(&globals{now: time.Now, poll: 20 * time.Millisecond}, &out, &errOut, args)
	root.SetIn(strings.NewReader(stdin))
	return execute(ctx, root, &out, &errOut)
}

// TestSecretsAndTokens: a secret is set from stdin and from a file, listed and deleted, and its
// value is never printed; a token is issued (its secret once, on stdout), listed and revoked; the
// audit log shows both, filtered.
func TestSecretsAndTokens(t *testing.T) {
	srv := startServer(t, withMasterKey(t))
	useServer(t, srv)
	n := &normaliser{}

	r := runIn(t, "sk_test_from_stdin\n", "secrets", "set", "stripe_key", "--allowed-hosts", "api.stripe.com", "--description", "Stripe")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "created secret stripe_key (version 1)\n", r.stdout)
	file := filepath.Join(t.TempDir(), "value")
	require.NoError(t, os.WriteFile(file, []byte("sk_test_from_file"), 0o600))
	r = run(t, "secrets", "set", "stripe_key", "--from-file", file)
	require.Equal(t, "updated secret stripe_key (version 2)\n", r.stdout, r.stderr)
	r = runIn(t, "", "secrets", "set", "other")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, "no value")
	r = runIn(t, "v4lue", "secrets", "set", "other")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, "--allowed-hosts is required")
	cmdStep(t, n, "secrets_list", "secrets", "list")
	for _, args := range [][]string{{"secrets", "list", "-o", "json"}, {"secrets", "get", "stripe_key"}} {
		r = run(t, args...)
		require.Equal(t, 0, r.code, r.stderr)
		require.NotContains(t, r.stdout, "sk_test_")
	}
	cmdStep(t, n, "secrets_delete", "secrets", "delete", "stripe_key")
	require.Equal(t, ExitAPI, run(t, "secrets", "get", "stripe_key").code)

	r = run(t, "tokens", "create", "--subject", "ci", "--roles", "viewer,operator", "--description", "CI", "--expires", "720h")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^lark_\S+\n$`, r.stdout, "stdout is the secret alone, for $(…)")
	require.Contains(t, r.stderr, "shown only this once")
	id := regexp.MustCompile(`tok_\w+`).FindString(r.stderr)
	r = cmdStep(t, n, "tokens_list", "tokens", "list", "--filter", "subject_id eq 'ci'")
	require.NotContains(t, r.stdout, "lark_")
	cmdStep(t, n, "tokens_revoke", "tokens", "revoke", id)
	r = run(t, "tokens", "list", "--filter", "subject_id eq 'ci' and revoked eq false")
	require.NotContains(t, r.stdout, id)

	cmdStep(t, n, "audit_list", "audit", "list", "--filter", "resource_type eq 'secret' or resource_type eq 'token' and resource_id eq '"+id+"'")
}

// TestTriggersDeadLettersWebhooksEventTypes drives the event commands: an event type registered
// from a file, a trigger disabled and enabled, its dead letters listed, redriven and purged, its
// metrics as a table, a webhook created, listed, disabled, with its deliveries, and deleted.
func TestTriggersDeadLettersWebhooksEventTypes(t *testing.T) {
	srv := startServer(t, withMasterKey(t))
	useServer(t, srv)
	n := &normaliser{}
	require.Equal(t, 0, run(t, "deploy", "testdata/failing").code)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	const explode = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.demo.util.explode.v1~"
	const paid = "gts.x.core.events.event.v1~acme.shop.orders.paid.v1~"
	r := run(t, "event-types", "create", "-f", write("paid.yaml", "event_type_id: "+paid+"\ndescription: An order was paid\nschema: {type: object}\n"))
	golden(t, n, "event_types_create", []string{"event-types", "create", "-f", "paid.yaml"}, r)
	cmdStep(t, n, "event_types_list", "event-types", "list")
	require.Equal(t, 0, run(t, "triggers", "create", "-f", write("t.yaml", "trigger_id: on-paid\nevent_type_id: "+paid+"\nentrypoint_id: "+explode+"\n")).code)
	cmdStep(t, n, "triggers_disable", "triggers", "disable", "on-paid")
	cmdStep(t, n, "triggers_enable", "triggers", "enable", "on-paid")

	require.Equal(t, 0, run(t, "events", "publish", paid, "--id", "p1", "--data", `{"a": 1}`).code)
	r = waitFor(t, func() (result, bool) {
		r := run(t, "dead-letters", "list", "on-paid")
		return r, strings.Contains(r.stdout, "dlq_")
	})
	golden(t, n, "dead_letters_list", []string{"dead-letters", "list", "on-paid"}, r)
	letter := regexp.MustCompile(`dlq_\w+`).FindString(r.stdout)
	r = run(t, "dead-letters", "redrive", "on-paid", letter)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^redrove `+letter+` as inv_\w+\n$`, r.stdout)
	r = run(t, "dead-letters", "redrive", "on-paid")
	require.Equal(t, ExitUsage, r.code, "one letter or --all")
	waitFor(t, func() (result, bool) {
		r := run(t, "dead-letters", "list", "on-paid")
		return r, strings.Contains(r.stdout, "dlq_")
	})
	require.Equal(t, "purged 1 dead letters of on-paid\n", run(t, "dead-letters", "purge", "on-paid").stdout)
	require.Equal(t, "no dead letters on on-paid\n", run(t, "dead-letters", "redrive", "on-paid", "--all").stdout)
	r = cmdStep(t, n, "triggers_metrics", "triggers", "metrics", "on-paid")
	require.Regexp(t, `(?m)^events_received\s+1$`, r.stdout)
	require.Regexp(t, `(?m)^executions_triggered\s+2$`, r.stdout, "the event's run and its redrive")
	r = run(t, "triggers", "metrics", "on-paid", "-o", "json")
	require.Contains(t, r.stdout, `"events_received": 1`)

	r = run(t, "webhooks", "create", "-f",
		write("gh.json", `{"webhook_trigger_id": "gh", "entrypoint_id": "`+explode+`", "authentication": {"type": "bearer"}}`))
	require.Equal(t, 0, r.code, r.stderr)
	m := regexp.MustCompile(`^created webhook gh \(active\): POST (/\S+)\nsecret \(shown only this once\): (\S+)\n$`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+m[1], strings.NewReader(`{"ref": "main"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+m[2])
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusAccepted, res.StatusCode)
	r = cmdStep(t, n, "webhooks_list", "webhooks", "list")
	require.NotContains(t, r.stdout, "secret")
	cmdStep(t, n, "webhooks_disable", "webhooks", "disable", "gh")
	r = cmdStep(t, n, "webhooks_deliveries", "webhooks", "deliveries", "gh")
	require.Regexp(t, `(?m)^dlv_\w+\s.*\s202\s+accepted\s+inv_`, r.stdout)
	cmdStep(t, n, "webhooks_delete", "webhooks", "delete", "gh")
}

// waitFor runs probe until it reports done (10 s at most) and returns its last result.
func waitFor(t *testing.T, probe func() (result, bool)) result {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, ok := probe()
		if ok {
			return r
		}
		require.True(t, time.Now().Before(deadline), "gave up waiting; last output:\n%s%s", r.stdout, r.stderr)
		require.NoError(t, sleep(t.Context(), 20*time.Millisecond))
	}
}

// TestUsageErrorsAndCompletion: an unknown subcommand or flag anywhere exits 2 with a usage error;
// a group alone prints its help; ENTRYPOINT arguments and --entrypoint flags complete the active
// entrypoints' names from the server, and complete nothing, quickly, when it cannot be reached.
func TestUsageErrorsAndCompletion(t *testing.T) {
	srv := startServer(t)
	useServer(t, srv)
	n := &normaliser{}
	r := cmdStep(t, n, "unknown_subcommand", "invocations", "lsit")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, `did you mean list?`)
	require.Equal(t, ExitUsage, run(t, "secrets", "nope").code)
	require.Equal(t, ExitUsage, run(t, "dead-letters", "list", "t", "--nope").code)
	r = run(t, "webhooks")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "deliveries")

	require.Equal(t, 0, run(t, "deploy", "testdata/project").code)
	r = run(t, "__complete", "invoke", "calc")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "calculate_tax\tCalculate tax\n:4\n", r.stdout)
	r = run(t, "__complete", "invocations", "list", "--entrypoint", "")
	require.Contains(t, r.stdout, "calculate_tax\t")
	require.Contains(t, r.stdout, "process_order\t")
	r = run(t, "__complete", "invoke", "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function")
	require.Contains(t, r.stdout, "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.billing.tax.calculate_tax.v1~\t")
	r = run(t, "__complete", "invoke", "calculate_tax", "")
	require.Equal(t, ":4\n", r.stdout, "one ENTRYPOINT only")

	t.Setenv("LARK_SERVER", "http://127.0.0.1:1")
	start := time.Now()
	r = run(t, "__complete", "invoke", "")
	require.Equal(t, 0, r.code)
	require.Equal(t, ":4\n", r.stdout, "silent on errors")
	require.Less(t, time.Since(start), completionTimeout+time.Second)
}

// TestWorkersList: a worker that polled is listed once its node recorded it, as a table and as
// JSON; a filter that matches nothing prints the empty table.
func TestWorkersList(t *testing.T) {
	ks, err := workerproto.ParseKeys([]string{"wk1:worker-secret-0123456789"})
	require.NoError(t, err)
	srv := startServer(t, func(c *server.Config) { c.WorkerKeys, c.NodeID = ks, "node-a" })
	useServer(t, srv)
	n := &normaliser{}
	env, err := ks.Sign(workerproto.PollRequest{WorkerID: "w-1", MaxTasks: 1, Concurrency: 8, Version: "0.9.0"}, time.Now(), time.Minute)
	require.NoError(t, err)
	b, err := json.Marshal(env)
	require.NoError(t, err)
	hr, err := http.Post(srv.URL+"/api/serverless-runtime/v1"+workerproto.PathPoll, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, hr.Body.Close())
	require.Equal(t, http.StatusOK, hr.StatusCode)
	require.NoError(t, srv.Srv.WorkerHub.Record(context.Background()))

	r := cmdStep(t, n, "workers_list", "workers", "list")
	require.Equal(t, 0, r.code, r.stderr)
	r = run(t, "workers", "list", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"worker_id":"w-1"`)
	r = run(t, "workers", "list", "--filter", "status eq 'offline'")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "w-1")
}

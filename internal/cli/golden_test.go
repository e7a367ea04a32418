package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden with the current output")

// testServer is a real Lark server in process (HTTP, dispatcher, scheduler loops) with the dev
// tenant and its admin token.
type testServer struct {
	URL, Token, TenantID string
	// Srv is the server itself (its services, for what a test drives directly).
	Srv *server.Server
}

// operatorToken is the test server's platform operator token.
const operatorToken = "operator-token-for-tests"

// startServer starts a test server; opts adjust its configuration.
func startServer(t *testing.T, opts ...func(*server.Config)) testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := server.Config{DataDir: dir, AdminToken: operatorToken, Logger: quiet}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := server.New(ctx, cfg)
	require.NoError(t, err)
	creds, err := server.LoadOrCreateDevAdmin(dir)
	require.NoError(t, err)
	require.NoError(t, srv.ProvisionDev(ctx, &creds))
	ts := httptest.NewServer(specChecker.Wrap(srv.Handler())) // every call checked against the OpenAPI document
	done := make(chan struct{}, 2)
	go func() { srv.RunDispatcher(ctx); done <- struct{}{} }()
	go func() { srv.RunSingletons(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		ts.Close()
		require.NoError(t, srv.Close())
	})
	return testServer{URL: ts.URL, Token: creds.Token, TenantID: creds.TenantID, Srv: srv}
}

// result is what one command printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// run runs `lark <args>` (the client commands only) in process, the way cmd/lark does.
func run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut syncBuffer
	return runTo(ctx, &out, &errOut, args...)
}

// runTo runs a command until it returns or ctx ends, writing to out and errOut as it goes.
func runTo(ctx context.Context, out, errOut *syncBuffer, args ...string) result {
	return runWith(ctx, &globals{now: time.Now, poll: 20 * time.Millisecond}, out, errOut, args...)
}

// runWith is runTo with the globals g (tests set its HTTP client for OIDC issuers).
func runWith(ctx context.Context, g *globals, out, errOut *syncBuffer, args ...string) result {
	return execute(ctx, newRoot(g, out, errOut, args), out, errOut)
}

// newRoot builds the lark root command with the client commands, as cmd/lark does.
func newRoot(g *globals, out, errOut *syncBuffer, args []string) *cobra.Command {
	root := &cobra.Command{Use: "lark", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(commands(g)...)
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(args)
	return root
}

// execute runs root until it returns or ctx ends, and reports what it printed and its exit code.
func execute(ctx context.Context, root *cobra.Command, out, errOut *syncBuffer) result {
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(errOut, "lark:", err)
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: ExitCode(err)}
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// normaliser replaces what changes from run to run (ids, times, durations, the server's port)
// with stable placeholders; the same id always gets the same placeholder within one test.
type normaliser struct {
	ids map[string]string
	n   map[string]int
}

var (
	reID       = regexp.MustCompile(`\b(inv|run|evt|ep|bf|sch|trg|corr|mat|tok|aud|dlq|dlv)_[0-9a-f]{24,32}\b`)
	reHash     = regexp.MustCompile(`\b[0-9a-f]{64}\b|\b[0-9a-f]{12}…`)
	reDateTime = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?Z?`)
	reClock    = regexp.MustCompile(`\b\d{2}:\d{2}:\d{2}\.\d{3}(Z|\b)`)
	reDuration = regexp.MustCompile(`\b\d+(\.\d+)?(ms|µs|s)\b`)
	reURL      = regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
)

func (n *normaliser) apply(s string) string {
	if n.ids == nil {
		n.ids, n.n = map[string]string{}, map[string]int{}
	}
	s = reID.ReplaceAllStringFunc(s, func(id string) string {
		if v, ok := n.ids[id]; ok {
			return v
		}
		prefix := id[:strings.IndexByte(id, '_')]
		n.n[prefix]++
		v := fmt.Sprintf("%s_<%d>", prefix, n.n[prefix])
		n.ids[id] = v
		return v
	})
	s = reHash.ReplaceAllString(s, "<HASH>")
	s = reDateTime.ReplaceAllString(s, "<TIME>")
	s = reClock.ReplaceAllString(s, "<CLOCK>")
	s = reDuration.ReplaceAllString(s, "<DUR>")
	s = reURL.ReplaceAllString(s, "<SERVER>")
	return s
}

// golden compares the normalised transcript of r with testdata/golden/<name>.golden (or rewrites
// it with -update).
func golden(t *testing.T, n *normaliser, name string, args []string, r result) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "$ lark %s\n", strings.Join(args, " "))
	b.WriteString(r.stdout)
	if r.stderr != "" {
		b.WriteString("--- stderr\n")
		b.WriteString(r.stderr)
	}
	fmt.Fprintf(&b, "--- exit %d\n", r.code)
	got := n.apply(b.String())
	path := filepath.Join("testdata", "golden", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run the test with -update to create %s", path)
	require.Equal(t, string(want), got, "%s differs (rerun with -update if the change is intended)", path)
}

// cmdStep runs one command and checks it against its golden file.
func cmdStep(t *testing.T, n *normaliser, name string, args ...string) result {
	t.Helper()
	r := run(t, args...)
	golden(t, n, name, args, r)
	return r
}

package workerclient

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoStore: the worker's client, the Starlark executor lark worker injects into it and the Go
// worker SDK built on it never link the store (nor a database driver); the client links neither
// the interpreter nor an OpenTelemetry exporter (pkg/larkworker's TestDeps checks the SDK).
func TestNoStore(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not available")
	}
	for _, pkg := range []string{"github.com/larkrun/lark/internal/workerclient", "github.com/larkrun/lark/internal/workerexec",
		"github.com/larkrun/lark/pkg/larkworker"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		for _, dep := range strings.Split(string(out), "\n") {
			require.False(t, strings.Contains(dep, "/internal/store") || strings.Contains(dep, "sqlite") || strings.Contains(dep, "pgx") ||
				dep == "database/sql", "%s depends on %s", pkg, dep)
			if pkg == "github.com/larkrun/lark/internal/workerclient" {
				require.False(t, strings.Contains(dep, "go.starlark.net") || strings.Contains(dep, "otel/exporters") ||
					strings.HasPrefix(dep, "google.golang.org/grpc"), "%s depends on %s", pkg, dep)
			}
		}
		require.Contains(t, string(out), "github.com/larkrun/lark/internal/workerproto")
	}
}

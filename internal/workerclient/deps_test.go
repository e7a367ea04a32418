package workerclient

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoStore: the worker's client, and the Go worker SDK built on it, never link the store (nor
// a database driver).
func TestNoStore(t *testing.T) {
	for _, pkg := range []string{"github.com/larkrun/lark/internal/workerclient", "github.com/larkrun/lark/pkg/larkworker"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		for _, dep := range strings.Split(string(out), "\n") {
			require.False(t, strings.Contains(dep, "/internal/store") || strings.Contains(dep, "sqlite") || strings.Contains(dep, "pgx") ||
				dep == "database/sql", "%s depends on %s", pkg, dep)
		}
		require.Contains(t, string(out), "github.com/larkrun/lark/internal/workerproto")
	}
}

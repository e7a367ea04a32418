package workerclient

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoStore: the worker's client never links the store (nor a database driver).
func TestNoStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/larkrun/lark/internal/workerclient").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, dep := range strings.Split(string(out), "\n") {
		require.False(t, strings.Contains(dep, "/internal/store") || strings.Contains(dep, "sqlite") || strings.Contains(dep, "pgx"),
			"workerclient depends on %s", dep)
	}
	require.Contains(t, string(out), "github.com/larkrun/lark/internal/run")
}

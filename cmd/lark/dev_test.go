package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDevBanner: the banner keeps its export lines (users paste them; the e2e harness parses
// them) and names the lark login line and the web console.
func TestDevBanner(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	devBanner(&out, devInfo{tenant: "dev", data: "./lark-data", url: "http://127.0.0.1:8080",
		token: "lark_tenant", adminToken: "lark_operator"})
	require.Equal(t, strings.Join([]string{
		`Lark dev server (tenant "dev", data in ./lark-data)`,
		"  export LARK_URL=http://127.0.0.1:8080",
		"  export LARK_TOKEN=lark_tenant",
		"  export LARK_ADMIN_TOKEN=lark_operator",
		"Or save them for the lark client commands: lark login --server http://127.0.0.1:8080 --token lark_tenant",
		"Web console: http://127.0.0.1:8080/console/ (sign in with LARK_TOKEN)",
		"",
	}, "\n"), out.String())
}

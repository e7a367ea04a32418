package api_test

import (
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
)

// TestStoredSchemaOverTheLimits: an entrypoint stored before the schema limits existed, with a
// schema over them, answers 409 schema_not_compilable when started (register a new version with a
// smaller schema), never 500.
func TestStoredSchemaOverTheLimits(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	dir := t.TempDir()
	e := newEnv(t, func(c *server.Config) { c.DataDir = dir })
	adm := invTenant(t, e, "acme")
	id := e.registerActive(t, adm, invFn(t, "billing.old_schema.v1~", "def main(ctx, input):\n  return {}\n"))["entrypoint_id"].(string)

	deep := `{"type":"object"}`
	for range 40 { // 40 levels of subschemas: over the limit of 32
		deep = `{"allOf":[` + deep + `]}`
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "lark.db")+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer db.Close()
	res, err := db.Exec(`UPDATE entrypoints SET definition = json_set(definition, '$.schema.params', json(?)) WHERE gts_id = ?`, deep, id)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	r := e.expectProblem(t, http.StatusConflict, "conflict", http.MethodPost, invPath, adm,
		obj{"entrypoint_id": id, "mode": "sync", "params": obj{}})
	require.Equal(t, "schema_not_compilable", r.Body["reason"], "%s", r)
	require.True(t, strings.Contains(r.Body["detail"].(string), "register a new version"), "%s", r)
}

package pgtest_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// TestContents: every table of the schema is read, text as text and bytea as its raw bytes (a leak
// test searching for a value stored in clear in a bytea column finds it).
func TestContents(t *testing.T) {
	u := pgtest.Schema(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	raw := []byte{0x00, 's', 'e', 'c', 'r', 'e', 't', 0xff}
	for _, q := range []string{
		"CREATE TABLE a (name text, value bytea, n bigint)",
		"CREATE TABLE b (x text)",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO a VALUES ('first', $1, 42), ('second', NULL, NULL)", raw); err != nil {
		t.Fatal(err)
	}
	got := pgtest.Contents(t, u)
	if _, ok := got["b"]; len(got) != 2 || !ok {
		t.Fatalf("tables: %q, want a and b", got)
	}
	for _, want := range [][]byte{[]byte("first"), []byte("second"), raw, []byte("42")} {
		if !bytes.Contains(got["a"], want) {
			t.Errorf("table a: %q lacks %q", got["a"], want)
		}
	}
	if n := bytes.Count(got["a"], []byte("\n")); n != 2 {
		t.Errorf("table a: %d rows, want 2: %q", n, got["a"])
	}
}

// Package pgtest gives tests their own PostgreSQL schema: the database named by
// LARK_TEST_POSTGRES_URL, a fresh schema per call, dropped when the test ends. Tests that need
// PostgreSQL skip, saying why, when the variable is unset.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL is the variable naming the test database.
const EnvURL = "LARK_TEST_POSTGRES_URL"

// URL returns the test database's URL, or skips t when it is unset.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		t.Skip(EnvURL + " is unset: set it to a PostgreSQL URL (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the PostgreSQL tests")
	}
	return u
}

// Schema creates a schema with a unique name in the test database and returns a URL whose
// connections use it (search_path); the schema and everything in it are dropped when t ends.
func Schema(t testing.TB) string {
	t.Helper()
	base := URL(t)
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "lark_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", EnvURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// Contents reads every row of every table in the schema that dbURL selects (a URL from Schema) and
// returns, per table, the rows' values in their native form, one row a line: text as its bytes,
// bytea as its raw bytes (not PostgreSQL's \x hex form), other values as fmt prints them. It is
// what a leak test searches on PostgreSQL, as it searches the database file on SQLite.
func Contents(t testing.TB, dbURL string) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`)
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	if len(tables) == 0 {
		t.Fatal("the schema has no tables")
	}
	out := make(map[string][]byte, len(tables))
	for _, table := range tables {
		rows, err := conn.Query(ctx, "SELECT * FROM "+pgx.Identifier{table}.Sanitize())
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		var b bytes.Buffer
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatalf("read %s: %v", table, err)
			}
			for i, v := range vals {
				if i > 0 {
					b.WriteByte('\t')
				}
				switch v := v.(type) {
				case nil:
				case string:
					b.WriteString(v)
				case []byte:
					b.Write(v)
				default:
					fmt.Fprint(&b, v)
				}
			}
			b.WriteByte('\n')
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		out[table] = b.Bytes()
	}
	return out
}

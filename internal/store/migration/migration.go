// Package migration compares the schema version a database is at with the migrations a binary
// embeds, for both stores: the start-up check (a database newer than the binary, or behind it with
// migrations turned off, stops the start) and `lark migrate status`.
//
// The versions are goose's: the numbers that start the migration files' names. A database's
// applied versions are read from goose's goose_db_version table by each store (Applied).
package migration

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Migration is one migration a binary knows.
type Migration struct {
	// Version is the number that starts its file name.
	Version int64
	// Name is its file name without the directory (e.g. 00015_leader_lease.sql).
	Name string
}

// Status is where a database's schema stands against the migrations a binary knows.
type Status struct {
	// Current is the highest version applied to the database (0: none, a new database).
	Current int64
	// Latest is the highest version the binary knows.
	Latest int64
	// Pending are the known migrations not applied yet, in order.
	Pending []Migration
	// Unknown are versions applied to the database that the binary does not know: a newer binary
	// (or another build) migrated it.
	Unknown []int64
}

// Compute builds the status of a database whose applied versions are applied (in any order;
// version 0, goose's bookkeeping row, is ignored) against the known migrations.
func Compute(known []Migration, applied []int64) Status {
	var st Status
	isKnown := make(map[int64]bool, len(known))
	for _, m := range known {
		isKnown[m.Version] = true
		st.Latest = max(st.Latest, m.Version)
	}
	done := make(map[int64]bool, len(applied))
	for _, v := range applied {
		if v <= 0 {
			continue
		}
		done[v] = true
		st.Current = max(st.Current, v)
		if !isKnown[v] {
			st.Unknown = append(st.Unknown, v)
		}
	}
	slices.Sort(st.Unknown)
	st.Unknown = slices.Compact(st.Unknown)
	for _, m := range known {
		if !done[m.Version] {
			st.Pending = append(st.Pending, m)
		}
	}
	slices.SortFunc(st.Pending, func(a, b Migration) int { return cmp.Compare(a.Version, b.Version) })
	return st
}

// Check says whether a binary may serve the database: an error when the database is newer than
// the binary (TooNewError), or when migrations are pending and migrate is false (BehindError).
func (s Status) Check(migrate bool) error {
	if s.Current > s.Latest || len(s.Unknown) > 0 {
		return &TooNewError{Current: s.Current, Latest: s.Latest, Unknown: s.Unknown}
	}
	if len(s.Pending) > 0 && !migrate {
		return &BehindError{Current: s.Current, Latest: s.Latest, Pending: len(s.Pending)}
	}
	return nil
}

// TooNewError is the start-up error of a database migrated by a newer binary: this one does not
// know its schema, so it must not serve it.
type TooNewError struct {
	// Current is the database's schema version, Latest the binary's.
	Current, Latest int64
	// Unknown are the applied versions the binary does not know.
	Unknown []int64
}

// Error implements error.
func (e *TooNewError) Error() string {
	return fmt.Sprintf("the database's schema is at version %d (applied migrations this binary does not know: %s), "+
		"newer than this binary's version %d: run the lark release that migrated it (or a later one), "+
		"or restore a backup taken before the upgrade (docs/operations.md, \"Upgrades\")",
		e.Current, versions(e.Unknown), e.Latest)
}

// BehindError is the start-up error of a database with pending migrations when migrations at
// start are turned off (--no-migrate).
type BehindError struct {
	// Current is the database's schema version, Latest the binary's.
	Current, Latest int64
	// Pending counts the migrations to apply.
	Pending int
}

// Error implements error.
func (e *BehindError) Error() string {
	return fmt.Sprintf("the database's schema is at version %d, behind this binary's version %d (%d migrations pending), "+
		"and migrations at start are off (--no-migrate): run `lark migrate up` with the same --store/--data first",
		e.Current, e.Latest, e.Pending)
}

func versions(vs []int64) string {
	if len(vs) == 0 {
		return "none"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}

// FromPaths builds the known migrations from goose sources' versions and paths.
func FromPaths(versions []int64, paths []string) []Migration {
	out := make([]Migration, len(versions))
	for i, v := range versions {
		out[i] = Migration{Version: v, Name: path.Base(paths[i])}
	}
	return out
}

// Table is goose's version table.
const Table = "goose_db_version"

// ReadApplied reads the versions applied to db from goose's table without writing anything (goose's
// own readers create the table when it is absent): exists counts the tables named Table that the
// store's queries would see (0 for a new database: nothing applied). A version is applied when its
// latest row says so (a migration that was rolled back has a later row that does not).
func ReadApplied(ctx context.Context, db *sql.DB, exists string) ([]int64, error) {
	var n int
	if err := db.QueryRowContext(ctx, exists).Scan(&n); err != nil {
		return nil, fmt.Errorf("read the schema version: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	rows, err := db.QueryContext(ctx, "SELECT version_id, is_applied FROM "+Table+" ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("read the schema version: %w", err)
	}
	defer rows.Close()
	state := map[int64]bool{}
	for rows.Next() {
		var v int64
		var applied bool
		if err := rows.Scan(&v, &applied); err != nil {
			return nil, fmt.Errorf("read the schema version: %w", err)
		}
		state[v] = applied
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the schema version: %w", err)
	}
	var out []int64
	for v, ok := range state {
		if ok && v > 0 {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

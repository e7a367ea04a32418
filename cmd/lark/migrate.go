package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/store/migration"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

// storeFlags name the database the migrate and backup commands work on, as lark serve's --store
// and --data do.
type storeFlags struct{ store, data string }

func (f *storeFlags) bind(c *cobra.Command) {
	c.Flags().StringVar(&f.store, "store", env("LARK_STORE", "sqlite"), "store: sqlite, or a postgres:// URL (env LARK_STORE)")
	c.Flags().StringVar(&f.data, "data", env("LARK_DATA", "./lark-data"), "data directory of the SQLite store (env LARK_DATA)")
}

// sqlitePath is the SQLite database file, or "" for a postgres:// store; another store is an error.
func (f *storeFlags) sqlitePath() (string, error) {
	switch {
	case f.store == "" || f.store == "sqlite":
		return filepath.Join(f.data, sqlstore.DefaultFile), nil
	case pgstore.IsURL(f.store):
		return "", nil
	default:
		return "", fmt.Errorf("--store: want sqlite or a postgres:// URL, got %q", f.store)
	}
}

// where names the database for the output, never a URL's password.
func (f *storeFlags) where() string {
	p, err := f.sqlitePath()
	if err == nil && p != "" {
		return "sqlite " + p
	}
	return "postgresql " + redactURL(f.store)
}

func migrateCmd() *cobra.Command {
	c := &cobra.Command{Use: "migrate", Short: "Show or apply the database's schema migrations (docs/operations.md, Upgrades)"}
	var sf storeFlags
	status := &cobra.Command{Use: "status", Short: "Print the database's schema version, the latest this binary knows and the pending migrations",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			path, err := sf.sqlitePath()
			if err != nil {
				return err
			}
			var st migration.Status
			if path != "" {
				st, err = sqlstore.SchemaStatus(ctx, path)
			} else {
				st, err = pgstore.SchemaStatus(ctx, sf.store)
			}
			if err != nil {
				return err
			}
			printStatus(c.OutOrStdout(), sf.where(), st)
			return st.Check(true)
		}}
	sf.bind(status)
	var uf storeFlags
	up := &cobra.Command{Use: "up", Short: "Apply the pending migrations (SQLite: with no server running on the data directory)",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			path, err := uf.sqlitePath()
			if err != nil {
				return err
			}
			var before, after migration.Status
			if path != "" {
				before, after, err = sqlstore.MigrateUp(ctx, path)
			} else {
				before, after, err = pgstore.MigrateUp(ctx, uf.store)
			}
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			if len(before.Pending) == 0 {
				fmt.Fprintf(out, "%s: schema version %d is the latest this binary knows: nothing to apply\n", uf.where(), after.Current)
				return nil
			}
			for _, m := range before.Pending {
				fmt.Fprintf(out, "applied %d %s\n", m.Version, m.Name)
			}
			fmt.Fprintf(out, "%s: schema version %d -> %d\n", uf.where(), before.Current, after.Current)
			return nil
		}}
	uf.bind(up)
	c.AddCommand(status, up)
	return c
}

// printStatus writes st as `lark migrate status` shows it.
func printStatus(w io.Writer, where string, st migration.Status) {
	fmt.Fprintf(w, "database:        %s\n", where)
	fmt.Fprintf(w, "current version: %d\n", st.Current)
	fmt.Fprintf(w, "latest known:    %d\n", st.Latest)
	switch {
	case len(st.Unknown) > 0:
		fmt.Fprintf(w, "unknown applied: %v (the database is newer than this binary)\n", st.Unknown)
	case len(st.Pending) == 0:
		fmt.Fprintln(w, "pending:         none")
	default:
		fmt.Fprintf(w, "pending:         %d\n", len(st.Pending))
		for _, m := range st.Pending {
			fmt.Fprintf(w, "  %d %s\n", m.Version, m.Name)
		}
	}
}

// redactURL is s without its password (a placeholder when s does not parse).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/internal/backup"
)

// errPostgresBackup answers `lark backup` on a PostgreSQL store.
var errPostgresBackup = errors.New("lark backup backs up the SQLite store only: back a PostgreSQL store up with pg_dump, " +
	"or pg_basebackup and WAL archiving for point-in-time recovery (docs/operations.md, \"Backup and restore\")")

func backupCmd() *cobra.Command {
	var sf storeFlags
	var to string
	c := &cobra.Command{Use: "backup --to FILE [--data DIR]",
		Short: "Write a consistent backup of the SQLite store while a server may be serving it (docs/operations.md, Backup and restore)",
		Long: `Write a consistent snapshot of the SQLite database in --data, taken while a server may be serving
it, with the dev credentials if any, the objects of the local blob store (--data/blobs: DAG asset
outputs) and a manifest, to one gzipped tar file (mode 0600). A blob store elsewhere (S3, or another
--blob-store directory) is not in it.

The master key (LARK_MASTER_KEY, --master-key-file, or master.key in a dev data directory) is NOT in
the backup: keep it apart, in your secret manager. Without it, the tenants' secrets in the backup
cannot be read.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) (err error) {
			path, err := sf.sqlitePath()
			if err != nil {
				return err
			}
			if path == "" {
				return errPostgresBackup
			}
			if to == "" {
				return errors.New("--to is required: the backup file to write")
			}
			if _, err := os.Stat(to); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("--to %s: the file exists; choose a new name", to)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Written beside its final name, then renamed: a failed backup leaves no partial file.
			out, err := os.CreateTemp(filepath.Dir(to), ".lark-backup-*.partial")
			if err != nil {
				return err
			}
			defer func() {
				if err != nil {
					err = errors.Join(err, os.Remove(out.Name()))
				}
			}()
			res, err := backup.Create(ctx, sf.data, filepath.Dir(to), out, time.Now())
			if err == nil {
				err = out.Sync()
			}
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := os.Rename(out.Name(), to); err != nil {
				return err
			}
			w := c.OutOrStdout()
			fmt.Fprintf(w, "backup of %s written to %s (schema version %d)\n", sf.data, to, res.Manifest.SchemaVersion)
			var blobs, blobBytes int64
			for _, f := range res.Manifest.Files {
				if strings.HasPrefix(f.Name, backup.BlobsDir+"/") {
					blobs, blobBytes = blobs+1, blobBytes+f.Size
					continue
				}
				fmt.Fprintf(w, "  %s  %d bytes  sha256 %s\n", f.Name, f.Size, f.SHA256)
			}
			fmt.Fprintf(w, "  %s/  %d objects, %d bytes\n", backup.BlobsDir, blobs, blobBytes)
			for _, p := range res.LeftOut {
				fmt.Fprintf(c.ErrOrStderr(), "warning: %s is NOT in the backup: keep a copy of it apart; without it the secrets in the backup cannot be read\n", p)
			}
			if len(res.LeftOut) == 0 {
				fmt.Fprintln(c.ErrOrStderr(), "note: the master key is never in a backup: keep it apart; without it the secrets in the backup cannot be read")
			}
			return nil
		}}
	sf.bind(c)
	c.Flags().StringVar(&to, "to", "", "the backup file to write (must not exist)")
	return c
}

func restoreCmd() *cobra.Command {
	var from, data string
	var force bool
	c := &cobra.Command{Use: "restore --from FILE --data DIR",
		Short: "Restore a backup made by lark backup into a data directory (with no server running on it)",
		Long: `Restore a backup made by lark backup into --data. The directory must be empty (or absent) unless
--force, which replaces its database, dev credentials and blobs folder and keeps its other files. Every file is
checked against the backup's manifest, the database with SQLite's integrity check and its schema
version, before anything is replaced. The master key is not in the backup: give the server the key
the data was sealed with (LARK_MASTER_KEY or --master-key-file, or copy master.key for lark dev).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if from == "" || data == "" {
				return errors.New("--from and --data are required")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			in, err := os.Open(from)
			if err != nil {
				return err
			}
			defer in.Close()
			m, err := backup.Restore(ctx, in, data, force)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "restored the backup of %s (schema version %d) into %s\n",
				m.CreatedAt.Format(time.RFC3339), m.SchemaVersion, data)
			if _, err := os.Stat(filepath.Join(data, backup.MasterKeyFile)); errors.Is(err, os.ErrNotExist) {
				fmt.Fprintln(c.ErrOrStderr(), "note: start the server with the master key the secrets were sealed with (it is not in the backup)")
			}
			return nil
		}}
	c.Flags().StringVar(&from, "from", "", "the backup file to read")
	c.Flags().StringVar(&data, "data", "", "the data directory to restore into")
	c.Flags().BoolVar(&force, "force", false, "restore into a directory that is not empty, replacing its database")
	return c
}

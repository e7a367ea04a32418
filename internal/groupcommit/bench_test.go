package groupcommit_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/larkrun/lark/internal/groupcommit"
)

// benchWriters are the fixed writer counts of both benchmarks.
var benchWriters = []int{1, 16, 256}

// baselineOps is how many tx-per-write operations BenchmarkCommit times, before its own loop, to
// compute x_vs_txperwrite on the same machine and in the same run.
const baselineOps = 200

// baselineWarmup untimed operations precede both the baseline and BenchmarkTxPerWrite's loop.
const baselineWarmup = 20

var payload = strings.Repeat("x", 100)

const insertSQL = "INSERT INTO rows (v) VALUES (?)"

func insertRow(tx *sql.Tx) error {
	_, err := tx.Exec(insertSQL, payload)
	return err
}

// txPerWrite is the baseline write: its own BEGIN/INSERT/COMMIT, so one fsync per row.
func txPerWrite(db *sql.DB) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	if err := insertRow(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// openBenchDB is openDB brought to a steady state: a fresh database's first ~1000 commits append to
// a growing WAL file (a metadata flush per fsync) until the first checkpoint, and are markedly
// slower than later ones. One large transaction grows the WAL and leaves free pages behind, so
// every timed commit overwrites WAL space that already exists, whatever the op count.
func openBenchDB(b *testing.B) *sql.DB {
	db := openDB(b)
	for _, q := range []string{
		"CREATE TABLE pad (b BLOB)",
		"INSERT INTO pad VALUES (zeroblob(8 << 20))",
		"DROP TABLE pad",
		"PRAGMA wal_checkpoint(PASSIVE)",
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// runWriters runs op n times in total from exactly w goroutines, which share the n operations
// through an atomic counter, and returns the wall time and the first error.
func runWriters(w, n int, op func() error) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	start := time.Now()
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := op(); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), first
}

// BenchmarkCommit inserts one row per op through a Committer from a fixed number of writers, on a
// single-connection WAL database with synchronous=FULL. Metrics: writes/s, rows/txn (closures per
// committed transaction) and x_vs_txperwrite (throughput over that of tx-per-write with the same
// writer count, measured on the same database just before the timed loop).
func BenchmarkCommit(b *testing.B) {
	for _, w := range benchWriters {
		b.Run(fmt.Sprintf("writers=%d", w), func(b *testing.B) {
			db := openBenchDB(b)
			// Warm up, then time the baseline.
			if _, err := runWriters(w, baselineWarmup, func() error { return txPerWrite(db) }); err != nil {
				b.Fatal(err)
			}
			elapsed, err := runWriters(w, baselineOps, func() error { return txPerWrite(db) })
			if err != nil {
				b.Fatal(err)
			}
			baseline := baselineOps / elapsed.Seconds()

			c := groupcommit.New(db, groupcommit.Options{})
			defer c.Close()
			ctx := context.Background()
			b.ResetTimer()
			elapsed, err = runWriters(w, b.N, func() error { return c.Do(ctx, insertRow) })
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			batches, writes := c.Stats()
			if writes != uint64(b.N) {
				b.Fatalf("committer counted %d writes, want %d", writes, b.N)
			}
			rate := float64(b.N) / elapsed.Seconds()
			b.ReportMetric(rate, "writes/s")
			b.ReportMetric(float64(writes)/float64(batches), "rows/txn")
			b.ReportMetric(rate/baseline, "x_vs_txperwrite")
		})
	}
}

// BenchmarkTxPerWrite is the baseline: the same inserts and writer counts as BenchmarkCommit, each
// in its own transaction on the same kind of single-connection database.
func BenchmarkTxPerWrite(b *testing.B) {
	for _, w := range benchWriters {
		b.Run(fmt.Sprintf("writers=%d", w), func(b *testing.B) {
			db := openBenchDB(b)
			if _, err := runWriters(w, baselineWarmup, func() error { return txPerWrite(db) }); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			elapsed, err := runWriters(w, b.N, func() error { return txPerWrite(db) })
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
			b.ReportMetric(1, "rows/txn")
		})
	}
}

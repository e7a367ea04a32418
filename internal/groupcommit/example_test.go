package groupcommit_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	_ "modernc.org/sqlite"

	"github.com/larkrun/lark/internal/groupcommit"
)

// Concurrent writers share transactions; each Do returns only after its write is committed.
func Example() {
	dir, _ := os.MkdirTemp("", "gc-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "x.db")+"?_pragma=journal_mode(WAL)")
	db.SetMaxOpenConns(1)
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (n INTEGER)"); err != nil {
		panic(err)
	}

	c := groupcommit.New(db, groupcommit.Options{})
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Do(context.Background(), func(tx *sql.Tx) error {
				_, err := tx.Exec("INSERT INTO t VALUES (?)", i)
				return err
			})
		}()
	}
	wg.Wait()
	// A failing write is rolled back on its own.
	err := c.Do(context.Background(), func(tx *sql.Tx) error {
		if _, err := tx.Exec("INSERT INTO t VALUES (-1)"); err != nil {
			return err
		}
		return fmt.Errorf("refused")
	})
	c.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println(n, err)
	// Output: 10 refused
}

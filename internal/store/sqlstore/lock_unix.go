//go:build unix

package sqlstore

import (
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on path (created if needed) for as long as the returned
// file stays open: the embedded database belongs to one process at a time. The kernel drops the lock
// when the process dies, kill -9 included.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another lark process is using this database (%s is locked): %w", path, err)
	}
	return f, nil
}

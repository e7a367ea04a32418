//go:build !unix

package sqlstore

import "os"

// lockFile opens path without locking it: advisory file locks are used on Unix only, so elsewhere
// the operator must not start two processes on one data directory.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

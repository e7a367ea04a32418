//go:build !linux

package pgstore

import (
	"syscall"
	"time"
)

// userTimeout does nothing where TCP_USER_TIMEOUT is not available: keepalives alone end a
// connection to a silent peer, once it is idle.
func userTimeout(time.Duration) func(network, address string, c syscall.RawConn) error { return nil }

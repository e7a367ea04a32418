package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/groupcommit"
)

// DefaultWriteWait is the API's default bound of a request's wait for the store's writer (the
// server's --store-write-wait).
const DefaultWriteWait = 5 * time.Second

// WithWriteWait returns ctx carrying a bound d of how long a write made with it waits for the
// store's writer to start it; past it the write fails with ErrUnavailable and never runs (d <= 0:
// no bound). The API sets it on every request; the engine's own writes (the dispatcher's claims
// and outcomes, the loops') carry none and wait, so that finished work is never dropped.
func WithWriteWait(ctx context.Context, d time.Duration) context.Context {
	return groupcommit.WithMaxWait(ctx, d)
}

// ErrUnavailable says the store could not take or answer an operation within its bound: the
// writer did not start a write within its wait (a slow or stuck database), or the database is
// unreachable or shutting down. Nothing was applied; the API answers 503 with Retry-After.
var ErrUnavailable = errors.New("store unavailable")

// IsUnavailable reports whether err means the store is unavailable rather than that the operation
// is wrong: ErrUnavailable; a network error reaching the database (connection refused, reset,
// timed out, a connection cut mid-answer); or one of PostgreSQL's SQLSTATEs for a connection failure (class 08), an operator
// intervention (57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now, 57014 a
// statement cancelled by statement_timeout) or too many connections (53300). It looks at
// SQLSTATEs through the SQLState method that PostgreSQL drivers' errors have, so this package does
// not depend on a driver.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		code := st.SQLState()
		switch {
		case strings.HasPrefix(code, "08"), code == "57P01", code == "57P02", code == "57P03", code == "57014", code == "53300":
			return true
		}
	}
	return false
}

type outlastKey struct{}

// OutlastOutages returns ctx marking the writes made with it as worth waiting for: a write that
// failed without applying anything because the database could not be reached (a connection
// refused, or lost before the commit was sent) is run again, with backoff, for up to d after its
// first such failure, or until ctx ends, instead of giving up after the store's few retries. A
// write whose commit was cut (its outcome unknown) is not run again. The dispatcher's attempts
// write their outcomes with it, d their lease's grace, so that an attempt that finished while the
// database was away is recorded when it comes back instead of being run again once its lease
// expires. A store whose database cannot go away (SQLite) ignores it.
func OutlastOutages(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, outlastKey{}, d)
}

// OutagesOutlasted reports OutlastOutages's d for a write made with ctx; ok is false for a write
// made without it.
func OutagesOutlasted(ctx context.Context) (d time.Duration, ok bool) {
	d, ok = ctx.Value(outlastKey{}).(time.Duration)
	return d, ok && d > 0
}

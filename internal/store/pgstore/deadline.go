package pgstore

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Partitions: how the store gives up on a database that stopped answering.
//
// A database that goes away cleanly (a restart, a refused or reset connection) fails statements at
// once. A network partition does not: packets are dropped, nothing is closed or reset, and a
// statement waits for an answer that does not come. PostgreSQL's statement_timeout cannot help,
// since the server never hears of the statement, so the bound is on this side:
//
//   - Every operation on a connection of the store's handle (database/sql over the pool: reads,
//     the committers' transactions, TenantLoads, the leader claim) runs under a deadline of
//     Options.ClientTimeout, counted from when it asks for a connection: taking one from the pool
//     (or opening one), the statement and the reading of its rows, or a transaction from BEGIN to
//     COMMIT (pconn.deadline). pgx closes a connection whose operation passed its deadline, so the
//     pool never hands it out again; the operation fails with a timeout, which the store reports
//     as store.ErrUnavailable (a request answers 503 with Retry-After).
//   - Opening a connection is bounded by the same timeout, unless the URL sets connect_timeout.
//   - The kernel ends a connection whose peer is silent (keepalive probes unanswered, or data
//     unacknowledged for Options.TCPTimeout: TCP_USER_TIMEOUT on Linux), so that connections with
//     no deadline of their own (the LISTEN connection, the queue vacuum) fail too, and the server
//     is asked to do the same for its end (tcp_keepalives_*, tcp_user_timeout) and to end a
//     transaction this side abandoned (idle_in_transaction_session_timeout), releasing its locks.
//
// A request whose write was taken by a committer therefore waits at most for the batch in front of
// it and its own (two ClientTimeouts), and one that was not taken at most --store-write-wait.

// DefaultClientTimeout is Options.ClientTimeout's default: a request in flight when the database
// stops answering answers 503 within about twice it (a batch in front of its write, then its own).
const DefaultClientTimeout = 4 * time.Second

// DefaultTCPTimeout is Options.TCPTimeout's default.
const DefaultTCPTimeout = 15 * time.Second

// timeouts are the resolved bounds of Options.ClientTimeout and TCPTimeout (0: none).
type timeouts struct {
	client, tcp time.Duration
}

func timeoutsOf(o Options) timeouts {
	t := timeouts{client: DefaultClientTimeout, tcp: DefaultTCPTimeout}
	if o.ClientTimeout != 0 {
		t.client = max(o.ClientTimeout, 0)
	}
	if o.TCPTimeout != 0 {
		t.tcp = max(o.TCPTimeout, 0)
	}
	return t
}

// applyTimeouts sets cfg's dialer (keepalives, TCP_USER_TIMEOUT), its connect timeout and the
// server-side settings of its connections that the URL does not set.
func applyTimeouts(cfg *pgxpool.Config, t timeouts) {
	cc := cfg.ConnConfig
	if cc.ConnectTimeout == 0 && t.client > 0 {
		cc.ConnectTimeout = t.client
	}
	if t.client > 0 {
		cfg.PingTimeout = t.client
	}
	rp := cc.RuntimeParams
	setDefault := func(k, v string) {
		if _, set := rp[k]; !set {
			rp[k] = v
		}
	}
	if t.client > 0 {
		// A transaction abandoned by this side (its deadline passed, the connection is gone) holds its
		// locks until the server ends it.
		setDefault("idle_in_transaction_session_timeout", strconv.FormatInt(max(4*t.client, 10*time.Second).Milliseconds(), 10))
	}
	if t.tcp <= 0 {
		return
	}
	idle, interval, count := keepalive(t.tcp)
	d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: idle, Interval: interval, Count: count},
		Control: userTimeout(t.tcp)}
	cc.DialFunc = d.DialContext
	setDefault("tcp_keepalives_idle", strconv.Itoa(int(idle/time.Second)))
	setDefault("tcp_keepalives_interval", strconv.Itoa(int(interval/time.Second)))
	setDefault("tcp_keepalives_count", strconv.Itoa(count))
	setDefault("tcp_user_timeout", strconv.FormatInt(t.tcp.Milliseconds(), 10))
}

// keepalive splits d, the time a silent peer is given, into the keepalive's idle time, interval
// and probe count: idle d/3, then four probes d/6 apart (at least a second each: the kernel counts
// in seconds).
func keepalive(d time.Duration) (idle, interval time.Duration, count int) {
	idle = max(d/3, time.Second).Truncate(time.Second)
	interval = max(d/6, time.Second).Truncate(time.Second)
	return idle, interval, 4
}

// deadline is the client-side bound of the operations of one connection of the store's handle: a
// pconn is one operation (the handle keeps no idle connections: each statement or transaction takes
// one from the pool and gives it back), bounded from when it asked for the connection.
type deadline struct {
	at time.Time // zero: no bound
	mu sync.Mutex
	// cancels end the contexts made for the operation's calls once it is over (Close, ResetSession).
	cancels []context.CancelFunc
	// background is the bounded context.Background() of the operation, made once: a transaction's
	// statements run with it (the committer's), many per batch.
	background context.Context
}

// arm starts a new operation bounded by d from now (d <= 0: none), ending the previous one's contexts.
func (b *deadline) arm(d time.Duration) {
	b.release()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.at = time.Time{}
	if d > 0 {
		b.at = time.Now().Add(d)
	}
}

// bound returns ctx bounded by the operation's deadline (ctx itself when there is none). The
// context stays valid until release: a query's rows are read after the call that made them returns.
func (b *deadline) bound(ctx context.Context) context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.at.IsZero() {
		return ctx
	}
	if d, ok := ctx.Deadline(); ok && !d.After(b.at) {
		return ctx
	}
	isBackground := ctx == bg
	if isBackground && b.background != nil {
		return b.background
	}
	ctx, cancel := context.WithDeadline(ctx, b.at)
	b.cancels = append(b.cancels, cancel)
	if isBackground {
		b.background = ctx
	}
	return ctx
}

// release ends the contexts bound made.
func (b *deadline) release() {
	b.mu.Lock()
	cancels := b.cancels
	b.cancels, b.background = nil, nil
	b.mu.Unlock()
	for _, c := range cancels {
		c()
	}
}

package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// wakeChannel names the NOTIFY channel of the processes sharing one database and schema: channels
// are database-wide, so the schema's name is part of it (hashed: a channel is an identifier of at
// most 63 bytes), and deployments or tests in other schemas do not wake each other.
func wakeChannel(where string) string {
	h := fnv.New64a()
	h.Write([]byte("lark.wake." + where))
	return fmt.Sprintf("lark_wake_%016x", h.Sum64())
}

// WakeChannel is the NOTIFY channel of this store's cross-node wake-ups.
func (s *Store) WakeChannel() string { return s.wakeChannel }

// Notify sends payload on the wake-up channel to every process listening on it (Listen): one
// pg_notify, delivered once the statement's own transaction commits, so after the writes the caller
// committed before calling it. It gives up after Options.ClientTimeout.
func (s *Store) Notify(ctx context.Context, payload string) error {
	return s.within(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", s.wakeChannel, payload)
		return err
	})
}

// Listen listens on the wake-up channel on a connection of its own (outside the pool, so it never
// holds one of the pool's connections) and calls f with each notification's payload, in order,
// until ctx ends or the connection fails; it returns the error (ctx's when it ended). ready, when not
// nil, is called once the LISTEN is in place: notifications sent after it returns are delivered.
// The caller reconnects by calling Listen again.
//
// A connection that stays silent for Options.TCPTimeout is pinged, within Options.ClientTimeout:
// a database that stopped answering without closing the connection (a partition, or a middlebox
// that keeps the TCP connection alive) fails the ping, and the caller reconnects, instead of
// waiting on a dead connection.
func (s *Store) Listen(ctx context.Context, ready func(), f func(payload string)) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("listen: connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx) // a dead connection is closed all the same
	}()
	if err := s.within(ctx, func(ctx context.Context) error {
		_, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.wakeChannel}.Sanitize())
		return err
	}); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if ready != nil {
		ready()
	}
	for {
		n, err := s.waitNotification(ctx, conn)
		if err != nil {
			return err
		}
		f(n.Payload)
	}
}

// waitNotification waits for conn's next notification, pinging conn each Options.TCPTimeout of
// silence (30 s when that is not set).
func (s *Store) waitNotification(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	idle := s.timeouts.tcp
	if idle <= 0 {
		idle = 30 * time.Second
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, idle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return n, err
		}
		if err := s.within(ctx, conn.Ping); err != nil {
			return nil, fmt.Errorf("listen: the connection stopped answering: %w", err)
		}
	}
}

// within runs fn under ctx bounded by Options.ClientTimeout.
func (s *Store) within(ctx context.Context, fn func(context.Context) error) error {
	if s.timeouts.client > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeouts.client)
		defer cancel()
	}
	return fn(ctx)
}

package pgstore

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
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
// committed before calling it.
func (s *Store) Notify(ctx context.Context, payload string) error {
	_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", s.wakeChannel, payload)
	return err
}

// Listen listens on the wake-up channel on a connection of its own (outside the pool, so it never
// holds one of the pool's connections) and calls f with each notification's payload, in order,
// until ctx ends or the connection fails; it returns the error (ctx's when it ended). ready, when not
// nil, is called once the LISTEN is in place: notifications sent after it returns are delivered.
// The caller reconnects by calling Listen again.
func (s *Store) Listen(ctx context.Context, ready func(), f func(payload string)) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("listen: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.wakeChannel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if ready != nil {
		ready()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		f(n.Payload)
	}
}

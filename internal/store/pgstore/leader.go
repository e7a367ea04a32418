package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/store"
)

// ClaimLeaderLease implements store.Tx: one upsert that takes the lease when it is free, already
// the claimant's or expired, and leaves it alone otherwise; the row then says who holds it.
func (t *tx) ClaimLeaderLease(c store.LeaderClaim) (store.LeaderLease, error) {
	if c.Name == "" || c.Holder == "" {
		return store.LeaderLease{}, fmt.Errorf("leader lease: name and holder are required")
	}
	return claimLeaderLease(bg, t.t, c)
}

// claimLeaderLease runs the claim's statements on q under ctx.
func claimLeaderLease(ctx context.Context, q rebound, c store.LeaderClaim) (store.LeaderLease, error) {
	if _, err := q.ExecContext(ctx, `INSERT INTO leader_leases (name, holder, expires_at, term) VALUES (?, ?, ?, 1)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
			term = CASE WHEN leader_leases.holder = excluded.holder THEN leader_leases.term ELSE leader_leases.term + 1 END
		WHERE leader_leases.holder = excluded.holder OR leader_leases.expires_at <= ?`,
		c.Name, c.Holder, ts(c.ExpiresAt), ts(c.Now)); err != nil {
		return store.LeaderLease{}, err
	}
	l := store.LeaderLease{Name: c.Name}
	var exp string
	if err := q.QueryRowContext(ctx, `SELECT holder, expires_at, term FROM leader_leases WHERE name = ?`, c.Name).
		Scan(&l.Holder, &exp, &l.Term); err != nil {
		return store.LeaderLease{}, err
	}
	var err error
	l.ExpiresAt, err = parseTS(exp)
	return l, err
}

// ReleaseLeaderLease implements store.Tx.
func (t *tx) ReleaseLeaderLease(name, holder string, now time.Time) error {
	return releaseLeaderLease(bg, t.t, name, holder, now)
}

func releaseLeaderLease(ctx context.Context, q rebound, name, holder string, now time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE leader_leases SET expires_at = ? WHERE name = ? AND holder = ? AND expires_at > ?`,
		ts(now), name, holder, ts(now))
	return err
}

// ClaimLeaderLeaseNow is Tx.ClaimLeaderLease outside the write queue: its own statements on the
// pool, so that a leader's renewal never waits behind a backlog of group-committed writes (a
// renewal late by more than the lease's TTL would hand the leadership over for nothing). Its
// statements run under ctx, so the caller bounds them. The upsert is one atomic statement; the read
// after it sees its outcome or a later one.
func (s *Store) ClaimLeaderLeaseNow(ctx context.Context, c store.LeaderClaim) (store.LeaderLease, error) {
	if c.Name == "" || c.Holder == "" {
		return store.LeaderLease{}, fmt.Errorf("leader lease: name and holder are required")
	}
	return claimLeaderLease(ctx, s.r, c)
}

// ReleaseLeaderLeaseNow is Tx.ReleaseLeaderLease outside the write queue.
func (s *Store) ReleaseLeaderLeaseNow(ctx context.Context, name, holder string, now time.Time) error {
	return releaseLeaderLease(ctx, s.r, name, holder, now)
}

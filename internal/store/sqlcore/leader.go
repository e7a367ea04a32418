package sqlcore

import (
	"context"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/store"
)

// ClaimLeaderLease implements store.Tx: one upsert that takes the lease when it is free, already
// the claimant's or expired, and leaves it alone otherwise; the row then says who holds it.
func (t *Tx) ClaimLeaderLease(c store.LeaderClaim) (store.LeaderLease, error) {
	if c.Name == "" || c.Holder == "" {
		return store.LeaderLease{}, fmt.Errorf("leader lease: name and holder are required")
	}
	return ClaimLeaderLease(bg, t.Q, c)
}

// ClaimLeaderLease runs the claim's statements on q under ctx: Tx.ClaimLeaderLease, and a store's
// claim outside the write queue (pgstore's ClaimLeaderLeaseNow).
func ClaimLeaderLease(ctx context.Context, q Querier, c store.LeaderClaim) (store.LeaderLease, error) {
	if _, err := q.ExecContext(ctx, `INSERT INTO leader_leases (name, holder, expires_at, term) VALUES (?, ?, ?, 1)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
			term = CASE WHEN leader_leases.holder = excluded.holder THEN leader_leases.term ELSE leader_leases.term + 1 END
		WHERE leader_leases.holder = excluded.holder OR leader_leases.expires_at <= ?`,
		c.Name, c.Holder, TS(c.ExpiresAt), TS(c.Now)); err != nil {
		return store.LeaderLease{}, err
	}
	l := store.LeaderLease{Name: c.Name}
	var exp string
	if err := q.QueryRowContext(ctx, `SELECT holder, expires_at, term FROM leader_leases WHERE name = ?`, c.Name).
		Scan(&l.Holder, &exp, &l.Term); err != nil {
		return store.LeaderLease{}, err
	}
	var err error
	l.ExpiresAt, err = ParseTS(exp)
	return l, err
}

// ReleaseLeaderLease implements store.Tx.
func (t *Tx) ReleaseLeaderLease(name, holder string, now time.Time) error {
	return releaseLeaderLease(bg, t.Q, name, holder, now)
}

// releaseLeaderLease runs the release's statement on q under ctx.
func releaseLeaderLease(ctx context.Context, q Querier, name, holder string, now time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE leader_leases SET expires_at = ? WHERE name = ? AND holder = ? AND expires_at > ?`,
		TS(now), name, holder, TS(now))
	return err
}

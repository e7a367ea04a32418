package pgstore

import (
	"context"
	"fmt"

	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// The leader lease's statements are in sqlcore; PostgreSQL adds the claim outside the write queue.

// ClaimLeaderLeaseNow is Tx.ClaimLeaderLease outside the write queue: its own statements on the
// pool, so that a leader's renewal never waits behind a backlog of group-committed writes (a
// renewal late by more than the lease's TTL would hand the leadership over for nothing). Its
// statements run under ctx, so the caller bounds them. The upsert is one atomic statement; the read
// after it sees its outcome or a later one.
func (s *Store) ClaimLeaderLeaseNow(ctx context.Context, c store.LeaderClaim) (store.LeaderLease, error) {
	if c.Name == "" || c.Holder == "" {
		return store.LeaderLease{}, fmt.Errorf("leader lease: name and holder are required")
	}
	return sqlcore.ClaimLeaderLease(ctx, s.r, c)
}

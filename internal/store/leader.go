package store

import "time"

// LeaderLease is the state of a named leader lease (internal/leader): which node holds it, until
// when, and its term, a counter that moves each time the lease changes hands (a fencing token).
type LeaderLease struct {
	Name      string
	Holder    string
	ExpiresAt time.Time
	Term      int64
}

// LeaderClaim asks for a leader lease: Holder takes it, or keeps it, until ExpiresAt, when it is
// free (never held), already Holder's, or expired at Now.
type LeaderClaim struct {
	Name      string
	Holder    string
	Now       time.Time
	ExpiresAt time.Time
}

// LeaderTx holds the writes of the leader lease. Each is one conditional statement, so two nodes
// claiming the same lease at once cannot both win: the database serialises them on the lease's row.
type LeaderTx interface {
	// ClaimLeaderLease takes, renews or leaves a lease as LeaderClaim says, and returns the lease as
	// it stands after the statement: c.Holder holds it exactly when the returned Holder is c.Holder.
	// The term moves when the holder changes.
	ClaimLeaderLease(c LeaderClaim) (LeaderLease, error)
	// ReleaseLeaderLease ends holder's lease (its expiry becomes now), so another node may take it at
	// once; it does nothing when holder does not hold the lease.
	ReleaseLeaderLease(name, holder string, now time.Time) error
}

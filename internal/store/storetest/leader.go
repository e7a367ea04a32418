package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store"
)

// claimLeader claims the "singletons" lease for holder at now, for ttl, and returns the lease.
func claimLeader(t *testing.T, s store.Store, holder string, now time.Time, ttl time.Duration) store.LeaderLease {
	t.Helper()
	var l store.LeaderLease
	update(t, s, func(x store.Tx) error {
		var err error
		l, err = x.ClaimLeaderLease(store.LeaderClaim{Name: "singletons", Holder: holder, Now: now, ExpiresAt: now.Add(ttl)})
		return err
	})
	return l
}

// testLeaderLease: the first claimant takes a free lease; another cannot take it before it expires,
// can after; the holder renews its own; the term moves only when the holder changes; a release frees
// the lease at once, and a release by a node that does not hold it changes nothing.
func testLeaderLease(t *testing.T, s store.Store) {
	ttl := 10 * time.Second
	l := claimLeader(t, s, "a", t0, ttl)
	require.Equal(t, store.LeaderLease{Name: "singletons", Holder: "a", ExpiresAt: t0.Add(ttl), Term: 1}, l)

	l = claimLeader(t, s, "b", t0.Add(ttl-time.Microsecond), ttl)
	require.Equal(t, "a", l.Holder, "b took a lease that had not expired")
	require.Equal(t, t0.Add(ttl), l.ExpiresAt)

	l = claimLeader(t, s, "a", t0.Add(5*time.Second), ttl) // renewal
	require.Equal(t, store.LeaderLease{Name: "singletons", Holder: "a", ExpiresAt: t0.Add(15 * time.Second), Term: 1}, l)

	l = claimLeader(t, s, "b", t0.Add(15*time.Second), ttl) // expired at that instant
	require.Equal(t, store.LeaderLease{Name: "singletons", Holder: "b", ExpiresAt: t0.Add(25 * time.Second), Term: 2}, l)

	l = claimLeader(t, s, "a", t0.Add(16*time.Second), ttl) // a's late renewal does not take it back
	require.Equal(t, "b", l.Holder)
	require.Equal(t, int64(2), l.Term)

	update(t, s, func(x store.Tx) error { return x.ReleaseLeaderLease("singletons", "a", t0.Add(17*time.Second)) })
	l = claimLeader(t, s, "c", t0.Add(17*time.Second), ttl)
	require.Equal(t, "b", l.Holder, "a release by a non-holder freed the lease")

	update(t, s, func(x store.Tx) error { return x.ReleaseLeaderLease("singletons", "b", t0.Add(18*time.Second)) })
	l = claimLeader(t, s, "c", t0.Add(18*time.Second), ttl)
	require.Equal(t, store.LeaderLease{Name: "singletons", Holder: "c", ExpiresAt: t0.Add(28 * time.Second), Term: 3}, l)

	// Leases are independent by name.
	var other store.LeaderLease
	update(t, s, func(x store.Tx) error {
		var err error
		other, err = x.ClaimLeaderLease(store.LeaderClaim{Name: "other", Holder: "a", Now: t0.Add(18 * time.Second), ExpiresAt: t0.Add(time.Minute)})
		return err
	})
	require.Equal(t, "a", other.Holder)
	require.Equal(t, int64(1), other.Term)

	update(t, s, func(x store.Tx) error {
		_, err := x.ClaimLeaderLease(store.LeaderClaim{Name: "singletons", Now: t0, ExpiresAt: t0})
		require.Error(t, err, "a claim without a holder")
		return nil
	})
}

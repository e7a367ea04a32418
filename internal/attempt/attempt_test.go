package attempt_test

import (
	"testing"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/invocation"
)

// TestLeaseOwner: the lease owner names the node, the logical attempt and the engine attempt; a
// compensation run's is distinct.
func TestLeaseOwner(t *testing.T) {
	owner := attempt.LeaseOwner("node-a", invocation.Record{Attempt: 2, EngineAttempt: 3})
	if owner != "node-a/2/3" {
		t.Fatalf("LeaseOwner = %q, want node-a/2/3", owner)
	}
	if c := attempt.CompensationLease(owner); c != "node-a/2/3/compensate" {
		t.Fatalf("CompensationLease = %q, want node-a/2/3/compensate", c)
	}
}

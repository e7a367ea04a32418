package groupcommit_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/groupcommit"
)

// trace records, on the committer's goroutine, the order closures ran in and where batches ended.
type trace struct {
	mu  sync.Mutex
	log []string
}

func (tr *trace) add(s string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.log = append(tr.log, s)
}

func (tr *trace) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.log, " ")
}

// queueBehindHold holds the committer with one closure, queues each write of writes (name, lane,
// weight) in that order, waits until all of them are queued, releases the hold and waits for all.
func queueBehindHold(t *testing.T, c *groupcommit.Committer, tr *trace, writes [][3]any) {
	t.Helper()
	release, held := hold(t, c)
	errs := make(chan error, len(writes))
	for i, w := range writes {
		name, lane, weight := w[0].(string), w[1].(string), w[2].(int)
		ctx := groupcommit.WithWeight(context.Background(), lane, int64(weight))
		go func() {
			errs <- c.Do(ctx, func(tx *sql.Tx) error { tr.add(name); return insert(i + 1)(tx) })
		}()
		// Queued in this order: the next one is sent once this one is in.
		deadline := time.Now().Add(waitTimeout)
		for all, _ := c.InFlight(); all < int64(i+2); all, _ = c.InFlight() {
			require.True(t, time.Now().Before(deadline), "write %d not queued", i)
			time.Sleep(time.Millisecond)
		}
	}
	release()
	require.NoError(t, waitErr(t, held, "the holder"))
	for range writes {
		require.NoError(t, waitErr(t, errs, "a queued write"))
	}
}

// requireTrace waits (at most waitTimeout) until tr reads want: a batch's writes are acknowledged
// when it commits, and its AfterBatch mark follows on the committer goroutine.
func requireTrace(t *testing.T, tr *trace, want string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for tr.String() != want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, want, tr.String())
}

// TestLargeWritesCommitAloneAndAnotherLaneGoesNext: tenant a's five 900 KB writes are queued before
// tenant b's small one; b's write runs right after a's first, in a batch of its own, instead of
// after all five in a batch with them.
func TestLargeWritesCommitAloneAndAnotherLaneGoesNext(t *testing.T) {
	t.Parallel()
	tr := &trace{}
	c := newCommitter(t, openDB(t), groupcommit.Options{AfterBatch: func() { tr.add("|") }})
	var writes [][3]any
	for i := range 5 {
		writes = append(writes, [3]any{fmt.Sprint("a", i), "a", 900_000})
	}
	writes = append(writes, [3]any{"b", "b", 200})
	queueBehindHold(t, c, tr, writes)
	requireTrace(t, tr, "| a0 | b | a1 | a2 | a3 | a4 |")
}

// TestLanesTakeTurnsWithinABatch: tenant a's ten small writes are queued before tenant b's two;
// with four writes a batch, b's are in the first batch after the hold, not the third.
func TestLanesTakeTurnsWithinABatch(t *testing.T) {
	t.Parallel()
	tr := &trace{}
	c := newCommitter(t, openDB(t), groupcommit.Options{MaxBatch: 4, AfterBatch: func() { tr.add("|") }})
	var writes [][3]any
	for i := range 10 {
		writes = append(writes, [3]any{fmt.Sprint("a", i), "a", 100})
	}
	writes = append(writes, [3]any{"b0", "b", 100}, [3]any{"b1", "b", 100})
	queueBehindHold(t, c, tr, writes)
	requireTrace(t, tr, "| a0 b0 a1 b1 | a2 a3 a4 a5 | a6 a7 a8 a9 |")
}

// TestMaxBatchBytesBoundsBatches: small writes of one lane fill a batch up to MaxBatchBytes of
// weight.
func TestMaxBatchBytesBoundsBatches(t *testing.T) {
	t.Parallel()
	tr := &trace{}
	c := newCommitter(t, openDB(t), groupcommit.Options{MaxBatchBytes: 10_000, AfterBatch: func() { tr.add("|") }})
	var writes [][3]any
	for i := range 7 {
		writes = append(writes, [3]any{fmt.Sprint("a", i), "a", 4_000})
	}
	queueBehindHold(t, c, tr, writes)
	requireTrace(t, tr, "| a0 a1 | a2 a3 | a4 a5 | a6 |")
}

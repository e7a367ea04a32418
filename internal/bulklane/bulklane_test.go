package bulklane_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/bulklane"
)

// entered reports whether ch received within a short wait (the lane let the request in).
func entered(ch <-chan *bulklane.Hold) (*bulklane.Hold, bool) {
	select {
	case h := <-ch:
		return h, true
	case <-time.After(50 * time.Millisecond):
		return nil, false
	}
}

func enter(l *bulklane.Lanes, tenant string) <-chan *bulklane.Hold {
	ch := make(chan *bulklane.Hold, 1)
	go func() {
		h, err := l.Enter(context.Background(), tenant)
		if err == nil {
			ch <- h
		}
	}()
	return ch
}

// TestOneAtATimePerTenant: a tenant's second bulky request waits for the first to leave; another
// tenant's does not wait at all.
func TestOneAtATimePerTenant(t *testing.T) {
	t.Parallel()
	l := bulklane.New()
	first, err := l.Enter(context.Background(), "a")
	require.NoError(t, err)
	second := enter(l, "a")
	_, in := entered(second)
	require.False(t, in, "a's second request waits for its first")
	require.Eventually(t, func() bool { return l.Waiting() == 1 }, time.Second, time.Millisecond)
	other, err := l.Enter(context.Background(), "b")
	require.NoError(t, err, "b's request does not wait for a's")
	other.Leave()
	first.Leave()
	h, in := entered(second)
	require.True(t, in, "a's second request enters once the first left")
	h.Leave()
	h.Leave() // idempotent
	require.Zero(t, l.Waiting())
}

// TestEnterGivesUpWithItsContext: a request that waits past its context holds nothing, and the
// lane stays usable.
func TestEnterGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	l := bulklane.New()
	h, err := l.Enter(context.Background(), "a")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = l.Enter(ctx, "a")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	h.Leave()
	again, err := l.Enter(context.Background(), "a")
	require.NoError(t, err)
	again.Leave()
}

// TestPauseLetsTheNextIn: a paused request frees the lane for the tenant's next one, and takes it
// again, in order, when it resumes.
func TestPauseLetsTheNextIn(t *testing.T) {
	t.Parallel()
	l := bulklane.New()
	h, err := l.Enter(context.Background(), "a")
	require.NoError(t, err)
	ctx := bulklane.With(context.Background(), h)
	resume := bulklane.Pause(ctx)
	next, in := entered(enter(l, "a"))
	require.True(t, in, "the next request enters while the first is paused")
	resumed := make(chan struct{})
	go func() { resume(); close(resumed) }()
	select {
	case <-resumed:
		t.Fatal("resume took the lane while another request held it")
	case <-time.After(50 * time.Millisecond):
	}
	next.Leave()
	select {
	case <-resumed:
	case <-time.After(time.Second):
		t.Fatal("resume did not take the lane once it was free")
	}
	h.Leave()
	bulklane.Pause(context.Background())() // no hold: nothing to pause
}

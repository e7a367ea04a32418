package loops_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/loops"
)

// TestGroupStartsAndStopsTogether: every loop runs until the context ends, and Run returns only
// after each has returned.
func TestGroupStartsAndStopsTogether(t *testing.T) {
	var running, stopped atomic.Int32
	started := make(chan struct{}, 3)
	loop := func(ctx context.Context) {
		running.Add(1)
		started <- struct{}{}
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond) // a loop finishing its batch
		stopped.Add(1)
	}
	g := loops.Group{Loops: []loops.Loop{{Name: "a", Run: loop}, {Name: "b", Run: loop}, {Name: "c", Run: loop}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	for range 3 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("loops did not start")
		}
	}
	select {
	case <-done:
		t.Fatal("Run returned before its context ended")
	default:
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	require.Equal(t, int32(3), running.Load())
	require.Equal(t, int32(3), stopped.Load(), "Run returned before every loop had")
}

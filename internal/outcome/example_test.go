package outcome_test

import (
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/sandbox"
)

// A transient failure on the first of three attempts is retried after the policy's backoff; the
// events record it and say when the invocation is runnable again.
func Example() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := invocation.Record{ID: "inv_1", Attempt: 1, EngineAttempt: 1}
	policy := outcome.RetryPolicy{MaxAttempts: 3, InitialDelayMS: 500}
	o := outcome.Decide(rec, policy, nil, &sandbox.Error{TypeID: sandbox.ErrHTTP, Category: "retryable"}, false, now)
	events, available, err := o.Events(rec, nil, now)
	if err != nil {
		panic(err)
	}
	fmt.Println(o.Kind, events[0].Type, available.Sub(now))
	// Output: retry_scheduled retry_scheduled 500ms
}

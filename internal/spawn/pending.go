package spawn

import "context"

// pendingStartKey carries a sync call's held-back start (invoke's runSync) to what runs under it.
type pendingStartKey struct{}

// WithPendingStart returns ctx carrying durable, which makes the start of the invocation running
// under ctx durable (writing it now if it was held back) and answers the write's outcome.
func WithPendingStart(ctx context.Context, durable func() error) context.Context {
	return context.WithValue(ctx, pendingStartKey{}, durable)
}

// StartDurable makes the start ctx carries durable before a write that refers to it (a child's
// record names its parent): nil at once when there is none, or when it was written already.
func StartDurable(ctx context.Context) error {
	if f, ok := ctx.Value(pendingStartKey{}).(func() error); ok {
		return f()
	}
	return nil
}

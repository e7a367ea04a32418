package store

import "context"

type optimisticKey struct{}

// Optimistic returns ctx marking the writes made with it (Update, Enqueue) as tolerant of
// optimistic execution: a store may run such a closure first on answers it assumed rather than
// waited for (an insert reported as done before the database confirmed it, an update made
// conditional on the projection the caller passed as AppendOptions.Expect instead of a read of
// it), and, when an assumption proves wrong, roll that run back and run the closure again on exact
// answers. Nothing of the first run is applied and its AfterCommit hooks never run; a closure must
// only not act outside its transaction on what it learnt (which store.Tx's closures must not do
// anyway, since a closure may be retried), and must leave nothing outside its transaction that a
// run again would read as its own (a struct a store method updated, a chain of writes): a store
// may also run it again after it succeeded, its transaction rolled back. The engine's own writes
// are made with it; pgstore uses it in its pipelined transactions, the SQLite store in Update (not
// Enqueue) to skip Append's read of a projection the caller passed, and to run a batch of such
// closures (Update's and Enqueue's) without a savepoint each (groupcommit.Options.LazySavepoints).
func Optimistic(ctx context.Context) context.Context {
	return context.WithValue(ctx, optimisticKey{}, true)
}

// IsOptimistic reports whether ctx was made by Optimistic.
func IsOptimistic(ctx context.Context) bool {
	v, _ := ctx.Value(optimisticKey{}).(bool)
	return v
}

type anyWriterKey struct{}

// AnyWriter returns ctx marking the writes made with it as free to run on any of a store's
// writers (pgstore's group committers), concurrently with and in any order relative to the
// process's other writes: such writes are ordered only by the database (row locks, SKIP LOCKED
// claims, conditional updates), as the writes of different processes sharing it are. Writes
// without it keep the order of a single writer: they run one batch at a time, in the order they
// were made. The dispatcher's claims and the attempts it runs are made with it.
func AnyWriter(ctx context.Context) context.Context {
	return context.WithValue(ctx, anyWriterKey{}, true)
}

// OneWriter returns ctx with AnyWriter undone: the writes made with it keep the order of a single
// writer. A write that locks a row other writes of the process lock too, after rows of their own
// (a child's closing write locks its parent: a DAG run or a workflow), uses it, so that two of
// them never hold each other's rows from two writers at once (a deadlock PostgreSQL would break
// only after deadlock_timeout).
func OneWriter(ctx context.Context) context.Context {
	return context.WithValue(ctx, anyWriterKey{}, false)
}

// IsAnyWriter reports whether ctx was made by AnyWriter.
func IsAnyWriter(ctx context.Context) bool {
	v, _ := ctx.Value(anyWriterKey{}).(bool)
	return v
}

package sqlcore

import "github.com/larkrun/lark/internal/invocation"

// UsageKey is a usage_hourly row: a tenant's entrypoint in one hour (hours since the Unix epoch).
type UsageKey struct {
	TenantID, EntrypointID string
	Hour                   int64
}

// UsageBatch sums the usage deltas of a committer's batch by row, so that a batch of n closures
// writes each row it touched once, before it commits (groupcommit.Options.BeforeCommit), instead
// of one upsert per closure: the aggregates are additive, so the sums are what the upserts would
// have left. Only the committer's goroutine uses it.
type UsageBatch struct {
	keys []UsageKey // in the order the rows were first touched
	sums map[UsageKey]*invocation.Usage
}

// NewUsageBatch returns an empty batch.
func NewUsageBatch() *UsageBatch {
	return &UsageBatch{sums: map[UsageKey]*invocation.Usage{}}
}

// Reset forgets what was gathered (a batch's run starts, a replay included).
func (b *UsageBatch) Reset() {
	b.keys = b.keys[:0]
	clear(b.sums)
}

// Add gathers the deltas of a closure that succeeded.
func (b *UsageBatch) Add(ds []UsageDelta) {
	for _, d := range ds {
		for _, h := range d.Hours {
			b.addRow(UsageKey{TenantID: d.TenantID, EntrypointID: d.EntrypointID, Hour: h.Hour}, h.Usage)
		}
	}
}

func (b *UsageBatch) addRow(k UsageKey, u invocation.Usage) {
	sum := b.sums[k]
	if sum == nil {
		sum = new(invocation.Usage)
		b.sums[k] = sum
		b.keys = append(b.keys, k)
	}
	sum.Add(u)
}

// Take returns what was gathered, and forgets it.
func (b *UsageBatch) Take() *UsageBatch {
	out := &UsageBatch{keys: b.keys, sums: b.sums}
	b.keys, b.sums = nil, map[UsageKey]*invocation.Usage{}
	return out
}

// Merge gathers again what o holds (taken, and written in a savepoint that was rolled back).
func (b *UsageBatch) Merge(o *UsageBatch) {
	for _, k := range o.keys {
		b.addRow(k, *o.sums[k])
	}
}

// Each calls write with every row gathered, in the order they were first touched, until it fails.
// It keeps what it holds: the caller forgets it (Take, or the next batch's Reset) once that write
// cannot be undone.
func (b *UsageBatch) Each(write func(UsageKey, invocation.Usage) error) error {
	for _, k := range b.keys {
		if err := write(k, *b.sums[k]); err != nil {
			return err
		}
	}
	return nil
}

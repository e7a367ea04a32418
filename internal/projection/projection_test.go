package projection_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/projection"
	"github.com/larkrun/lark/internal/store"
)

var at = time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.UTC)

func storedOf(t *testing.T, r invocation.Record) store.StoredInvocation {
	t.Helper()
	doc, err := json.Marshal(r)
	require.NoError(t, err)
	return store.StoredInvocation{ID: r.ID, TenantID: r.TenantID, Record: doc, Status: r.Status, EntrypointRef: r.EntrypointRef,
		EntrypointID: r.EntrypointID, Mode: r.Mode, CorrelationID: r.CorrelationID, SubjectID: r.SubjectID,
		EntrypointOwner: r.EntrypointOwner, LastSeq: r.LastSeq, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

func record() invocation.Record {
	return invocation.Record{ID: "inv_1", TenantID: "acme", EntrypointRef: "ep_1", EntrypointID: "gts.x~", SubjectID: "u1",
		Status: invocation.StatusSucceeded, Mode: invocation.ModeAsync, Params: json.RawMessage(`{"a":1,"b":[2]}`),
		Result: json.RawMessage(`{"ok":true}`), CorrelationID: "c1", Attempt: 1, CreatedAt: at, UpdatedAt: at.Add(time.Second), LastSeq: 3}
}

// TestCompareInvocation: equal projections compare clean (whatever the member order inside a
// value); every damaged member and column is named with both values; a record that does not decode
// is one difference.
func TestCompareInvocation(t *testing.T) {
	t.Parallel()
	want := record()
	si := storedOf(t, want)
	require.Empty(t, projection.CompareInvocation(si, want))
	si.Record = json.RawMessage(`{"invocation_id":"inv_1","tenant_id":"acme","entrypoint_ref":"ep_1","entrypoint_id":"gts.x~",
		"subject_id":"u1","status":"succeeded","mode":"async","params":{"b":[2],"a":1},"result":{"ok":true},
		"correlation_id":"c1","attempt":1,"created_at":"2026-05-06T07:08:09.123456Z"}`)
	require.Empty(t, projection.CompareInvocation(si, want), "member order inside a value does not matter")

	bad := want
	bad.Result, bad.Attempt = json.RawMessage(`{"ok":false}`), 2
	si = storedOf(t, bad)
	si.Status, si.LastSeq = invocation.StatusFailed, 2
	var got []string
	for _, d := range projection.CompareInvocation(si, want) {
		require.Equal(t, projection.KindInvocation, d.Kind)
		got = append(got, d.Field+": "+d.Stored+" → "+d.Recomputed)
	}
	require.Equal(t, []string{"attempt: 2 → 1", "last_seq: 2 → 3", `result: {"ok":false} → {"ok":true}`,
		`column status: "failed" → "succeeded"`}, got)

	si = storedOf(t, want)
	si.Record = json.RawMessage(`{"status":`)
	diffs := projection.CompareInvocation(si, want)
	require.Len(t, diffs, 1)
	require.Equal(t, "record", diffs[0].Field)
	require.Contains(t, diffs[0].String(), "invocation inv_1: record: stored undecodable")
}

// TestExpectedKeepsMigratedOwner: an owner the log does not carry (set on the stored projection by
// the migration that introduced it) is kept; one the log carries wins.
func TestExpectedKeepsMigratedOwner(t *testing.T) {
	t.Parallel()
	r := record()
	r.Status, r.Result, r.LastSeq = "", nil, 0
	data, err := json.Marshal(r)
	require.NoError(t, err)
	log := []invocation.Event{{InvocationID: "inv_1", Seq: 1, Type: invocation.EventCreated, Data: data, At: at}}
	got, err := projection.Expected(log, "owner_from_migration")
	require.NoError(t, err)
	require.Equal(t, "owner_from_migration", got.EntrypointOwner)

	r.EntrypointOwner = "u9"
	log[0].Data, err = json.Marshal(r)
	require.NoError(t, err)
	got, err = projection.Expected(log, "someone_else")
	require.NoError(t, err)
	require.Equal(t, "u9", got.EntrypointOwner)

	_, err = projection.Expected([]invocation.Event{{Seq: 1, Type: invocation.EventStarted, At: at}}, "")
	require.Error(t, err, "a log that does not start with created cannot be replayed")
}

// TestCompareUsage: each differing figure is one difference; costs compare with a relative
// tolerance (float sums taken in another order).
func TestCompareUsage(t *testing.T) {
	t.Parallel()
	h := at.Truncate(time.Hour)
	a := invocation.Usage{Invocations: 3, Succeeded: 2, CPUTimeMS: 40, Cost: 0.1 + 0.2}
	b := a
	b.Cost = 0.3
	require.Empty(t, projection.CompareUsage("acme", h, "ep", a, b))
	b.Succeeded, b.Cost = 1, 0.31
	diffs := projection.CompareUsage("acme", h, "ep", a, b)
	require.Len(t, diffs, 2)
	require.Equal(t, "usage acme 2026-05-06T07Z ep: succeeded: stored 2, recomputed 1", diffs[0].String())
	require.Equal(t, "cost", diffs[1].Field)
}

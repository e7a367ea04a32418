package gts

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKindString(t *testing.T) {
	require.Equal(t, "unknown", KindUnknown.String())
	require.Equal(t, "function", KindFunction.String())
	require.Equal(t, "workflow", KindWorkflow.String())
	require.Equal(t, "unknown", Kind(42).String())
}

func TestWellKnownTypesAreValid(t *testing.T) {
	for _, s := range []string{EntrypointBase, FunctionType, WorkflowType} {
		id := MustParse(s)
		require.True(t, id.IsType(), s)
	}
}

func TestEntrypointKind(t *testing.T) {
	tests := []struct {
		in   string
		kind Kind
		err  string // substring of the error; "" means success
	}{
		{in: calcV1, kind: KindFunction},
		{in: calcV1_2, kind: KindFunction},
		{in: WorkflowType + "vendor.app.billing.month_end.v3.1~", kind: KindWorkflow},
		{in: "gts.x.core.serverless.entrypoint.v1.4~x.core.serverless.function.v1.9~vendor.app._.f.v0~", kind: KindFunction},
		{in: "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1.0~vendor.app._.w.v1~", kind: KindWorkflow},

		{in: EntrypointBase, err: "missing x.core.serverless.function.v1"},
		{in: FunctionType, err: "want exactly 3 segments"},
		{in: WorkflowType, err: "want exactly 3 segments"},
		{in: calcV1 + "vendor.app.billing.more.v1~", err: "want exactly 3 segments"},
		{in: FunctionType + "vendor.app.billing.calculate_tax.v1", err: `must be a type id ending with "~"`},
		{in: "gts.x.core.serverless.entrypoint.v2~x.core.serverless.function.v1~vendor.app.b.f.v1~", err: "first segment must be x.core.serverless.entrypoint.v1, got x.core.serverless.entrypoint.v2"},
		{in: "gts.y.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.b.f.v1~", err: "first segment"},
		{in: "gts.x.core.events.type.v1~x.core.serverless.function.v1~vendor.app.b.f.v1~", err: "first segment"},
		{in: "gts.x.core.serverless.function.v1~vendor.app.b.f.v1~", err: "first segment"},
		{in: EntrypointBase + "x.core.serverless.function.v2~vendor.app.b.f.v1~", err: "second segment must be"},
		{in: EntrypointBase + "x.core.serverless.job.v1~vendor.app.b.f.v1~", err: "second segment must be"},
		{in: EntrypointBase + "vendor.app.b.f.v1~", err: "second segment must be"},
		{in: EntrypointBase + "x.core.serverless.entrypoint.v1~vendor.app.b.f.v1~", err: "second segment must be"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			kind, err := EntrypointKind(MustParse(tt.in))
			if tt.err == "" {
				require.NoError(t, err)
				require.Equal(t, tt.kind, kind)
				return
			}
			require.ErrorIs(t, err, ErrNotEntrypoint)
			require.ErrorContains(t, err, "gts: not an entrypoint id: ")
			require.ErrorContains(t, err, tt.err)
			require.Equal(t, KindUnknown, kind)
		})
	}
}

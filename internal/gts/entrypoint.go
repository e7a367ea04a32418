package gts

import (
	"errors"
	"fmt"
	"strconv"
)

// Kind is the kind of a serverless entrypoint.
type Kind int

const (
	// KindUnknown is the zero Kind; it is not a valid entrypoint kind.
	KindUnknown Kind = iota
	// KindFunction marks entrypoints derived from FunctionType.
	KindFunction
	// KindWorkflow marks entrypoints derived from WorkflowType.
	KindWorkflow
)

// String returns "function", "workflow" or "unknown".
func (k Kind) String() string {
	switch k {
	case KindFunction:
		return "function"
	case KindWorkflow:
		return "workflow"
	default:
		return "unknown"
	}
}

// Well-known serverless entrypoint base types.
const (
	// EntrypointBase is the base type of all serverless entrypoints.
	EntrypointBase = "gts.x.core.serverless.entrypoint.v1~"
	// FunctionType is the base type of function entrypoints.
	FunctionType = EntrypointBase + "x.core.serverless.function.v1~"
	// WorkflowType is the base type of workflow entrypoints.
	WorkflowType = EntrypointBase + "x.core.serverless.workflow.v1~"
)

// ErrNotEntrypoint is wrapped by every error returned by EntrypointKind.
var ErrNotEntrypoint = errors.New("gts: not an entrypoint id")

// EntrypointKind classifies a custom entrypoint type identifier. The chain
// must be exactly three segments and end with "~":
//
//	x.core.serverless.entrypoint.v1            (any MINOR of v1)
//	x.core.serverless.function.v1 or x.core.serverless.workflow.v1  (any MINOR of v1)
//	the custom entrypoint segment
//
// such as "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.billing.calculate_tax.v1~".
// Otherwise it returns KindUnknown and an error wrapping ErrNotEntrypoint.
func EntrypointKind(id ID) (Kind, error) {
	segs := id.segs
	if len(segs) == 0 {
		return KindUnknown, notEntrypoint(id, "empty id")
	}
	if !isCoreServerless(segs[0], "entrypoint") {
		return KindUnknown, notEntrypoint(id, "first segment must be x.core.serverless.entrypoint.v1, got "+segs[0].String())
	}
	if len(segs) < 2 {
		return KindUnknown, notEntrypoint(id, "missing x.core.serverless.function.v1 or x.core.serverless.workflow.v1 segment")
	}
	var kind Kind
	switch {
	case isCoreServerless(segs[1], "function"):
		kind = KindFunction
	case isCoreServerless(segs[1], "workflow"):
		kind = KindWorkflow
	default:
		return KindUnknown, notEntrypoint(id, "second segment must be x.core.serverless.function.v1 or x.core.serverless.workflow.v1, got "+segs[1].String())
	}
	if len(segs) != 3 {
		return KindUnknown, notEntrypoint(id, "want exactly 3 segments (base~kind~entrypoint~), got "+strconv.Itoa(len(segs)))
	}
	if !id.IsType() {
		return KindUnknown, notEntrypoint(id, `entrypoint must be a type id ending with "~"`)
	}
	return kind, nil
}

// isCoreServerless reports whether seg is x.core.serverless.<typ>.v1[.MINOR].
func isCoreServerless(seg Segment, typ string) bool {
	return seg.Vendor == "x" && seg.Package == "core" && seg.Namespace == "serverless" &&
		seg.Type == typ && seg.Major == 1
}

func notEntrypoint(id ID, reason string) error {
	return fmt.Errorf("%w: %s (id %q)", ErrNotEntrypoint, reason, truncate(id.raw, maxEchoedInput))
}

package tracing_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/larkrun/lark/internal/tracing"
)

// A request carrying a caller's traceparent, served with tracing off: it gets a span id of its
// own in the caller's trace, and an outbound request made under it continues that trace.
func ExampleWithIDs() {
	in := http.Header{}
	in.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx := tracing.WithIDs(tracing.Extract(context.Background(), in))

	out := http.Header{}
	tracing.Inject(ctx, out)
	traceID, spanID := tracing.IDs(ctx)
	fmt.Println(traceID)
	fmt.Println(spanID != "00f067aa0ba902b7", out.Get("Traceparent") == "00-"+traceID+"-"+spanID+"-01")
	// Output:
	// 4bf92f3577b34da6a3ce929d0e0e4736
	// true true
}

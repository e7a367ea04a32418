package run_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/run"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schema"
)

// The run stage takes an attempt as data and gives back what it came to; writing it is the next
// stage's job.
func Example() {
	schemas, err := schema.New()
	if err != nil {
		panic(err)
	}
	r := &run.Runner{Programs: sandbox.NewCache(16), Schemas: schemas, Clock: clock.Real{}}
	a := run.Job{
		Record:     invocation.Record{ID: "inv_1", TenantID: "acme", Attempt: 1, Params: json.RawMessage(`{"amount": 100}`)},
		ProgramKey: "ep_tax_v1",
		Source:     "def main(ctx, input):\n  return {\"tax\": input.amount * 0.1}\n",
		Limits:     sandbox.Limits{Timeout: time.Second, MemoryMB: 16},
	}
	res := r.Function(context.Background(), a, &logHost{})
	fmt.Println(res.Outcome.Kind, string(res.Outcome.Output))
	// Output: succeeded {"tax":10}
}

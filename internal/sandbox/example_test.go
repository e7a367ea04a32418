package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/sandbox"
)

// exampleHost has no egress and no children; it prints logs.
type exampleHost struct{}

func (exampleHost) HTTP(ctx context.Context, req sandbox.HTTPRequest) (sandbox.HTTPResponse, error) {
	return sandbox.HTTPResponse{}, &sandbox.Error{TypeID: sandbox.ErrHTTPTransport, Category: sandbox.CategoryNonRetryable, Message: "no egress"}
}

func (exampleHost) Invoke(ctx context.Context, req sandbox.InvokeRequest) (sandbox.InvokeResult, error) {
	return sandbox.InvokeResult{}, &sandbox.Error{TypeID: sandbox.ErrRuntime, Category: sandbox.CategoryNonRetryable, Message: "no children"}
}

func (exampleHost) Log(ctx context.Context, msg string, fields map[string]any) {
	fmt.Println("log:", msg, fields)
}

func (exampleHost) Now() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }

func ExampleRun() {
	cache := sandbox.NewCache(100)
	prog, err := cache.Get("calculate_tax@v1.0", "calculate_tax.star", `
def main(ctx, input):
    ctx.log("computing", customer=input.customer_id)
    return {"tax": input.amount * 0.1, "total": input.amount * 1.1, "at": r_now_v1()}
`)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, rerr := sandbox.Run(context.Background(), sandbox.Request{
		Program: prog,
		Input:   map[string]any{"amount": 100, "customer_id": "c-42"},
		Info:    sandbox.Info{InvocationID: "inv-1", TenantID: "t-1"},
		Limits:  sandbox.Limits{Timeout: 5 * time.Second, CPU: 0.5, MemoryMB: 64},
		Host:    exampleHost{},
	})
	if rerr != nil {
		fmt.Println(rerr)
		return
	}
	out, err := json.Marshal(res.Output)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))

	// Exceeding a limit is a typed error.
	prog, _ = sandbox.Compile("greedy.star", "def main(ctx, input):\n    return \"x\" * (1 << 30)\n")
	_, rerr = sandbox.Run(context.Background(), sandbox.Request{Program: prog, Host: exampleHost{}, Limits: sandbox.Limits{MemoryMB: 16}})
	fmt.Println(rerr.TypeID == sandbox.ErrMemoryLimit, rerr.Category, rerr.Details["line"])
	// Output:
	// log: computing map[customer:c-42]
	// {"at":"2025-01-02T03:04:05.000Z","tax":10,"total":110.00000000000001}
	// true resource_limit 2
}

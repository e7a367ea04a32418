package larkclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"time"

	"github.com/larkrun/lark/internal/server"
	"github.com/larkrun/lark/pkg/larkclient"
)

const (
	taxID  = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.billing.tax.calculate_tax.v1~"
	flowID = "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~acme.shop.orders.wait_a_while.v1~"
)

// taxBody is a registration body (docs/api.md, "Registration body").
var taxBody = json.RawMessage(`{
  "entrypoint_id": "` + taxID + `",
  "title": "Calculate tax", "owner": {"owner_type": "tenant"},
  "schema": {"params": {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}},
  "traits": {"invocation": {"supported": ["sync", "async"], "default": "sync"}, "retry": {"max_attempts": 1}},
  "implementation": {"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
    "code": {"language": "starlark", "source": "def main(ctx, input):\n    return {\"tax\": input[\"amount\"] * 0.2}\n"}}}`)

var flowBody = json.RawMessage(`{
  "entrypoint_id": "` + flowID + `",
  "title": "Wait a while", "owner": {"owner_type": "tenant"}, "schema": {},
  "traits": {"invocation": {"supported": ["async"], "default": "async"}, "retry": {"max_attempts": 1},
    "workflow": {"compensation": {"on_failure": null, "on_cancel": null},
      "checkpointing": {"strategy": "automatic"}, "max_suspension_days": 1}},
  "implementation": {"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
    "code": {"language": "starlark", "source": "def main(ctx, input):\n    r_sleep_v1(3600000)\n    return {}\n"}}}`)

// exampleServer starts a Lark server in process with the dev tenant and returns its URL, an admin
// token of the tenant and a stop function. A real program talks to `lark serve` or `lark dev`.
func exampleServer() (string, string, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	dir, err := os.MkdirTemp("", "larkclient-example")
	if err != nil {
		panic(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(ctx, server.Config{DataDir: dir, AdminToken: "example-operator-token", Logger: quiet})
	if err != nil {
		panic(err)
	}
	creds, err := server.LoadOrCreateDevAdmin(dir)
	if err != nil {
		panic(err)
	}
	if err := srv.ProvisionDev(ctx, &creds); err != nil {
		panic(err)
	}
	ts := httptest.NewServer(specChecker.Wrap(srv.Handler())) // every call checked against the OpenAPI document
	done := make(chan struct{})
	go func() { defer close(done); srv.RunDispatcher(ctx) }()
	return ts.URL, creds.Token, func() {
		cancel()
		<-done
		ts.Close()
		if err := srv.Close(); err != nil {
			fmt.Println("close:", err)
		}
		if err := os.RemoveAll(dir); err != nil {
			fmt.Println("cleanup:", err)
		}
	}
}

// deployed returns a client of a server where the tax function and the workflow are active.
func deployed() (*larkclient.Client, func()) {
	url, token, stop := exampleServer()
	c, err := larkclient.New(url, token)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, body := range []json.RawMessage{taxBody, flowBody} {
		ep, err := c.RegisterEntrypoint(ctx, body)
		if err != nil {
			panic(err)
		}
		if _, err := c.ActivateEntrypoint(ctx, ep.ID, "first release"); err != nil {
			panic(err)
		}
	}
	return c, stop
}

// Register a function, activate it and list what is active.
func Example() {
	url, token, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	c, err := larkclient.New(url, token)
	if err != nil {
		fmt.Println(err)
		return
	}
	ep, err := c.RegisterEntrypoint(ctx, taxBody)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ep.Status, ep.Version)
	if _, err := c.ActivateEntrypoint(ctx, ep.ID, "first release"); err != nil {
		fmt.Println(err)
		return
	}
	for e, err := range c.AllEntrypoints(ctx, larkclient.ListOptions{Filter: "status eq 'active'"}, false) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(e.Title, e.Status)
	}
	// Output:
	// draft 1.0.0
	// Calculate tax active
}

// Validate a registration body without saving it: every finding comes back at once.
func ExampleClient_ValidateEntrypoint() {
	url, token, stop := exampleServer()
	defer stop()
	c, err := larkclient.New(url, token)
	if err != nil {
		fmt.Println(err)
		return
	}
	bad := json.RawMessage(`{"entrypoint_id": "` + taxID + `", "title": "t", "schema": {},
	  "traits": {"invocation": {"supported": ["sync"], "default": "sync"}, "retry": {"max_attempts": 1}},
	  "implementation": {"adapter": "gts.x.core.serverless.adapter.starlark.v1~", "kind": "code",
	    "code": {"language": "starlark", "source": "def main(ctx, input):\n    return fooo\n"}}}`)
	rep, err := c.ValidateEntrypoint(context.Background(), bad)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("valid:", rep.Valid)
	for _, f := range rep.Errors {
		fmt.Printf("%s line %d column %d: %s\n", f.Code, f.Location.Line, f.Location.Column, f.Message)
	}
	// Output:
	// valid: false
	// UNDEFINED_NAME line 2 column 12: undefined name 'fooo'
}

// Start a sync invocation and read its result.
func ExampleClient_StartInvocation() {
	c, stop := deployed()
	defer stop()
	res, err := c.StartInvocation(context.Background(), larkclient.StartInvocation{
		EntrypointID: taxID, Params: json.RawMessage(`{"amount": 100}`), IdempotencyKey: "order-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Record.Status, string(res.Record.Result))
	// Output: succeeded {"tax":20}
}

// A refused request is a *Problem: its detail and per-field issues say what to fix.
func ExampleProblem() {
	c, stop := deployed()
	defer stop()
	_, err := c.StartInvocation(context.Background(), larkclient.StartInvocation{
		EntrypointID: taxID, Params: json.RawMessage(`{"amount": "a lot"}`)})
	var p *larkclient.Problem
	if errors.As(err, &p) {
		fmt.Println(p.Status, p.Errors[0].Path, p.Errors[0].Code)
	}
	fmt.Println(err)
	// Output:
	// 422 $.params.amount SCHEMA_MISMATCH
	// params do not match the entrypoint's schema (422)
	//   $.params.amount: invalid type: expected number, got string [SCHEMA_MISMATCH]
}

// Start a workflow in the background, wait until it sleeps on its durable timer, read its
// timeline and cancel it.
func ExampleClient_CancelInvocation() {
	c, stop := deployed()
	defer stop()
	ctx := context.Background()
	res, err := c.StartInvocation(ctx, larkclient.StartInvocation{EntrypointID: flowID})
	if err != nil {
		fmt.Println(err)
		return
	}
	id := res.Record.InvocationID
	for deadline := time.Now().Add(10 * time.Second); ; {
		inv, err := c.GetInvocation(ctx, id)
		if err != nil {
			fmt.Println(err)
			return
		}
		if inv.Status == "suspended" || time.Now().After(deadline) {
			fmt.Println(inv.Status)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	inv, err := c.CancelInvocation(ctx, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(inv.Status)
	tl, err := c.InvocationTimeline(ctx, id, "", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	last := tl.Items[len(tl.Items)-1]
	fmt.Println(tl.Status, last.EventType)
	// Output:
	// suspended
	// canceled
	// canceled canceled
}

// Iterate every invocation of an entrypoint, page after page.
func ExampleClient_AllInvocations() {
	c, stop := deployed()
	defer stop()
	ctx := context.Background()
	for i := range 3 {
		if _, err := c.StartInvocation(ctx, larkclient.StartInvocation{EntrypointID: taxID,
			Params: json.RawMessage(fmt.Sprintf(`{"amount": %d}`, i))}); err != nil {
			fmt.Println(err)
			return
		}
	}
	n := 0
	opts := larkclient.ListOptions{Filter: "entrypoint_id eq '" + taxID + "' and status eq 'succeeded'", Limit: 2}
	for _, err := range c.AllInvocations(ctx, opts) {
		if err != nil {
			fmt.Println(err)
			return
		}
		n++
	}
	fmt.Println(n, "succeeded")
	// Output: 3 succeeded
}

// Create a schedule, run it now and read its history.
func ExampleClient_TriggerSchedule() {
	c, stop := deployed()
	defer stop()
	ctx := context.Background()
	s, err := c.CreateSchedule(ctx, json.RawMessage(`{"schedule_id": "nightly", "entrypoint_id": "`+taxID+`",
	  "expression": {"kind": "cron", "value": "0 2 * * *"}, "input_overrides": {"amount": 10}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.ScheduleID, s.Status)
	t, err := c.TriggerSchedule(ctx, s.ScheduleID, json.RawMessage(`{"amount": 5}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := c.ScheduleHistory(ctx, s.ScheduleID, larkclient.ListOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(h.Items), h.Items[0].Kind, h.Items[0].RunID == t.RunID)
	// Output:
	// nightly active
	// 1 manual true
}

// Publish an event; an event trigger starts the tax function for it.
func ExampleClient_PublishEvent() {
	c, stop := deployed()
	defer stop()
	ctx := context.Background()
	tr, err := c.CreateTrigger(ctx, json.RawMessage(`{"trigger_id": "on-paid",
	  "event_type_id": "gts.x.core.events.event.v1~acme.shop.orders.paid.v1~", "entrypoint_id": "`+taxID+`"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := c.PublishEvent(ctx, larkclient.PublishEvent{EventTypeID: tr.EventTypeID, EventID: "paid-1",
		Payload: json.RawMessage(`{"amount": 3}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Event.EventID, p.Triggered)
	// Output: paid-1 1
}

// Create a backfill over four days and read its progress.
func ExampleClient_CreateBackfill() {
	c, stop := deployed()
	defer stop()
	b, err := c.CreateBackfill(context.Background(), json.RawMessage(`{"backfill_id": "jan", "entrypoint_id": "`+taxID+`",
	  "start": "2024-01-01T00:00:00Z", "end": "2024-01-05T00:00:00Z", "step": "P1D", "params": {"amount": 1}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.BackfillID, b.State, b.Progress.Total)
	// Output: jan running 4
}

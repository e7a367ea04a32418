package larkclient

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"time"
)

// EventType is a registered event type (docs/events.md, "Event types").
type EventType struct {
	Raw
	EventTypeID string          `json:"event_type_id"`         // a GTS type id (ends in ~)
	Scope       string          `json:"scope"`                 // tenant or platform
	Description string          `json:"description,omitempty"` // free text
	Schema      json.RawMessage `json:"schema"`                // the payload's JSON Schema
	CreatedAt   time.Time       `json:"created_at"`            // when it was registered
}

// ListEventTypes returns one page of the tenant's and the platform's event types.
func (c *Client) ListEventTypes(ctx context.Context, opts ListOptions) (*Page[EventType], error) {
	return listPage[EventType](ctx, c, "/event-types", opts.values())
}

// AllEventTypes iterates every event type matching opts.
func (c *Client) AllEventTypes(ctx context.Context, opts ListOptions) iter.Seq2[EventType, error] {
	return all(ctx, opts, c.ListEventTypes)
}

// GetEventType returns the tenant's event type of that id, else the platform's.
func (c *Client) GetEventType(ctx context.Context, id string) (*EventType, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var e EventType
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/event-types/" + esc(id)}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// CreateEventType registers an event type from its body ({event_type_id, schema, description?}).
func (c *Client) CreateEventType(ctx context.Context, body json.RawMessage) (*EventType, error) {
	var e EventType
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/event-types", body: body}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// DeleteEventType deletes an event type of the caller's own scope.
func (c *Client) DeleteEventType(ctx context.Context, id string) error {
	if err := need(id); err != nil {
		return err
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/event-types/" + esc(id)})
	return err
}

// EnableTrigger sets an event trigger's status to active.
func (c *Client) EnableTrigger(ctx context.Context, id string) (*Trigger, error) {
	return c.triggerVerb(ctx, id, ":enable")
}

// DisableTrigger sets an event trigger's status to disabled.
func (c *Client) DisableTrigger(ctx context.Context, id string) (*Trigger, error) {
	return c.triggerVerb(ctx, id, ":disable")
}

func (c *Client) triggerVerb(ctx context.Context, id, verb string) (*Trigger, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var t Trigger
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/triggers/" + esc(id) + verb}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// DeadLetter is an event trigger's dead letter (docs/events.md, "Dead letters").
type DeadLetter struct {
	Raw
	DeadLetterID string           `json:"dead_letter_id"` // dlq_…
	TriggerID    string           `json:"trigger_id"`     // its trigger
	EventIDs     []string         `json:"event_ids"`      // the events the invocation took
	InvocationID string           `json:"invocation_id"`  // the failed invocation ("" when it could not start)
	Error        *InvocationError `json:"error"`          // why
	CreatedAt    time.Time        `json:"created_at"`     // when it was written
	// RedrivenAs is the new invocation, in a redrive's answer.
	RedrivenAs string `json:"redriven_as,omitempty"`
}

// ListDeadLetters returns one page of a trigger's dead letters, oldest first.
func (c *Client) ListDeadLetters(ctx context.Context, triggerID string, opts ListOptions) (*Page[DeadLetter], error) {
	if err := need(triggerID); err != nil {
		return nil, err
	}
	return listPage[DeadLetter](ctx, c, "/triggers/"+esc(triggerID)+"/dead-letters", opts.values())
}

// AllDeadLetters iterates a trigger's dead letters matching opts.
func (c *Client) AllDeadLetters(ctx context.Context, triggerID string, opts ListOptions) iter.Seq2[DeadLetter, error] {
	return all(ctx, opts, func(ctx context.Context, o ListOptions) (*Page[DeadLetter], error) {
		return c.ListDeadLetters(ctx, triggerID, o)
	})
}

// RedriveDeadLetter starts a new invocation with one letter's params and removes the letter; it
// returns the letter with RedrivenAs set.
func (c *Client) RedriveDeadLetter(ctx context.Context, triggerID, deadLetterID string) ([]DeadLetter, error) {
	if err := need(deadLetterID); err != nil {
		return nil, err
	}
	return c.redrive(ctx, triggerID, "/dead-letters/"+esc(deadLetterID)+":redrive")
}

// RedriveDeadLetters redrives the trigger's oldest 100 letters (call again for the rest).
func (c *Client) RedriveDeadLetters(ctx context.Context, triggerID string) ([]DeadLetter, error) {
	return c.redrive(ctx, triggerID, "/dead-letters:redrive")
}

func (c *Client) redrive(ctx context.Context, triggerID, suffix string) ([]DeadLetter, error) {
	if err := need(triggerID); err != nil {
		return nil, err
	}
	var out struct {
		Redriven []json.RawMessage `json:"redriven"`
	}
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/triggers/" + esc(triggerID) + suffix}, &out); err != nil {
		return nil, err
	}
	letters := make([]DeadLetter, 0, len(out.Redriven))
	for _, raw := range out.Redriven {
		var d DeadLetter
		if err := decode(raw, &d); err != nil {
			return nil, err
		}
		letters = append(letters, d)
	}
	return letters, nil
}

// PurgeDeadLetters deletes all of a trigger's dead letters and returns how many there were.
func (c *Client) PurgeDeadLetters(ctx context.Context, triggerID string) (int, error) {
	if err := need(triggerID); err != nil {
		return 0, err
	}
	var out struct {
		Purged int `json:"purged"`
	}
	if _, err := c.call(ctx, request{method: http.MethodDelete, path: "/triggers/" + esc(triggerID) + "/dead-letters"}, &out); err != nil {
		return 0, err
	}
	return out.Purged, nil
}

// DeleteWebhook deletes a webhook trigger with its secrets and deliveries.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	if err := need(id); err != nil {
		return err
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/webhook-triggers/" + esc(id)})
	return err
}

// EnableWebhook sets a webhook trigger's status to active.
func (c *Client) EnableWebhook(ctx context.Context, id string) (*Webhook, error) {
	return c.webhookCall(ctx, http.MethodPost, id+":enable", nil)
}

// DisableWebhook sets a webhook trigger's status to disabled (its receiver answers 404).
func (c *Client) DisableWebhook(ctx context.Context, id string) (*Webhook, error) {
	return c.webhookCall(ctx, http.MethodPost, id+":disable", nil)
}

// Delivery is one request a webhook trigger received (docs/webhooks.md, "Deliveries").
type Delivery struct {
	Raw
	DeliveryID   string    `json:"delivery_id"`             // dlv_…
	ReceivedAt   time.Time `json:"received_at"`             // when it arrived
	StatusCode   int       `json:"status_code"`             // the receiver's answer
	Outcome      string    `json:"outcome"`                 // accepted, unauthorized, rate_limited, …
	Reason       string    `json:"reason,omitempty"`        // why it was refused
	InvocationID string    `json:"invocation_id,omitempty"` // what it started
	SourceIP     string    `json:"source_ip"`               // the sender's address
	BodyBytes    int       `json:"body_bytes"`              // the body's size (never the body)
}

// ListDeliveries returns one page of a webhook trigger's last deliveries, newest first.
func (c *Client) ListDeliveries(ctx context.Context, id string, opts ListOptions) (*Page[Delivery], error) {
	if err := need(id); err != nil {
		return nil, err
	}
	return listPage[Delivery](ctx, c, "/webhook-triggers/"+esc(id)+"/deliveries", opts.values())
}

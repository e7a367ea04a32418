package larkclient

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"time"
)

// Event is a published platform event (docs/api.md §8).
type Event struct {
	Raw
	EventID     string          `json:"event_id"`      // the publisher's id or evt_…
	EventTypeID string          `json:"event_type_id"` // the GTS type id
	Payload     json.RawMessage `json:"payload"`       // the event data
	ReceivedAt  time.Time       `json:"received_at"`   // when the server stored it
}

// PublishEvent is the body of POST /events.
type PublishEvent struct {
	// EventTypeID is the GTS type id (ending in ~).
	EventTypeID string `json:"event_type_id"`
	// Payload is any JSON (nil: {}).
	Payload json.RawMessage `json:"payload,omitempty"`
	// EventID is the publisher's id; empty lets the server assign one.
	EventID string `json:"event_id,omitempty"`
	// Source and Subject are optional attributes filters can see.
	Source  string `json:"source,omitempty"`
	Subject string `json:"subject,omitempty"` // see Source
}

// Published is the answer of POST /events.
type Published struct {
	Raw
	Event Event `json:"event"` // the stored event
	// Delivered counts the waiting workflows resumed, Triggered the triggers that took the event.
	Delivered int `json:"delivered"`
	Triggered int `json:"triggered"` // see Delivered
}

// PublishEvent publishes an event to the caller's tenant.
func (c *Client) PublishEvent(ctx context.Context, e PublishEvent) (*Published, error) {
	var p Published
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/events", body: e}, &p); err != nil {
		return nil, err
	}
	p.Event.setRaw(extract(p.JSON, "event"))
	return &p, nil
}

// Trigger is an event trigger (docs/events.md).
type Trigger struct {
	Raw
	TriggerID        string `json:"trigger_id"`                   // the id (client-given or trg_…)
	EventTypeID      string `json:"event_type_id"`                // the event type it listens to
	EntrypointID     string `json:"entrypoint_id"`                // what it starts
	EventFilterQuery string `json:"event_filter_query,omitempty"` // the CEL filter, if any
	Status           string `json:"status"`                       // active, paused or disabled
}

// ListTriggers returns one page of the tenant's event triggers.
func (c *Client) ListTriggers(ctx context.Context, opts ListOptions) (*Page[Trigger], error) {
	return listPage[Trigger](ctx, c, "/triggers", opts.values())
}

// AllTriggers iterates every event trigger matching opts.
func (c *Client) AllTriggers(ctx context.Context, opts ListOptions) iter.Seq2[Trigger, error] {
	return all(ctx, opts, c.ListTriggers)
}

// GetTrigger returns one event trigger.
func (c *Client) GetTrigger(ctx context.Context, id string) (*Trigger, error) {
	return c.triggerCall(ctx, http.MethodGet, "/triggers/", id, nil)
}

// CreateTrigger creates an event trigger from its body.
func (c *Client) CreateTrigger(ctx context.Context, body json.RawMessage) (*Trigger, error) {
	var t Trigger
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/triggers", body: body}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// ReplaceTrigger replaces an event trigger's writable fields (PUT).
func (c *Client) ReplaceTrigger(ctx context.Context, id string, body json.RawMessage) (*Trigger, error) {
	return c.triggerCall(ctx, http.MethodPut, "/triggers/", id, body)
}

// DeleteTrigger deletes an event trigger.
func (c *Client) DeleteTrigger(ctx context.Context, id string) error {
	if err := need(id); err != nil {
		return err
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/triggers/" + esc(id)})
	return err
}

// TriggerMetrics returns an event trigger's counters over window ("24h", "7d"; "" for 24h).
func (c *Client) TriggerMetrics(ctx context.Context, id, window string) (json.RawMessage, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var q url.Values
	if window != "" {
		q = url.Values{"window": {window}}
	}
	res, err := c.do(ctx, request{method: http.MethodGet, path: "/triggers/" + esc(id) + "/metrics", query: q})
	if err != nil {
		return nil, err
	}
	return res.body, nil
}

func (c *Client) triggerCall(ctx context.Context, method, prefix, id string, body any) (*Trigger, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var t Trigger
	if _, err := c.call(ctx, request{method: method, path: prefix + esc(id), body: body}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Webhook is a webhook trigger (docs/webhooks.md).
type Webhook struct {
	Raw
	WebhookTriggerID string `json:"webhook_trigger_id"` // the id (client-given or whk_…)
	Name             string `json:"name"`               // the display name (defaults to the id)
	EntrypointID     string `json:"entrypoint_id"`      // what each delivery starts
	Status           string `json:"status"`             // active or disabled
	WebhookURL       string `json:"webhook_url"`        // the receiver's path, relative to the server's public address
	// Secret is present only in the create answer (and a PUT that generated one).
	Secret string `json:"secret,omitempty"`
}

// ListWebhooks returns one page of the tenant's webhook triggers.
func (c *Client) ListWebhooks(ctx context.Context, opts ListOptions) (*Page[Webhook], error) {
	return listPage[Webhook](ctx, c, "/webhook-triggers", opts.values())
}

// AllWebhooks iterates every webhook trigger matching opts.
func (c *Client) AllWebhooks(ctx context.Context, opts ListOptions) iter.Seq2[Webhook, error] {
	return all(ctx, opts, c.ListWebhooks)
}

// GetWebhook returns one webhook trigger (never its secret).
func (c *Client) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	return c.webhookCall(ctx, http.MethodGet, id, nil)
}

// CreateWebhook creates a webhook trigger; the answer carries its secret this once.
func (c *Client) CreateWebhook(ctx context.Context, body json.RawMessage) (*Webhook, error) {
	var w Webhook
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/webhook-triggers", body: body}, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// ReplaceWebhook replaces a webhook trigger's writable fields (PUT).
func (c *Client) ReplaceWebhook(ctx context.Context, id string, body json.RawMessage) (*Webhook, error) {
	return c.webhookCall(ctx, http.MethodPut, id, body)
}

func (c *Client) webhookCall(ctx context.Context, method, id string, body any) (*Webhook, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	var w Webhook
	if _, err := c.call(ctx, request{method: method, path: "/webhook-triggers/" + esc(id), body: body}, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

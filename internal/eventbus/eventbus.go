// Package eventbus is the events service: tenants publish events (POST /events) and code emits them
// (r_emit_v1); each new event is stored, validated against its registered event type, delivered to
// the workflows waiting for it (through Waits: waits.Delivery) and matched against the tenant's
// event triggers (through its Subscribers), all in the transaction that stores it. It also keeps
// the registry of event types (POST/GET/DELETE /event-types). It imports nothing of the invocation
// engine, and the engine never imports it.
package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// Waits delivers an event to the workflows waiting for it (waits.Delivery), inside
// the transaction that stores it; it returns how many it resumed.
type Waits interface {
	DeliverToWaits(tx store.Tx, ev events.Event, now time.Time) (int, error)
}

// Subscriber reacts to every new event inside the transaction that stores it (the event triggers
// service); it returns how many invocations it started or batched. An error rolls the publish back.
type Subscriber interface {
	// Prepare does what it can of matching ev before the publishing transaction, outside the
	// store's single writer (evaluating filters over what it has cached), and returns it for
	// Match; nil when it cannot. It must not block on the store.
	Prepare(ev events.Event) any
	// Match reacts to ev inside the transaction that stores it, with what Prepare returned (nil:
	// nothing prepared, or an event published from inside another write, such as r_emit_v1's).
	Match(tx store.Tx, ev events.Event, now time.Time, prepared any) (int, error)
}

// Store is the store methods the bus uses (store.Store has them all): the event and event type
// reads, the tenant's policy, and Update for publishes and event type writes.
type Store interface {
	store.TenantReader
	store.EventReader
	store.EventTypeReader
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Config wires a Bus.
type Config struct {
	Store   Store
	Schemas *schema.Registry
	Waits   Waits
	Clock   clock.Clock
	IDs     idgen.Generator
	Logger  *slog.Logger
	// MaxPayloadBytes bounds a published payload (default invoke.DefaultMaxPayloadBytes' value,
	// 2 MiB): 413 over it.
	MaxPayloadBytes int
	// Mirror, when set, is handed every newly stored event once its transaction has committed
	// (the NATS bridge's Mirror: it must not block), except events that came from the external bus
	// themselves, with a context that carries only the span context of the publishing request or
	// attempt.
	Mirror func(context.Context, events.Event)
	// Observer hears of every newly stored event once its transaction has committed (nil: none).
	Observer Observer
}

// Observer hears of the events the bus stores (package metrics implements it): called once the
// publishing transaction has committed, never for a replayed event id. delivered is how many
// waiting workflows the event resumed in that transaction.
type Observer interface {
	EventPublished(tenantID string, delivered int)
}

// Bus is the events service.
type Bus struct {
	cfg    Config
	mu     sync.RWMutex
	subs   []Subscriber
	mirror func(context.Context, events.Event) // Config.Mirror
}

// ExternalSourcePrefix starts the source of events that came in from an external bus (natsfeed:
// "nats://<subject>"); they are not mirrored back out.
const ExternalSourcePrefix = "nats://"

// PublishExternal publishes an event that arrived from an external bus for a tenant (ev's ID,
// TenantID, TypeID, Payload, Source and ReceivedAt set): bounded like POST /events, then stored,
// validated, delivered and matched in one transaction, idempotent on the event id. A problem
// (4xx) error means the event can never be accepted as it is.
func (b *Bus) PublishExternal(ctx context.Context, ev events.Event) (Published, error) {
	if len(ev.Payload) > b.cfg.MaxPayloadBytes {
		return Published{}, tooLarge("payload", len(ev.Payload), b.cfg.MaxPayloadBytes)
	}
	var payload any
	if err := invocation.DecodeJSON(ev.Payload, &payload); err != nil {
		return Published{}, problem.Validation("the payload is not JSON", []problem.Issue{{Path: "$.payload", Code: "INVALID_VALUE", Message: "must be JSON"}})
	}
	if path, deep := invocation.TooDeep("$.payload", payload); deep {
		return Published{}, problem.Validation("the payload is too deep", []problem.Issue{{Path: path, Code: "TOO_DEEP",
			Message: fmt.Sprintf("the payload is nested more than %d levels deep", invocation.MaxJSONDepth)}})
	}
	now := b.cfg.Clock.Now()
	if ev.ReceivedAt.IsZero() {
		ev.ReceivedAt = now
	}
	ctx = obs.WithLogger(ctx, b.cfg.Logger.With("tenant_id", ev.TenantID, "source", ev.Source))
	return b.publish(ctx, ev, now)
}

// publish runs one event's transaction: prepared by the subscribers first, then publishTx.
func (b *Bus) publish(ctx context.Context, e events.Event, now time.Time) (Published, error) {
	var out Published
	prepared := b.prepare(e) // filters evaluated here, in parallel with other requests, not in the writer
	err := b.cfg.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		out, err = b.publishTx(tx, e, now, prepared)
		return err
	})
	var pe *problem.Error
	if errors.As(err, &pe) {
		return Published{}, pe
	}
	if err != nil {
		return Published{}, problem.Internal(err)
	}
	obs.Logger(ctx).InfoContext(ctx, "event published", "event_id", out.Event.ID,
		"event_type_id", out.Event.TypeID, "replayed", out.Replayed, "delivered", out.Delivered, "triggered", out.Triggered)
	return out, nil
}

// defaultMaxPayloadBytes is 2 MiB, as invoke's.
const defaultMaxPayloadBytes = 2 << 20

// New returns a Bus.
func New(cfg Config) *Bus {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.IDs == nil {
		cfg.IDs = idgen.UUIDv7{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = defaultMaxPayloadBytes
	}
	return &Bus{cfg: cfg, mirror: cfg.Mirror}
}

// Subscribe adds a subscriber that sees every new event (call it while wiring, before serving).
func (b *Bus) Subscribe(s Subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs = append(b.subs, s)
}

// PublishRequest is the body of POST /events.
type PublishRequest struct {
	// EventID is the publisher's id for the event (optional; one is assigned otherwise). Publishing
	// the same id again returns the stored event and delivers nothing.
	EventID string `json:"event_id"`
	// EventTypeID is the GTS type id of the event (it ends with "~").
	EventTypeID string          `json:"event_type_id"`
	Payload     json.RawMessage `json:"payload"`
	Source      string          `json:"source"`
	Subject     string          `json:"subject"`
	// Time is when the event happened (RFC 3339), as the publisher says.
	Time *time.Time `json:"time"`
}

// Published is the outcome of Publish.
type Published struct {
	Event events.Event
	// Replayed is true when the tenant had already published an event with this id.
	Replayed bool
	// Delivered is how many waiting workflows the event resumed.
	Delivered int
	// Triggered is how many trigger invocations it started or batch entries it added.
	Triggered int
}

var eventIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:\-]{0,254}$`)

func tooLarge(what string, size, limit int) *problem.Error {
	return problem.New(problem.TypePayloadTooLarge, "%s: %d bytes, more than the limit of %d bytes", what, size, limit).
		With("limit_bytes", limit)
}

// Publish validates the request and stores the event for the caller's tenant; in the same
// transaction (PublishTx) it is validated against its event type, delivered to the waiting
// workflows and matched against the tenant's triggers. The event is durable before Publish returns.
func (b *Bus) Publish(ctx context.Context, sc auth.SecurityContext, req PublishRequest) (Published, error) {
	var out Published
	if !sc.Has(auth.RoleOperator) {
		return out, problem.Forbidden("publishing events needs the operator role")
	}
	if sc.Operator {
		return out, problem.Forbidden("the platform operator has no tenant to publish in; use a tenant token")
	}
	var issues []problem.Issue
	if id, err := gts.Parse(req.EventTypeID); err != nil || !id.IsType() {
		msg := "must be a GTS type id ending with ~"
		if err != nil {
			msg = err.Error()
		}
		issues = append(issues, problem.Issue{Path: "$.event_type_id", Code: "INVALID_VALUE", Message: msg})
	}
	if req.EventID != "" && !eventIDPattern.MatchString(req.EventID) {
		issues = append(issues, problem.Issue{Path: "$.event_id", Code: "INVALID_VALUE",
			Message: "must be 1-255 characters: letters, digits and . _ : - (starting with a letter or digit)"})
	}
	for _, f := range []struct{ path, v string }{{"$.source", req.Source}, {"$.subject", req.Subject}} {
		if len(f.v) > 255 {
			issues = append(issues, problem.Issue{Path: f.path, Code: "INVALID_VALUE", Message: "at most 255 characters"})
		}
	}
	var payload any
	if len(req.Payload) == 0 || string(req.Payload) == "null" {
		req.Payload = json.RawMessage("{}")
	}
	if len(req.Payload) > b.cfg.MaxPayloadBytes {
		return out, tooLarge("payload", len(req.Payload), b.cfg.MaxPayloadBytes)
	}
	if err := invocation.DecodeJSON(req.Payload, &payload); err != nil {
		issues = append(issues, problem.Issue{Path: "$.payload", Code: "INVALID_VALUE", Message: "must be JSON"})
	} else if path, deep := invocation.TooDeep("$.payload", payload); deep {
		issues = append(issues, problem.Issue{Path: path, Code: "TOO_DEEP",
			Message: fmt.Sprintf("the payload is nested more than %d levels deep", invocation.MaxJSONDepth)})
	}
	if len(issues) > 0 {
		return out, problem.Validation("the event is invalid", issues)
	}
	now := b.cfg.Clock.Now()
	e := events.Event{ID: req.EventID, TenantID: sc.TenantID, TypeID: req.EventTypeID, Payload: req.Payload,
		Source: req.Source, Subject: req.Subject, Time: req.Time, ReceivedAt: now, PublishedBy: sc.SubjectID,
		CorrelationID: obs.CorrelationID(ctx)}
	if e.ID == "" {
		e.ID = b.cfg.IDs.New("evt")
	}
	return b.publish(ctx, e, now)
}

// PublishTx stores ev (its ID, TenantID, TypeID, Payload and ReceivedAt set; the payload valid
// JSON within the bounds) inside the caller's transaction, idempotent on the tenant's event id:
// an id the tenant published before returns the stored event with inserted false and does nothing
// else. A new event is validated against its registered event type (the tenant's, else the
// platform's; a 422 problem naming the JSON path when it does not match, or when the type is not
// registered and the tenant's policy requires registered types), delivered to the waiting
// workflows and matched against the tenant's enabled triggers, all in tx.
func (b *Bus) PublishTx(tx store.Tx, ev events.Event, now time.Time) (stored events.Event, inserted bool, err error) {
	p, err := b.publishTx(tx, ev, now, nil)
	return p.Event, !p.Replayed, err
}

// prepare asks every subscriber to Prepare ev, before the transaction.
func (b *Bus) prepare(ev events.Event) []any {
	b.mu.RLock()
	subs := b.subs
	b.mu.RUnlock()
	out := make([]any, len(subs))
	for i, s := range subs {
		out[i] = s.Prepare(ev)
	}
	return out
}

func (b *Bus) publishTx(tx store.Tx, ev events.Event, now time.Time, prepared []any) (Published, error) {
	stored, inserted, err := tx.InsertEvent(ev)
	if err != nil {
		return Published{}, err
	}
	out := Published{Event: stored, Replayed: !inserted}
	if !inserted {
		return out, nil
	}
	b.mu.RLock()
	mirror := b.mirror
	b.mu.RUnlock()
	if mirror != nil && !strings.HasPrefix(stored.Source, ExternalSourcePrefix) {
		// The mirrored message carries the publishing request's (or attempt's) trace context.
		traced := trace.ContextWithSpanContext(context.Background(), trace.SpanContextFromContext(tx.Context()))
		tx.AfterCommit(func() { mirror(traced, stored) })
	}
	// Validated once stored: a replayed id returns its stored event whatever the new payload; an
	// invalid new event fails the transaction, which takes the insert back.
	if err := b.validate(tx, stored); err != nil {
		return Published{}, err
	}
	if b.cfg.Waits != nil {
		if out.Delivered, err = b.cfg.Waits.DeliverToWaits(tx, stored, now); err != nil {
			return out, err
		}
	}
	b.mu.RLock()
	subs := b.subs
	b.mu.RUnlock()
	for i, s := range subs {
		var pre any
		if i < len(prepared) {
			pre = prepared[i]
		}
		n, err := s.Match(tx, stored, now, pre)
		if err != nil {
			return out, err
		}
		out.Triggered += n
	}
	if o := b.cfg.Observer; o != nil {
		tenantID, delivered := stored.TenantID, out.Delivered
		tx.AfterCommit(func() { o.EventPublished(tenantID, delivered) })
	}
	return out, nil
}

// validate checks ev against its registered event type (tenant's, else platform's), inside tx.
func (b *Bus) validate(tx store.Tx, ev events.Event) error {
	return b.check(ev, func() (events.Type, error) { return tx.EventTypeFor(ev.TenantID, ev.TypeID) },
		func() (tenant.Policy, error) { return tx.Tenant(ev.TenantID) })
}

// CheckEvent is validate through the read pool: what r_emit_v1 asks at the call (the engine's
// writer.Publisher, through host.Host.CheckEvent), so that code learns of an event its tenant would
// refuse where it emits it, rather than when the write that publishes it fails. The publishing
// transaction checks again.
func (b *Bus) CheckEvent(ctx context.Context, ev events.Event) error {
	return b.check(ev, func() (events.Type, error) {
		et, err := b.cfg.Store.EventType(ctx, ev.TenantID, ev.TypeID)
		if errors.Is(err, store.ErrNotFound) {
			et, err = b.cfg.Store.EventType(ctx, events.PlatformScope, ev.TypeID)
		}
		return et, err
	}, func() (tenant.Policy, error) { return b.cfg.Store.Tenant(ctx, ev.TenantID) })
}

// check validates ev against the event type typeFor finds, or, when there is none, against the
// tenant policy's require_registered_event_types.
func (b *Bus) check(ev events.Event, typeFor func() (events.Type, error), policy func() (tenant.Policy, error)) error {
	et, err := typeFor()
	if errors.Is(err, store.ErrNotFound) {
		pol, err := policy()
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if pol.Policies.RequireRegisteredEventTypes {
			msg := fmt.Sprintf("event type %s is not registered, and the tenant's policy (policies.require_registered_event_types) requires registered event types", ev.TypeID)
			return problem.Validation(msg, []problem.Issue{{Path: "$.event_type_id", Code: "UNREGISTERED_EVENT_TYPE", Message: msg}})
		}
		return nil
	}
	if err != nil {
		return err
	}
	compiled, issues := b.cfg.Schemas.CompileUserSchema("$.schema", et.Schema)
	if len(issues) > 0 {
		return fmt.Errorf("event type %s: its stored schema does not compile: %s", et.ID, issues[0].Message)
	}
	var payload any
	if err := invocation.DecodeJSON(ev.Payload, &payload); err != nil {
		return problem.Validation("the payload is not JSON", []problem.Issue{{Path: "$.payload", Code: "INVALID_VALUE", Message: "must be JSON"}})
	}
	if issues := b.cfg.Schemas.ValidateValue(compiled, "$.payload", payload); len(issues) > 0 {
		return problem.Validation(fmt.Sprintf("the payload does not match the schema of event type %s", et.ID), schemaIssues(issues))
	}
	return nil
}

// GetEvent reads one of the caller's tenant's events.
func (b *Bus) GetEvent(ctx context.Context, sc auth.SecurityContext, id string) (events.Event, error) {
	e, err := b.cfg.Store.Event(ctx, sc.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return e, problem.NotFound("event %s not found", id)
	}
	if err != nil {
		return e, problem.Internal(err)
	}
	return e, nil
}

// ListEvents lists the caller's tenant's events.
func (b *Bus) ListEvents(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[events.Event], error) {
	return b.cfg.Store.ListEvents(ctx, sc.TenantID, q)
}

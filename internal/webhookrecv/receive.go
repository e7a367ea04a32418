package webhookrecv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/webhook"
)

// Request is a delivery as the receiver sees it.
type Request struct {
	TenantID  string
	TriggerID string
	// Client is the sender's address: the TCP peer, or the address a trusted proxy forwarded.
	Client netip.Addr
	Header http.Header
	Query  url.Values
	// Body is read at most up to the trigger's max_body_bytes (plus one byte to tell it is over).
	Body          io.Reader
	ContentLength int64
}

// Accepted is the answer of an accepted delivery (202).
type Accepted struct {
	InvocationID string `json:"invocation_id"`
	DeliveryID   string `json:"delivery_id"`
	// Redelivery is set when the idempotency key was seen before: the invocation is the first
	// delivery's, nothing new was started.
	Redelivery bool `json:"redelivery,omitempty"`
}

// IdempotencyHeaders are read, in this order, for a delivery's idempotency key.
var IdempotencyHeaders = []string{"Idempotency-Key", "X-GitHub-Delivery", "X-Webhook-Id", "Webhook-Id"}

// maxIdempotencyKey bounds an idempotency key's length.
const maxIdempotencyKey = 256

// notFound is the one answer for an unknown tenant, an unknown trigger and a disabled one.
func notFound() error { return problem.NotFound("no webhook trigger at this address") }

func hashHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// refusal is a failed check with what the delivery record says of it.
type refusal struct {
	err     error
	outcome string
	reason  string
}

// Receive handles one delivery. Checks, in order: unknown tenant (or not enabled), unknown or
// disabled trigger → 404 (one body for all three); client outside allowed_sources → 403; body over
// max_body_bytes → 413; authentication (signature, timestamp tolerance, basic, bearer, api key) →
// 401; a signed request already accepted (a replay) → 401; rate limit → 429 with Retry-After;
// payload schema → 422 naming the path. Otherwise the invocation is queued in the transaction
// that records the delivery: 202. A delivery whose idempotency key was seen answers with the
// first delivery's invocation.
func (s *Service) Receive(ctx context.Context, req Request) (Accepted, error) {
	now := s.o.Clock.Now()
	// Both reads happen whatever the first finds, so an unknown tenant costs what an unknown
	// trigger does.
	w, werr := s.store.WebhookTrigger(ctx, req.TenantID, req.TriggerID)
	policy, perr := s.store.Tenant(ctx, req.TenantID)
	for _, err := range []error{werr, perr} {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return Accepted{}, problem.Internal(err)
		}
	}
	if werr != nil || perr != nil || !policy.Enabled || w.Status != webhook.StatusActive {
		s.observe(OutcomeNotFound)
		return Accepted{}, notFound()
	}
	d := webhook.Delivery{ID: s.o.IDs.New("dlv"), TenantID: w.TenantID, TriggerID: w.ID, ReceivedAt: now, SourceIP: req.Client.String()}
	acc, ref := s.receive(ctx, w, req, &d, now)
	if ref != nil {
		pe := problem.From(ref.err)
		d.StatusCode, d.Outcome, d.Reason = pe.Status, ref.outcome, ref.reason
		s.recordRefusal(ctx, d, now)
		s.observe(ref.outcome)
		return Accepted{}, ref.err
	}
	if acc.Redelivery {
		s.observe(webhook.OutcomeRedelivered)
	} else {
		s.observe(webhook.OutcomeAccepted)
	}
	return acc, nil
}

// observe reports a delivery's outcome to the Observer, when there is one.
func (s *Service) observe(outcome string) {
	if s.o.Observer != nil {
		s.o.Observer.WebhookDelivery(outcome)
	}
}

// receive runs the checks of a delivery after the trigger was found (see Receive), in order, and
// queues its invocation. d collects what the delivery record says (body size and hash, idempotency
// key); a refusal says why the delivery was refused.
func (s *Service) receive(ctx context.Context, w webhook.Trigger, req Request, d *webhook.Delivery, now time.Time) (Accepted, *refusal) {
	log := obs.Logger(ctx).With("tenant_id", w.TenantID, "webhook_trigger_id", w.ID, "delivery_id", d.ID)
	if !allowed(w.AllowedSources, req.Client) {
		return Accepted{}, &refusal{problem.Forbidden("the sender's address is not in the webhook trigger's allowed_sources"), webhook.OutcomeForbidden, "source " + req.Client.String() + " not allowed"}
	}
	body, ref := readBody(w, req, d)
	if ref != nil {
		return Accepted{}, ref
	}
	v, ref := s.authenticate(ctx, log, w, req, body, now)
	if ref != nil {
		return Accepted{}, ref
	}
	idem, ref := idempotencyKey(req.Header, d)
	if ref != nil {
		return Accepted{}, ref
	}
	seen, ref := s.checkSeen(ctx, w, idem, v.ReplayKey, now)
	if ref != nil {
		return Accepted{}, ref
	}
	if seen != nil {
		return s.redeliver(ctx, w, *d, *seen)
	}
	if ref := s.rateLimit(w, now); ref != nil {
		return Accepted{}, ref
	}
	planned, ref := s.plan(ctx, w, req, d.ID, body)
	if ref != nil {
		return Accepted{}, ref
	}
	out, again, ref := s.commit(ctx, w, *d, idem, v, planned, now)
	if ref != nil {
		return Accepted{}, ref
	}
	if again != nil {
		return s.redeliver(ctx, w, *d, *again)
	}
	log.DebugContext(ctx, "webhook delivery accepted", "invocation_id", out.InvocationID, "body_bytes", d.BodyBytes)
	return out, nil
}

// tooLarge refuses a body over the trigger's max_body_bytes.
func tooLarge(w webhook.Trigger) *refusal {
	return &refusal{problem.New(problem.TypePayloadTooLarge, "the body exceeds this webhook trigger's limit of %d bytes", w.MaxBodyBytes).With("max_body_bytes", w.MaxBodyBytes),
		webhook.OutcomeTooLarge, ""}
}

// readBody reads the body, at most max_body_bytes (a larger announced length is refused before
// reading), and records its size and hash in d.
func readBody(w webhook.Trigger, req Request, d *webhook.Delivery) ([]byte, *refusal) {
	if req.ContentLength > w.MaxBodyBytes {
		d.BodyBytes = req.ContentLength
		return nil, tooLarge(w)
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, w.MaxBodyBytes+1))
	d.BodyBytes = int64(len(body))
	var mbe *http.MaxBytesError
	if int64(len(body)) > w.MaxBodyBytes || errors.As(err, &mbe) {
		return nil, tooLarge(w)
	}
	if err != nil {
		return nil, &refusal{problem.BadRequest("reading the body: %v", err), webhook.OutcomeFailed, "body not read"}
	}
	d.BodySHA256 = hashHex(body)
	return body, nil
}

// authenticate opens the trigger's secrets valid now, verifies the delivery against them and
// clears them.
func (s *Service) authenticate(ctx context.Context, log *slog.Logger, w webhook.Trigger, req Request, body []byte, now time.Time) (Verified, *refusal) {
	secrets, err := s.secrets(ctx, w, now)
	if err != nil {
		log.ErrorContext(ctx, "webhook: opening the trigger's secret failed", "err", err)
		return Verified{}, &refusal{err, webhook.OutcomeFailed, "secret unavailable"}
	}
	v, err := Verify(w.Authentication, secrets, Message{Header: req.Header, Query: req.Query, Body: body}, now)
	clear2(secrets)
	if err != nil {
		var ae *AuthError
		reason := "authentication failed"
		if errors.As(err, &ae) {
			reason = ae.Reason
		}
		return Verified{}, &refusal{problem.Unauthorized("the webhook delivery failed authentication: %s", reason), webhook.OutcomeUnauthorized, reason}
	}
	return v, nil
}

// idempotencyKey is the hash of the first idempotency header present (see IdempotencyHeaders),
// "" when there is none; the key itself is recorded in d.
func idempotencyKey(h http.Header, d *webhook.Delivery) (string, *refusal) {
	for _, name := range IdempotencyHeaders {
		if k := h.Get(name); k != "" {
			if len(k) > maxIdempotencyKey {
				return "", &refusal{problem.BadRequest("header %s: at most %d characters", name, maxIdempotencyKey), webhook.OutcomeFailed, "idempotency key too long"}
			}
			d.IdempotencyKey = k
			return hashHex([]byte(k)), nil
		}
	}
	return "", nil
}

// replayed refuses a signed request that was already accepted.
func replayed() *refusal {
	return &refusal{problem.Unauthorized("the webhook delivery failed authentication: this signed request was already accepted (replay)"), webhook.OutcomeReplayed, "signature already used"}
}

// checkSeen looks up the idempotency key (seen: the earlier delivery, to answer with) and then
// the signature (seen: a replay, refused), each only when there is one.
func (s *Service) checkSeen(ctx context.Context, w webhook.Trigger, idem, replayKey string, now time.Time) (*webhook.Seen, *refusal) {
	if idem != "" {
		if seen, err := s.store.WebhookSeenAt(ctx, w.TenantID, w.ID, webhook.KindIdempotency, idem, now); err == nil {
			return &seen, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, &refusal{problem.Internal(err), webhook.OutcomeFailed, "store"}
		}
	}
	if replayKey != "" {
		if _, err := s.store.WebhookSeenAt(ctx, w.TenantID, w.ID, webhook.KindSignature, replayKey, now); err == nil {
			return nil, replayed()
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, &refusal{problem.Internal(err), webhook.OutcomeFailed, "store"}
		}
	}
	return nil, nil
}

// rateLimit takes a token of the trigger's rate limit: 429 with Retry-After (at least 1 s) when
// there is none.
func (s *Service) rateLimit(w webhook.Trigger, now time.Time) *refusal {
	if dec := s.limiter.Allow(w.TenantID+"\x00"+w.ID, rateConfig(w.RateLimit), now); !dec.Allowed {
		pe := problem.New(problem.TypeRateLimited, "webhook trigger %s accepts at most %g deliveries per second (burst %d); retry later", w.ID, w.RateLimit.MaxRequestsPerSecond, w.RateLimit.BurstSize)
		pe.RetryAfter = int(math.Ceil(dec.RetryAfter.Seconds()))
		if pe.RetryAfter < 1 {
			pe.RetryAfter = 1
		}
		return &refusal{pe, webhook.OutcomeRateLimited, ""}
	}
	return nil
}

// plan checks the payload, builds the entrypoint's params (body, forwarded headers, query, trigger
// and delivery ids) and plans the start.
func (s *Service) plan(ctx context.Context, w webhook.Trigger, req Request, deliveryID string, body []byte) (invoke.Planned, *refusal) {
	payload, err := s.payload(w, body)
	if err != nil {
		return invoke.Planned{}, &refusal{err, webhook.OutcomeInvalid, "payload does not match payload_schema"}
	}
	params, err := json.Marshal(map[string]any{"body": payload, "headers": forwarded(w, req.Header), "query": query(w, req.Query),
		"webhook_trigger_id": w.ID, "delivery_id": deliveryID})
	if err != nil {
		return invoke.Planned{}, &refusal{problem.Internal(err), webhook.OutcomeFailed, "params"}
	}
	planned, err := s.inv.Plan(ctx, invoke.SystemStart{As: runAs(w), EntrypointID: w.EntrypointID, Params: params, CorrelationID: obs.CorrelationID(ctx), Origin: invocation.OriginWebhook})
	if err != nil {
		pe := problem.From(err)
		reason := "the entrypoint refused the start: " + pe.Detail
		if pe.Status == http.StatusNotFound || pe.Status == http.StatusForbidden {
			// The sender learns nothing of the tenant's entrypoints: only that the trigger cannot
			// start its work now (the tenant sees why in the deliveries).
			err = problem.Conflict("entrypoint_unavailable", "this webhook trigger cannot start its entrypoint now")
		}
		return invoke.Planned{}, &refusal{err, webhook.OutcomeFailed, reason}
	}
	return planned, nil
}

// commit queues the invocation in the transaction that records the delivery: the idempotency key
// looked up again (again: the earlier delivery, nothing written), the signature remembered (a
// conflict is a replay), the invocation enqueued, the key remembered, the delivery recorded.
func (s *Service) commit(ctx context.Context, w webhook.Trigger, d webhook.Delivery, idem string, v Verified, planned invoke.Planned, now time.Time) (out Accepted, again *webhook.Seen, ref *refusal) {
	var replay bool
	err := s.store.Update(ctx, func(tx store.Tx) error {
		if idem != "" {
			if seen, err := tx.WebhookSeen(w.TenantID, w.ID, webhook.KindIdempotency, idem, now); err == nil {
				again = &seen
				return nil
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		id := s.inv.NewID()
		if v.ReplayKey != "" {
			err := rememberSignature(tx, w, d.ID, v, id, now)
			if errors.Is(err, store.ErrConflict) {
				replay = true
				return err
			}
			if err != nil {
				return err
			}
		}
		rec, err := s.inv.Enqueue(tx, planned, id, now)
		if err != nil {
			return err
		}
		if idem != "" {
			if err := tx.RememberWebhook(webhook.Seen{TenantID: w.TenantID, TriggerID: w.ID, Kind: webhook.KindIdempotency, Key: idem,
				InvocationID: rec.ID, DeliveryID: d.ID, ExpiresAt: now.Add(IdempotencyWindow)}, now); err != nil {
				return err
			}
		}
		rd := d
		rd.StatusCode, rd.Outcome, rd.InvocationID = http.StatusAccepted, webhook.OutcomeAccepted, rec.ID
		out = Accepted{InvocationID: rec.ID, DeliveryID: d.ID}
		return tx.RecordWebhookDelivery(rd, webhook.MaxDeliveries)
	})
	switch {
	case replay:
		return Accepted{}, nil, replayed()
	case err != nil:
		pe := problem.From(err)
		return Accepted{}, nil, &refusal{pe, webhook.OutcomeFailed, "not recorded"}
	}
	return out, again, nil
}

// rememberSignature remembers a signed request's replay key inside tx, until its signed timestamp
// leaves the tolerance (plus a second) or, unsigned, for UnsignedReplayWindow.
func rememberSignature(tx store.Tx, w webhook.Trigger, deliveryID string, v Verified, invocationID string, now time.Time) error {
	until := now.Add(UnsignedReplayWindow)
	if v.SignedAt != nil {
		until = v.SignedAt.Add(time.Duration(toleranceOf(w.Authentication))*time.Second + time.Second)
	}
	return tx.RememberWebhook(webhook.Seen{TenantID: w.TenantID, TriggerID: w.ID, Kind: webhook.KindSignature, Key: v.ReplayKey,
		InvocationID: invocationID, DeliveryID: deliveryID, ExpiresAt: until}, now)
}

// redeliver answers a delivery whose idempotency key was seen: the first invocation, recorded as a
// redelivery.
func (s *Service) redeliver(ctx context.Context, w webhook.Trigger, d webhook.Delivery, seen webhook.Seen) (Accepted, *refusal) {
	d.StatusCode, d.Outcome, d.InvocationID, d.Redelivery = http.StatusAccepted, webhook.OutcomeRedelivered, seen.InvocationID, true
	if err := s.store.Update(ctx, func(tx store.Tx) error { return tx.RecordWebhookDelivery(d, webhook.MaxDeliveries) }); err != nil {
		obs.Logger(ctx).WarnContext(ctx, "webhook: recording a redelivery failed", "tenant_id", w.TenantID, "webhook_trigger_id", w.ID, "err", err)
	}
	return Accepted{InvocationID: seen.InvocationID, DeliveryID: d.ID, Redelivery: true}, nil
}

// recordRefusal records a refused delivery, at most about one a second per trigger (bursts of
// 10): refusals are for debugging, and a sender that fails every check must not turn each request
// into a write.
func (s *Service) recordRefusal(ctx context.Context, d webhook.Delivery, now time.Time) {
	if !s.refusals.Allow(d.TenantID+"\x00"+d.TriggerID, refusalRate, now).Allowed {
		return
	}
	if err := s.store.Update(ctx, func(tx store.Tx) error { return tx.RecordWebhookDelivery(d, webhook.MaxDeliveries) }); err != nil {
		obs.Logger(ctx).WarnContext(ctx, "webhook: recording a refused delivery failed", "tenant_id", d.TenantID, "webhook_trigger_id", d.TriggerID, "err", err)
	}
}

var refusalRate = json.RawMessage(`{"max_requests_per_second":1,"burst_size":10}`)

func rateConfig(r webhook.RateLimit) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"max_requests_per_second":%g,"burst_size":%d,"max_requests_per_minute":%d}`,
		r.MaxRequestsPerSecond, r.BurstSize, r.MaxRequestsPerMinute))
}

func clear2(secrets [][]byte) {
	for _, s := range secrets {
		clear(s)
	}
}

// secrets opens the secrets valid now: the current generation, then the replaced one while its
// overlap lasts. 503 without a keyring.
func (s *Service) secrets(ctx context.Context, w webhook.Trigger, now time.Time) ([][]byte, error) {
	if !w.Authentication.Type.NeedsSecret() {
		return nil, nil
	}
	if s.o.Keyring == nil {
		return nil, noKeyring()
	}
	rows, err := s.store.WebhookSecrets(ctx, w.TenantID, w.ID)
	if err != nil {
		return nil, problem.Internal(err)
	}
	var out [][]byte
	for _, r := range rows {
		valid := r.Generation == w.SecretGeneration ||
			(r.Generation == w.SecretGeneration-1 && w.PreviousSecretExpiresAt != nil && now.Before(*w.PreviousSecretExpiresAt))
		if !valid {
			continue
		}
		aad, err := r.AAD()
		if err != nil {
			return nil, problem.Internal(err)
		}
		pt, err := s.o.Keyring.Open(r.Sealed, aad)
		if err != nil {
			// A server started with --allow-unreadable-secrets (docs/operations.md): the operator's
			// to fix, so 503 as without a master key, never the sender's 401.
			s.o.Logger.ErrorContext(ctx, "webhook secret: cannot be opened with the configured master keys", "tenant_id", w.TenantID,
				"webhook_trigger_id", w.ID, "generation", r.Generation, "key_id", keyring.KeyIDOf(r.Sealed), "err", err)
			return nil, problem.New(problem.TypeUnavailable, "the trigger's secret cannot be opened with the server's master key; "+
				"the operator must configure the key it was sealed with, or a developer regenerate the secret").With("reason", "secret_unreadable")
		}
		out = append(out, pt)
	}
	if len(out) == 0 {
		return nil, problem.Internal(errors.New("webhook trigger has no valid secret"))
	}
	return out, nil
}

// allowed reports whether addr is in sources (every address when there are none).
func allowed(sources []string, addr netip.Addr) bool {
	if len(sources) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, src := range sources {
		if p, err := netip.ParsePrefix(src); err == nil && p.Contains(addr) {
			return true
		}
	}
	return false
}

// payload is the body as the entrypoint receives it: parsed JSON when it is JSON, else a string;
// validated against the payload schema when there is one.
func (s *Service) payload(w webhook.Trigger, body []byte) (any, error) {
	var v any = string(body)
	isJSON := len(body) > 0 && json.Valid(body)
	if isJSON {
		v = json.RawMessage(body)
	} else if !utf8.Valid(body) {
		v = strings.ToValidUTF8(string(body), "\uFFFD")
	}
	if len(w.PayloadSchema) == 0 {
		return v, nil
	}
	if !isJSON {
		return nil, problem.Validation("the body is not JSON; this webhook trigger has a payload_schema",
			[]problem.Issue{{Path: "$.body", Code: "SCHEMA_MISMATCH", Message: "the body is not a JSON document"}})
	}
	sch, issues := s.o.Schemas.CompileUserSchema("$.payload_schema", w.PayloadSchema)
	if len(issues) > 0 {
		return nil, problem.Internal(fmt.Errorf("stored payload_schema no longer compiles: %s", issues[0].Message))
	}
	if issues := s.o.Schemas.ValidateValue(sch, "$.body", json.RawMessage(body)); len(issues) > 0 {
		return nil, problem.Validation("the body does not match the webhook trigger's payload_schema", schemaIssues(issues))
	}
	return v, nil
}

// forwarded is the headers the entrypoint receives: those forward_headers names, never the
// authentication's, each with its first value, names lower-cased.
func forwarded(w webhook.Trigger, h http.Header) map[string]string {
	out := map[string]string{}
	deny := authHeaders(w.Authentication)
	if w.Authentication.TimestampHeader != "" {
		deny = append(deny, w.Authentication.TimestampHeader)
	}
	for _, name := range w.ForwardHeaders {
		skip := false
		for _, d := range deny {
			if strings.EqualFold(d, name) {
				skip = true
			}
		}
		if v := h.Get(name); v != "" && !skip {
			out[strings.ToLower(name)] = v
		}
	}
	return out
}

// query is the query parameters the entrypoint receives (first value each), never the api key's.
func query(w webhook.Trigger, q url.Values) map[string]string {
	out := map[string]string{}
	for k, v := range q {
		if len(v) == 0 || (w.Authentication.QueryParam != "" && k == w.Authentication.QueryParam) {
			continue
		}
		if len(out) >= 64 {
			break
		}
		out[k] = v[0]
	}
	return out
}

// Package webhook defines webhook triggers (002's Webhook Triggers in 000's naming), their sealed
// secrets, their deliveries and the replay memory of the receiver: pure types, no I/O. Package
// webhookrecv manages them and receives deliveries.
package webhook

import (
	"encoding/json"
	"fmt"
	"time"
)

// Status is a webhook trigger's state: only active triggers accept deliveries.
type Status string

// Webhook trigger statuses (000's TriggerStatus; a webhook is never paused, only disabled).
const (
	StatusActive   Status = "active"
	StatusDisabled Status = "disabled"
)

// AuthType is how the receiver authenticates a delivery (002's Webhook Authentication Types).
type AuthType string

// Authentication types.
const (
	AuthNone       AuthType = "none"
	AuthHMACSHA256 AuthType = "hmac_sha256"
	AuthHMACSHA1   AuthType = "hmac_sha1"
	AuthBasic      AuthType = "basic"
	AuthBearer     AuthType = "bearer"
	AuthAPIKey     AuthType = "api_key"
)

// NeedsSecret reports whether a type checks deliveries against the trigger's secret.
func (t AuthType) NeedsSecret() bool { return t != AuthNone && t != "" }

// HMAC signature formats (Authentication.Format): where the signature is and what it signs.
const (
	// FormatGitHub: header X-Hub-Signature-256 (sha256) or X-Hub-Signature (sha1), value
	// "sha256=<hex>" / "sha1=<hex>", over the raw body. No timestamp.
	FormatGitHub = "github"
	// FormatStripe: header Stripe-Signature, value "t=<unix>,v1=<hex>[,v1=<hex>...]", over
	// "<t>.<body>". The timestamp is checked against the tolerance.
	FormatStripe = "stripe"
	// FormatSlack: header X-Slack-Signature, value "v0=<hex>", over "v0:<ts>:<body>" with ts from
	// X-Slack-Request-Timestamp. The timestamp is checked against the tolerance.
	FormatSlack = "slack"
	// FormatGeneric: a configurable header holding "<prefix><hex>" (prefix optional, e.g.
	// "sha256="), over the raw body, or over "<ts>.<body>" when a timestamp header is configured
	// (then checked against the tolerance).
	FormatGeneric = "generic"
)

// Authentication configures how deliveries are authenticated. The secret itself is never part of
// it: it is generated (or given) once and stored sealed, apart from the trigger.
type Authentication struct {
	Type AuthType `json:"type"`
	// Format is the signature format of the hmac types: github, stripe, slack or generic.
	Format string `json:"format,omitempty"`
	// Header is the header that carries the signature (hmac), or the key (api_key, when it is
	// sent in a header). Defaults follow the format; api_key defaults to X-API-Key.
	Header string `json:"header,omitempty"`
	// QueryParam is the query parameter that carries the key (api_key sent in the URL).
	QueryParam string `json:"query_param,omitempty"`
	// SignaturePrefix is what precedes the hex signature in the header (generic format), e.g.
	// "sha256=".
	SignaturePrefix string `json:"signature_prefix,omitempty"`
	// SignatureEncoding is how the generic format's signature is written: hex (default) or
	// base64.
	SignatureEncoding string `json:"signature_encoding,omitempty"`
	// TimestampHeader is the header that carries a Unix timestamp signed with the body (generic
	// format; slack's is X-Slack-Request-Timestamp).
	TimestampHeader string `json:"timestamp_header,omitempty"`
	// TimestampToleranceSeconds bounds how far a signed timestamp may be from the server's clock
	// (default 300).
	TimestampToleranceSeconds int `json:"timestamp_tolerance_seconds,omitempty"`
	// Username is the user name basic authentication expects (the password is the secret).
	Username string `json:"username,omitempty"`
}

// Signed reports whether the delivery's signature covers a timestamp (stripe, slack, or generic
// with a timestamp header).
func (a Authentication) Signed() bool {
	if a.Type != AuthHMACSHA256 && a.Type != AuthHMACSHA1 {
		return false
	}
	return a.Format == FormatStripe || a.Format == FormatSlack || (a.Format == FormatGeneric && a.TimestampHeader != "")
}

// RateLimit bounds the deliveries a trigger accepts (a token bucket per trigger, in process).
type RateLimit struct {
	MaxRequestsPerSecond float64 `json:"max_requests_per_second"`
	BurstSize            int64   `json:"burst_size"`
	MaxRequestsPerMinute int64   `json:"max_requests_per_minute,omitempty"`
}

// Trigger is a webhook trigger: deliveries to its URL start its entrypoint.
type Trigger struct {
	ID             string          `json:"webhook_trigger_id"`
	TenantID       string          `json:"tenant_id"`
	Name           string          `json:"name"`
	EntrypointID   string          `json:"entrypoint_id"`
	Authentication Authentication  `json:"authentication"`
	AllowedSources []string        `json:"allowed_sources"`
	PayloadSchema  json.RawMessage `json:"payload_schema,omitempty"`
	MaxBodyBytes   int64           `json:"max_body_bytes"`
	RateLimit      RateLimit       `json:"rate_limit"`
	// ForwardHeaders names the request headers passed to the entrypoint (never the
	// authentication headers).
	ForwardHeaders   []string `json:"forward_headers"`
	ExecutionContext string   `json:"execution_context"`
	Status           Status   `json:"status"`
	// SecretGeneration counts the secrets the trigger has had (0: none, authentication none).
	SecretGeneration int `json:"secret_generation"`
	// PreviousSecretExpiresAt is when the secret replaced by the last :regenerate-secret stops
	// being accepted (nil: no previous secret is valid).
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	CreatedBy               string     `json:"created_by"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
	// Revision guards read-modify-write (not part of the resource).
	Revision int64 `json:"-"`
}

// Secret is one generation of a trigger's secret, sealed by the keyring (never the plaintext).
type Secret struct {
	TenantID   string
	TriggerID  string
	Generation int
	Sealed     []byte
	CreatedAt  time.Time
	// ExpiresAt is when a replaced secret stops being accepted (nil: the current one).
	ExpiresAt *time.Time
}

// AAD is the additional authenticated data a secret is sealed with: it binds the ciphertext to its
// tenant, trigger and generation.
func (s Secret) AAD() ([]byte, error) {
	return SecretAAD(s.TenantID, s.TriggerID, s.Generation)
}

// SecretAAD is Secret.AAD for the parts.
func SecretAAD(tenantID, triggerID string, generation int) ([]byte, error) {
	b, err := json.Marshal([]any{"lark-webhook-secret-v1", tenantID, triggerID, generation})
	if err != nil {
		return nil, fmt.Errorf("webhook secret AAD: %w", err)
	}
	return b, nil
}

// Delivery is one request the receiver answered for a trigger (kept for debugging: the last
// MaxDeliveries per trigger). It holds neither the secret nor the body: the body's size and hash.
type Delivery struct {
	ID             string    `json:"delivery_id"`
	TenantID       string    `json:"tenant_id"`
	TriggerID      string    `json:"webhook_trigger_id"`
	ReceivedAt     time.Time `json:"received_at"`
	StatusCode     int       `json:"status_code"`
	Outcome        string    `json:"outcome"`
	Reason         string    `json:"reason,omitempty"`
	InvocationID   string    `json:"invocation_id,omitempty"`
	SourceIP       string    `json:"source_ip"`
	BodyBytes      int64     `json:"body_bytes"`
	BodySHA256     string    `json:"body_sha256,omitempty"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Redelivery     bool      `json:"redelivery,omitempty"`
}

// Delivery outcomes.
const (
	OutcomeAccepted     = "accepted"
	OutcomeRedelivered  = "redelivered"
	OutcomeForbidden    = "source_not_allowed"
	OutcomeTooLarge     = "payload_too_large"
	OutcomeUnauthorized = "unauthorized"
	OutcomeReplayed     = "replayed"
	OutcomeRateLimited  = "rate_limited"
	OutcomeInvalid      = "invalid_payload"
	OutcomeFailed       = "failed"
)

// MaxDeliveries is how many deliveries are kept per trigger.
const MaxDeliveries = 100

// Seen is what the receiver remembers of an accepted delivery until ExpiresAt: a signature (Kind
// KindSignature, so the same signed request is refused a second time) or an idempotency key
// (KindIdempotency, so a redelivery answers with the first delivery's invocation). Key is a
// SHA-256 hex digest, never the signature or key itself.
type Seen struct {
	TenantID     string
	TriggerID    string
	Kind         string
	Key          string
	InvocationID string
	DeliveryID   string
	ExpiresAt    time.Time
}

// Kinds of Seen.
const (
	KindSignature   = "signature"
	KindIdempotency = "idempotency"
)

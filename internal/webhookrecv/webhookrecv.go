// Package webhookrecv is the webhook receiver: it receives deliveries at the addresses of webhook
// triggers and starts their invocations, and manages those triggers (002's Webhook Triggers under
// 000's naming; the types are package webhook). It is a sibling of package scheduler and uses the
// same seam: a delivery that passes every check is planned through the Invoker and its invocation
// queued in the same transaction as the delivery's record, so an accepted delivery and its
// invocation are committed together or not at all.
//
// A trigger's secret is generated on the server (or given, for senders that generate their own),
// shown once in the answer of the create or :regenerate-secret, and stored sealed by the keyring
// (envelope encryption, AAD binding it to tenant, trigger and generation); it is never rendered
// again, logged or audited. After :regenerate-secret the previous secret stays valid for a stated
// overlap, on the injected clock.
package webhookrecv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/mergepatch"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/ratelimit"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/webhook"
)

// Defaults and bounds of a trigger's settings (docs/webhooks.md).
const (
	DefaultToleranceSeconds = 300
	MaxToleranceSeconds     = 3600
	DefaultMaxBodyBytes     = 1 << 20
	// MaxBodyBytes is the largest body a trigger may accept: the server's payload bound (2 MiB).
	MaxBodyBytes         = 2 << 20
	DefaultOverlap       = 24 * time.Hour
	MaxOverlap           = 7 * 24 * time.Hour
	MaxAllowedSources    = 64
	MaxForwardHeaders    = 32
	DefaultRatePerSecond = 10
	DefaultBurst         = 20
	// UnsignedReplayWindow is how long the signature of a request without a signed timestamp
	// (github, generic without a timestamp header) is remembered: the same request is refused
	// within it.
	UnsignedReplayWindow = 24 * time.Hour
	// IdempotencyWindow is how long an idempotency key is remembered.
	IdempotencyWindow = 24 * time.Hour
	// EncodingBase64 is the generic format's base64 signature encoding (hex is the default).
	EncodingBase64 = "base64"
	// secretBytes is the entropy of a generated secret.
	secretBytes                = 32
	minSecretLen, maxSecretLen = 16, 256
)

// DefaultForwardHeaders are the request headers the entrypoint receives when forward_headers is
// not given.
var DefaultForwardHeaders = []string{"Content-Type", "User-Agent", "X-GitHub-Event", "X-GitHub-Delivery"}

// Invoker is what the webhook service needs of invoke.Service (a subset of scheduler.Invoker).
type Invoker interface {
	Plan(ctx context.Context, st invoke.SystemStart) (invoke.Planned, error)
	NewID() string
	// Enqueue writes a planned invocation inside tx; once tx commits, the invoker reports it and
	// wakes its dispatcher.
	Enqueue(tx store.Tx, p invoke.Planned, id string, now time.Time) (invocation.Record, error)
	// CanSee reports whether sc may see an entrypoint.
	CanSee(ctx context.Context, sc auth.SecurityContext, entrypointID string) (bool, error)
}

// Options configure a Service.
type Options struct {
	Clock  clock.Clock
	IDs    idgen.Generator
	Logger *slog.Logger
	// Keyring seals and opens secrets; nil refuses (503) every trigger whose authentication needs
	// a secret.
	Keyring *keyring.Keyring
	// Schemas compiles payload schemas (user-schema limits).
	Schemas *schema.Registry
	// Observer hears of every delivery's outcome (nil: none).
	Observer Observer
	// Secrets resolves 002's authentication.secret_ref: the tenant secret whose value becomes a
	// new trigger's secret (nil: secret_ref answers 503).
	Secrets SecretSource
}

// Observer hears of the outcome of every webhook delivery, once it is answered (package metrics
// implements it): webhook.OutcomeAccepted, webhook.OutcomeRedelivered, a refusal's outcome
// (webhook.OutcomeUnauthorized, OutcomeReplayed, OutcomeTooLarge, …), or OutcomeNotFound for a
// delivery to no active webhook trigger.
type Observer interface {
	WebhookDelivery(outcome string)
}

// OutcomeNotFound is the Observer outcome of a delivery to an unknown tenant, or to an unknown or
// disabled webhook trigger (404; not recorded as a delivery).
const OutcomeNotFound = "not_found"

// Store is the store methods the webhook receiver uses (store.Store has them all): the webhook
// reads, the tenant's policy, and Update for its writes.
type Store interface {
	store.TenantReader
	WebhookTrigger(ctx context.Context, tenantID, id string) (webhook.Trigger, error)
	ListWebhookTriggers(ctx context.Context, tenantID string, q store.ListQuery) (store.Page[webhook.Trigger], error)
	WebhookSecrets(ctx context.Context, tenantID, triggerID string) ([]webhook.Secret, error)
	WebhookDeliveries(ctx context.Context, tenantID, triggerID string, q store.ListQuery) (store.Page[webhook.Delivery], error)
	WebhookSeenAt(ctx context.Context, tenantID, triggerID, kind, key string, now time.Time) (webhook.Seen, error)
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Service implements the webhook trigger use cases and the receiver.
type Service struct {
	store   Store
	inv     Invoker
	o       Options
	limiter *ratelimit.TokenBucket
	// refusals bounds how many refused deliveries per trigger are recorded (an unauthenticated
	// sender must not be able to turn every request into a write).
	refusals *ratelimit.TokenBucket
}

// New returns a Service.
func New(st Store, inv Invoker, o Options) *Service {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.IDs == nil {
		o.IDs = idgen.UUIDv7{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{store: st, inv: inv, o: o, limiter: ratelimit.NewTokenBucket(), refusals: ratelimit.NewTokenBucket()}
}

// Spec is the writable part of a webhook trigger: the body of POST and PUT, and what PATCH merges
// into. The read-only members of the resource are accepted and ignored, so a GET body can be PUT
// back.
type Spec struct {
	WebhookTriggerID string              `json:"webhook_trigger_id,omitempty"`
	Name             string              `json:"name"`
	EntrypointID     string              `json:"entrypoint_id"`
	Authentication   *SpecAuthentication `json:"authentication"`
	AllowedSources   []string            `json:"allowed_sources"`
	PayloadSchema    json.RawMessage     `json:"payload_schema,omitempty"`
	MaxBodyBytes     *int64              `json:"max_body_bytes,omitempty"`
	RateLimit        *webhook.RateLimit  `json:"rate_limit,omitempty"`
	ForwardHeaders   []string            `json:"forward_headers"`
	ExecutionContext string              `json:"execution_context"`
	Status           string              `json:"status"`
	// Secret, on create only, is a secret the sender generated (Stripe does); omitted, the server
	// generates one.
	Secret string `json:"secret,omitempty"`
	// TriggerID and Enabled are 002's names for webhook_trigger_id and status (aliases.go).
	TriggerID string `json:"trigger_id,omitempty"`
	Enabled   *bool  `json:"enabled,omitempty"`
	// secretFromRef: Secret was read from authentication.secret_ref (never shown back).
	secretFromRef bool

	TenantID                json.RawMessage `json:"tenant_id,omitempty"`
	WebhookURL              json.RawMessage `json:"webhook_url,omitempty"`
	SecretGeneration        json.RawMessage `json:"secret_generation,omitempty"`
	PreviousSecretExpiresAt json.RawMessage `json:"previous_secret_expires_at,omitempty"`
	CreatedBy               json.RawMessage `json:"created_by,omitempty"`
	CreatedAt               json.RawMessage `json:"created_at,omitempty"`
	UpdatedAt               json.RawMessage `json:"updated_at,omitempty"`
}

// View is a trigger as the API renders it: the resource, its receiver URL (relative to the
// server's public address) and, in the answer of a create or :regenerate-secret only, the secret.
type View struct {
	webhook.Trigger
	WebhookURL string `json:"webhook_url"`
	Secret     string `json:"secret,omitempty"`
	// SecretNotice says the secret is shown once.
	SecretNotice string `json:"secret_notice,omitempty"`
}

// ReceiverPath is the receiver's path under the API's base path.
func ReceiverPath(tenantID, triggerID string) string {
	return "/webhooks/" + tenantID + "/" + triggerID
}

// BasePath is the API base path the webhook_url is rendered under.
const BasePath = "/api/serverless-runtime/v1"

// ViewOf renders a trigger (without a secret).
func ViewOf(w webhook.Trigger) View {
	if w.AllowedSources == nil {
		w.AllowedSources = []string{}
	}
	if w.ForwardHeaders == nil {
		w.ForwardHeaders = []string{}
	}
	return View{Trigger: w, WebhookURL: BasePath + ReceiverPath(w.TenantID, w.ID)}
}

func withSecret(w webhook.Trigger, secret string) View {
	v := ViewOf(w)
	if secret != "" {
		v.Secret = secret
		v.SecretNotice = "the secret is shown once: store it now; it cannot be read again (regenerate it if it is lost)"
	}
	return v
}

var (
	idPattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	headerPattern = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_|~-]{1,64}$`)
	paramPattern  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

func invalid(path, code, format string, args ...any) *problem.Error {
	msg := fmt.Sprintf(format, args...)
	return problem.Validation(msg, []problem.Issue{{Path: path, Code: code, Message: msg}})
}

func oneOf(field, v string, allowed ...string) (string, error) {
	if v == "" {
		return allowed[0], nil
	}
	if slices.Contains(allowed, v) {
		return v, nil
	}
	return "", invalid("$."+field, "INVALID_VALUE", "%s must be one of %s", field, strings.Join(allowed, ", "))
}

// Execution contexts: whom a delivery's invocation runs as.
const (
	ContextSystem    = "system"
	ContextAPIClient = "api_client"
	ContextUser      = "user"
)

// sensitiveHeaders are never forwarded to the entrypoint.
var sensitiveHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", HeaderGitHub256, HeaderGitHub1,
	HeaderStripe, HeaderSlack, DefaultAPIKeyHeader}

// authHeaders are the headers a trigger's authentication reads (never forwarded).
func authHeaders(a webhook.Authentication) []string {
	out := slices.Clone(sensitiveHeaders)
	if a.Header != "" {
		out = append(out, a.Header)
	}
	return out
}

// build validates spec onto base (id, tenant, creation, secret state), one group of settings
// after the other in the order of the resource.
func (s *Service) build(spec Spec, base webhook.Trigger) (webhook.Trigger, error) {
	out := base
	entrypointID, name, err := checkNaming(spec, out.ID)
	if err != nil {
		return out, err
	}
	out.EntrypointID, out.Name = entrypointID, name
	if spec.Authentication == nil {
		return out, invalid("$.authentication", "MISSING_FIELD", `authentication is required: {"type": "none"|"hmac_sha256"|"hmac_sha1"|"basic"|"bearer"|"api_key", ...}`)
	}
	a, err := checkAuth(spec.Authentication.Authentication)
	if err != nil {
		return out, err
	}
	out.Authentication = a
	if out.AllowedSources, err = checkSources(spec.AllowedSources); err != nil {
		return out, err
	}
	if out.PayloadSchema, err = s.checkPayloadSchema(spec.PayloadSchema); err != nil {
		return out, err
	}
	if out.MaxBodyBytes, err = checkMaxBodyBytes(spec.MaxBodyBytes); err != nil {
		return out, err
	}
	if out.RateLimit, err = checkRateLimit(spec.RateLimit); err != nil {
		return out, err
	}
	if out.ForwardHeaders, err = checkForwardHeaders(spec.ForwardHeaders, a); err != nil {
		return out, err
	}
	if out.ExecutionContext, err = oneOf("execution_context", spec.ExecutionContext, ContextSystem, ContextAPIClient, ContextUser); err != nil {
		return out, err
	}
	st, err := oneOf("status", spec.Status, string(webhook.StatusActive), string(webhook.StatusDisabled))
	if err != nil {
		return out, err
	}
	out.Status = webhook.Status(st)
	return out, nil
}

// checkNaming checks the entrypoint (required, at most 1024 characters) and the name (default: the
// trigger's id, at most 256 characters).
func checkNaming(spec Spec, id string) (entrypointID, name string, err error) {
	if spec.EntrypointID == "" {
		return "", "", invalid("$.entrypoint_id", "MISSING_FIELD", "entrypoint_id is required")
	}
	if len(spec.EntrypointID) > 1024 {
		return "", "", invalid("$.entrypoint_id", "INVALID_VALUE", "entrypoint_id must be at most 1024 characters")
	}
	name = spec.Name
	if name == "" {
		name = id
	}
	if len(name) > 256 {
		return "", "", invalid("$.name", "INVALID_VALUE", "name must be at most 256 characters")
	}
	return spec.EntrypointID, name, nil
}

// checkSources reads allowed_sources (at most MaxAllowedSources) into masked CIDRs; none is an
// empty list.
func checkSources(srcs []string) ([]string, error) {
	if len(srcs) > MaxAllowedSources {
		return nil, invalid("$.allowed_sources", "INVALID_VALUE", "allowed_sources holds at most %d CIDRs", MaxAllowedSources)
	}
	out := []string{}
	for i, src := range srcs {
		p, err := parseSource(src)
		if err != nil {
			return nil, invalid(fmt.Sprintf("$.allowed_sources[%d]", i), "INVALID_VALUE", "%q is not a CIDR (e.g. 192.30.252.0/22) or an IP address", src)
		}
		out = append(out, p.String())
	}
	return out, nil
}

// checkPayloadSchema compiles a payload_schema under the user-schema limits; absent or null is
// none (nil).
func (s *Service) checkPayloadSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if s.o.Schemas == nil {
		return nil, problem.Internal(errors.New("webhooks: no schema registry"))
	}
	if _, issues := s.o.Schemas.CompileUserSchema("$.payload_schema", raw); len(issues) > 0 {
		return nil, problem.Validation("payload_schema is not a usable JSON Schema", schemaIssues(issues))
	}
	return raw, nil
}

// checkMaxBodyBytes checks max_body_bytes (1 to MaxBodyBytes, default DefaultMaxBodyBytes).
func checkMaxBodyBytes(n *int64) (int64, error) {
	if n == nil {
		return DefaultMaxBodyBytes, nil
	}
	if *n < 1 || *n > MaxBodyBytes {
		return DefaultMaxBodyBytes, invalid("$.max_body_bytes", "INVALID_VALUE", "max_body_bytes must be 1 to %d", MaxBodyBytes)
	}
	return *n, nil
}

// checkRateLimit checks rate_limit, filling in a zero burst_size (in rl itself) with DefaultBurst;
// absent, the defaults apply.
func checkRateLimit(rl *webhook.RateLimit) (webhook.RateLimit, error) {
	def := webhook.RateLimit{MaxRequestsPerSecond: DefaultRatePerSecond, BurstSize: DefaultBurst}
	if rl == nil {
		return def, nil
	}
	if rl.MaxRequestsPerSecond <= 0 || rl.MaxRequestsPerSecond > 1000 {
		return def, invalid("$.rate_limit.max_requests_per_second", "INVALID_VALUE", "max_requests_per_second must be more than 0 and at most 1000")
	}
	if rl.BurstSize == 0 {
		rl.BurstSize = DefaultBurst
	}
	if rl.BurstSize < 1 || rl.BurstSize > 10000 {
		return def, invalid("$.rate_limit.burst_size", "INVALID_VALUE", "burst_size must be 1 to 10000")
	}
	if rl.MaxRequestsPerMinute < 0 || rl.MaxRequestsPerMinute > 1_000_000 {
		return def, invalid("$.rate_limit.max_requests_per_minute", "INVALID_VALUE", "max_requests_per_minute must be 0 (no limit) to 1000000")
	}
	return *rl, nil
}

// checkForwardHeaders checks forward_headers (DefaultForwardHeaders when absent): header names,
// canonicalized, without duplicates, none of those a's authentication reads.
func checkForwardHeaders(fwd []string, a webhook.Authentication) ([]string, error) {
	if fwd == nil {
		fwd = DefaultForwardHeaders
	}
	if len(fwd) > MaxForwardHeaders {
		return nil, invalid("$.forward_headers", "INVALID_VALUE", "forward_headers names at most %d headers", MaxForwardHeaders)
	}
	out := []string{}
	for i, h := range fwd {
		if !headerPattern.MatchString(h) {
			return nil, invalid(fmt.Sprintf("$.forward_headers[%d]", i), "INVALID_VALUE", "%q is not a header name", h)
		}
		h = textproto.CanonicalMIMEHeaderKey(h)
		if slices.Contains(authHeaders(a), h) {
			return nil, invalid(fmt.Sprintf("$.forward_headers[%d]", i), "INVALID_VALUE", "%s carries credentials and is never forwarded", h)
		}
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out, nil
}

func schemaIssues(in []schema.Issue) []problem.Issue {
	out := make([]problem.Issue, 0, len(in))
	for _, is := range in {
		out = append(out, problem.Issue{Path: is.Path, Message: is.Message, Code: strings.ToUpper(is.Code)})
	}
	return out
}

// parseSource reads a CIDR or a single address (as its /32 or /128).
func parseSource(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// authPath is the path of the authentication block in a trigger's body.
const authPath = "$.authentication."

// badAuth is an INVALID_VALUE issue on one field of the authentication block.
func badAuth(field, format string, args ...any) error {
	return invalid(authPath+field, "INVALID_VALUE", format, args...)
}

// onlyFor refuses the first of fields that is set: none of them applies to authentication type typ.
func onlyFor(typ string, fields map[string]bool) error {
	for f, set := range fields {
		if set {
			return badAuth(f, "%s does not apply to authentication type %s", f, typ)
		}
	}
	return nil
}

// checkAuth validates an authentication block and fills in its defaults: first what every type
// shares (header names, signature prefix), then the fields of its type.
func checkAuth(a webhook.Authentication) (webhook.Authentication, error) {
	if err := checkAuthHeaders(&a); err != nil {
		return a, err
	}
	var err error
	switch a.Type {
	case webhook.AuthNone, webhook.AuthBearer:
		err = onlyFor(string(a.Type), map[string]bool{"format": a.Format != "", "header": a.Header != "", "query_param": a.QueryParam != "",
			"signature_prefix": a.SignaturePrefix != "", "signature_encoding": a.SignatureEncoding != "", "timestamp_header": a.TimestampHeader != "",
			"timestamp_tolerance_seconds": a.TimestampToleranceSeconds != 0, "username": a.Username != ""})
	case webhook.AuthBasic:
		err = checkBasicAuth(&a)
	case webhook.AuthAPIKey:
		err = checkAPIKeyAuth(&a)
	case webhook.AuthHMACSHA256, webhook.AuthHMACSHA1:
		err = checkHMACAuth(&a)
	case "":
		err = invalid(authPath+"type", "MISSING_FIELD", "authentication.type is required: none, hmac_sha256, hmac_sha1, basic, bearer or api_key")
	default:
		err = badAuth("type", "authentication.type must be one of none, hmac_sha256, hmac_sha1, basic, bearer, api_key")
	}
	return a, err
}

// checkAuthHeaders checks the header names (and canonicalizes them) and the signature prefix.
func checkAuthHeaders(a *webhook.Authentication) error {
	for field, h := range map[string]string{"header": a.Header, "timestamp_header": a.TimestampHeader} {
		if h != "" && !headerPattern.MatchString(h) {
			return badAuth(field, "%q is not a header name", h)
		}
	}
	if a.Header != "" {
		a.Header = textproto.CanonicalMIMEHeaderKey(a.Header)
	}
	if a.TimestampHeader != "" {
		a.TimestampHeader = textproto.CanonicalMIMEHeaderKey(a.TimestampHeader)
	}
	if len(a.SignaturePrefix) > 32 || strings.ContainsAny(a.SignaturePrefix, "\r\n") {
		return badAuth("signature_prefix", "signature_prefix must be at most 32 characters on one line")
	}
	return nil
}

// checkBasicAuth checks a basic block: only a username applies (default "webhook").
func checkBasicAuth(a *webhook.Authentication) error {
	if err := onlyFor("basic", map[string]bool{"format": a.Format != "", "header": a.Header != "", "query_param": a.QueryParam != "",
		"signature_prefix": a.SignaturePrefix != "", "signature_encoding": a.SignatureEncoding != "", "timestamp_header": a.TimestampHeader != "",
		"timestamp_tolerance_seconds": a.TimestampToleranceSeconds != 0}); err != nil {
		return err
	}
	if a.Username == "" {
		a.Username = "webhook"
	}
	if len(a.Username) > 128 || strings.ContainsAny(a.Username, ":\r\n") {
		return badAuth("username", "username must be at most 128 characters without ':'")
	}
	return nil
}

// checkAPIKeyAuth checks an api_key block: a header or a query parameter, not both (default the
// X-API-Key header).
func checkAPIKeyAuth(a *webhook.Authentication) error {
	if err := onlyFor("api_key", map[string]bool{"format": a.Format != "", "signature_prefix": a.SignaturePrefix != "",
		"signature_encoding": a.SignatureEncoding != "", "timestamp_header": a.TimestampHeader != "",
		"timestamp_tolerance_seconds": a.TimestampToleranceSeconds != 0, "username": a.Username != ""}); err != nil {
		return err
	}
	if a.Header != "" && a.QueryParam != "" {
		return badAuth("query_param", "an api key is sent in a header or in a query parameter, not both")
	}
	if a.QueryParam != "" && !paramPattern.MatchString(a.QueryParam) {
		return badAuth("query_param", "query_param must be 1-64 letters, digits, '_', '.' or '-'")
	}
	if a.Header == "" && a.QueryParam == "" {
		a.Header = DefaultAPIKeyHeader
	}
	return nil
}

// checkHMACAuth checks an hmac block: its format and what the format fixes, then the timestamp
// tolerance. The format defaults to generic when the block describes a signature header, and to
// github when it says nothing but the type (002's example: its answer names X-Hub-Signature-256).
func checkHMACAuth(a *webhook.Authentication) error {
	if err := onlyFor(string(a.Type), map[string]bool{"query_param": a.QueryParam != "", "username": a.Username != ""}); err != nil {
		return err
	}
	if a.Format == "" && a.Header == "" && a.SignaturePrefix == "" && a.SignatureEncoding == "" && a.TimestampHeader == "" {
		a.Format = webhook.FormatGitHub
	}
	f, err := oneOf("authentication.format", a.Format, webhook.FormatGeneric, webhook.FormatGitHub, webhook.FormatStripe, webhook.FormatSlack)
	if err != nil {
		return err
	}
	a.Format = f
	if err := checkHMACFormat(a); err != nil {
		return err
	}
	return checkTolerance(a)
}

// checkHMACFormat applies the preset of a.Format (github, stripe, slack: header, prefix and
// timestamp header are fixed) or checks the generic format's header and encoding.
func checkHMACFormat(a *webhook.Authentication) error {
	f := a.Format
	preset := func(header, prefix, ts string) error {
		if (a.Header != "" && a.Header != header) || (a.SignaturePrefix != "" && a.SignaturePrefix != prefix) ||
			(a.TimestampHeader != "" && a.TimestampHeader != ts) || a.SignatureEncoding != "" {
			return badAuth("format", "format %s fixes the signature header (%s); leave header, signature_prefix, signature_encoding and timestamp_header out, or use format generic", f, header)
		}
		a.Header, a.SignaturePrefix, a.TimestampHeader = header, prefix, ts
		return nil
	}
	switch f {
	case webhook.FormatGitHub:
		if a.Type == webhook.AuthHMACSHA1 {
			return preset(HeaderGitHub1, "sha1=", "")
		}
		return preset(HeaderGitHub256, "sha256=", "")
	case webhook.FormatStripe, webhook.FormatSlack:
		if a.Type != webhook.AuthHMACSHA256 {
			return badAuth("format", "format %s signs with hmac_sha256", f)
		}
		if f == webhook.FormatStripe {
			return preset(HeaderStripe, "", "")
		}
		return preset(HeaderSlack, "v0=", HeaderSlackTimestamp)
	default:
		if a.Header == "" {
			return invalid(authPath+"header", "MISSING_FIELD", "format generic needs the header that carries the signature")
		}
		if a.SignatureEncoding != "" && a.SignatureEncoding != "hex" && a.SignatureEncoding != EncodingBase64 {
			return badAuth("signature_encoding", "signature_encoding must be hex or base64")
		}
		return nil
	}
}

// checkTolerance checks the timestamp tolerance: only for formats that sign a timestamp, where it
// defaults to DefaultToleranceSeconds.
func checkTolerance(a *webhook.Authentication) error {
	if a.TimestampToleranceSeconds != 0 && !a.Signed() {
		return badAuth("timestamp_tolerance_seconds", "timestamp_tolerance_seconds applies only to formats that sign a timestamp (stripe, slack, generic with timestamp_header)")
	}
	if a.Signed() {
		if a.TimestampToleranceSeconds == 0 {
			a.TimestampToleranceSeconds = DefaultToleranceSeconds
		}
		if a.TimestampToleranceSeconds < 1 || a.TimestampToleranceSeconds > MaxToleranceSeconds {
			return badAuth("timestamp_tolerance_seconds", "timestamp_tolerance_seconds must be 1 to %d", MaxToleranceSeconds)
		}
	}
	return nil
}

// newSecret returns a fresh secret: 32 random bytes, URL-safe base64, prefixed whsec_.
func newSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b), nil
}

// checkGivenSecret validates a secret the caller brings.
func checkGivenSecret(path, s string) error {
	if len(s) < minSecretLen || len(s) > maxSecretLen {
		return invalid(path, "INVALID_VALUE", "secret must be %d to %d characters", minSecretLen, maxSecretLen)
	}
	for _, c := range s {
		if c < 0x21 || c > 0x7e {
			return invalid(path, "INVALID_VALUE", "secret must be printable ASCII without spaces")
		}
	}
	return nil
}

// seal seals a secret for generation gen of w; 503 without a keyring.
func (s *Service) seal(w webhook.Trigger, gen int, secret string, now time.Time) (webhook.Secret, error) {
	if s.o.Keyring == nil {
		return webhook.Secret{}, noKeyring()
	}
	sec := webhook.Secret{TenantID: w.TenantID, TriggerID: w.ID, Generation: gen, CreatedAt: now}
	aad, err := sec.AAD()
	if err != nil {
		return sec, problem.Internal(err)
	}
	sealed, err := s.o.Keyring.Seal([]byte(secret), aad)
	if err != nil {
		return sec, problem.Internal(err)
	}
	sec.Sealed = sealed
	return sec, nil
}

func noKeyring() error {
	return problem.New(problem.TypeUnavailable, "webhook secrets cannot be stored: the server has no master key (set LARK_MASTER_KEY or --master-key-file); use authentication type none, or ask the operator").
		With("reason", "no_master_key")
}

func canRead(sc auth.SecurityContext) error {
	return auth.RequireTenantRole(sc, auth.RoleViewer, "reading webhook triggers")
}

func canWrite(sc auth.SecurityContext) error {
	return auth.RequireTenantRole(sc, auth.RoleDeveloper, "changing webhook triggers")
}

// runsAsCreator reports whether w's invocations run as its creator.
func runsAsCreator(w webhook.Trigger) bool {
	return w.ExecutionContext != ContextSystem && w.CreatedBy != ""
}

// runAs is the identity a trigger's invocations have.
func runAs(w webhook.Trigger) auth.SecurityContext {
	sc := auth.SecurityContext{TenantID: w.TenantID, SubjectID: "webhook:" + w.ID, Roles: []auth.Role{auth.RoleOperator}}
	if runsAsCreator(w) {
		sc.SubjectID = w.CreatedBy
	}
	return sc
}

// hidden reports whether sc may not know w exists: it runs as another subject whose entrypoint
// sc cannot see. Tenant admins see every trigger of their tenant.
func (s *Service) hidden(ctx context.Context, sc auth.SecurityContext, w webhook.Trigger) (bool, error) {
	if !runsAsCreator(w) || w.CreatedBy == sc.SubjectID || sc.Has(auth.RoleAdmin) {
		return false, nil
	}
	ok, err := s.inv.CanSee(ctx, sc, w.EntrypointID)
	return !ok, err
}

// mayAct checks that sc may change w: one that runs as its creator only by the creator or an
// admin (404 when sc may not know it exists, 403 otherwise).
func (s *Service) mayAct(ctx context.Context, sc auth.SecurityContext, w webhook.Trigger) error {
	if !runsAsCreator(w) || w.CreatedBy == sc.SubjectID || sc.Has(auth.RoleAdmin) {
		return nil
	}
	hide, err := s.hidden(ctx, sc, w)
	if err != nil {
		return problem.Internal(err)
	}
	if hide {
		return problem.NotFound("webhook trigger %s not found", w.ID)
	}
	return problem.Forbidden("webhook trigger %s runs as its creator (execution_context %s): only its creator or a tenant admin may change it", w.ID, w.ExecutionContext)
}

func storeErr(id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return problem.NotFound("webhook trigger %s not found", id)
	case errors.Is(err, store.ErrStale):
		return problem.Conflict("concurrent_update", "webhook trigger %s changed while this request was applied; retry it", id)
	}
	var pe *problem.Error
	if errors.As(err, &pe) {
		return pe
	}
	return problem.Internal(err)
}

// auditEvent is an audit record of a change of w (never its secret).
func (s *Service) auditEvent(ctx context.Context, sc auth.SecurityContext, w webhook.Trigger, typ string, details map[string]any) (audit.Event, error) {
	d := map[string]any{"webhook_trigger_id": w.ID, "entrypoint_id": w.EntrypointID, "status": w.Status,
		"authentication_type": w.Authentication.Type, "secret_generation": w.SecretGeneration}
	for k, v := range details {
		d[k] = v
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return audit.Event{}, err
	}
	return audit.Event{ID: s.o.IDs.New("aud"), TenantID: w.TenantID, Type: typ, ActorID: sc.SubjectID,
		ResourceType: "webhook_trigger", ResourceID: w.ID, CorrelationID: obs.CorrelationID(ctx), At: s.o.Clock.Now(), Details: raw}, nil
}

func (s *Service) insertAudit(ctx context.Context, tx store.Tx, sc auth.SecurityContext, w webhook.Trigger, typ string, details map[string]any) error {
	ev, err := s.auditEvent(ctx, sc, w, typ, details)
	if err != nil {
		return err
	}
	return tx.InsertAudit(ev)
}

// checkEntrypoint answers 404 unless the trigger's invocations, run as the trigger runs them, can
// see its entrypoint: its creator for execution_context user or api_client; the trigger's own
// subject for system, which sees what every member of the tenant sees (tenant, platform and shared
// entrypoints) and never a user's private one.
func (s *Service) checkEntrypoint(ctx context.Context, w webhook.Trigger) error {
	ok, err := s.inv.CanSee(ctx, runAs(w), w.EntrypointID)
	if err != nil {
		return problem.Internal(err)
	}
	if !ok {
		return s.notVisible(ctx, w)
	}
	return nil
}

// notVisible is the refusal of an entrypoint the trigger's invocations cannot see: 404, unless the
// context is system and the trigger's author can see it, which the refusal then says (a 422 at
// $.execution_context; nothing is disclosed that the author does not know).
func (s *Service) notVisible(ctx context.Context, w webhook.Trigger) error {
	nf := problem.NotFound("entrypoint %s not found", w.EntrypointID).With("field", "entrypoint_id")
	if w.ExecutionContext != ContextSystem || w.CreatedBy == "" {
		return nf
	}
	author := w
	author.ExecutionContext = ContextUser
	if ok, err := s.inv.CanSee(ctx, runAs(author), w.EntrypointID); err != nil || !ok {
		return nf
	}
	msg := fmt.Sprintf("execution_context is %q: the trigger's invocations start as webhook:%s, which cannot see %s: "+
		"it is private to its owner; set execution_context to \"user\" to run as %s, or share the entrypoint (\"shared\": true)",
		w.ExecutionContext, w.ID, w.EntrypointID, w.CreatedBy)
	return problem.Validation(msg, []problem.Issue{{Path: "$.execution_context", Code: "ENTRYPOINT_NOT_VISIBLE", Message: msg}}).
		With("execution_context", w.ExecutionContext)
}

// Create registers a webhook trigger: 201 with it and, when its authentication needs one, its
// secret (shown this once). The tenant's max_triggers applies (webhook triggers count there).
func (s *Service) Create(ctx context.Context, sc auth.SecurityContext, spec Spec) (View, error) {
	if err := canWrite(sc); err != nil {
		return View{}, err
	}
	if err := s.resolveAliases(ctx, sc.TenantID, &spec); err != nil {
		return View{}, err
	}
	now := s.o.Clock.Now()
	base := webhook.Trigger{ID: spec.WebhookTriggerID, TenantID: sc.TenantID, CreatedBy: sc.SubjectID, CreatedAt: now, UpdatedAt: now}
	if base.ID == "" {
		base.ID = s.o.IDs.New("whk")
	} else if !idPattern.MatchString(base.ID) {
		return View{}, invalid("$.webhook_trigger_id", "INVALID_VALUE", "webhook_trigger_id must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	w, err := s.build(spec, base)
	if err != nil {
		return View{}, err
	}
	if err := checkSpecSecret(w, spec.Secret); err != nil {
		return View{}, err
	}
	if err := s.checkEntrypoint(ctx, w); err != nil {
		return View{}, err
	}
	secret, sealed, err := s.firstSecret(&w, spec.Secret, now)
	if err != nil {
		return View{}, err
	}
	policy, err := s.store.Tenant(ctx, sc.TenantID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return View{}, problem.Internal(err)
	}
	var perr error
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if max := policy.Quotas.MaxTriggers; max != nil {
			n, err := store.TriggerTotal(tx, sc.TenantID)
			if err != nil {
				return err
			}
			if n >= *max {
				pe := problem.New(problem.TypeQuotaExceeded, "tenant %s has reached its quota of %d triggers; delete some, or ask the operator to raise max_triggers", sc.TenantID, *max).With("quota", "max_triggers")
				pe.RetryAfter = 60
				perr = pe
				return perr
			}
		}
		if err := tx.InsertWebhookTrigger(&w); err != nil {
			return err
		}
		if w.SecretGeneration > 0 {
			if err := tx.PutWebhookSecret(sealed, 1, nil); err != nil {
				return err
			}
		}
		return s.insertAudit(ctx, tx, sc, w, audit.WebhookCreated, nil)
	})
	switch {
	case perr != nil:
		return View{}, perr
	case errors.Is(err, store.ErrConflict):
		return View{}, problem.Conflict("webhook_trigger_exists", "a webhook trigger with id %s already exists", w.ID).With("webhook_trigger_id", w.ID)
	case err != nil:
		return View{}, problem.Internal(err)
	}
	if spec.secretFromRef {
		// The value is the tenant secret's: write-only there, so not shown here either.
		return withSecret(w, ""), nil
	}
	return withSecret(w, secret), nil
}

// checkSpecSecret checks a secret sent on create (none: the server generates one).
func checkSpecSecret(w webhook.Trigger, secret string) error {
	if secret == "" {
		return nil
	}
	if !w.Authentication.Type.NeedsSecret() {
		return invalid("$.secret", "INVALID_VALUE", "authentication type none takes no secret")
	}
	return checkGivenSecret("$.secret", secret)
}

// firstSecret is a new trigger's first secret, the given one or a generated one, sealed as
// generation 1 ("" when its authentication needs none).
func (s *Service) firstSecret(w *webhook.Trigger, given string, now time.Time) (string, webhook.Secret, error) {
	if !w.Authentication.Type.NeedsSecret() {
		return "", webhook.Secret{}, nil
	}
	secret := given
	if secret == "" {
		var err error
		if secret, err = newSecret(); err != nil {
			return "", webhook.Secret{}, problem.Internal(err)
		}
	}
	w.SecretGeneration = 1
	sealed, err := s.seal(*w, 1, secret, now)
	return secret, sealed, err
}

// Get returns a webhook trigger of the caller's tenant (never its secret).
func (s *Service) Get(ctx context.Context, sc auth.SecurityContext, id string) (View, error) {
	w, err := s.get(ctx, sc, id)
	if err != nil {
		return View{}, err
	}
	return ViewOf(w), nil
}

func (s *Service) get(ctx context.Context, sc auth.SecurityContext, id string) (webhook.Trigger, error) {
	if err := canRead(sc); err != nil {
		return webhook.Trigger{}, err
	}
	w, err := s.store.WebhookTrigger(ctx, sc.TenantID, id)
	if err != nil {
		return w, storeErr(id, err)
	}
	hide, err := s.hidden(ctx, sc, w)
	if err != nil {
		return w, problem.Internal(err)
	}
	if hide {
		return w, problem.NotFound("webhook trigger %s not found", id)
	}
	return w, nil
}

// List lists the caller's tenant's webhook triggers (another subject's triggers on its private
// entrypoints left out).
func (s *Service) List(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[View], error) {
	if err := canRead(sc); err != nil {
		return store.Page[View]{}, err
	}
	page, err := s.store.ListWebhookTriggers(ctx, sc.TenantID, q)
	if err != nil {
		return store.Page[View]{}, err
	}
	out := store.Page[View]{NextCursor: page.NextCursor, PrevCursor: page.PrevCursor, HasMore: page.HasMore, Items: []View{}}
	for _, w := range page.Items {
		hide, err := s.hidden(ctx, sc, w)
		if err != nil {
			return out, problem.Internal(err)
		}
		if !hide {
			out.Items = append(out.Items, ViewOf(w))
		}
	}
	return out, nil
}

// specOf is the writable part of a stored trigger (what PATCH merges into).
func specOf(w webhook.Trigger) Spec {
	a := w.Authentication
	rl := w.RateLimit
	n := w.MaxBodyBytes
	return Spec{WebhookTriggerID: w.ID, Name: w.Name, EntrypointID: w.EntrypointID, Authentication: &SpecAuthentication{Authentication: a},
		AllowedSources: w.AllowedSources, PayloadSchema: w.PayloadSchema, MaxBodyBytes: &n, RateLimit: &rl,
		ForwardHeaders: w.ForwardHeaders, ExecutionContext: w.ExecutionContext, Status: string(w.Status)}
}

// Replace is PUT: the body replaces every writable field (absent ones take their defaults).
func (s *Service) Replace(ctx context.Context, sc auth.SecurityContext, id string, spec Spec) (View, error) {
	return s.change(ctx, sc, id, func(webhook.Trigger) (Spec, error) { return spec, nil })
}

// Patch is PATCH: a JSON merge patch (RFC 7396) of the writable fields; decode reads the merged
// document into a Spec (the API's strict decoder).
func (s *Service) Patch(ctx context.Context, sc auth.SecurityContext, id string, patch map[string]any, decode func([]byte, *Spec) error) (View, error) {
	return s.change(ctx, sc, id, func(cur webhook.Trigger) (Spec, error) {
		raw, err := json.Marshal(specOf(cur))
		if err != nil {
			return Spec{}, problem.Internal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return Spec{}, problem.Internal(err)
		}
		patchAliases(doc, patch)
		merged, err := json.Marshal(mergepatch.Apply(doc, patch))
		if err != nil {
			return Spec{}, problem.Internal(err)
		}
		var spec Spec
		return spec, decode(merged, &spec)
	})
}

// change applies an update built from the current trigger. A change to an authentication type
// that needs a secret, on a trigger that has none, generates one (returned this once).
func (s *Service) change(ctx context.Context, sc auth.SecurityContext, id string, next func(webhook.Trigger) (Spec, error)) (View, error) {
	if err := canWrite(sc); err != nil {
		return View{}, err
	}
	cur, err := s.store.WebhookTrigger(ctx, sc.TenantID, id)
	if err != nil {
		return View{}, storeErr(id, err)
	}
	if err := s.mayAct(ctx, sc, cur); err != nil {
		return View{}, err
	}
	spec, err := next(cur)
	if err != nil {
		return View{}, err
	}
	if err := spec.changeAliases(); err != nil {
		return View{}, err
	}
	if spec.WebhookTriggerID != "" && spec.WebhookTriggerID != cur.ID {
		return View{}, invalid("$.webhook_trigger_id", "READ_ONLY", "webhook_trigger_id cannot change (it is %s)", cur.ID)
	}
	if spec.Secret != "" {
		return View{}, invalid("$.secret", "READ_ONLY", "the secret changes only through :regenerate-secret")
	}
	base := cur
	base.CreatedBy = sc.SubjectID
	w, err := s.build(spec, base)
	if err != nil {
		return View{}, err
	}
	if err := s.checkEntrypoint(ctx, w); err != nil {
		return View{}, err
	}
	now := s.o.Clock.Now()
	w.UpdatedAt = now
	var secret string
	var sealed webhook.Secret
	if w.Authentication.Type.NeedsSecret() && cur.SecretGeneration == 0 {
		if secret, err = newSecret(); err != nil {
			return View{}, problem.Internal(err)
		}
		w.SecretGeneration = 1
		if sealed, err = s.seal(w, 1, secret, now); err != nil {
			return View{}, err
		}
	}
	fields := changedFields(specOf(cur), specOf(w))
	built := w
	err = s.store.Update(ctx, func(tx store.Tx) error {
		w = built // a run again (store.Tx) starts from the same trigger: UpdateWebhookTrigger moved its revision
		if err := tx.UpdateWebhookTrigger(&w); err != nil {
			return err
		}
		if secret != "" {
			if err := tx.PutWebhookSecret(sealed, 1, nil); err != nil {
				return err
			}
		}
		return s.insertAudit(ctx, tx, sc, w, audit.WebhookUpdated, map[string]any{"updated_fields": fields, "secret_generated": secret != ""})
	})
	if err != nil {
		return View{}, storeErr(id, err)
	}
	return withSecret(w, secret), nil
}

func changedFields(a, b Spec) []string {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	var ma, mb map[string]json.RawMessage
	if errA != nil || errB != nil || json.Unmarshal(ja, &ma) != nil || json.Unmarshal(jb, &mb) != nil {
		return nil
	}
	var out []string
	for k, v := range mb {
		if string(ma[k]) != string(v) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// SetStatus is :enable (active) and :disable (disabled); setting the current status changes
// nothing.
func (s *Service) SetStatus(ctx context.Context, sc auth.SecurityContext, id string, status webhook.Status) (View, error) {
	if err := canWrite(sc); err != nil {
		return View{}, err
	}
	cur, err := s.store.WebhookTrigger(ctx, sc.TenantID, id)
	if err != nil {
		return View{}, storeErr(id, err)
	}
	if err := s.mayAct(ctx, sc, cur); err != nil {
		return View{}, err
	}
	var out webhook.Trigger
	err = s.store.Update(ctx, func(tx store.Tx) error {
		w, err := tx.WebhookTrigger(sc.TenantID, id)
		if err != nil {
			return err
		}
		out = w
		if w.Status == status {
			return nil
		}
		out.Status, out.UpdatedAt = status, s.o.Clock.Now()
		if err := tx.UpdateWebhookTrigger(&out); err != nil {
			return err
		}
		typ := audit.WebhookEnabled
		if status == webhook.StatusDisabled {
			typ = audit.WebhookDisabled
		}
		return s.insertAudit(ctx, tx, sc, out, typ, nil)
	})
	if err != nil {
		return View{}, storeErr(id, err)
	}
	return ViewOf(out), nil
}

// Deleted is the answer of DELETE.
type Deleted struct {
	WebhookTriggerID string    `json:"webhook_trigger_id"`
	DeletedAt        time.Time `json:"deleted_at"`
	DeletedBy        string    `json:"deleted_by"`
}

// Delete deletes a trigger with its secrets, deliveries and replay memory; its invocations stay.
func (s *Service) Delete(ctx context.Context, sc auth.SecurityContext, id string) (Deleted, error) {
	if err := canWrite(sc); err != nil {
		return Deleted{}, err
	}
	cur, err := s.store.WebhookTrigger(ctx, sc.TenantID, id)
	if err != nil {
		return Deleted{}, storeErr(id, err)
	}
	if err := s.mayAct(ctx, sc, cur); err != nil {
		return Deleted{}, err
	}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if err := tx.DeleteWebhookTrigger(sc.TenantID, id); err != nil {
			return err
		}
		return s.insertAudit(ctx, tx, sc, cur, audit.WebhookDeleted, nil)
	})
	if err != nil {
		return Deleted{}, storeErr(id, err)
	}
	return Deleted{WebhookTriggerID: id, DeletedAt: s.o.Clock.Now(), DeletedBy: sc.SubjectID}, nil
}

// Regenerate is the body of :regenerate-secret.
type Regenerate struct {
	// OverlapSeconds is how long the replaced secret stays valid (default 86400, at most 604800;
	// 0 ends it at once).
	OverlapSeconds *int64 `json:"overlap_seconds,omitempty"`
	// Secret is a secret the sender generated; omitted, the server generates one.
	Secret string `json:"secret,omitempty"`
}

// RegenerateSecret gives a trigger a new secret (returned this once). The replaced one stays
// valid for the overlap, so senders can be moved over without downtime; any older one is dropped.
func (s *Service) RegenerateSecret(ctx context.Context, sc auth.SecurityContext, id string, req Regenerate) (View, error) {
	if err := canWrite(sc); err != nil {
		return View{}, err
	}
	overlap := DefaultOverlap
	if req.OverlapSeconds != nil {
		if *req.OverlapSeconds < 0 || *req.OverlapSeconds > int64(MaxOverlap/time.Second) {
			return View{}, invalid("$.overlap_seconds", "INVALID_VALUE", "overlap_seconds must be 0 to %d", int64(MaxOverlap/time.Second))
		}
		overlap = time.Duration(*req.OverlapSeconds) * time.Second
	}
	if req.Secret != "" {
		if err := checkGivenSecret("$.secret", req.Secret); err != nil {
			return View{}, err
		}
	}
	cur, err := s.store.WebhookTrigger(ctx, sc.TenantID, id)
	if err != nil {
		return View{}, storeErr(id, err)
	}
	if err := s.mayAct(ctx, sc, cur); err != nil {
		return View{}, err
	}
	if !cur.Authentication.Type.NeedsSecret() {
		return View{}, problem.Conflict("no_secret", "webhook trigger %s uses authentication type none: it has no secret", id)
	}
	secret := req.Secret
	if secret == "" {
		if secret, err = newSecret(); err != nil {
			return View{}, problem.Internal(err)
		}
	}
	now := s.o.Clock.Now()
	w := cur
	w.SecretGeneration = cur.SecretGeneration + 1
	w.UpdatedAt = now
	w.PreviousSecretExpiresAt = nil
	if overlap > 0 && cur.SecretGeneration > 0 {
		until := now.Add(overlap)
		w.PreviousSecretExpiresAt = &until
	}
	sealed, err := s.seal(w, w.SecretGeneration, secret, now)
	if err != nil {
		return View{}, err
	}
	base := w
	err = s.store.Update(ctx, func(tx store.Tx) error {
		w = base // as in change: UpdateWebhookTrigger moved its revision
		if err := tx.UpdateWebhookTrigger(&w); err != nil {
			return err
		}
		keep := w.SecretGeneration
		if w.PreviousSecretExpiresAt != nil {
			keep--
		}
		if err := tx.PutWebhookSecret(sealed, keep, w.PreviousSecretExpiresAt); err != nil {
			return err
		}
		return s.insertAudit(ctx, tx, sc, w, audit.WebhookSecretRegenerated, map[string]any{"overlap_seconds": int64(overlap / time.Second),
			"previous_secret_expires_at": w.PreviousSecretExpiresAt})
	})
	if err != nil {
		return View{}, storeErr(id, err)
	}
	return withSecret(w, secret), nil
}

// Deliveries lists a trigger's recorded deliveries (the last webhook.MaxDeliveries), newest first.
func (s *Service) Deliveries(ctx context.Context, sc auth.SecurityContext, id string, q store.ListQuery) (store.Page[webhook.Delivery], error) {
	if _, err := s.get(ctx, sc, id); err != nil {
		return store.Page[webhook.Delivery]{}, err
	}
	page, err := s.store.WebhookDeliveries(ctx, sc.TenantID, id, q)
	if err != nil {
		var qe *store.QueryError
		if errors.As(err, &qe) {
			return page, problem.BadRequest("%s", qe.Error())
		}
		return page, problem.Internal(err)
	}
	if page.Items == nil {
		page.Items = []webhook.Delivery{}
	}
	return page, nil
}

// RewrapStore is the store methods RewrapSecrets uses (store.Store has them all): the walk over
// every tenant's webhook secrets, and Update for each rewrap.
type RewrapStore interface {
	WebhookSecretsAfter(ctx context.Context, after store.WebhookSecretKey, limit int) ([]webhook.Secret, error)
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// RewrapStats is what RewrapSecrets did.
type RewrapStats struct {
	// Rewrapped secrets are now sealed under the current master key.
	Rewrapped int
	// Unreadable secrets are sealed under a key that is not configured, or do not open under
	// theirs: left as they are, each logged with its tenant, trigger, generation and key id.
	Unreadable int
}

// RewrapSecrets re-seals every webhook secret not sealed under kr's current master key (the step
// of a master-key rotation: configure "NEW,OLD", rewrap, then drop OLD). It walks the secrets in
// batches; a secret changed meanwhile is left to its writer (which sealed it under the current
// key anyway), and one that cannot be opened is counted and logged, not changed: the caller
// decides whether the server may start with it (server.Config.AllowUnreadableSecrets).
func RewrapSecrets(ctx context.Context, st RewrapStore, kr *keyring.Keyring, log *slog.Logger) (RewrapStats, error) {
	var out RewrapStats
	if kr == nil {
		return out, nil
	}
	var after store.WebhookSecretKey
	for {
		batch, err := st.WebhookSecretsAfter(ctx, after, 256)
		if err != nil || len(batch) == 0 {
			return out, err
		}
		for _, sec := range batch {
			after = store.WebhookSecretKey{TenantID: sec.TenantID, TriggerID: sec.TriggerID, Generation: sec.Generation}
			if !kr.NeedsRewrap(sec.Sealed) {
				continue
			}
			done, err := rewrapOne(ctx, st, kr, sec)
			switch {
			case errors.Is(err, errUnreadable):
				out.Unreadable++
				log.ErrorContext(ctx, "webhook secret: cannot be opened with the configured master keys", "tenant_id", sec.TenantID,
					"webhook_trigger_id", sec.TriggerID, "generation", sec.Generation, "key_id", keyring.KeyIDOf(sec.Sealed))
			case err != nil:
				return out, err
			case done:
				out.Rewrapped++
			}
		}
	}
}

var errUnreadable = errors.New("webhook secret cannot be opened")

// rewrapOne re-seals one secret under the current key; false when it changed meanwhile.
func rewrapOne(ctx context.Context, st RewrapStore, kr *keyring.Keyring, sec webhook.Secret) (bool, error) {
	aad, err := sec.AAD()
	if err != nil {
		return false, err
	}
	out, err := kr.Rewrap(sec.Sealed, aad)
	if err != nil {
		return false, errUnreadable
	}
	old := sec.Sealed
	sec.Sealed = out
	err = st.Update(ctx, func(tx store.Tx) error { return tx.RewrapWebhookSecret(sec, old) })
	if errors.Is(err, store.ErrStale) || errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

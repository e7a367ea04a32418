package larkclient

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"time"
)

// Secret is a tenant secret's metadata (docs/api.md §11). Its value is write-only: no answer
// carries it.
type Secret struct {
	Raw
	Name         string     `json:"name"`          // the id in paths
	Description  string     `json:"description"`   // free text
	AllowedHosts []string   `json:"allowed_hosts"` // the hosts the value may be sent to
	Version      int        `json:"version"`       // the version in use
	CreatedAt    time.Time  `json:"created_at"`    // when it was created
	UpdatedAt    time.Time  `json:"updated_at"`    // when it last changed
	LastUsedAt   *time.Time `json:"last_used_at"`  // when a request last used it (nil: never)
}

// SecretInput is the body of POST /secrets and PUT /secrets/{name}: a PUT sends only the members
// set (at least one).
type SecretInput struct {
	// Name is required by POST and ignored by PUT (the path names the secret).
	Name string `json:"name,omitempty"`
	// Value is the secret (write-only); empty keeps the current one in a PUT.
	Value string `json:"value,omitempty"`
	// Description replaces the description when not nil.
	Description *string `json:"description,omitempty"`
	// AllowedHosts replaces the host patterns when not nil (required by POST).
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
}

// ListSecrets returns one page of the tenant's secrets (names and metadata, never values).
func (c *Client) ListSecrets(ctx context.Context, opts ListOptions) (*Page[Secret], error) {
	return listPage[Secret](ctx, c, "/secrets", opts.values())
}

// AllSecrets iterates every secret matching opts.
func (c *Client) AllSecrets(ctx context.Context, opts ListOptions) iter.Seq2[Secret, error] {
	return all(ctx, opts, c.ListSecrets)
}

// GetSecret returns one secret's metadata with its versions.
func (c *Client) GetSecret(ctx context.Context, name string) (*Secret, error) {
	return c.secretCall(ctx, http.MethodGet, name, nil)
}

// CreateSecret creates a secret (admin role).
func (c *Client) CreateSecret(ctx context.Context, in SecretInput) (*Secret, error) {
	var s Secret
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/secrets", body: in}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// UpdateSecret replaces the members of in that are set (a new value is a new version).
func (c *Client) UpdateSecret(ctx context.Context, name string, in SecretInput) (*Secret, error) {
	in.Name = ""
	return c.secretCall(ctx, http.MethodPut, name, in)
}

// DeleteSecret deletes a secret and its versions.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	if err := need(name); err != nil {
		return err
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/secrets/" + esc(name)})
	return err
}

func (c *Client) secretCall(ctx context.Context, method, name string, body any) (*Secret, error) {
	if err := need(name); err != nil {
		return nil, err
	}
	var s Secret
	if _, err := c.call(ctx, request{method: method, path: "/secrets/" + esc(name), body: body}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Token is an API token (docs/api.md §4). Secret is set only in CreateToken's answer.
type Token struct {
	Raw
	ID          string     `json:"id"`                    // tok_…
	TenantID    string     `json:"tenant_id"`             // its tenant
	SubjectID   string     `json:"subject_id"`            // who it is
	Roles       []string   `json:"roles"`                 // viewer, operator, developer, admin
	Description string     `json:"description,omitempty"` // free text
	CreatedAt   time.Time  `json:"created_at"`            // when it was issued
	CreatedBy   string     `json:"created_by"`            // who issued it
	ExpiresAt   *time.Time `json:"expires_at"`            // nil: never
	RevokedAt   *time.Time `json:"revoked_at"`            // nil: not revoked
	// Secret is the bearer token (lark_…), present only in the create answer.
	Secret string `json:"token,omitempty"`
}

// CreateTokenInput is the body of POST /tokens.
type CreateTokenInput struct {
	TenantID    string     `json:"tenant_id,omitempty"`   // the operator's only; an admin's own tenant
	SubjectID   string     `json:"subject_id"`            // required
	Roles       []string   `json:"roles"`                 // required, non-empty
	Description string     `json:"description,omitempty"` // free text
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`  // in the future; nil: never
}

// CreateToken issues a token (admin role); the answer's Secret is shown this once.
func (c *Client) CreateToken(ctx context.Context, in CreateTokenInput) (*Token, error) {
	var t Token
	if _, err := c.call(ctx, request{method: http.MethodPost, path: "/tokens", body: in}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// ListTokens returns one page of tokens (revoked and expired ones included, never secrets).
func (c *Client) ListTokens(ctx context.Context, opts ListOptions) (*Page[Token], error) {
	return listPage[Token](ctx, c, "/tokens", opts.values())
}

// AllTokens iterates every token matching opts.
func (c *Client) AllTokens(ctx context.Context, opts ListOptions) iter.Seq2[Token, error] {
	return all(ctx, opts, c.ListTokens)
}

// RevokeToken revokes a token (again: no change).
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	if err := need(id); err != nil {
		return err
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/tokens/" + esc(id)})
	return err
}

// AuditEvent is one entry of the audit log (docs/api.md §9).
type AuditEvent struct {
	Raw
	ID            string          `json:"id"`                // aud_…
	TenantID      string          `json:"tenant_id"`         // the tenant it belongs to
	Type          string          `json:"type"`              // the GTS audit event type
	ActorID       string          `json:"actor_id"`          // the caller's subject_id
	ResourceType  string          `json:"resource_type"`     // entrypoint, token, secret, …
	ResourceID    string          `json:"resource_id"`       // the resource's id
	CorrelationID string          `json:"correlation_id"`    // the request's X-Correlation-Id
	Timestamp     time.Time       `json:"timestamp"`         // when it happened
	Details       json.RawMessage `json:"details,omitempty"` // what changed (never a secret)
}

// ListAuditEvents returns one page of audit events (admin role).
func (c *Client) ListAuditEvents(ctx context.Context, opts ListOptions) (*Page[AuditEvent], error) {
	return listPage[AuditEvent](ctx, c, "/audit-events", opts.values())
}

// AllAuditEvents iterates every audit event matching opts.
func (c *Client) AllAuditEvents(ctx context.Context, opts ListOptions) iter.Seq2[AuditEvent, error] {
	return all(ctx, opts, c.ListAuditEvents)
}

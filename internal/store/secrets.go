package store

import (
	"context"
	"time"
)

// Secret is the metadata of a tenant secret (docs/secrets.md); its values are SecretVersions. No
// field holds a value.
type Secret struct {
	TenantID    string
	Name        string
	Description string
	// AllowedHosts are the host patterns (egress.DomainAllowed) the value may be sent to.
	AllowedHosts []string
	// Version is the latest version: the one substituted into requests.
	Version    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	LastUsedAt *time.Time
	CreatedBy  string
	UpdatedBy  string
	// Versions are the kept versions, newest first, without their sealed values (filled by the
	// single-secret reads only).
	Versions []SecretVersion
}

// SecretVersion is one value of a secret. Sealed is the value as keyring.Seal made it (nil in
// metadata reads and for a superseded version, whose value is erased); KeyID is the fingerprint of
// the master key that wrapped it ("" once erased).
type SecretVersion struct {
	TenantID  string
	Name      string
	Version   int64
	CreatedAt time.Time
	CreatedBy string
	KeyID     string
	Sealed    []byte
}

// SealedSecret is what a request needs to use a secret: its latest sealed value and where it may
// be sent.
type SealedSecret struct {
	Version      SecretVersion
	AllowedHosts []string
}

// SecretRef names one version of a secret: the keyset cursor of SecretsToRewrap.
type SecretRef struct {
	TenantID string
	Name     string
	Version  int64
}

// RewrapQuery selects sealed values for a master-key rotation (Reader.SecretsToRewrap).
type RewrapQuery struct {
	// ExceptKeyID leaves out values wrapped by this key (the current one).
	ExceptKeyID string
	// After is the last value of the previous batch (zero: from the start).
	After SecretRef
	// Limit bounds the batch.
	Limit int
}

// SecretRewrap replaces a sealed value by its rewrapped form (Tx.RewrapSecret), only if it is still
// wrapped by FromKeyID.
type SecretRewrap struct {
	Ref       SecretRef
	FromKeyID string
	KeyID     string
	Sealed    []byte
}

// SecretReader holds the reads of secrets. None returns a value in clear: values are sealed.
type SecretReader interface {
	// Secret reads one secret of a tenant with its versions (without values); ErrNotFound when
	// there is none.
	Secret(ctx context.Context, tenantID, name string) (Secret, error)
	// ListSecrets lists a tenant's secrets (without versions). Filters: name (eq, startswith),
	// created_at; order: either (default name).
	ListSecrets(ctx context.Context, tenantID string, q ListQuery) (Page[Secret], error)
	// SealedSecret reads the latest sealed value of a secret and its allowed hosts; ErrNotFound
	// when the tenant has no such secret.
	SealedSecret(ctx context.Context, tenantID, name string) (SealedSecret, error)
	// SecretsToRewrap lists up to q.Limit sealed values (of any tenant) not wrapped by
	// q.ExceptKeyID, after q.After in (tenant, name, version) order, with their sealed values.
	SecretsToRewrap(ctx context.Context, q RewrapQuery) ([]SecretVersion, error)
}

// SecretTx holds the writes of secrets.
type SecretTx interface {
	// InsertSecret stores a new secret (s.Version must equal v.Version, normally 1) with its first
	// value; ErrConflict when the tenant has a secret of that name.
	InsertSecret(s Secret, v SecretVersion) error
	// Secret is Reader.Secret inside the transaction (for read-modify-write).
	Secret(tenantID, name string) (Secret, error)
	// UpdateSecret replaces a secret's description, allowed hosts, version, updated_at and
	// updated_by; ErrNotFound when it is gone.
	UpdateSecret(s Secret) error
	// AddSecretVersion stores a new latest value of a secret, erases the sealed values of its
	// older versions and deletes versions beyond the newest keep.
	AddSecretVersion(v SecretVersion, keep int) error
	// DeleteSecret deletes a secret and its versions; ErrNotFound when there is none.
	DeleteSecret(tenantID, name string) error
	// CountTenantSecrets counts a tenant's secrets (the per-tenant bound).
	CountTenantSecrets(tenantID string) (int64, error)
	// TouchSecret sets a secret's last_used_at (a missing secret is not an error).
	TouchSecret(tenantID, name string, at time.Time) error
	// RewrapSecret stores a rewrapped value if the version still holds a value wrapped by
	// r.FromKeyID, and reports whether it did.
	RewrapSecret(r SecretRewrap) (bool, error)
}

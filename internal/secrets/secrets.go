// Package secrets keeps each tenant's secrets (docs/secrets.md): named values sealed at rest by
// internal/keyring under the operator's master key, bound to the hosts they may be sent to. Values
// are write-only: the API sees names, metadata and versions, never a value. The egress layer is the
// only reader of a value (Service.ForTenant is its egress.SecretResolver): it substitutes the
// {{secret:NAME}} references of an outbound request's headers after the sandbox, so a value never
// enters Starlark memory, results, logs, timelines, errors or the event log.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
)

// Bounds and defaults (docs/secrets.md).
const (
	// DefaultMaxSecrets is the default Options.MaxSecrets: secrets per tenant.
	DefaultMaxSecrets = 100
	// DefaultMaxVersions is the default Options.MaxVersions: versions kept per secret (the latest
	// with its value, the older ones as metadata).
	DefaultMaxVersions = 10
	// MaxValueBytes bounds a value.
	MaxValueBytes = 64 << 10
	// MinValueBytes is the shortest value: shorter ones could not be told apart in a response to
	// scrub them.
	MinValueBytes = 4
	// MaxDescriptionBytes bounds a description.
	MaxDescriptionBytes = 1024
	// MaxAllowedHosts bounds a secret's allowed_hosts.
	MaxAllowedHosts = 50
	// DefaultTouchEvery is the default Options.TouchEvery.
	DefaultTouchEvery = time.Minute
	// DefaultRewrapBatch is the default Options.RewrapBatch.
	DefaultRewrapBatch = 100
)

// Audit event types of secrets (names and versions only, never values).
const (
	AuditCreated  = audit.TypeBase + "x.core.serverless.audit.secret_created.v1~"
	AuditUpdated  = audit.TypeBase + "x.core.serverless.audit.secret_updated.v1~"
	AuditDeleted  = audit.TypeBase + "x.core.serverless.audit.secret_deleted.v1~"
	AuditAccessed = audit.TypeBase + "x.core.serverless.audit.secret_accessed.v1~"
)

// NamePattern is a secret's name: a letter or '_', then letters, digits or '_', 1-64 in all (the
// names egress.SecretPattern finds in headers).
var NamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// Options configure a Service.
type Options struct {
	// Keyring seals and opens values; nil disables secrets (the API answers 503, references fail).
	Keyring *keyring.Keyring
	Clock   clock.Clock
	IDs     idgen.Generator
	Logger  *slog.Logger
	// MaxSecrets bounds a tenant's secrets (default DefaultMaxSecrets).
	MaxSecrets int
	// MaxVersions bounds the versions kept per secret (default DefaultMaxVersions).
	MaxVersions int
	// TouchEvery is the least time between two writes of a secret's last_used_at (and its
	// secret_accessed audit event) by this process (default DefaultTouchEvery).
	TouchEvery time.Duration
	// RewrapBatch is how many values one rotation transaction rewraps (default DefaultRewrapBatch).
	RewrapBatch int
}

// Store is the store methods the secrets service uses (store.Store has them all): the secret reads,
// and Update for its writes and their audit events.
type Store interface {
	store.SecretReader
	// Update runs fn in a group-committed transaction (store.Store.Update).
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// Service implements the secret use cases.
type Service struct {
	store Store
	o     Options

	mu      sync.Mutex
	touched map[string]time.Time // tenant\x00name → last write of last_used_at
}

// New returns a Service.
func New(st Store, o Options) *Service {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.IDs == nil {
		o.IDs = idgen.UUIDv7{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxSecrets <= 0 {
		o.MaxSecrets = DefaultMaxSecrets
	}
	if o.MaxVersions <= 0 {
		o.MaxVersions = DefaultMaxVersions
	}
	if o.TouchEvery <= 0 {
		o.TouchEvery = DefaultTouchEvery
	}
	if o.RewrapBatch <= 0 {
		o.RewrapBatch = DefaultRewrapBatch
	}
	return &Service{store: st, o: o, touched: map[string]time.Time{}}
}

// Enabled reports whether a master key is configured.
func (s *Service) Enabled() bool { return s != nil && s.o.Keyring != nil }

// Secret is the API view of a secret: metadata, never a value.
type Secret struct {
	Name         string     `json:"name"`
	Description  string     `json:"description"`
	AllowedHosts []string   `json:"allowed_hosts"`
	Version      int64      `json:"version"`
	Versions     []Version  `json:"versions,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	LastUsedAt   *time.Time `json:"last_used_at"`
	CreatedBy    string     `json:"created_by"`
	UpdatedBy    string     `json:"updated_by"`
}

// Version is one version of a secret, without its value. Current is true for the version in use
// (the only one whose value is kept).
type Version struct {
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	Current   bool      `json:"current"`
}

func view(s store.Secret) Secret {
	out := Secret{Name: s.Name, Description: s.Description, AllowedHosts: s.AllowedHosts, Version: s.Version,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, LastUsedAt: s.LastUsedAt, CreatedBy: s.CreatedBy, UpdatedBy: s.UpdatedBy}
	if out.AllowedHosts == nil {
		out.AllowedHosts = []string{}
	}
	for _, v := range s.Versions {
		out.Versions = append(out.Versions, Version{Version: v.Version, CreatedAt: v.CreatedAt, CreatedBy: v.CreatedBy, Current: v.Version == s.Version})
	}
	return out
}

// Create is the body of POST /secrets.
type Create struct {
	Name         string   `json:"name"`
	Value        *string  `json:"value"`
	Description  string   `json:"description"`
	AllowedHosts []string `json:"allowed_hosts"`
}

// Update is the body of PUT /secrets/{name}: each member present replaces the secret's; a value
// makes a new version.
type Update struct {
	Value        *string   `json:"value"`
	Description  *string   `json:"description"`
	AllowedHosts *[]string `json:"allowed_hosts"`
}

// unavailable is the answer of every use case without a master key.
func unavailable() *problem.Error {
	return problem.New(problem.TypeUnavailable, "secrets are disabled on this server: it has no master key. "+
		"Start it with LARK_MASTER_KEY (one or more base64 32-byte keys, comma-separated) or --master-key-file; "+
		"`lark dev` creates one in its data directory (docs/secrets.md)").With("reason", "no_master_key")
}

func (s *Service) check(sc auth.SecurityContext, write bool) error {
	if !s.Enabled() {
		return unavailable()
	}
	if sc.Operator {
		return problem.Forbidden("the platform operator has no tenant; use a tenant token to manage secrets")
	}
	if write {
		if !sc.Has(auth.RoleAdmin) {
			return problem.Forbidden("changing secrets needs the admin role")
		}
		return nil
	}
	if !sc.Has(auth.RoleDeveloper) {
		return problem.Forbidden("reading secrets' metadata needs the developer role")
	}
	return nil
}

func invalid(path, code, format string, args ...any) *problem.Error {
	msg := fmt.Sprintf(format, args...)
	return problem.Validation(msg, []problem.Issue{{Path: path, Code: code, Message: msg}})
}

// checkValue validates a value; its messages never contain it.
func checkValue(v string) error {
	switch {
	case len(v) > MaxValueBytes:
		return problem.New(problem.TypePayloadTooLarge, "value: %d bytes, more than the limit of %d bytes", len(v), MaxValueBytes).
			With("limit_bytes", MaxValueBytes)
	case len(v) < MinValueBytes:
		return invalid("$.value", "INVALID_VALUE", "value must be at least %d bytes", MinValueBytes)
	case !utf8.ValidString(v):
		return invalid("$.value", "INVALID_VALUE", "value must be valid UTF-8")
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return invalid("$.value", "INVALID_VALUE", "value must not contain control characters (it is sent in a header); byte %d is one", i)
		}
	}
	return nil
}

func checkDescription(d string) error {
	if len(d) > MaxDescriptionBytes || !utf8.ValidString(d) {
		return invalid("$.description", "INVALID_VALUE", "description must be valid UTF-8 of at most %d bytes", MaxDescriptionBytes)
	}
	return nil
}

func checkHosts(h []string) error {
	if len(h) == 0 {
		return invalid("$.allowed_hosts", "MISSING_FIELD", "allowed_hosts is required: the hosts (\"api.example.com\", \"*.example.com\") the value may be sent to")
	}
	if len(h) > MaxAllowedHosts {
		return invalid("$.allowed_hosts", "INVALID_VALUE", "allowed_hosts has %d entries, more than %d", len(h), MaxAllowedHosts)
	}
	var issues []problem.Issue
	for i, e := range h {
		path := fmt.Sprintf("$.allowed_hosts[%d]", i)
		if e == "*" {
			issues = append(issues, problem.Issue{Path: path, Code: "INVALID_VALUE", Message: `"*" is not allowed: bind a secret to the hosts that need it`})
			continue
		}
		if err := egress.ValidateEntry(e); err != nil {
			issues = append(issues, problem.Issue{Path: path, Code: "INVALID_VALUE", Message: fmt.Sprintf("%q: %v", e, err)})
		}
	}
	if len(issues) > 0 {
		return problem.Validation("invalid allowed_hosts", issues)
	}
	return nil
}

// aad binds a sealed value to its row: tenant, name and version (none contains a NUL).
func aad(tenantID, name string, version int64) []byte {
	return []byte("lark-secret-v1\x00" + tenantID + "\x00" + name + "\x00" + strconv.FormatInt(version, 10))
}

func (s *Service) seal(tenantID, name, actor string, version int64, value string, now time.Time) (store.SecretVersion, error) {
	sealed, err := s.o.Keyring.Seal([]byte(value), aad(tenantID, name, version))
	if err != nil {
		return store.SecretVersion{}, problem.Internal(err)
	}
	return store.SecretVersion{TenantID: tenantID, Name: name, Version: version, CreatedAt: now, CreatedBy: actor,
		KeyID: s.o.Keyring.Current(), Sealed: sealed}, nil
}

func (s *Service) auditEvent(ctx context.Context, tenantID, actor, typ, name string, details map[string]any) (audit.Event, error) {
	d := map[string]any{"name": name}
	for k, v := range details {
		d[k] = v
	}
	return audit.WithDetails(audit.Event{ID: s.o.IDs.New("aud"), TenantID: tenantID, Type: typ, ActorID: actor, ResourceType: "secret",
		ResourceID: name, CorrelationID: obs.CorrelationID(ctx), At: s.o.Clock.Now()}, d)
}

// insertAudit records an audit event of the secret name in tx.
func (s *Service) insertAudit(ctx context.Context, tx store.Tx, tenantID, actor, typ, name string, details map[string]any) error {
	ev, err := s.auditEvent(ctx, tenantID, actor, typ, name, details)
	if err != nil {
		return err
	}
	return tx.InsertAudit(ev)
}

func notFound(name string) error { return problem.NotFound("secret %s not found", name) }

// storeErr maps a store error of secret name to its problem.
func storeErr(name string, err error) error {
	var pe *problem.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, store.ErrNotFound):
		return notFound(name)
	case errors.Is(err, store.ErrConflict):
		return problem.Conflict("secret_exists", "a secret named %s already exists; PUT /secrets/%s gives it a new value", name, name).With("name", name)
	}
	return problem.Internal(err)
}

// Create stores a new secret with its first value (version 1): admin only; at most MaxSecrets per
// tenant (429 quota_exceeded beyond).
func (s *Service) Create(ctx context.Context, sc auth.SecurityContext, c Create) (Secret, error) {
	if err := s.check(sc, true); err != nil {
		return Secret{}, err
	}
	if !NamePattern.MatchString(c.Name) {
		return Secret{}, invalid("$.name", "INVALID_VALUE", "name must be 1-64 letters, digits or '_', not starting with a digit")
	}
	if c.Value == nil {
		return Secret{}, invalid("$.value", "MISSING_FIELD", "value is required")
	}
	if err := checkValue(*c.Value); err != nil {
		return Secret{}, err
	}
	if err := checkDescription(c.Description); err != nil {
		return Secret{}, err
	}
	if err := checkHosts(c.AllowedHosts); err != nil {
		return Secret{}, err
	}
	now := s.o.Clock.Now()
	v, err := s.seal(sc.TenantID, c.Name, sc.SubjectID, 1, *c.Value, now)
	if err != nil {
		return Secret{}, err
	}
	rec := store.Secret{TenantID: sc.TenantID, Name: c.Name, Description: c.Description, AllowedHosts: c.AllowedHosts,
		Version: 1, CreatedAt: now, UpdatedAt: now, CreatedBy: sc.SubjectID, UpdatedBy: sc.SubjectID}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		n, err := tx.CountTenantSecrets(sc.TenantID)
		if err != nil {
			return err
		}
		if n >= int64(s.o.MaxSecrets) {
			pe := problem.New(problem.TypeQuotaExceeded, "tenant %s has reached its limit of %d secrets; delete some, or ask the operator to raise it",
				sc.TenantID, s.o.MaxSecrets).With("quota", "max_secrets")
			pe.RetryAfter = 60 // as the other count quotas (spec README rule 4: 429 with Retry-After)
			return pe
		}
		if err := tx.InsertSecret(rec, v); err != nil {
			return err
		}
		return s.insertAudit(ctx, tx, sc.TenantID, sc.SubjectID, AuditCreated, c.Name, map[string]any{"version": 1})
	})
	if err != nil {
		return Secret{}, storeErr(c.Name, err)
	}
	s.o.Logger.InfoContext(ctx, "secret created", "tenant_id", sc.TenantID, "secret", c.Name, "version", 1)
	rec.Versions = []store.SecretVersion{v}
	return view(rec), nil
}

// Get returns a secret's metadata and versions.
func (s *Service) Get(ctx context.Context, sc auth.SecurityContext, name string) (Secret, error) {
	if err := s.check(sc, false); err != nil {
		return Secret{}, err
	}
	if !NamePattern.MatchString(name) {
		return Secret{}, notFound(name)
	}
	rec, err := s.store.Secret(ctx, sc.TenantID, name)
	if err != nil {
		return Secret{}, storeErr(name, err)
	}
	return view(rec), nil
}

// List lists the tenant's secrets (metadata only).
func (s *Service) List(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[Secret], error) {
	if err := s.check(sc, false); err != nil {
		return store.Page[Secret]{}, err
	}
	page, err := s.store.ListSecrets(ctx, sc.TenantID, q)
	var qe *store.QueryError
	switch {
	case errors.As(err, &qe):
		return store.Page[Secret]{}, problem.BadRequest("%s", qe.Error())
	case errors.Is(err, store.ErrBadCursor):
		return store.Page[Secret]{}, problem.BadRequest("invalid cursor")
	case err != nil:
		return store.Page[Secret]{}, problem.Internal(err)
	}
	out := store.Page[Secret]{NextCursor: page.NextCursor, PrevCursor: page.PrevCursor, HasMore: page.HasMore, Items: make([]Secret, 0, len(page.Items))}
	for _, it := range page.Items {
		out.Items = append(out.Items, view(it))
	}
	return out, nil
}

// Update changes a secret: a value makes a new version (the older ones keep their metadata, up to
// MaxVersions, and lose their values); description and allowed_hosts replace the secret's.
func (s *Service) Update(ctx context.Context, sc auth.SecurityContext, name string, u Update) (Secret, error) {
	if err := s.check(sc, true); err != nil {
		return Secret{}, err
	}
	if !NamePattern.MatchString(name) {
		return Secret{}, notFound(name)
	}
	if u.Value == nil && u.Description == nil && u.AllowedHosts == nil {
		return Secret{}, invalid("$", "MISSING_FIELD", "give at least one of value, description, allowed_hosts")
	}
	if u.Value != nil {
		if err := checkValue(*u.Value); err != nil {
			return Secret{}, err
		}
	}
	if u.Description != nil {
		if err := checkDescription(*u.Description); err != nil {
			return Secret{}, err
		}
	}
	if u.AllowedHosts != nil {
		if err := checkHosts(*u.AllowedHosts); err != nil {
			return Secret{}, err
		}
	}
	now := s.o.Clock.Now()
	var out store.Secret
	err := s.store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Secret(sc.TenantID, name)
		if err != nil {
			return err
		}
		var fields []string
		details := map[string]any{}
		if u.Value != nil {
			v, err := s.seal(sc.TenantID, name, sc.SubjectID, cur.Version+1, *u.Value, now)
			if err != nil {
				return err
			}
			if err := tx.AddSecretVersion(v, s.o.MaxVersions); err != nil {
				return err
			}
			cur.Version = v.Version
			fields = append(fields, "value")
		}
		if u.Description != nil {
			cur.Description = *u.Description
			fields = append(fields, "description")
		}
		if u.AllowedHosts != nil {
			cur.AllowedHosts = *u.AllowedHosts
			fields = append(fields, "allowed_hosts")
			details["allowed_hosts"] = cur.AllowedHosts
		}
		cur.UpdatedAt, cur.UpdatedBy = now, sc.SubjectID
		if err := tx.UpdateSecret(cur); err != nil {
			return err
		}
		details["version"], details["updated_fields"] = cur.Version, fields
		if err := s.insertAudit(ctx, tx, sc.TenantID, sc.SubjectID, AuditUpdated, name, details); err != nil {
			return err
		}
		out, err = tx.Secret(sc.TenantID, name)
		return err
	})
	if err != nil {
		return Secret{}, storeErr(name, err)
	}
	s.o.Logger.InfoContext(ctx, "secret updated", "tenant_id", sc.TenantID, "secret", name, "version", out.Version)
	return view(out), nil
}

// Delete deletes a secret and all its versions; requests that refer to it fail from then on.
func (s *Service) Delete(ctx context.Context, sc auth.SecurityContext, name string) error {
	if err := s.check(sc, true); err != nil {
		return err
	}
	if !NamePattern.MatchString(name) {
		return notFound(name)
	}
	err := s.store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Secret(sc.TenantID, name)
		if err != nil {
			return err
		}
		if err := tx.DeleteSecret(sc.TenantID, name); err != nil {
			return err
		}
		return s.insertAudit(ctx, tx, sc.TenantID, sc.SubjectID, AuditDeleted, name, map[string]any{"version": cur.Version})
	})
	if err != nil {
		return storeErr(name, err)
	}
	s.o.Logger.InfoContext(ctx, "secret deleted", "tenant_id", sc.TenantID, "secret", name)
	return nil
}

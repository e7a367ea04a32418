package secrets

import (
	"context"
	"errors"
	"fmt"

	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/keyring"
	"github.com/larkrun/lark/internal/store"
)

// ForTenant returns the resolver of one tenant's outbound requests (the egress layer calls it;
// the sandbox never does). invocationID, when known, is recorded in the secret_accessed audit
// event. A nil or disabled Service resolves nothing (egress.ErrSecretsUnavailable).
func (s *Service) ForTenant(tenantID, invocationID string) egress.SecretResolver {
	return resolver{s: s, tenantID: tenantID, invocationID: invocationID}
}

type resolver struct {
	s                      *Service
	tenantID, invocationID string
}

// ResolveSecret implements egress.SecretResolver. Its errors never contain a value.
func (r resolver) ResolveSecret(ctx context.Context, name string) (egress.Secret, error) {
	s := r.s
	if !s.Enabled() {
		return egress.Secret{}, egress.ErrSecretsUnavailable
	}
	if !NamePattern.MatchString(name) {
		return egress.Secret{}, egress.ErrUnknownSecret
	}
	sealed, err := s.store.SealedSecret(ctx, r.tenantID, name)
	if errors.Is(err, store.ErrNotFound) {
		return egress.Secret{}, egress.ErrUnknownSecret
	}
	if err != nil {
		s.o.Logger.WarnContext(ctx, "secret: read failed", "tenant_id", r.tenantID, "secret", name, "err", err)
		return egress.Secret{}, fmt.Errorf("secret %s: read failed", name)
	}
	pt, err := s.o.Keyring.Open(sealed.Version.Sealed, aad(r.tenantID, name, sealed.Version.Version))
	if err != nil {
		// keyring errors name no value; the key's fingerprint helps the operator.
		s.o.Logger.ErrorContext(ctx, "secret: cannot open its value", "tenant_id", r.tenantID, "secret", name,
			"version", sealed.Version.Version, "key_id", sealed.Version.KeyID, "err", err)
		return egress.Secret{}, fmt.Errorf("secret %s: cannot be opened", name)
	}
	r.touch(ctx, name, sealed.Version.Version)
	return egress.Secret{Value: string(pt), AllowedHosts: sealed.AllowedHosts}, nil
}

// touch records the use: last_used_at and a secret_accessed audit event, at most once per
// TouchEvery per secret in this process, so that a hot secret costs no write per request.
func (r resolver) touch(ctx context.Context, name string, version int64) {
	s := r.s
	now := s.o.Clock.Now()
	key := r.tenantID + "\x00" + name
	s.mu.Lock()
	last, ok := s.touched[key]
	if ok && now.Sub(last) < s.o.TouchEvery {
		s.mu.Unlock()
		return
	}
	s.touched[key] = now
	if len(s.touched) > 100_000 { // bounded: forget everything (at worst a few more writes)
		clear(s.touched)
		s.touched[key] = now
	}
	s.mu.Unlock()
	details := map[string]any{"version": version}
	if r.invocationID != "" {
		details["invocation_id"] = r.invocationID
	}
	err := s.store.Update(ctx, func(tx store.Tx) error {
		if err := tx.TouchSecret(r.tenantID, name, now); err != nil {
			return err
		}
		return s.insertAudit(ctx, tx, r.tenantID, "system:egress", AuditAccessed, name, details)
	})
	if err != nil {
		s.o.Logger.WarnContext(ctx, "secret: recording its use failed", "tenant_id", r.tenantID, "secret", name, "err", err)
	}
}

// RewrapStats counts what Rewrap did.
type RewrapStats struct {
	// Rewrapped values now sealed under the current key.
	Rewrapped int
	// Unknown values sealed under a key that is not configured (they cannot be opened until it is).
	Unknown int
	// Failed values that did not open under their (configured) key: corrupt or moved.
	Failed int
}

// Rewrap seals again, under the current master key, every stored value wrapped by another
// configured key: the rotation step run at start (docs/secrets.md). It works in batches of
// RewrapBatch values, each in its own transaction, and leaves a value changed meanwhile alone.
// Values under keys that are not configured are counted and logged, not changed.
func (s *Service) Rewrap(ctx context.Context) (RewrapStats, error) {
	var st RewrapStats
	if !s.Enabled() {
		return st, nil
	}
	kr := s.o.Keyring
	known := map[string]bool{}
	for _, id := range kr.KeyIDs() {
		known[id] = true
	}
	var after store.SecretRef
	for {
		batch, err := s.store.SecretsToRewrap(ctx, store.RewrapQuery{ExceptKeyID: kr.Current(), After: after, Limit: s.o.RewrapBatch})
		if err != nil {
			return st, err
		}
		if len(batch) == 0 {
			break
		}
		var todo []store.SecretRewrap
		for _, v := range batch {
			ref := store.SecretRef{TenantID: v.TenantID, Name: v.Name, Version: v.Version}
			after = ref
			if !known[v.KeyID] {
				st.Unknown++
				s.o.Logger.WarnContext(ctx, "secret sealed under a master key that is not configured", "tenant_id", v.TenantID,
					"secret", v.Name, "version", v.Version, "key_id", v.KeyID)
				continue
			}
			sealed, err := kr.Rewrap(v.Sealed, aad(v.TenantID, v.Name, v.Version))
			if err != nil {
				st.Failed++
				s.o.Logger.ErrorContext(ctx, "secret: cannot rewrap", "tenant_id", v.TenantID, "secret", v.Name,
					"version", v.Version, "key_id", v.KeyID, "err", err)
				continue
			}
			todo = append(todo, store.SecretRewrap{Ref: ref, FromKeyID: v.KeyID, KeyID: kr.Current(), Sealed: sealed})
		}
		if len(todo) > 0 {
			n := 0
			err := s.store.Update(ctx, func(tx store.Tx) error {
				n = 0
				for _, r := range todo {
					ok, err := tx.RewrapSecret(r)
					if err != nil {
						return err
					}
					if ok {
						n++
					}
				}
				return nil
			})
			if err != nil {
				return st, err
			}
			st.Rewrapped += n
		}
		if len(batch) < s.o.RewrapBatch {
			break
		}
	}
	if st.Rewrapped+st.Unknown+st.Failed > 0 {
		s.o.Logger.InfoContext(ctx, "secrets: master key rotation", "current_key_id", kr.Current(),
			"rewrapped", st.Rewrapped, "unknown_key", st.Unknown, "failed", st.Failed)
	}
	return st, nil
}

// Keyring is the configured keyring (nil when secrets are disabled).
func (s *Service) Keyring() *keyring.Keyring { return s.o.Keyring }

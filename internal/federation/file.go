package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/identity"
	"github.com/larkrun/lark/internal/store"
)

// File is the operator's identity provider file (lark serve --identity-providers FILE).
type File struct {
	IdentityProviders []CreateRequest `json:"identity_providers"`
}

// ConfigSubject is the actor of the changes the file makes.
const ConfigSubject = "config:identity-providers"

// LoadFile registers the providers of the file at path: a new issuer is added, a registered one
// whose settings differ is replaced (keeping its id), an unchanged one is left alone. Providers
// registered through the API and absent from the file stay. Any invalid entry fails the whole
// file, naming the entry's JSON path. The file's providers are the platform operator's
// (RegisteredBy), so a tenant-owned one does not follow its tenant's policy flag.
func (s *Service) LoadFile(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("identity providers: %w", err)
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("identity providers %s: %w", path, err)
	}
	ps := make([]identity.Provider, len(f.IdentityProviders))
	for i, req := range f.IdentityProviders {
		ps[i] = req.Provider()
		if issues := ps[i].Validate(); len(issues) > 0 {
			msgs := make([]string, len(issues))
			for j, is := range issues {
				msgs[j] = fmt.Sprintf("$.identity_providers[%d]%s: %s", i, strings.TrimPrefix(is.Path, "$"), is.Message)
			}
			return fmt.Errorf("identity providers %s: %s", path, strings.Join(msgs, "; "))
		}
	}
	for _, p := range ps {
		if err := s.apply(ctx, p); err != nil {
			return fmt.Errorf("identity providers %s: %s: %w", path, p.Issuer, err)
		}
	}
	return nil
}

// apply adds or replaces one provider of the file, as the platform operator's. A provider stored
// before RegisteredBy existed differs by it, so it is replaced once, and marked the operator's.
func (s *Service) apply(ctx context.Context, p identity.Provider) error {
	p.RegisteredBy = identity.RegisteredByOperator
	old, err := s.store.IdentityProviderByIssuer(ctx, p.Issuer)
	switch {
	case errors.Is(err, store.ErrNotFound):
		p.ID = s.ids.New("idp")
	case err != nil:
		return err
	case old.TenantID != p.TenantID:
		return fmt.Errorf("the issuer is registered for another owner (provider %s)", old.ID)
	default:
		p.ID, p.CreatedAt, p.CreatedBy = old.ID, old.CreatedAt, old.CreatedBy
		if reflect.DeepEqual(old, p) {
			return nil
		}
	}
	p.CreatedAt, p.CreatedBy = s.clock.Now(), ConfigSubject
	sc := auth.SecurityContext{SubjectID: ConfigSubject, Operator: true}
	return s.store.Update(ctx, func(tx store.Tx) error {
		if old.ID != "" {
			if _, err := tx.DeleteIdentityProvider("", old.ID); err != nil {
				return err
			}
		}
		if err := tx.InsertIdentityProvider(p); err != nil {
			return err
		}
		return s.audit(ctx, tx, sc, audit.IdentityProviderCreated, p)
	})
}

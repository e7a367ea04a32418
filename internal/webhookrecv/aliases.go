package webhookrecv

import (
	"context"
	"errors"

	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/webhook"
)

// 002 writes a webhook trigger with its own member names: trigger_id, enabled, and
// authentication.secret_ref. The spec README maps only 002's older id family and definition_id
// onto 000, so Lark takes 002's names as aliases of its own (docs/webhooks.md, "002's member
// names"): trigger_id is webhook_trigger_id, enabled is status (true: active, false: disabled),
// and secret_ref names a tenant secret (/secrets) whose value becomes the trigger's secret when
// it is created, as if it had been sent as secret. An alias and the member it stands for may both
// be sent only when they agree.

// SpecAuthentication is the authentication of a request: the trigger's, plus 002's secret_ref.
type SpecAuthentication struct {
	webhook.Authentication
	// SecretRef names the tenant secret whose value becomes the secret (create only).
	SecretRef string `json:"secret_ref,omitempty"`
}

// SecretSource opens a tenant's secrets (secrets.Service implements it).
type SecretSource interface {
	ForTenant(tenantID, invocationID string) egress.SecretResolver
}

// aliases folds trigger_id and enabled into webhook_trigger_id and status.
func (spec *Spec) aliases() error {
	if spec.TriggerID != "" {
		if spec.WebhookTriggerID != "" && spec.WebhookTriggerID != spec.TriggerID {
			return invalid("$.trigger_id", "INVALID_VALUE", "trigger_id (002's name of webhook_trigger_id) is %q but webhook_trigger_id is %q; send one of them",
				spec.TriggerID, spec.WebhookTriggerID)
		}
		spec.WebhookTriggerID, spec.TriggerID = spec.TriggerID, ""
	}
	if spec.Enabled != nil {
		st := string(webhook.StatusDisabled)
		if *spec.Enabled {
			st = string(webhook.StatusActive)
		}
		if spec.Status != "" && spec.Status != st {
			return invalid("$.enabled", "INVALID_VALUE", "enabled (002's name of status) is %t but status is %q; send one of them", *spec.Enabled, spec.Status)
		}
		spec.Status, spec.Enabled = st, nil
	}
	return nil
}

// changeAliases is aliases for PUT and PATCH, where secret_ref is refused as secret is.
func (spec *Spec) changeAliases() error {
	if spec.Authentication != nil && spec.Authentication.SecretRef != "" {
		return invalid("$.authentication.secret_ref", "READ_ONLY", "secret_ref is read when a trigger is created; the secret changes only through :regenerate-secret")
	}
	return spec.aliases()
}

// resolveAliases is aliases for a create, with secret_ref read into secret.
func (s *Service) resolveAliases(ctx context.Context, tenantID string, spec *Spec) error {
	if err := spec.aliases(); err != nil {
		return err
	}
	if spec.Authentication == nil || spec.Authentication.SecretRef == "" {
		return nil
	}
	const path = "$.authentication.secret_ref"
	name := spec.Authentication.SecretRef
	if spec.Secret != "" {
		return invalid(path, "INVALID_VALUE", "send either secret or authentication.secret_ref, not both")
	}
	if !spec.Authentication.Type.NeedsSecret() {
		return invalid(path, "INVALID_VALUE", "authentication type %s takes no secret", spec.Authentication.Type)
	}
	if s.o.Secrets == nil {
		return problem.New(problem.TypeUnavailable, "secrets are not configured on this server: authentication.secret_ref cannot be read")
	}
	sec, err := s.o.Secrets.ForTenant(tenantID, "").ResolveSecret(ctx, name)
	switch {
	case errors.Is(err, egress.ErrUnknownSecret):
		return invalid(path, "INVALID_VALUE", "secret_ref names no secret of this tenant: %q (create it with POST /secrets)", name)
	case errors.Is(err, egress.ErrSecretsUnavailable):
		return problem.New(problem.TypeUnavailable, "secrets are not configured on this server: authentication.secret_ref cannot be read")
	case err != nil:
		return problem.Internal(err)
	}
	if checkGivenSecret(path, sec.Value) != nil {
		return invalid(path, "INVALID_VALUE", "the value of secret %q cannot be a webhook secret: it must be %d to %d printable ASCII characters without spaces",
			name, minSecretLen, maxSecretLen)
	}
	spec.Secret, spec.Authentication.SecretRef, spec.secretFromRef = sec.Value, "", true
	return nil
}

// patchAliases lets a merge patch that says enabled (and not status) override the current status
// it is merged into, and likewise trigger_id the current webhook_trigger_id (a different one is
// then refused as a change of id).
func patchAliases(doc, patch map[string]any) {
	if v, ok := patch["enabled"]; ok && v != nil {
		if _, both := patch["status"]; !both {
			delete(doc, "status")
		}
	}
	if v, ok := patch["trigger_id"]; ok && v != nil {
		if _, both := patch["webhook_trigger_id"]; !both {
			delete(doc, "webhook_trigger_id")
		}
	}
}

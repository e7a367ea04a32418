package assetops

import (
	"context"
	"errors"
	"fmt"
	"path"
	"unicode/utf8"

	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/assetblob"
	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
)

// Approve promotes quarantined materialization id of asset key: its data is committed out of
// quarantine (the commit protocol's last steps, assetblob.Commit: under materializations/{id}/
// with its metadata and a commit marker naming who approved it), then, in one transaction with the
// audit event, it becomes promoted with that data and the latest of its (asset, partition), in
// place of the one before, and downstream tasks read it from then on; the quarantined copy is
// deleted after. Developer role; 409 invalid_transition when it is not quarantined.
func (s *Service) Approve(ctx context.Context, sc auth.SecurityContext, key, id string, d Decision) (asset.Materialization, error) {
	q, err := s.Materialization(ctx, sc, key, id)
	if err == nil {
		err = canDecide(sc)
	}
	if err != nil {
		return q, err
	}
	var uri string
	var cerr error
	if q.State == asset.StateQuarantined {
		uri, cerr = assetblob.Commit(ctx, s.blobs, q.OutputURI, q, map[string]any{"approved_by": sc.SubjectID, "reason": d.Reason},
			s.o.Clock.Now())
	}
	m, err := s.decide(ctx, sc, key, id, d, AuditApproved, func(tx store.Tx, m asset.Materialization) (asset.Materialization, error) {
		if cerr != nil {
			return m, fmt.Errorf("committing its data out of quarantine: %w", cerr)
		}
		return tx.Promote(store.Promotion{TenantID: m.TenantID, ID: m.ID, At: s.o.Clock.Now(), DecidedBy: sc.SubjectID,
			Reason: d.Reason, OutputURI: uri})
	})
	if err == nil {
		s.discard(ctx, q) // the quarantined copy: the data is committed now
	}
	return m, err
}

// Reject discards quarantined materialization id of asset key: it becomes rejected (never
// promoted) and, once that is committed, its quarantined data is deleted from the blob store.
// Developer role; audited with who and why; 409 invalid_transition when it is not quarantined.
func (s *Service) Reject(ctx context.Context, sc auth.SecurityContext, key, id string, d Decision) (asset.Materialization, error) {
	m, err := s.decide(ctx, sc, key, id, d, AuditRejected, func(tx store.Tx, m asset.Materialization) (asset.Materialization, error) {
		return tx.SetMaterializationState(store.MaterializationChange{TenantID: m.TenantID, ID: m.ID, To: asset.StateRejected,
			At: s.o.Clock.Now(), DecidedBy: sc.SubjectID, Reason: d.Reason})
	})
	if err != nil {
		return m, err
	}
	s.discard(ctx, m)
	return m, nil
}

// discard deletes a quarantined materialization's data (m.OutputURI, in quarantine) and the
// quarantine's reason beside it, once it is rejected or its data committed out of quarantine. The
// decision stands whatever happens here: a failure is logged, and that copy is never served again.
func (s *Service) discard(ctx context.Context, m asset.Materialization) {
	if m.OutputURI == "" {
		return
	}
	for _, k := range []string{m.OutputURI, path.Join(path.Dir(m.OutputURI), assetblob.ReasonFile)} {
		if err := s.blobs.Delete(ctx, k); err != nil {
			s.o.Logger.WarnContext(ctx, "deleting a rejected materialization's data", "tenant_id", m.TenantID,
				"materialization_id", m.ID, "key", k, "err", err)
		}
	}
}

// decide applies a decision on a quarantined materialization in one transaction with its audit
// event: move makes the change.
func (s *Service) decide(ctx context.Context, sc auth.SecurityContext, key, id string, d Decision, typ string,
	move func(store.Tx, asset.Materialization) (asset.Materialization, error)) (asset.Materialization, error) {
	if err := canDecide(sc); err != nil {
		return asset.Materialization{}, err
	}
	if len(d.Reason) > MaxReasonBytes || !utf8.ValidString(d.Reason) {
		msg := "reason must be valid UTF-8 of at most 1024 bytes"
		return asset.Materialization{}, problem.Validation(msg, []problem.Issue{{Path: "$.reason", Code: "INVALID_VALUE", Message: msg}})
	}
	what := "materialization " + id + " of asset " + key
	var out asset.Materialization
	err := s.store.Update(ctx, func(tx store.Tx) error {
		m, err := tx.Materialization(sc.TenantID, id)
		if err != nil {
			return err
		}
		if m.AssetKey != key {
			return store.ErrNotFound
		}
		if m.State != asset.StateQuarantined {
			return problem.Conflict("invalid_transition", "only a quarantined materialization can be approved or rejected; %s is %s",
				id, m.State).With("state", string(m.State))
		}
		if out, err = move(tx, m); err != nil {
			return err
		}
		return s.insertAudit(ctx, tx, sc, typ, out)
	})
	var te *asset.TransitionError
	if errors.As(err, &te) {
		return out, problem.Conflict("invalid_transition", "%s", te.Error()).With("state", string(te.From))
	}
	if err != nil {
		return out, resourceErr(what, err)
	}
	s.o.Logger.InfoContext(ctx, "materialization decided", "tenant_id", sc.TenantID, "asset_key", key,
		"materialization_id", id, "state", out.State, "by", sc.SubjectID)
	return out, nil
}

// insertAudit records the decision on m in tx: who (the actor), why, and what it was about.
func (s *Service) insertAudit(ctx context.Context, tx store.Tx, sc auth.SecurityContext, typ string, m asset.Materialization) error {
	ev, err := audit.WithDetails(audit.Event{ID: s.o.IDs.New("aud"), TenantID: sc.TenantID, Type: typ, ActorID: sc.SubjectID,
		ResourceType: "materialization", ResourceID: m.ID, CorrelationID: obs.CorrelationID(ctx), At: s.o.Clock.Now()},
		map[string]any{"asset_key": m.AssetKey, "partition_key": m.PartitionKey, "materialization_id": m.ID,
			"run_id": m.RunID, "task_id": m.TaskID, "state": m.State, "reason": m.Reason})
	if err != nil {
		return err
	}
	return tx.InsertAudit(ev)
}

package dagrun

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/assetblob"
	"github.com/larkrun/lark/internal/blob"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/quality"
	"github.com/larkrun/lark/internal/store"
)

// The output commit protocol (004 §16), per task attempt whose task names an asset:
//
//  1. stage: the output and its metadata under staging/{run}/{task}/attempt={N}/;
//  2. check: the post checks run on the output, against the previous promoted materialization of
//     the (asset, partition), and are gated (internal/quality);
//  3. commit: copied to materializations/{id}/ and marked with _commit.json (created once); a
//     quarantined output goes to quarantine/{run}/{task}/ with _reason.json instead;
//  4. promote: in the transaction that records the task's end, the materialization is stored and
//     becomes the latest of its (asset, partition) — never a quarantined one.
//
// The materialization id is derived from the run, the task and the child's attempt, so an
// activation repeated after a crash rewrites the same objects (the marker exists already: fine) and
// its one transaction promotes once. Keys are under tenants/{tenant}/assets/{asset}/.

// maxOutputBytes bounds an output read back from the blob store (the payload limit).
const maxOutputBytes = 2 << 20

// materialization is what a task's output came to: its checks, gating and, for an asset, the
// materialization to record with the task's end.
type materialization struct {
	results  []quality.Result
	decision quality.Decision
	mat      *asset.Materialization
}

// checkOutput runs task t's post checks on output (its child's result, attempt attempt), and for a
// task that names an asset stages and commits (or quarantines) the output.
func (a *activation) checkOutput(t *Task, output json.RawMessage, attempt int) (materialization, error) {
	pt := t.Planned
	var m materialization
	if len(pt.Checks) == 0 && pt.AssetKey == "" {
		m.decision = quality.Gate(nil, false) // nothing to check nor to commit
		return m, nil
	}
	if a.inTx {
		a.deferred = true // checks and commits run in the run's activation
		return m, nil
	}
	checks, err := parseChecks(pt.Checks)
	if err != nil {
		return m, err
	}
	var value any
	if err := invocation.DecodeJSON(output, &value); err != nil {
		return m, fmt.Errorf("output: %w", err)
	}
	if pt.AssetKey != "" && a.g.cfg.Blobs == nil {
		return m, errors.New("this server has no blob store for asset outputs")
	}
	var prev *quality.Previous
	if pt.AssetKey != "" {
		if p, ok, err := a.latestOutput(pt.AssetKey); err != nil {
			return m, err
		} else if ok {
			prev = &quality.Previous{Output: p}
		}
	}
	m.results = quality.Runner{Clock: a.g.cfg.Clock}.Run(a.ctx, checks, quality.PhasePost, value, prev)
	m.decision = quality.Gate(m.results, pt.QuarantineEnabled)
	if pt.AssetKey == "" || m.decision.Action == quality.Block {
		return m, nil
	}
	m.mat, err = a.commit(t, output, attempt, m)
	return m, err
}

// parseChecks decodes a planned task's checks (validated when the DAG was registered).
func parseChecks(raw []json.RawMessage) ([]quality.Check, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	all, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	checks, issues := quality.ParseChecks(all, "$.checks")
	if len(issues) > 0 {
		return nil, fmt.Errorf("checks: %s: %s", issues[0].Path, issues[0].Message)
	}
	return checks, nil
}

// commit stages task t's output and commits it (or quarantines it), returning the
// materialization to record.
func (a *activation) commit(t *Task, output json.RawMessage, attempt int, m materialization) (*asset.Materialization, error) {
	pt := t.Planned
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d", a.rec.ID, pt.ID, attempt)))
	id := "mat_" + hex.EncodeToString(sum[:12])
	checks, err := json.Marshal(m.results)
	if err != nil {
		return nil, err
	}
	passed, failed := 0, 0
	for _, r := range m.results {
		if r.Passed {
			passed++
		} else if !r.Skipped {
			failed++
		}
	}
	mat := &asset.Materialization{ID: id, TenantID: a.rec.TenantID, AssetKey: pt.AssetKey, PartitionKey: a.run.Plan.PartitionKey,
		RunID: a.rec.ID, TaskID: pt.ID, Attempt: attempt, RowCount: rowCount(output), ByteSize: int64(len(output)),
		SchemaHash: schemaHash(output), Checks: checks, ChecksPassed: passed, ChecksFailed: failed,
		GatingDecision: asset.GatingDecision(strings.ToLower(string(m.decision.Action))), CreatedAt: a.now, UpdatedAt: a.now}
	meta, err := assetblob.Metadata(*mat)
	if err != nil {
		return nil, err
	}
	base := assetblob.Prefix(a.rec.TenantID, pt.AssetKey)
	staging := fmt.Sprintf("%s/staging/%s/%s/attempt=%d", base, a.rec.ID, url.PathEscape(pt.ID), attempt)
	if err := a.put(staging+"/"+assetblob.DataFile, output); err != nil {
		return nil, err
	}
	if err := a.put(staging+"/"+assetblob.MetadataFile, meta); err != nil {
		return nil, err
	}
	if m.decision.Action == quality.Quarantine {
		return mat, a.quarantine(mat, staging, fmt.Sprintf("%s/quarantine/%s/%s", base, a.rec.ID, url.PathEscape(pt.ID)), m.decision)
	}
	uri, err := assetblob.Commit(a.ctx, a.g.cfg.Blobs, staging+"/"+assetblob.DataFile, *mat, nil, a.now)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{staging + "/" + assetblob.DataFile, staging + "/" + assetblob.MetadataFile} {
		_ = a.g.cfg.Blobs.Delete(a.ctx, k) // the commit stands; a leftover staged copy is only clutter
	}
	mat.State, mat.OutputURI = asset.StateCommitted, uri
	return mat, nil
}

// quarantine moves a staged output that the checks quarantined to its quarantine path, with why.
func (a *activation) quarantine(mat *asset.Materialization, staging, path string, d quality.Decision) error {
	if err := a.g.cfg.Blobs.Copy(a.ctx, staging+"/"+assetblob.DataFile, path+"/"+assetblob.DataFile); err != nil {
		return err
	}
	reason, err := json.Marshal(map[string]any{"materialization_id": mat.ID, "reason": d.Reason, "checks": mat.Checks})
	if err != nil {
		return err
	}
	if err := a.put(path+"/"+assetblob.ReasonFile, reason); err != nil {
		return err
	}
	mat.State, mat.OutputURI = asset.StateQuarantined, path+"/"+assetblob.DataFile
	return nil
}

// put writes b at key.
func (a *activation) put(key string, b []byte) error {
	return a.g.cfg.Blobs.Write(a.ctx, key, bytes.NewReader(b), int64(len(b)))
}

// latestOutput reads the output of the latest promoted materialization of assetKey for the run's
// partition; ok is false when there is none.
func (a *activation) latestOutput(assetKey string) (json.RawMessage, bool, error) {
	if a.inTx {
		a.deferred = true // the blob store is read in the run's activation
		return nil, false, nil
	}
	m, err := a.read.LatestMaterialization(a.rec.TenantID, assetKey, a.run.Plan.PartitionKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	b, err := ReadOutput(a.ctx, a.g.cfg.Blobs, m.OutputURI)
	return b, err == nil, err
}

// ReadOutput reads a materialization's data (at most the payload limit).
func ReadOutput(ctx context.Context, blobs blob.Store, key string) (json.RawMessage, error) {
	r, _, err := blobs.Read(ctx, key, maxOutputBytes)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// record returns the effect that stores a task's materialization with the task's end: promoted
// (the latest of its asset and partition) unless quarantined, and the asset's health updated.
func (a *activation) record(mat *asset.Materialization) func(tx store.Tx, _ invocation.Record) error {
	return func(tx store.Tx, _ invocation.Record) error {
		if _, err := tx.PutMaterialization(*mat); err != nil {
			return err
		}
		if mat.State == asset.StateCommitted {
			if _, err := tx.Promote(store.Promotion{TenantID: mat.TenantID, ID: mat.ID, At: a.now}); err != nil {
				return err
			}
		}
		passed := mat.ChecksFailed == 0
		_, err := tx.RecordAssetOutcome(store.AssetOutcome{TenantID: mat.TenantID, AssetKey: mat.AssetKey, At: a.now,
			Succeeded: mat.State == asset.StateCommitted, ChecksPassed: &passed, GatingDecision: mat.GatingDecision})
		return err
	}
}

// rowCount is an output's row count: its length when it is an array, the length of its "rows"
// array when it has one, else 1.
func rowCount(output json.RawMessage) int64 {
	var v any
	if invocation.DecodeJSON(output, &v) != nil {
		return 0
	}
	switch x := v.(type) {
	case []any:
		return int64(len(x))
	case map[string]any:
		if rows, ok := x["rows"].([]any); ok {
			return int64(len(rows))
		}
	}
	return 1
}

// schemaHash is the SHA-256 of an output's shape: its keys and value types, not its values (the
// first item of an array stands for the rest).
func schemaHash(output json.RawMessage) string {
	var v any
	if invocation.DecodeJSON(output, &v) != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(shape(v)))
	return hex.EncodeToString(sum[:])
}

func shape(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		b.WriteString("{")
		for _, k := range keys {
			b.WriteString(k + ":" + shape(x[k]) + ",")
		}
		return b.String() + "}"
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return "[" + shape(x[0]) + "]"
	case string:
		return "string"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return "number"
}

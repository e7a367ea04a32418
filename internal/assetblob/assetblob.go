// Package assetblob is where asset outputs live in the blob store and the commit step of the
// output commit protocol (004 §16): a materialization's data, its metadata and its commit marker
// under tenants/{tenant}/assets/{asset}/materializations/{id}/. The DAG engine commits a task's
// checked output there; an approval commits a quarantined one there. docs/dag.md, "Outputs".
package assetblob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"time"

	"github.com/larkrun/lark/internal/asset"
	"github.com/larkrun/lark/internal/blob"
)

// Names of a materialization's objects in its folder.
const (
	DataFile     = "data.json"
	MetadataFile = "_metadata.json"
	CommitFile   = "_commit.json"
	ReasonFile   = "_reason.json"
)

// Prefix is the folder of an asset of a tenant.
func Prefix(tenantID, assetKey string) string {
	return "tenants/" + url.PathEscape(tenantID) + "/assets/" + url.PathEscape(assetKey)
}

// Folder is the folder of committed materialization m.
func Folder(m asset.Materialization) string {
	return Prefix(m.TenantID, m.AssetKey) + "/materializations/" + m.ID
}

// Metadata is m's _metadata.json: its row count, byte size, schema hash and creation time.
func Metadata(m asset.Materialization) ([]byte, error) {
	return json.Marshal(map[string]any{"row_count": m.RowCount, "byte_size": m.ByteSize, "schema_hash": m.SchemaHash,
		"created_at": m.CreatedAt.UTC().Format(time.RFC3339Nano)})
}

// Commit commits materialization m, whose data is at src: the data copied into m's folder
// (Folder), its metadata beside it, then its commit marker, created once (a marker already there
// was written by an earlier try of this very commit: the objects are the same). extra adds members
// to the marker (an approval's who and why). It returns the data's key, m's output_uri from then on;
// the materialization is committed when the marker exists, promoted when the store says so.
func Commit(ctx context.Context, blobs blob.Store, src string, m asset.Materialization, extra map[string]any, now time.Time) (string, error) {
	folder := Folder(m)
	if err := blobs.Copy(ctx, src, folder+"/"+DataFile); err != nil {
		return "", err
	}
	meta, err := Metadata(m)
	if err != nil {
		return "", err
	}
	if err := blobs.Write(ctx, folder+"/"+MetadataFile, bytes.NewReader(meta), int64(len(meta))); err != nil {
		return "", err
	}
	marker := map[string]any{"materialization_id": m.ID, "task_id": m.TaskID, "run_id": m.RunID, "attempt": m.Attempt,
		"committed_at": now.UTC().Format(time.RFC3339Nano), "metadata": json.RawMessage(meta)}
	for k, v := range extra {
		marker[k] = v
	}
	b, err := json.Marshal(marker)
	if err != nil {
		return "", err
	}
	err = blobs.Create(ctx, folder+"/"+CommitFile, bytes.NewReader(b), int64(len(b)))
	if err != nil && !errors.Is(err, blob.ErrExists) {
		return "", err
	}
	return folder + "/" + DataFile, nil
}

package sqlcore

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// PackAt is the size from which a store that packs (Dialect.Pack: SQLite) stores a record or an
// event's data compressed. SQLite has one writer, and writing a document costs it about 10 ms per
// MB; zstd at its fastest level shrinks the JSON of typical payloads several times, and repeated
// text (a tenant's 900 KB of filler) to almost nothing, in a fraction of that time. PostgreSQL
// compresses large values itself (TOAST) and writes concurrently: its store keeps them as they are.
const PackAt = 16 << 10

// maxUnpacked bounds a packed document's decompressed size: far above any document the engine
// writes (a record holds params and a result, each bounded by the payload limits), so that only a
// corrupt row can reach it.
const maxUnpacked = 512 << 20

// packedPrefix starts every packed document: the zstd frame follows, in base64, since the columns
// are STRICT TEXT. No JSON document starts with '~', so a stored value is packed exactly when it
// starts with it.
const packedPrefix = "~z:"

var (
	packer, _   = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	unpacker, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxUnpacked))
)

// Pack is doc as a store that packs keeps it: compressed from PackAt bytes on, when that saves at
// least a quarter, and as it is otherwise.
func Pack(doc []byte) string {
	if len(doc) >= PackAt {
		z := packer.EncodeAll(doc, make([]byte, 0, len(doc)/4))
		if n := len(packedPrefix) + base64.StdEncoding.EncodedLen(len(z)); n <= len(doc)-len(doc)/4 {
			out := make([]byte, n)
			copy(out, packedPrefix)
			base64.StdEncoding.Encode(out[len(packedPrefix):], z)
			return string(out)
		}
	}
	return string(doc)
}

// Packed reports whether a stored value is a packed document.
func Packed(v []byte) bool { return bytes.HasPrefix(v, []byte(packedPrefix)) }

// Unpack is the document a stored value holds: v itself unless Packed.
func Unpack(v []byte) ([]byte, error) {
	if !Packed(v) {
		return v, nil
	}
	z := make([]byte, base64.StdEncoding.DecodedLen(len(v)-len(packedPrefix)))
	n, err := base64.StdEncoding.Decode(z, v[len(packedPrefix):])
	if err != nil {
		return nil, fmt.Errorf("unpacking a stored document: %w", err)
	}
	doc, err := unpacker.DecodeAll(z[:n], nil)
	if err != nil {
		return nil, fmt.Errorf("unpacking a stored document: %w", err)
	}
	return doc, nil
}

// unpackString is Unpack of a value scanned as a string.
func unpackString(v string) (string, error) {
	if !strings.HasPrefix(v, packedPrefix) {
		return v, nil
	}
	doc, err := Unpack([]byte(v))
	return string(doc), err
}

// UnpackedLen is the length of the document a stored value holds, read from a packed one's frame
// header without unpacking it (the value's own length when it is not packed, or when its header
// does not say).
func UnpackedLen[T string | []byte](v T) int {
	if len(v) < len(packedPrefix) || string(v[:len(packedPrefix)]) != packedPrefix {
		return len(v)
	}
	head := v[len(packedPrefix):min(len(v), len(packedPrefix)+24)] // 18 header bytes at most
	z := make([]byte, base64.StdEncoding.DecodedLen(len(head)))
	n, _ := base64.StdEncoding.Decode(z, []byte(head[:len(head)/4*4]))
	var h zstd.Header
	if h.Decode(z[:n]) != nil || !h.HasFCS {
		return len(v)
	}
	return int(min(h.FrameContentSize, uint64(maxUnpacked)))
}

// JSONFieldOf is the top-level member field of a stored document (packed or not) as SQLite's
// json_extract answers it: a string unquoted, a number or boolean as itself, NULL (nil) when the
// member is absent or null or the document does not parse. It backs the SQLite store's JSONField
// for packed rows, which json_extract cannot read.
func JSONFieldOf(v []byte, field string) any {
	doc, err := Unpack(v)
	if err != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil {
		return nil
	}
	var x any
	if raw, ok := m[field]; !ok || json.Unmarshal(raw, &x) != nil {
		return nil
	}
	switch x := x.(type) {
	case string, float64:
		return x
	case bool:
		if x {
			return int64(1)
		}
		return int64(0)
	case nil:
		return nil
	}
	return string(m[field]) // an object or array: its JSON, as json_extract answers
}

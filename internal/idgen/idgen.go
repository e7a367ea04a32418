// Package idgen makes the opaque identifiers Lark assigns (ep_..., inv_..., tok_...).
package idgen

import (
	"encoding/hex"

	"github.com/google/uuid"
)

// Generator makes identifiers; tests may substitute a deterministic one.
type Generator interface {
	// New returns prefix + "_" + a unique, time-ordered suffix.
	New(prefix string) string
}

// UUIDv7 generates time-ordered ids from UUID version 7, hex-encoded without dashes.
type UUIDv7 struct{}

// New implements Generator.
func (UUIDv7) New(prefix string) string {
	u := uuid.Must(uuid.NewV7())
	var buf [32]byte
	hex.Encode(buf[:], u[:])
	return prefix + "_" + string(buf[:])
}

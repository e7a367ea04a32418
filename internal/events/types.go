package events

import (
	"encoding/json"
	"time"
)

// PlatformScope is the scope of event types the platform operator registers: they apply to every
// tenant that has not registered the same type id.
const PlatformScope = ""

// Type is a registered event type: a GTS type id (ending with "~") and the JSON Schema its
// payloads must match. TenantID is PlatformScope for the platform's types.
type Type struct {
	ID       string          `json:"event_type_id"`
	TenantID string          `json:"tenant_id,omitempty"`
	Scope    string          `json:"scope"` // "tenant" or "platform"
	Schema   json.RawMessage `json:"schema"`
	// Description is free text (at most 1024 characters).
	Description string    `json:"description,omitempty"`
	CreatedBy   string    `json:"created_by,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

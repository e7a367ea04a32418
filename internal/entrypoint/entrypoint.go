// Package entrypoint holds the registry's domain types: the entrypoint record, its status machine
// (000, "Entrypoint Status State Machine") and visibility rules (001 scopes mapped onto owner types).
// It is pure: no I/O.
package entrypoint

import (
	"encoding/json"
	"fmt"
	"time"
)

// Status is an entrypoint's lifecycle state.
type Status string

// The lifecycle states of 000.
const (
	StatusDraft      Status = "draft"
	StatusActive     Status = "active"
	StatusDeprecated Status = "deprecated"
	StatusDisabled   Status = "disabled"
	StatusArchived   Status = "archived"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{StatusDraft, StatusActive, StatusDeprecated, StatusDisabled, StatusArchived}

// Callable reports whether invocations may start in this status.
func (s Status) Callable() bool { return s == StatusActive || s == StatusDeprecated }

// OwnerType is 000's owner_ref.owner_type (001's scope: user, tenant, platform=system).
type OwnerType string

// Owner types.
const (
	OwnerUser   OwnerType = "user"
	OwnerTenant OwnerType = "tenant"
	OwnerSystem OwnerType = "system"
)

// PlatformTenant is the tenant id under which system-owned (operator-registered) entrypoints are
// stored. It is reserved: no real tenant may use it.
const PlatformTenant = "platform"

// Owner is 000's OwnerRef.
type Owner struct {
	OwnerType OwnerType `json:"owner_type"`
	ID        string    `json:"id"`
	TenantID  string    `json:"tenant_id"`
}

// Kind says whether the entrypoint is a function or a workflow; it is derived from the GTS chain.
type Kind string

// Kinds.
const (
	KindFunction Kind = "function"
	KindWorkflow Kind = "workflow"
)

// Deprecation records why and when an entrypoint was deprecated (001).
type Deprecation struct {
	Reason       string     `json:"reason,omitempty"`
	SuccessorID  string     `json:"successor_id,omitempty"`
	SunsetDate   *time.Time `json:"sunset_date,omitempty"`
	DeprecatedAt time.Time  `json:"deprecated_at"`
}

// Entrypoint is one registered version of a function or workflow. Definition holds the validated,
// defaults-applied registration body (title, schema, traits, implementation, ...); the other fields
// are server-owned or derived and are stored as columns so they can be queried.
type Entrypoint struct {
	ID          string // opaque ep_... id
	GTSID       string // full GTS id
	Family      string // GTS id without the last segment's version
	Major       int
	Minor       int
	HasMinor    bool
	Kind        Kind
	TenantID    string
	Owner       Owner
	Shared      bool
	Status      Status
	Version     string // semantic version "MAJOR.MINOR.PATCH"
	Title       string
	Tags        []string
	Adapter     string
	Definition  json.RawMessage
	Revision    int64 // optimistic-concurrency counter, bumped on every update
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CreatedBy   string
	ActivatedAt *time.Time
	DisabledAt  *time.Time
	ArchivedAt  *time.Time
	// ReleaseNotes is given with the activate action.
	ReleaseNotes string
	Deprecation  *Deprecation
}

// Action is a status action of POST /entrypoints/{id}:status.
type Action string

// Status actions.
const (
	ActionActivate  Action = "activate"
	ActionDeprecate Action = "deprecate"
	ActionDisable   Action = "disable"
	ActionEnable    Action = "enable"
	ActionArchive   Action = "archive"
)

// transitions is exactly 000's "Allowed Transitions" table.
var transitions = map[Action]map[Status]Status{
	ActionActivate:  {StatusDraft: StatusActive},
	ActionDeprecate: {StatusActive: StatusDeprecated},
	ActionDisable:   {StatusActive: StatusDisabled, StatusDeprecated: StatusDisabled},
	ActionEnable:    {StatusDisabled: StatusActive},
	ActionArchive:   {StatusDeprecated: StatusArchived, StatusDisabled: StatusArchived},
}

// ErrUnknownAction is returned by Transition for an action not in 000's table.
var ErrUnknownAction = fmt.Errorf("unknown status action")

// TransitionError says an action is not allowed from the current status.
type TransitionError struct {
	From   Status
	Action Action
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("action %q is not allowed in status %q", e.Action, e.From)
}

// Transition returns the status that action leads to from from, or an error: ErrUnknownAction, or a
// *TransitionError when the action exists but is not allowed in this status.
func Transition(from Status, action Action) (Status, error) {
	t, ok := transitions[action]
	if !ok {
		return "", ErrUnknownAction
	}
	to, ok := t[from]
	if !ok {
		return "", &TransitionError{From: from, Action: action}
	}
	return to, nil
}

// Viewer is who is looking: used for visibility and modification checks.
type Viewer struct {
	TenantID  string
	SubjectID string
	Operator  bool // the platform operator sees and manages everything
}

// VisibleTo reports whether v may see (and invoke, when callable) e:
// system-owned entrypoints are visible to every tenant once they leave draft (a system draft is the
// operator's work in progress); tenant-owned ones within their tenant; user-owned ones to their
// owner, and to the owner's tenant when shared.
func (e *Entrypoint) VisibleTo(v Viewer) bool {
	if v.Operator {
		return true
	}
	if e.Owner.OwnerType == OwnerSystem {
		return e.Status != StatusDraft
	}
	if e.TenantID != v.TenantID {
		return false
	}
	if e.Owner.OwnerType == OwnerTenant {
		return true
	}
	return e.Owner.ID == v.SubjectID || e.Shared
}

// ModifiableBy reports whether v may change e (given v holds the developer role): system-owned only
// by the operator; tenant-owned by the tenant; user-owned by its owner.
func (e *Entrypoint) ModifiableBy(v Viewer) bool {
	if v.Operator {
		return true
	}
	switch e.Owner.OwnerType {
	case OwnerSystem:
		return false
	case OwnerTenant:
		return e.TenantID == v.TenantID
	default:
		return e.TenantID == v.TenantID && e.Owner.ID == v.SubjectID
	}
}

package entrypoint

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTransitionTable checks every (status, action) pair against 000's table: the listed ones
// move, everything else is refused.
func TestTransitionTable(t *testing.T) {
	allowed := map[Status]map[Action]Status{
		StatusDraft:      {ActionActivate: StatusActive},
		StatusActive:     {ActionDeprecate: StatusDeprecated, ActionDisable: StatusDisabled},
		StatusDeprecated: {ActionDisable: StatusDisabled, ActionArchive: StatusArchived},
		StatusDisabled:   {ActionEnable: StatusActive, ActionArchive: StatusArchived},
		StatusArchived:   {},
	}
	actions := []Action{ActionActivate, ActionDeprecate, ActionDisable, ActionEnable, ActionArchive}
	for _, from := range Statuses {
		for _, a := range actions {
			to, err := Transition(from, a)
			if want, ok := allowed[from][a]; ok {
				require.NoError(t, err, "%s --%s-->", from, a)
				require.Equal(t, want, to)
			} else {
				var te *TransitionError
				require.ErrorAs(t, err, &te, "%s --%s--> must be refused", from, a)
				require.Equal(t, from, te.From)
			}
		}
	}
	_, err := Transition(StatusDraft, "publish")
	require.True(t, errors.Is(err, ErrUnknownAction))
}

func TestCallable(t *testing.T) {
	for _, s := range Statuses {
		require.Equal(t, s == StatusActive || s == StatusDeprecated, s.Callable(), s)
	}
}

func TestVisibilityAndModification(t *testing.T) {
	alice := Viewer{TenantID: "acme", SubjectID: "alice"}
	bob := Viewer{TenantID: "acme", SubjectID: "bob"}
	other := Viewer{TenantID: "other", SubjectID: "alice"}
	op := Viewer{Operator: true}
	priv := Entrypoint{TenantID: "acme", Owner: Owner{OwnerType: OwnerUser, ID: "alice", TenantID: "acme"}}
	shared := priv
	shared.Shared = true
	ten := Entrypoint{TenantID: "acme", Owner: Owner{OwnerType: OwnerTenant, ID: "acme", TenantID: "acme"}}
	sys := Entrypoint{TenantID: PlatformTenant, Status: StatusActive, Owner: Owner{OwnerType: OwnerSystem, ID: PlatformTenant, TenantID: PlatformTenant}}
	sysDraft := sys
	sysDraft.Status = StatusDraft
	cases := []struct {
		name           string
		e              Entrypoint
		v              Viewer
		visible, write bool
	}{
		{"owner sees private", priv, alice, true, true},
		{"colleague does not see private", priv, bob, false, false},
		{"colleague sees shared, cannot change it", shared, bob, true, false},
		{"other tenant never sees user entrypoints", shared, other, false, false},
		{"tenant entrypoint visible in tenant", ten, bob, true, true},
		{"tenant entrypoint hidden from other tenants", ten, other, false, false},
		{"system visible to all, changed by none", sys, other, true, false},
		{"system draft hidden from tenants", sysDraft, other, false, false},
		{"operator sees system drafts", sysDraft, op, true, true},
		{"operator sees and changes all", priv, op, true, true},
		{"operator changes system", sys, op, true, true},
	}
	for _, c := range cases {
		require.Equal(t, c.visible, c.e.VisibleTo(c.v), c.name)
		require.Equal(t, c.write, c.e.ModifiableBy(c.v), c.name)
	}
}

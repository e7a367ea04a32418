package natsbridge

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestEventSubjectMapping(t *testing.T) {
	for _, tc := range []struct{ typeID, subject string }{
		{"gts.x.shop.orders.placed.v1~", "lark.events.acme.gts.x.shop.orders.placed.v1.__"},
		{"gts.x.shop.orders.placed.v1.2~", "lark.events.acme.gts.x.shop.orders.placed.v1.2.__"},
		{"gts.x.core.faas.audit.v1~x.core.triggers.schedule_created.v1~",
			"lark.events.acme.gts.x.core.faas.audit.v1.__.x.core.triggers.schedule_created.v1.__"},
		{"gts.x.shop._.placed.v1~", "lark.events.acme.gts.x.shop._.placed.v1.__"},
	} {
		got, err := EventSubject("lark.events", "acme", tc.typeID)
		require.NoError(t, err, tc.typeID)
		require.Equal(t, tc.subject, got)
		require.NoError(t, validSubject(got, false), "a mapped subject is a valid literal subject")
		tenant, typeID, err := ParseEventSubject("lark.events", got)
		require.NoError(t, err)
		require.Equal(t, "acme", tenant)
		require.Equal(t, tc.typeID, typeID, "the mapping is reversible")
	}
}

func TestEventSubjectWildcardOnBaseType(t *testing.T) {
	// Every GTS token stays a subject token, so a filter can select a base type's derived events.
	derived, err := EventSubject("lark.events", "acme", "gts.x.core.faas.audit.v1~x.core.triggers.schedule_created.v1~")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(derived, "lark.events.acme.gts.x.core.faas.audit.v1.__."))
	other, err := EventSubject("lark.events", "acme", "gts.x.core.faas.audit.v10~x.core.triggers.schedule_created.v1~")
	require.NoError(t, err)
	require.False(t, strings.HasPrefix(other, "lark.events.acme.gts.x.core.faas.audit.v1.__."), "v10 is not v1")
}

func TestEventSubjectRefusesUnsafeInput(t *testing.T) {
	for _, tc := range []struct{ tenant, typeID string }{
		{"ac.me", "gts.x.shop.orders.placed.v1~"},
		{"*", "gts.x.shop.orders.placed.v1~"},
		{">", "gts.x.shop.orders.placed.v1~"},
		{"", "gts.x.shop.orders.placed.v1~"},
		{"a b", "gts.x.shop.orders.placed.v1~"},
		{strings.Repeat("a", MaxNameLen+1), "gts.x.shop.orders.placed.v1~"},
		{"acme", "gts.x.shop.orders.*.v1~"},
		{"acme", "gts.x.shop.orders.>"},
		{"acme", "not a gts id"},
		{"acme", ""},
	} {
		_, err := EventSubject("lark.events", tc.tenant, tc.typeID)
		require.ErrorIs(t, err, ErrInvalidSubject, "%q %q", tc.tenant, tc.typeID)
	}
}

func TestParseEventSubjectRefuses(t *testing.T) {
	for _, s := range []string{
		"other.acme.gts.x.shop.orders.placed.v1.__",
		"lark.events",
		"lark.events.acme",
		"lark.events.acme.gts.x.shop.orders.placed.v1.__.__",
		"lark.events.acme.gts.x.shop.__.orders.placed.v1.__",
		"lark.events.acme.*.x.shop.orders.placed.v1.__",
	} {
		_, _, err := ParseEventSubject("lark.events", s)
		require.ErrorIs(t, err, ErrInvalidSubject, s)
	}
}

func TestValidSubject(t *testing.T) {
	for _, ok := range []string{"a", "a.b.c", "orders.*.placed", "orders.>", "*", ">", "a-b_c.D~x"} {
		require.NoError(t, validSubject(ok, true), ok)
	}
	for _, bad := range []string{"", ".", "a..b", "a.", ".a", "a b", "a\tb", "a.>.b", "a*.b", "a.b>", "a.é",
		strings.Repeat("a", MaxSubjectLen+1)} {
		require.ErrorIs(t, validSubject(bad, true), ErrInvalidSubject, "%q", bad)
	}
	require.NoError(t, validSubject(strings.Repeat("a", MaxSubjectLen), true), "the bound itself is allowed")
	require.ErrorIs(t, validSubject("a.*", false), ErrInvalidSubject, "no wildcard in a literal subject")
}

func TestBackoffBounds(t *testing.T) {
	for attempt := 1; attempt < 40; attempt++ {
		full := min(100*time.Millisecond<<min(attempt-1, 20), 2*time.Second)
		for range 50 {
			d := backoff(100*time.Millisecond, 2*time.Second, attempt)
			require.GreaterOrEqual(t, d, full/2, "attempt %d", attempt)
			require.LessOrEqual(t, d, full, "attempt %d", attempt)
		}
	}
}

func TestConnectionDetailsJSON(t *testing.T) {
	at := time.Date(2026, 1, 27, 9, 55, 0, 0, time.UTC)
	got, err := json.Marshal(ConnectionDetails{LastConnectedAt: at, ReconnectAttempts: 3, NextReconnectAt: at.Add(10 * time.Minute)})
	require.NoError(t, err)
	require.JSONEq(t, `{"event_broker":"disconnected","last_connected_at":"2026-01-27T09:55:00.000Z",
		"reconnect_attempts":3,"next_reconnect_at":"2026-01-27T10:05:00.000Z"}`, string(got), "002's example")
	got, err = json.Marshal(ConnectionDetails{Connected: true, LastConnectedAt: at})
	require.NoError(t, err)
	require.JSONEq(t, `{"event_broker":"connected","last_connected_at":"2026-01-27T09:55:00.000Z","reconnect_attempts":0}`, string(got))
}

// genTypeID draws a valid GTS id from a small alphabet (so that ids collide often), with the
// namespace placeholder "_", underscores inside tokens and optional minor versions.
func genTypeID(t *rapid.T) string {
	n := rapid.IntRange(1, 3).Draw(t, "segments")
	segs := make([]string, n)
	tok := rapid.SampledFrom([]string{"x", "v1", "a_b", "_a", "b_", "core"})
	for i := range segs {
		segs[i] = tok.Draw(t, "vendor") + "." + tok.Draw(t, "package") + "." +
			rapid.SampledFrom([]string{"_", "ns", "v2"}).Draw(t, "namespace") + "." + tok.Draw(t, "type") +
			".v" + strconv.Itoa(rapid.IntRange(0, 11).Draw(t, "major"))
		if minor := rapid.IntRange(-1, 3).Draw(t, "minor"); minor >= 0 {
			segs[i] += "." + strconv.Itoa(minor)
		}
	}
	s := "gts." + strings.Join(segs, "~")
	if rapid.Bool().Draw(t, "type") {
		s += "~"
	}
	return s
}

func TestEventSubjectIsReversibleAndInjective(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tenant := rapid.SampledFrom([]string{"acme", "a-b", "t_1"}).Draw(t, "tenant")
		a, b := genTypeID(t), genTypeID(t)
		sa, err := EventSubject("lark.events", tenant, a)
		require.NoError(t, err, a)
		require.NoError(t, validSubject(sa, false))
		gotTenant, gotType, err := ParseEventSubject("lark.events", sa)
		require.NoError(t, err, sa)
		require.Equal(t, tenant, gotTenant)
		require.Equal(t, a, gotType)
		sb, err := EventSubject("lark.events", tenant, b)
		require.NoError(t, err, b)
		require.Equal(t, a == b, sa == sb, "%s / %s", a, b)
	})
}

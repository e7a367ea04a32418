package gts

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var fuzzSeeds = []string{
	"",
	"gts.",
	"gts.*",
	"gts.x.*",
	"gts.x.core.events.type.v1~",
	"gts.x.core.events.type.v1.0",
	"gts.x.core.events.type.v1.*",
	"gts.x.core.events.type.v1~*",
	"gts.x.core.events.topic.v1~ven.app._.custom_event_topic.v1.2",
	EntrypointBase,
	FunctionType,
	WorkflowType,
	calcV1,
	calcV1_2,
	calcV1 + "*",
	calcV1_2 + "vendor.app.billing.more.v1",
	"gts.gts.x.core.events.v1~",
	"gts.x.core.events.type.v1~gts.x.core.events.v1~",
	"gts.X.core.events.type.v1~",
	"gts.x.core.events.type.v01~",
	"gts.x.core.events.type.v1.01~",
	"gts._.core.events.type.v1~",
	"gts.x.core.__.type.v1~",
	"gts.x.core.type.v1~",
	"gts.x.core.events.type.extra.v1~",
	"gts.x.core.events.type~",
	"gts.x.core.events.type.v1~~",
	"gts.x.core.events.type.v1.2.3~",
	"gts.x.core.events.type.v2147483648~",
	"gts.x.core.calc*",
	"gts.**",
	"gts.x.*.y.*",
	"gts.x.core.\xffvents.type.v1~",
	longID(MaxLength),
	longID(MaxLength + 1),
}

// checkParseError checks the invariants of a *ParseError for input s.
func checkParseError(t *testing.T, s string, err error) {
	t.Helper()
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	require.GreaterOrEqual(t, pe.Offset, 0)
	require.LessOrEqual(t, pe.Offset, len(s))
	require.LessOrEqual(t, len(pe.Input), maxEchoedInput)
	require.True(t, strings.HasPrefix(s, pe.Input))
	require.NotEmpty(t, pe.Msg)
	require.True(t, strings.HasPrefix(err.Error(), "gts: invalid "))
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			checkParseError(t, s, err)
			require.False(t, valid(s))
			require.Panics(t, func() { MustParse(s) })
			if !strings.Contains(s, "*") {
				_, perr := ParsePattern(s)
				require.Error(t, perr)
			}
			return
		}
		require.True(t, valid(s))
		require.LessOrEqual(t, len(s), MaxLength)
		require.Equal(t, s, id.String())
		again, err := Parse(id.String())
		require.NoError(t, err)
		require.Equal(t, id, again)
		require.Equal(t, id, MustParse(s))

		// Segments re-assemble to the input.
		segs := id.Segments()
		require.NotEmpty(t, segs)
		parts := make([]string, len(segs))
		for i, seg := range segs {
			parts[i] = seg.String()
		}
		rebuilt := "gts." + strings.Join(parts, "~")
		if id.IsType() {
			rebuilt += "~"
		}
		require.Equal(t, s, rebuilt)

		// Family and MajorID are consistent.
		require.True(t, strings.HasPrefix(s, id.Family()))
		major := MustParse(id.MajorID())
		require.True(t, major.MajorOnly())
		require.Equal(t, id.Family(), major.Family())
		require.Equal(t, id.IsType(), major.IsType())

		// An id is a valid pattern that matches itself.
		p, err := ParsePattern(s)
		require.NoError(t, err)
		require.True(t, p.Match(s))
		require.True(t, MustParsePattern(id.MajorID()).Match(s))
		require.True(t, candidate(p, s))

		_, _ = EntrypointKind(id)
	})
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePattern(s)
		if err != nil {
			checkParseError(t, s, err)
			require.Panics(t, func() { MustParsePattern(s) })
			return
		}
		require.Equal(t, s, p.String())
		base := strings.TrimSuffix(s, "*")
		if base == s {
			require.True(t, p.Match(s))
		}
		for _, suffix := range []string{
			"", "~", "0~", "1~", "0", "10~", "01~", "1.2~", "v1~", "v1.2", "d.v1~", "c.d.v1~", "b.c.d.v1~",
			"a.b.c.d.v1~", "a.b.c.d.v1.0~a.b.c.d.v0", "~a.b.c.d.v1~", ".1~", ".1~a.b.c.d.v1~",
		} {
			for _, id := range []string{base + suffix, strings.TrimSuffix(base, ".") + suffix} {
				match := p.Match(id)
				require.Equal(t, modelMatch(s, id), match, "Match(%q, %q)", s, id)
				if !valid(id) {
					require.False(t, match)
					continue
				}
				cand := candidate(p, id)
				if match {
					require.True(t, cand, "%q matches %q but is not a candidate", id, s)
				}
				if p.Exact() {
					require.Equal(t, match, cand, "exact pattern %q, id %q", s, id)
				}
			}
		}
	})
}

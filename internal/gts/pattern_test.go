package gts

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsePatternValid(t *testing.T) {
	tests := []struct {
		in       string
		exact    []string
		prefixes []string
		isExact  bool
	}{
		{in: "gts.*", prefixes: []string{"gts."}, isExact: true},
		{in: "gts.x.*", prefixes: []string{"gts.x."}, isExact: true},
		{in: "gts.x.core.serverless.*", prefixes: []string{"gts.x.core.serverless."}, isExact: true},
		{in: "gts.x.core._.*", prefixes: []string{"gts.x.core._."}, isExact: true},
		{in: "gts.x.core.serverless.entrypoint.*", prefixes: []string{"gts.x.core.serverless.entrypoint."}, isExact: true},
		{in: EntrypointBase + "*", prefixes: []string{EntrypointBase}, isExact: true},
		{in: EntrypointBase + "x.core.*", prefixes: []string{EntrypointBase + "x.core."}, isExact: true},
		{in: calcV1_2 + "*", prefixes: []string{calcV1_2}, isExact: true},
		{
			in:       FunctionType + "vendor.app.billing.calculate_tax.v1.*",
			exact:    []string{calcV1},
			prefixes: []string{FunctionType + "vendor.app.billing.calculate_tax.v1."},
			isExact:  true,
		},
		{
			in:       "gts.x.core.events.type.v0.*",
			exact:    []string{"gts.x.core.events.type.v0~"},
			prefixes: []string{"gts.x.core.events.type.v0."},
			isExact:  true,
		},
		{in: calcV1_2, exact: []string{calcV1_2}, isExact: true},
		{
			in:       calcV1,
			exact:    []string{calcV1},
			prefixes: []string{FunctionType + "vendor.app.billing.calculate_tax.v1."},
		},
		{in: "gts.x.core.events.topic.v1~ven.app._.t.v1.2", exact: []string{"gts.x.core.events.topic.v1~ven.app._.t.v1.2"}, isExact: true},
		{
			in:       "gts.x.core.events.topic.v1~ven.app._.t.v1",
			exact:    []string{"gts.x.core.events.topic.v1~ven.app._.t.v1"},
			prefixes: []string{"gts.x.core.events.topic.v1~ven.app._.t.v1."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := ParsePattern(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.in, p.String())
			exact, prefixes := p.Candidates()
			require.Equal(t, tt.exact, exact)
			require.Equal(t, tt.prefixes, prefixes)
			require.Equal(t, tt.isExact, p.Exact())
			require.Equal(t, p, MustParsePattern(tt.in))
		})
	}
}

func TestParsePatternInvalid(t *testing.T) {
	tests := []struct {
		in  string
		off int
		msg string
	}{
		{"", 0, msgPrefix},
		{"*", 0, msgPrefix},
		{"gts*", 3, msgPrefix},
		{"g*", 1, msgPrefix},
		{"x.core.*", 0, msgPrefix},
		{"gts.**", 5, `pattern must contain at most one "*"`},
		{"gts.*.x.*", 8, `pattern must contain at most one "*"`},
		{"gts.x.*.core.events.type.v1~", 6, `"*" must be the last character`},
		{"gts.x.core.calc*", 15, `"*" must directly follow "gts.", "." or "~"`},
		{calcV1[:len(calcV1)-5] + "*", len(calcV1) - 5, `"*" must directly follow "gts.", "." or "~"`},
		{"gts.x.core.events.type.v*", 24, `"*" must directly follow "gts.", "." or "~"`},
		{"gts.x.core.events.type.v1*", 25, `"*" must directly follow "gts.", "." or "~"`},
		{"gts.x.core.events.type.v1.2.*", 27, msgVersionParts},
		{"gts.x.core.events.type.v1~~*", 26, msgEmptySegment},
		{"gts.~*", 4, msgEmptySegment},
		{"gts.X.*", 4, msgUppercase},
		{"gts.gts.*", 4, msgPrefixTwice},
		{"gts.x.core.events.type.v1~gts.*", 26, msgPrefixTwice},
		{"gts._.*", 4, msgPlaceholder},
		{"gts.x.core.events._.*", 18, msgPlaceholder},
		{"gts.x..*", 6, msgEmptyToken},
		{"gts.x.core.events.type.extra.*", 23, msgTooManyTokens},
		{"gts.x.core.events.type.v01.*", 24, msgLeadingZero},
		{"gts.x.core.events.type.V1.*", 23, msgUppercase},
		{"gts.x.core.type.v1~*", 16, msgTooFewTokens},
		{"gts.x.core.events.type.v01~", 24, msgLeadingZero},
		{"gts.x.core.events.type~", 22, msgMissingVersion},
		{"gts." + strings.Repeat("a", MaxLength) + ".*", MaxLength, msgTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := ParsePattern(tt.in)
			require.Error(t, err)
			require.Equal(t, Pattern{}, p)
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tt.msg, pe.Msg)
			require.Equal(t, tt.off, pe.Offset)
			require.Equal(t, "gts: invalid pattern at offset "+strconv.Itoa(tt.off)+": "+tt.msg, err.Error())
			require.Panics(t, func() { MustParsePattern(tt.in) })
		})
	}
}

func TestMatch(t *testing.T) {
	const (
		calcV1_0     = FunctionType + "vendor.app.billing.calculate_tax.v1.0~"
		calcV1_7     = FunctionType + "vendor.app.billing.calculate_tax.v1.7~"
		calcV10      = FunctionType + "vendor.app.billing.calculate_tax.v10~"
		calcV2       = FunctionType + "vendor.app.billing.calculate_tax.v2~"
		calcV1Inst   = FunctionType + "vendor.app.billing.calculate_tax.v1"
		calcV1_2Inst = FunctionType + "vendor.app.billing.calculate_tax.v1.2"
		calcV1Chain  = calcV1 + "vendor.app.billing.more.v1~"
		calcV1_2Chn  = calcV1_2 + "vendor.app.billing.more.v1~"
		other        = FunctionType + "vendor.app.billing.calculate_vat.v1~"
		workflow     = WorkflowType + "vendor.app.billing.calculate_tax.v1~"
	)
	ids := []string{
		calcV1, calcV1_0, calcV1_2, calcV1_7, calcV10, calcV2, calcV1Inst, calcV1_2Inst,
		calcV1Chain, calcV1_2Chn, other, workflow, EntrypointBase, FunctionType,
	}
	tests := []struct {
		pattern string
		matches []string // every other id in ids must not match
	}{
		{"gts.*", ids},
		{EntrypointBase + "*", ids},
		{FunctionType + "*", []string{
			calcV1, calcV1_0, calcV1_2, calcV1_7, calcV10, calcV2, calcV1Inst, calcV1_2Inst,
			calcV1Chain, calcV1_2Chn, other, FunctionType,
		}},
		{EntrypointBase + "x.core.serverless.workflow.*", []string{workflow}},
		{FunctionType + "vendor.app.billing.calculate_tax.*", []string{
			calcV1, calcV1_0, calcV1_2, calcV1_7, calcV10, calcV2, calcV1Inst, calcV1_2Inst, calcV1Chain, calcV1_2Chn,
		}},
		// vN.* matches every minor (and whatever is chained after it) plus the
		// major-only type id itself, but not v10.
		{FunctionType + "vendor.app.billing.calculate_tax.v1.*", []string{
			calcV1, calcV1_0, calcV1_2, calcV1_7, calcV1_2Inst, calcV1_2Chn,
		}},
		{calcV1 + "*", []string{calcV1, calcV1Chain}},
		{calcV1_2 + "*", []string{calcV1_2, calcV1_2Chn}},
		// Major-only ids match every minor of that major, with the same shape.
		{calcV1, []string{calcV1, calcV1_0, calcV1_2, calcV1_7}},
		{calcV1Inst, []string{calcV1Inst, calcV1_2Inst}},
		{FunctionType, []string{FunctionType}},
		// Ids with a minor match exactly.
		{calcV1_2, []string{calcV1_2}},
		{calcV1_2Inst, []string{calcV1_2Inst}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			p := MustParsePattern(tt.pattern)
			want := map[string]bool{}
			for _, id := range tt.matches {
				want[id] = true
			}
			for _, id := range ids {
				require.Equal(t, want[id], p.Match(id), "Match(%q)", id)
				require.True(t, !p.Match(id) || candidate(p, id), "Match(%q) but not a candidate", id)
				if p.Exact() {
					require.Equal(t, p.Match(id), candidate(p, id), "candidate(%q)", id)
				}
			}
		})
	}
}

func TestMatchRejectsInvalidIDs(t *testing.T) {
	tests := []struct{ pattern, id string }{
		{"gts.*", "gts."},
		{"gts.*", "gts.x.core.events.type.v1~~"},
		{"gts.*", "gts.x.core.events.type.v01~"},
		{"gts.*", "gts.x.core.events.type.v1~ "},
		{"gts.*", longID(MaxLength + 1)},
		{"gts.x.core.events.type.v1.*", "gts.x.core.events.type.v1.01~"},
		{"gts.x.core.events.type.v1.*", "gts.x.core.events.type.v1.x~"},
		{"gts.x.core.events.type.v1~", "gts.x.core.events.type.v1.01~"},
		{"gts.x.core.events.type.v1~", "gts.x.core.events.type.v1.~"},
		{"gts.x.core.events.type.v1~", "gts.x.core.events.type.v1.2"},
		{"gts.x.core.events.type.v1~", "gts.x.core.events.type.v1.2~~"},
		{"gts.x.core.events.type.v1~", "gts.x.core.events.type.v1.99999999999~"},
		{"gts.x.core.events.type.v1", "gts.x.core.events.type.v1.2~"},
		{"gts.x.core.events.type.v1", "gts.x.core.events.type.v1.2~a.b.c.d.v1"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.id, func(t *testing.T) {
			require.False(t, MustParsePattern(tt.pattern).Match(tt.id))
		})
	}
}

func TestMajorPatternLength(t *testing.T) {
	// A major-only pattern must not match a "minor" id that is too long.
	base := longID(MaxLength - 2) // ends with "v1~"
	p := MustParsePattern(base)
	require.True(t, p.Match(base[:len(base)-1]+".0~"))   // MaxLength - 0 bytes
	require.False(t, p.Match(base[:len(base)-1]+".10~")) // MaxLength + 1 bytes
}

func TestZeroPattern(t *testing.T) {
	var p Pattern
	require.Equal(t, "", p.String())
	require.False(t, p.Match(calcV1))
	exact, prefixes := p.Candidates()
	require.Empty(t, exact)
	require.Empty(t, prefixes)
	require.True(t, p.Exact())
}

func TestMatchAllocations(t *testing.T) {
	for _, s := range []string{"gts.*", calcV1, calcV1_2, FunctionType + "vendor.app.billing.calculate_tax.v1.*"} {
		p := MustParsePattern(s)
		allocs := testing.AllocsPerRun(100, func() {
			_ = p.Match(calcV1_2)
			_ = p.Match(calcV1_2 + "x")
		})
		require.Zero(t, allocs, s)
	}
}

// candidate reports whether id is selected by p.Candidates.
func candidate(p Pattern, id string) bool {
	exact, prefixes := p.Candidates()
	for _, e := range exact {
		if id == e {
			return true
		}
	}
	for _, pre := range prefixes {
		if strings.HasPrefix(id, pre) {
			return true
		}
	}
	return false
}

func BenchmarkMatch(b *testing.B) {
	p := MustParsePattern(FunctionType + "vendor.app.billing.*")
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Match(calcV1_2)
	}
}

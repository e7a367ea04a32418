package gts

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	calcV1   = FunctionType + "vendor.app.billing.calculate_tax.v1~"
	calcV1_2 = FunctionType + "vendor.app.billing.calculate_tax.v1.2~"
)

// longID returns a valid type id of exactly n bytes (n >= 15).
func longID(n int) string {
	// "gts." + name + ".b.c.d.v1~" with a variable-length vendor token.
	const tail = ".b.c.d.v1~"
	return "gts." + strings.Repeat("a", n-len("gts.")-len(tail)) + tail
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		segs   []Segment
		isType bool
	}{
		{
			name:   "single type",
			in:     "gts.x.core.events.type.v1~",
			segs:   []Segment{{Vendor: "x", Package: "core", Namespace: "events", Type: "type", Major: 1}},
			isType: true,
		},
		{
			name: "single instance",
			in:   "gts.x.core.events.type.v1.0",
			segs: []Segment{{Vendor: "x", Package: "core", Namespace: "events", Type: "type", Major: 1, HasMinor: true}},
		},
		{
			name:   "version zero",
			in:     "gts.x.core.events.type.v0~",
			segs:   []Segment{{Vendor: "x", Package: "core", Namespace: "events", Type: "type"}},
			isType: true,
		},
		{
			name:   "multi digit versions",
			in:     "gts.x.core.events.type.v10.12~",
			segs:   []Segment{{Vendor: "x", Package: "core", Namespace: "events", Type: "type", Major: 10, Minor: 12, HasMinor: true}},
			isType: true,
		},
		{
			name:   "max version",
			in:     "gts.x.core.events.type.v2147483647.2147483647~",
			segs:   []Segment{{Vendor: "x", Package: "core", Namespace: "events", Type: "type", Major: 2147483647, Minor: 2147483647, HasMinor: true}},
			isType: true,
		},
		{
			name:   "namespace placeholder and underscores",
			in:     "gts._x.my_pkg._.calculate_tax_.v1~",
			segs:   []Segment{{Vendor: "_x", Package: "my_pkg", Namespace: "_", Type: "calculate_tax_", Major: 1}},
			isType: true,
		},
		{
			name:   "digits inside tokens and version-like names",
			in:     "gts.v2.p0.n1.v3.v4~",
			segs:   []Segment{{Vendor: "v2", Package: "p0", Namespace: "n1", Type: "v3", Major: 4}},
			isType: true,
		},
		{
			name:   "gts as a non-vendor token",
			in:     "gts.x.gts.gts.gts.v1~",
			segs:   []Segment{{Vendor: "x", Package: "gts", Namespace: "gts", Type: "gts", Major: 1}},
			isType: true,
		},
		{
			name: "entrypoint chain",
			in:   calcV1,
			segs: []Segment{
				{Vendor: "x", Package: "core", Namespace: "serverless", Type: "entrypoint", Major: 1},
				{Vendor: "x", Package: "core", Namespace: "serverless", Type: "function", Major: 1},
				{Vendor: "vendor", Package: "app", Namespace: "billing", Type: "calculate_tax", Major: 1},
			},
			isType: true,
		},
		{
			name: "entrypoint chain with minor",
			in:   calcV1_2,
			segs: []Segment{
				{Vendor: "x", Package: "core", Namespace: "serverless", Type: "entrypoint", Major: 1},
				{Vendor: "x", Package: "core", Namespace: "serverless", Type: "function", Major: 1},
				{Vendor: "vendor", Package: "app", Namespace: "billing", Type: "calculate_tax", Major: 1, Minor: 2, HasMinor: true},
			},
			isType: true,
		},
		{
			name: "chained instance",
			in:   "gts.x.core.events.topic.v1~ven.app._.custom_event_topic.v1.2",
			segs: []Segment{
				{Vendor: "x", Package: "core", Namespace: "events", Type: "topic", Major: 1},
				{Vendor: "ven", Package: "app", Namespace: "_", Type: "custom_event_topic", Major: 1, Minor: 2, HasMinor: true},
			},
		},
		{
			name:   "exactly max length",
			in:     longID(MaxLength),
			segs:   []Segment{{Vendor: strings.Repeat("a", MaxLength-14), Package: "b", Namespace: "c", Type: "d", Major: 1}},
			isType: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := Parse(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.in, id.String())
			require.Equal(t, tt.segs, id.Segments())
			require.Equal(t, tt.segs[len(tt.segs)-1], id.Last())
			require.Equal(t, tt.isType, id.IsType())
			require.Equal(t, id, MustParse(tt.in))
			require.True(t, valid(tt.in))

			// Segments round-trip through Segment.String.
			var b strings.Builder
			b.WriteString("gts.")
			for i, s := range id.Segments() {
				if i > 0 {
					b.WriteByte('~')
				}
				b.WriteString(s.String())
			}
			if tt.isType {
				b.WriteByte('~')
			}
			require.Equal(t, tt.in, b.String())
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		off  int
		msg  string
	}{
		{"empty", "", 0, msgPrefix},
		{"no prefix", "x.core.events.type.v1~", 0, msgPrefix},
		{"uppercase prefix", "GTS.x.core.events.type.v1~", 0, msgPrefix},
		{"partial prefix", "gts:x.core.events.type.v1~", 3, msgPrefix},
		{"prefix only", "gts.", 4, msgNoSegment},
		{"leading space", " gts.x.core.events.type.v1~", 0, msgPrefix},
		{"trailing space", "gts.x.core.events.type.v1~ ", 26, msgInvalidChar + " ' '"},
		{"prefix twice at start", "gts.gts.x.core.events.v1~", 4, msgPrefixTwice},
		{"prefix twice in chain", "gts.x.core.events.type.v1~gts.x.core.events.v1~", 26, msgPrefixTwice},
		{"prefix twice in chain with 5 tokens", "gts.x.core.events.type.v1~gts.y.core.events.type.v1~", 26, msgPrefixTwice},
		{"uppercase vendor", "gts.X.core.events.type.v1~", 4, msgUppercase},
		{"uppercase inside token", "gts.x.core.events.tyPe.v1~", 20, msgUppercase},
		{"uppercase version", "gts.x.core.events.type.V1~", 23, msgUppercase},
		{"uppercase in later segment", "gts.x.core.events.type.v1~ven.App._.t.v1~", 30, msgUppercase},
		{"token starts with digit", "gts.x.1core.events.type.v1~", 6, msgDigitStart},
		{"hyphen", "gts.x.core.my-events.type.v1~", 13, msgInvalidChar + " '-'"},
		{"non-ascii", "gts.x.core.évents.type.v1~", 11, msgInvalidChar + " 'é'"},
		{"invalid utf8", "gts.x.core.\xffvents.type.v1~", 11, msgInvalidChar + ` '\xff'`},
		{"wildcard in id", "gts.x.core.*", 11, msgStar},
		{"wildcard in version", "gts.x.core.events.type.v1.*", 26, msgVersionNumber},
		{"placeholder as vendor", "gts._.core.events.type.v1~", 4, msgPlaceholder},
		{"placeholder as package", "gts.x._.events.type.v1~", 6, msgPlaceholder},
		{"placeholder as type", "gts.x.core.events._.v1~", 18, msgPlaceholder},
		{"double underscore namespace", "gts.x.core.__.type.v1~", 11, msgPlaceholder},
		{"empty token", "gts.x..events.type.v1~", 6, msgEmptyToken},
		{"leading empty token", "gts..x.core.events.type.v1~", 4, msgEmptyToken},
		{"empty version before tilde", "gts.x.core.events.type.~", 23, msgMissingVersion},
		{"too few tokens", "gts.x.core.type.v1~", 16, msgTooFewTokens},
		{"too few tokens with minor", "gts.x.core.type.v1.2~", 16, msgTooFewTokens},
		{"too many tokens", "gts.x.core.events.type.extra.v1~", 23, msgTooManyTokens},
		{"missing version", "gts.x.core.events.type~", 22, msgMissingVersion},
		{"missing version at end", "gts.x.core.events.type", 22, msgMissingVersion},
		{"missing version after dot", "gts.x.core.events.type.", 23, msgMissingVersion},
		{"incomplete segment", "gts.x.core~", 10, msgIncomplete},
		{"incomplete chained segment", "gts.x.core.events.type.v1~ven.app", 33, msgIncomplete},
		{"bare v", "gts.x.core.events.type.v~", 24, msgVersionNumber},
		{"version not v", "gts.x.core.events.type.1~", 23, msgExpectVersion},
		{"leading zero major", "gts.x.core.events.type.v01~", 24, msgLeadingZero},
		{"leading zero minor", "gts.x.core.events.type.v1.01~", 26, msgLeadingZero},
		{"double zero", "gts.x.core.events.type.v00~", 24, msgLeadingZero},
		{"empty minor", "gts.x.core.events.type.v1.~", 26, msgVersionNumber},
		{"minor at end", "gts.x.core.events.type.v1.", 26, msgVersionNumber},
		{"three part version", "gts.x.core.events.type.v1.2.3~", 27, msgVersionParts},
		{"junk after version", "gts.x.core.events.type.v1a~", 25, msgAfterVersion},
		{"uppercase after version", "gts.x.core.events.type.v1A~", 25, msgUppercase},
		{"major overflow", "gts.x.core.events.type.v2147483648~", 24, msgVersionTooLarge},
		{"minor overflow", "gts.x.core.events.type.v1.99999999999999999999~", 26, msgVersionTooLarge},
		{"empty segment", "gts.x.core.events.type.v1~~", 26, msgEmptySegment},
		{"empty segment in chain", "gts.x.core.events.type.v1~~ven.app._.t.v1~", 26, msgEmptySegment},
		{"leading tilde", "gts.~x.core.events.type.v1~", 4, msgEmptySegment},
		{"too long", longID(MaxLength + 1), MaxLength, msgTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := Parse(tt.in)
			require.Error(t, err)
			require.Equal(t, ID{}, id)
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tt.msg, pe.Msg)
			require.Equal(t, tt.off, pe.Offset)
			require.Equal(t, tt.in[:min(len(tt.in), 100)], pe.Input)
			require.Equal(t, "gts: invalid id at offset "+strconv.Itoa(tt.off)+": "+tt.msg, err.Error())
			require.False(t, valid(tt.in))
			require.Panics(t, func() { MustParse(tt.in) })
		})
	}
}

func TestParseErrorTruncatesInput(t *testing.T) {
	in := "gts." + strings.Repeat("A", 5000)
	_, err := Parse(in)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Input, 100)
	require.Equal(t, MaxLength, pe.Offset)
	require.NotContains(t, err.Error(), "AAA")

	// Truncation does not split a UTF-8 sequence.
	in = "gts.x" + strings.Repeat("é", 100)
	_, err = Parse(in)
	require.ErrorAs(t, err, &pe)
	require.Equal(t, in[:99], pe.Input)
	require.Equal(t, 5, pe.Offset)
}

func TestIDAccessors(t *testing.T) {
	tests := []struct {
		in        string
		majorOnly bool
		family    string
		majorID   string
	}{
		{
			in:      calcV1_2,
			family:  FunctionType + "vendor.app.billing.calculate_tax",
			majorID: calcV1,
		},
		{
			in:        calcV1,
			majorOnly: true,
			family:    FunctionType + "vendor.app.billing.calculate_tax",
			majorID:   calcV1,
		},
		{
			in:      "gts.x.core.events.type.v10.0~",
			family:  "gts.x.core.events.type",
			majorID: "gts.x.core.events.type.v10~",
		},
		{
			in:      "gts.x.core.events.topic.v1.3~ven.app._.topic.v2.3",
			family:  "gts.x.core.events.topic.v1.3~ven.app._.topic",
			majorID: "gts.x.core.events.topic.v1.3~ven.app._.topic.v2",
		},
		{
			in:        "gts.x.core.events.topic.v1.3~ven.app._.topic.v2",
			majorOnly: true,
			family:    "gts.x.core.events.topic.v1.3~ven.app._.topic",
			majorID:   "gts.x.core.events.topic.v1.3~ven.app._.topic.v2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			id := MustParse(tt.in)
			require.Equal(t, tt.majorOnly, id.MajorOnly())
			require.Equal(t, tt.family, id.Family())
			require.Equal(t, tt.majorID, id.MajorID())
			m := MustParse(id.MajorID())
			require.True(t, m.MajorOnly())
			require.Equal(t, id.Family(), m.Family())
			require.Equal(t, id.IsType(), m.IsType())
		})
	}
}

func TestSegmentsIsACopy(t *testing.T) {
	id := MustParse(calcV1_2)
	segs := id.Segments()
	segs[0].Vendor = "changed"
	require.Equal(t, "x", id.Segments()[0].Vendor)
}

func TestZeroID(t *testing.T) {
	var id ID
	require.Equal(t, "", id.String())
	require.Empty(t, id.Segments())
	require.Equal(t, Segment{}, id.Last())
	require.False(t, id.IsType())
	require.False(t, id.MajorOnly())
	require.Equal(t, "", id.Family())
	require.Equal(t, "", id.MajorID())
	_, err := EntrypointKind(id)
	require.ErrorIs(t, err, ErrNotEntrypoint)
}

func TestSegmentString(t *testing.T) {
	require.Equal(t, "vendor.app.billing.calculate_tax.v1.2",
		Segment{Vendor: "vendor", Package: "app", Namespace: "billing", Type: "calculate_tax", Major: 1, Minor: 2, HasMinor: true}.String())
	require.Equal(t, "a.b._.d.v0",
		Segment{Vendor: "a", Package: "b", Namespace: "_", Type: "d", Minor: 5}.String())
}

func TestParseErrorIsTyped(t *testing.T) {
	_, err := Parse("nope")
	var pe *ParseError
	require.True(t, errors.As(err, &pe))
}

func TestParseAllocations(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = Parse(calcV1_2)
	})
	require.LessOrEqual(t, allocs, 1.0)
	allocs = testing.AllocsPerRun(100, func() {
		_ = valid(calcV1_2)
	})
	require.Zero(t, allocs)
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Parse(calcV1_2)
	}
}

package gts

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// genSegment draws a segment from a deliberately tiny alphabet so that
// independently drawn identifiers collide often.
func genSegment(t *rapid.T) string {
	s := rapid.SampledFrom([]string{"x", "ven"}).Draw(t, "vendor") + "." +
		rapid.SampledFrom([]string{"core", "app"}).Draw(t, "package") + "." +
		rapid.SampledFrom([]string{"_", "serverless"}).Draw(t, "namespace") + "." +
		rapid.SampledFrom([]string{"f", "v1", "my_func"}).Draw(t, "type") + ".v" +
		strconv.Itoa(rapid.SampledFrom([]int{0, 1, 10}).Draw(t, "major"))
	if minor := rapid.IntRange(-1, 12).Draw(t, "minor"); minor >= 0 {
		s += "." + strconv.Itoa(minor)
	}
	return s
}

// genID draws a valid identifier.
func genID(t *rapid.T) string {
	n := rapid.IntRange(1, 4).Draw(t, "segments")
	segs := make([]string, n)
	for i := range segs {
		segs[i] = genSegment(t)
	}
	s := "gts." + strings.Join(segs, "~")
	if rapid.Bool().Draw(t, "type") {
		s += "~"
	}
	return s
}

// genPattern draws a valid pattern derived from a valid identifier.
func genPattern(t *rapid.T, id string) string {
	parsed := MustParse(id)
	switch rapid.IntRange(0, 3).Draw(t, "patternKind") {
	case 0: // the id itself
		return id
	case 1: // its major-only form
		return parsed.MajorID()
	case 2: // "...name.vN.*" for the last segment
		return strings.TrimSuffix(parsed.MajorID(), "~") + ".*"
	default: // cut at a token boundary and append "*"
		var cuts []int
		for j := len("gts."); j <= len(id); j++ {
			if c := id[j-1]; c == '.' || c == '~' {
				cuts = append(cuts, j)
			}
		}
		return id[:rapid.SampledFrom(cuts).Draw(t, "cut")] + "*"
	}
}

// genCandidate draws an identifier, often related to base, that may be invalid.
func genCandidate(t *rapid.T, base string) string {
	switch rapid.IntRange(0, 6).Draw(t, "candidateKind") {
	case 0:
		return base
	case 1: // a related id: same chain, different last version
		id := MustParse(base)
		s := id.Family() + ".v" + strconv.Itoa(rapid.SampledFrom([]int{0, 1, 10}).Draw(t, "major2"))
		if minor := rapid.IntRange(-1, 3).Draw(t, "minor2"); minor >= 0 {
			s += "." + strconv.Itoa(minor)
		}
		if rapid.Bool().Draw(t, "type2") {
			s += "~"
		}
		return s
	case 2: // derived from base
		return strings.TrimSuffix(base, "~") + "~" + genSegment(t) + rapid.SampledFrom([]string{"", "~"}).Draw(t, "end")
	case 3: // a truncated base
		return base[:rapid.IntRange(0, len(base)).Draw(t, "truncate")]
	case 4: // a corrupted base
		i := rapid.IntRange(0, len(base)).Draw(t, "at")
		junk := rapid.SampledFrom([]string{"~", ".", "0", "A", "*", "_", "v"}).Draw(t, "junk")
		return base[:i] + junk + base[i:]
	default:
		return genID(t)
	}
}

// modelMatch is a straightforward reference implementation of Match.
func modelMatch(pattern, id string) bool {
	got, err := Parse(id)
	if err != nil {
		return false
	}
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		if strings.HasPrefix(id, p) {
			return true
		}
		// "...name.vN.*" also matches "...name.vN~".
		last := p[strings.LastIndexAny(p, "~")+1:]
		last = strings.TrimPrefix(last, "gts.")
		parts := strings.Split(last, ".")
		return len(parts) == 6 && parts[5] == "" && id == strings.TrimSuffix(p, ".")+"~"
	}
	want := MustParse(pattern)
	if !want.MajorOnly() {
		return id == pattern
	}
	ws, gs := want.Segments(), got.Segments()
	if len(ws) != len(gs) || want.IsType() != got.IsType() {
		return false
	}
	n := len(ws) - 1
	for i := range n {
		if ws[i] != gs[i] {
			return false
		}
	}
	w, g := ws[n], gs[n]
	return w.Vendor == g.Vendor && w.Package == g.Package && w.Namespace == g.Namespace &&
		w.Type == g.Type && w.Major == g.Major
}

func TestPropertyCandidatesConsistentWithMatch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := genID(t)
		ps := genPattern(t, base)
		p, err := ParsePattern(ps)
		require.NoError(t, err, ps)

		id := genCandidate(t, base)
		match := p.Match(id)
		require.Equal(t, modelMatch(ps, id), match, "Match(%q, %q)", ps, id)
		if !valid(id) {
			require.False(t, match)
			return
		}
		cand := candidate(p, id)
		if match {
			require.True(t, cand, "%q matches %q but is not a candidate", id, ps)
		}
		if p.Exact() {
			require.Equal(t, match, cand, "exact pattern %q, id %q", ps, id)
		}
	})
}

func TestPropertyPatternMatchesItsBase(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := genID(t)
		ps := genPattern(t, base)
		p := MustParsePattern(ps)
		// Every pattern drawn from base matches base, except "vN.*" built
		// from a major-only instance id (which only covers "vN~" and minors).
		id := MustParse(base)
		if strings.HasSuffix(ps, ".*") && id.MajorOnly() && !id.IsType() && !strings.HasPrefix(base, strings.TrimSuffix(ps, "*")) {
			require.False(t, p.Match(base))
			return
		}
		require.True(t, p.Match(base), "%q should match %q", ps, base)
	})
}

package bench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// InstrShare is the instructions of one group of functions (InstrGroups) per request.
type InstrShare struct {
	Group      string  `json:"group"`
	PerRequest float64 `json:"instructions_per_request"`
	// OfBaseline is PerRequest ÷ the echo baseline's whole request.
	OfBaseline float64 `json:"of_baseline"`
}

// instrGroup names the functions whose symbol starts with one of prefixes.
type instrGroup struct {
	name     string
	prefixes []string
}

// InstrGroups split Lark's instructions by what executed them: each function's own instructions
// (exclusive counts, which callgrind gets right for Go; its inclusive ones are not, see
// docs/benchmarks.md) go to the first group whose prefix its symbol has, "other" when none.
var InstrGroups = []instrGroup{
	{"SQLite", []string{"modernc.org/"}}, // the store's engine, its libc and allocator
	{"database/sql", []string{"database/sql."}},
	{"encoding/json", []string{"encoding/json."}},
	{"HTTP", []string{"net/http.", "net.", "net/textproto.", "internal/poll.", "syscall.", "bufio.", "net/url."}},
	{"Starlark", []string{"github.com/larkrun/lark/third_party/", "go.starlark.net/"}},
	{"Lark", []string{"github.com/larkrun/lark/"}},
	{"Go runtime", []string{"runtime.", "internal/runtime/", "internal/bytealg.", "sync.", "internal/sync.", "memeqbody",
		"cmpbody", "aeshashbody", "gcWriteBarrier", "indexbytebody", "countbody"}},
}

// CallgrindSplit reads a callgrind profile (one event, Ir) and sums each function's own
// instructions into InstrGroups' groups, in their order, "other" last.
func CallgrindSplit(r io.Reader) (map[string]int64, error) {
	names := map[string]string{} // callgrind's compressed names: "(12)" → the symbol
	name := func(v string) string {
		id, rest, ok := strings.Cut(v, " ")
		if !strings.HasPrefix(id, "(") {
			return v
		}
		if ok {
			names[id] = rest
			return rest
		}
		return names[id]
	}
	out := map[string]int64{}
	group := "other"
	skip := false // the cost line after calls= is the call's inclusive cost
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "fn="):
			group = instrGroupOf(strings.TrimSuffix(name(line[3:]), "'2"))
		case strings.HasPrefix(line, "cfn="):
			name(line[4:])
		case strings.HasPrefix(line, "calls="):
			skip = true
		case line != "" && (line[0] == '+' || line[0] == '-' || line[0] == '*' || line[0] >= '0' && line[0] <= '9'):
			if skip {
				skip = false
				continue
			}
			f := strings.Fields(line)
			if len(f) < 2 {
				continue // a position without events: no cost
			}
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("callgrind profile: %q: %w", line, err)
			}
			out[group] += n
		}
	}
	return out, sc.Err()
}

// instrGroupOf is the group of the function named sym.
func instrGroupOf(sym string) string {
	for _, g := range InstrGroups {
		for _, p := range g.prefixes {
			if strings.HasPrefix(sym, p) {
				return g.name
			}
		}
	}
	return "other"
}

// instrShares are split's groups per request, in InstrGroups' order and "other" last, each
// beside the baseline's whole request.
func instrShares(split map[string]int64, requests int, baselinePerRequest float64) []InstrShare {
	if requests <= 0 {
		return nil
	}
	var out []InstrShare
	for _, g := range append(InstrGroups, instrGroup{name: "other"}) {
		s := InstrShare{Group: g.name, PerRequest: float64(split[g.name]) / float64(requests)}
		if baselinePerRequest > 0 {
			s.OfBaseline = s.PerRequest / baselinePerRequest
		}
		out = append(out, s)
	}
	return out
}

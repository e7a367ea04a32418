package api_test

import (
	"bufio"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/larkrun/lark/internal/api"
	"github.com/larkrun/lark/internal/workerhub"
	"github.com/larkrun/lark/internal/workerproto"
)

// docRouteRow is one row of the route table at the top of docs/api.md:
// | `METHOD` | `/path` [(no base path)] | role | section |
var docRouteRow = regexp.MustCompile("^\\| `([A-Z]+)` \\| `(/[^`]*)`( \\(no base path\\))? \\| [^|]+ \\| [^|]+ \\|$")

// routeKey normalises a route to "METHOD /path" with every path parameter (and its pattern)
// written {}: docs name them for the reader ({token_id}, {event_id}), the router for itself.
func routeKey(method, path string) string {
	var b strings.Builder
	depth := 0
	for _, c := range path {
		switch {
		case c == '{':
			if depth == 0 {
				b.WriteString("{}")
			}
			depth++
		case c == '}':
			depth--
		case depth == 0:
			b.WriteRune(c)
		}
	}
	return method + " " + b.String()
}

// documentedRoutes parses the route table of docs/api.md (the rows before §1).
func documentedRoutes(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var routes, bad []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## 1.") {
			break
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		m := docRouteRow.FindStringSubmatch(line)
		if m == nil {
			bad = append(bad, line)
			continue
		}
		path := api.BasePath + m[2]
		if m[3] != "" {
			path = m[2]
		}
		routes = append(routes, routeKey(m[1], path))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("docs/api.md route table rows not of the form | `METHOD` | `/path` [(no base path)] | role | section |:\n%s", strings.Join(bad, "\n"))
	}
	if len(routes) == 0 {
		t.Fatal("docs/api.md has no route table")
	}
	return routes
}

// TestRoutesDocumented compares the routes the real router serves (chi.Walk) with the route table
// of docs/api.md, both ways.
func TestRoutesDocumented(t *testing.T) {
	t.Parallel()
	ks, err := workerproto.ParseKeys([]string{"k:0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	// With a worker service, so that the worker route group is mounted too.
	h := api.New(api.Config{Metrics: http.NotFoundHandler(), WorkerHub: workerhub.New(workerhub.Config{}), WorkerKeys: ks}).Handler()
	mux, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("Handler() is a %T, not a chi router", h)
	}
	var served []string
	err = chi.Walk(mux, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, routeKey(method, route))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedRoutes(t)

	var missing, extra, dup []string
	for _, r := range served {
		if !slices.Contains(documented, r) {
			missing = append(missing, r)
		}
	}
	seen := map[string]bool{}
	for _, d := range documented {
		if seen[d] {
			dup = append(dup, d)
		}
		seen[d] = true
		if !slices.Contains(served, d) {
			extra = append(extra, d)
		}
	}
	var msg strings.Builder
	for _, d := range []struct {
		what   string
		routes []string
	}{{"served but not documented", missing}, {"documented but not served", extra}, {"documented twice", dup}} {
		if len(d.routes) > 0 {
			msg.WriteString("\n" + d.what + ":\n  " + strings.Join(d.routes, "\n  "))
		}
	}
	if msg.Len() > 0 {
		t.Errorf("docs/api.md's route table and the router disagree:%s", msg.String())
	}
}

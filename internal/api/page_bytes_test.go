package api_test

// List pages bounded by bytes (docs/api.md, "Page byte budget"): a page ends before the item that
// would take it over the budget, with a cursor that continues after its last item, and an item
// bigger than the budget comes alone.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/server"
)

// pageBudget is the byte budget of these tests' servers.
const pageBudget = 64 << 10

// pageWalk follows next_cursor from the first page of path?q and returns the pages read.
func pageWalk(t *testing.T, e *env, tok, path string, q url.Values) []*resp {
	t.Helper()
	var pages []*resp
	for {
		require.Less(t, len(pages), 100, "pagination does not end")
		r := e.expect(t, http.StatusOK, http.MethodGet, path+"?"+q.Encode(), tok, nil)
		pages = append(pages, r)
		pi := r.Body["page_info"].(obj)
		next, _ := pi["next_cursor"].(string)
		require.Equal(t, next != "", pi["has_more"], "has_more and next_cursor agree: %s", pi)
		if next == "" {
			return pages
		}
		q = cloneValues(q)
		q.Set("cursor", next)
	}
}

// itemBytes is the size of an item as the answer encodes it.
func itemBytes(t *testing.T, it obj) int {
	b, err := json.Marshal(it)
	require.NoError(t, err)
	return len(b)
}

func TestListPageByteBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxPageBytes = pageBudget })
	adm := invTenant(t, e, "acme")
	fn := e.registerActive(t, adm, invFn(t, "misc.bulky.v1~", "def main(ctx, input):\n    return {\"blob\": \"x\" * input.n}\n"))
	id := fn["entrypoint_id"].(string)
	// Ten results of 20 KB (three fit a page of 64 KiB, not four) and, in the middle, one of
	// 100 KB, bigger than the budget.
	sizes := []int{20000, 20000, 20000, 20000, 100000, 20000, 20000, 20000, 20000, 20000, 20000}
	want := map[string]int{}
	for _, n := range sizes {
		rec := invSync(t, e, adm, id, obj{"n": n}, nil)
		want[invID(rec)] = n
	}

	pages := pageWalk(t, e, adm, invPath, url.Values{"limit": {"200"}})
	seen := map[string]int{}
	for i, p := range pages {
		items := p.items()
		require.NotEmpty(t, items, "page %d", i)
		total := 0
		for _, it := range items {
			seen[invID(it)]++
			n := want[invID(it)]
			require.Equal(t, n, len(it["result"].(obj)["blob"].(string)), "the item keeps its whole result")
			require.Contains(t, it, "params", "the item keeps 000's full InvocationRecord")
			total += itemBytes(t, it)
			if n > pageBudget {
				require.Equal(t, 1, len(items), "an item bigger than the budget comes alone: page %d", i)
			}
		}
		require.Equal(t, float64(200), p.Body["page_info"].(obj)["limit"])
		if len(items) > 1 {
			require.LessOrEqual(t, total, pageBudget+len(items)*1024, "page %d holds %d bytes of items", i, total)
		}
	}
	for id := range want {
		require.Equal(t, 1, seen[id], "invocation %s is listed exactly once across the pages", id)
	}
	require.Len(t, seen, len(want))
	// 10 × 20 KB three to a page, and the big one alone: at least five pages, none over 3 items.
	require.GreaterOrEqual(t, len(pages), 5, "the byte budget ends the pages early")

	// prev_cursor of the last page gives the page before it back, whole; walking back from the
	// last page reaches every invocation exactly once too, in the same order.
	last := pages[len(pages)-1]
	prev := last.Body["page_info"].(obj)["prev_cursor"].(string)
	back := e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+url.Values{"limit": {"200"}, "cursor": {prev}}.Encode(), adm, nil)
	require.Equal(t, ids2(pages[len(pages)-2].items()), ids2(back.items()))
	var forward, backward []string
	for _, p := range pages {
		forward = append(forward, ids2(p.items())...)
	}
	p := last
	for range 100 {
		backward = append(ids2(p.items()), backward...)
		prev, _ := p.Body["page_info"].(obj)["prev_cursor"].(string)
		if prev == "" {
			break
		}
		p = e.expect(t, http.StatusOK, http.MethodGet, invPath+"?"+url.Values{"limit": {"200"}, "cursor": {prev}}.Encode(), adm, nil)
	}
	require.Equal(t, forward, backward)
}

// ids2 is the invocation_id of each item.
func ids2(items []obj) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, invID(it))
	}
	return out
}

func TestTimelinePageByteBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxPageBytes = pageBudget })
	adm := invTenant(t, e, "acme")
	// 40 log lines of 10 KB (six fit a page) and a result of 100 KB, bigger than the budget.
	fn := e.registerActive(t, adm, invFn(t, "misc.loud.v1~", `
def main(ctx, input):
    for i in range(40):
        print("%d " % i + "y" * 10000)
    return {"blob": "x" * 100000}
`))
	id := invID(invSync(t, e, adm, fn["entrypoint_id"].(string), obj{}, nil))
	path := invPath + "/" + id + "/timeline"

	pages := pageWalk(t, e, adm, path, url.Values{"limit": {"200"}})
	var all []obj
	for i, p := range pages {
		items := p.items()
		require.NotEmpty(t, items, "page %d", i)
		require.Equal(t, id, p.Body["invocation_id"])
		require.Equal(t, "succeeded", p.Body["status"])
		total := 0 // the entries' stored data (details): what the budget counts
		for _, it := range items {
			total += itemBytes(t, obj{"d": it["details"]})
			if it["event_type"] == "succeeded" {
				require.Equal(t, 1, len(items), "the result entry, bigger than the budget, comes alone")
			}
		}
		if len(items) > 1 {
			require.LessOrEqual(t, total, pageBudget+len(items)*1024, "page %d holds %d bytes of entries", i, total)
		}
		all = append(all, items...)
	}
	requireInOrder(t, all, 1, nil) // every entry exactly once, in seq order
	require.Equal(t, 43, len(all)) // created, started, 40 log lines, succeeded
	require.GreaterOrEqual(t, len(pages), 7, "the byte budget ends the pages early")
	require.True(t, strings.HasPrefix(all[41]["message"].(string), "39 "))

	// Walking back with prev_cursor from the last page reaches every entry exactly once too.
	var back []obj
	p := pages[len(pages)-1]
	for range 100 {
		back = append(p.items(), back...)
		prev, _ := p.Body["page_info"].(obj)["prev_cursor"].(string)
		if prev == "" {
			break
		}
		p = e.expect(t, http.StatusOK, http.MethodGet, path+"?"+url.Values{"limit": {"200"}, "cursor": {prev}}.Encode(), adm, nil)
		require.NotEmpty(t, p.items())
	}
	requireInOrder(t, back, 1, nil)
	require.Equal(t, 43, len(back))
}

package dag

import (
	"fmt"
	"sort"
	"strings"
)

// graph is a spec's tasks by id, with the edges of depends_on that name a task of the DAG.
type graph struct {
	index map[string]int      // task id -> position in Spec.Tasks (the first, for a repeated id)
	up    map[string][]string // task id -> the tasks it depends on, sorted, without repeats
}

// newGraph indexes the tasks; unknown and repeated ids are left out (graphIssues reports them).
func newGraph(tasks []Task) graph {
	g := graph{index: map[string]int{}, up: map[string][]string{}}
	for i, t := range tasks {
		if _, dup := g.index[t.ID]; !dup && t.ID != "" {
			g.index[t.ID] = i
		}
	}
	for id, i := range g.index {
		seen := map[string]bool{}
		for _, d := range tasks[i].DependsOn {
			if _, known := g.index[d]; known && !seen[d] {
				seen[d] = true
				g.up[id] = append(g.up[id], d)
			}
		}
		sort.Strings(g.up[id])
	}
	return g
}

// graphIssues checks what needs the whole spec: repeated ids and asset keys, depends_on entries,
// cycles and the placeholders of each task's params.
func graphIssues(s Spec) []Issue {
	var w walker
	g := newGraph(s.Tasks)
	assets := map[string]int{}
	for i, t := range s.Tasks {
		path := index(Root+".spec.tasks", i)
		if j := g.index[t.ID]; j != i && t.ID != "" {
			w.add(path+".id", CodeDuplicate, "duplicate task id %q (already at tasks[%d])", t.ID, j)
		}
		if j, dup := assets[t.AssetKey]; dup && t.AssetKey != "" {
			w.add(path+".asset_key", CodeDuplicate, "asset %q is already materialized by tasks[%d]; a DAG materializes each asset once", t.AssetKey, j)
		} else {
			assets[t.AssetKey] = i
		}
		seen := map[string]int{}
		for k, d := range t.DependsOn {
			p := index(path+".depends_on", k)
			if d == "" {
				continue // not a string: reported when read
			}
			if j, dup := seen[d]; dup {
				w.add(p, CodeDuplicate, "%q is already listed (depends_on[%d])", d, j)
				continue
			}
			seen[d] = k
			if _, known := g.index[d]; !known {
				w.add(p, CodeUnknownTask, "unknown task %q: depends_on names tasks of this DAG", d)
			}
		}
	}
	w.issues = append(w.issues, g.cycleIssues(s.Tasks)...)
	return append(w.issues, g.refIssues(s)...)
}

// cycleIssues reports each cycle of the graph once, in order from its least task id along the
// direction work flows ("a -> b -> c -> a": b depends on a, c on b, a on c), at the depends_on
// entry of its first task that closes it.
func (g graph) cycleIssues(tasks []Task) []Issue {
	rest := g.unordered()
	var issues []Issue
	reported := map[string]bool{}
	for _, start := range rest {
		if reported[start] {
			continue
		}
		cycle := g.findCycle(start, rest)
		if cycle == nil || anyOf(cycle, reported) {
			continue
		}
		for _, id := range cycle {
			reported[id] = true
		}
		first, closer := cycle[0], cycle[len(cycle)-1]
		i := g.index[first]
		k := indexOf(tasks[i].DependsOn, closer)
		issues = append(issues, Issue{Path: index(index(Root+".spec.tasks", i)+".depends_on", k), Code: CodeCycle,
			Message: fmt.Sprintf("depends_on forms a cycle: %s -> %s", strings.Join(cycle, " -> "), first)})
	}
	return issues
}

// unordered returns, sorted, the tasks Kahn's algorithm cannot order: those on a cycle or
// downstream of one.
func (g graph) unordered() []string {
	order := g.topo()
	done := map[string]bool{}
	for _, id := range order {
		done[id] = true
	}
	var rest []string
	for id := range g.index {
		if !done[id] {
			rest = append(rest, id)
		}
	}
	sort.Strings(rest)
	return rest
}

// findCycle walks upstream from start through the unordered tasks (each has an unordered
// dependency), always to the least, until a task repeats; it returns that cycle in the direction
// work flows, starting at its least id.
func (g graph) findCycle(start string, rest []string) []string {
	in := map[string]bool{}
	for _, id := range rest {
		in[id] = true
	}
	pos := map[string]int{}
	var walk []string
	for cur := start; ; {
		if p, seen := pos[cur]; seen {
			return rotate(reverse(walk[p:]))
		}
		pos[cur] = len(walk)
		walk = append(walk, cur)
		next := ""
		for _, d := range g.up[cur] {
			if in[d] {
				next = d
				break
			}
		}
		if next == "" {
			return nil // cannot happen: an unordered task has an unordered dependency
		}
		cur = next
	}
}

// topo is Kahn's algorithm with ties broken by task id: the tasks in a stable topological order.
// Tasks on or after a cycle are left out.
func (g graph) topo() []string {
	indeg := map[string]int{}
	down := map[string][]string{}
	for id := range g.index {
		indeg[id] = len(g.up[id])
		for _, u := range g.up[id] {
			down[u] = append(down[u], id)
		}
	}
	var ready []string
	for id, n := range indeg {
		if n == 0 {
			ready = append(ready, id)
		}
	}
	sort.Strings(ready)
	order := make([]string, 0, len(g.index))
	for len(ready) > 0 {
		id := ready[0]
		ready = ready[1:]
		order = append(order, id)
		for _, d := range down[id] {
			if indeg[d]--; indeg[d] == 0 {
				i := sort.SearchStrings(ready, d)
				ready = append(ready[:i], append([]string{d}, ready[i:]...)...)
			}
		}
	}
	return order
}

// ancestors returns the tasks id depends on, directly or not.
func (g graph) ancestors(id string) map[string]bool {
	out := map[string]bool{}
	stack := append([]string(nil), g.up[id]...)
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !out[u] {
			out[u] = true
			stack = append(stack, g.up[u]...)
		}
	}
	return out
}

// refIssues checks each placeholder of each task's params: partition_key only in a partitioned
// DAG, outputs only of the task's ancestors.
func (g graph) refIssues(s Spec) []Issue {
	var w walker
	for i, t := range s.Tasks {
		v, err := decodeValue(t.Params)
		if err != nil {
			continue // params were reported when read
		}
		anc := g.ancestors(t.ID)
		walkStrings(v, index(Root+".spec.tasks", i)+".params", func(path, str string, key bool) {
			tpl, _ := parseTemplate(str)
			for _, r := range tpl.refs() {
				switch _, known := g.index[r.task]; {
				case r.partition && s.Partitioning == nil:
					w.add(path, CodeTemplate, "%s: the DAG has no partitioning", r.text)
				case r.partition:
				case !known:
					w.add(path, CodeUnknownTask, "%s: unknown task %q", r.text, r.task)
				case !anc[r.task]:
					w.add(path, CodeTemplate, "%s: task %q is not upstream of %q; a task reads only the outputs of tasks it depends on (add %q to depends_on)", r.text, r.task, t.ID, r.task)
				}
			}
		})
	}
	return w.issues
}

func anyOf(ids []string, set map[string]bool) bool {
	for _, id := range ids {
		if set[id] {
			return true
		}
	}
	return false
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[len(s)-1-i] = x
	}
	return out
}

// rotate returns the cycle s starting at its least element.
func rotate(s []string) []string {
	m := 0
	for i, x := range s {
		if x < s[m] {
			m = i
		}
	}
	return append(append([]string(nil), s[m:]...), s[:m]...)
}

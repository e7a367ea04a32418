package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/larkrun/lark/pkg/larkclient"
)

// dagCmd is `lark dag`: plan a DAG's run, list a run's tasks (docs/dag.md).
func dagCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "dag", Short: "Plan DAG runs and list a run's tasks"}
	c.AddCommand(dagPlanCmd(g), dagTasksCmd(g))
	return c
}

func dagPlanCmd(g *globals) *cobra.Command {
	var partition string
	c := &cobra.Command{Use: "plan ENTRYPOINT [--partition KEY]", Short: "Show what a run of a DAG for a partition would do now",
		Long: `Plan a run of the DAG ENTRYPOINT (a GTS id, an ep_ id or a short name, as for lark invoke) for
the partition KEY (POST /entrypoints/{id}:plan): its tasks in run order, each with the exact
version of its function it would run, and the plan's fingerprint. --partition is required for a
partitioned DAG and refused for another. -o json prints the API's answer.`,
		Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			ctx := ctxOf(c)
			cl, err := g.client()
			if err != nil {
				return err
			}
			ep, err := resolveEntrypoint(ctx, cl, a[0])
			if err != nil {
				return err
			}
			p, err := cl.PlanDAG(ctx, ep.EntrypointID, partition)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.out, p.JSON)
			}
			return g.printPlan(ep.EntrypointID, p)
		}}
	c.Flags().StringVar(&partition, "partition", "", "the partition key (2026-03-01 for a daily DAG)")
	return c
}

// printPlan prints a plan as a table of its tasks, then its fingerprint.
func (g *globals) printPlan(id string, p *larkclient.DAGPlan) error {
	fmt.Fprintf(g.out, "DAG %s", shortID(id))
	if p.Plan.PartitionKey != "" {
		fmt.Fprintf(g.out, ", partition %s", p.Plan.PartitionKey)
	}
	fmt.Fprintf(g.out, ": %d tasks\n", len(p.Plan.Tasks))
	t := newTable(g.out, "#", "TASK", "FUNCTION", "VERSION", "DEPENDS ON", "ASSET", "CHECKS", "PARAMS")
	for i, task := range p.Plan.Tasks {
		checks := strconv.Itoa(len(task.Checks))
		if task.QuarantineEnabled {
			checks += " (quarantine)"
		}
		t.row(strconv.Itoa(i+1), task.ID, shortID(task.EntrypointID), task.Version, orDash(strings.Join(task.DependsOn, ",")),
			orDash(task.AssetKey), checks, compact(task.Params, 60))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "fingerprint %s\n", p.Fingerprint)
	return nil
}

func dagTasksCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "tasks RUN_ID", Short: "List the tasks of a DAG run with their states",
		Long: `List the tasks of the DAG run RUN_ID (its invocation id; GET /invocations/{id}/tasks) in plan
order: state, attempts, child invocation, gating decision, materialization, and why a task failed
or was skipped. -o json prints one task per line.`,
		Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			ts, err := cl.DAGRunTasks(ctxOf(c), a[0])
			if err != nil {
				return err
			}
			if g.output == "json" {
				for _, raw := range extractTasks(ts) {
					if err := printJSONLine(g.out, raw); err != nil {
						return err
					}
				}
				return nil
			}
			t := newTable(g.out, "TASK", "STATE", "ATTEMPTS", "INVOCATION", "GATING", "MATERIALIZATION", "REASON")
			for _, task := range ts.Items {
				t.row(task.TaskID, task.State, strconv.Itoa(task.Attempts), orDash(task.InvocationID), orDash(task.GatingDecision),
					orDash(task.MaterializationID), taskReason(task))
			}
			return t.flush()
		}}
}

// extractTasks returns each task of the answer as the server sent it.
func extractTasks(ts *larkclient.DAGTasks) []json.RawMessage {
	var v struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(ts.JSON, &v); err != nil {
		return nil
	}
	return v.Items
}

// taskReason is why a task ended as it did: its reason, else its error's message ("-": none).
func taskReason(t larkclient.DAGTask) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Error != nil:
		return t.Error.Message
	}
	return "-"
}

package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/larkrun/lark/internal/eventfilter"
)

// EventTypeID is the type of the events scenario's events.
const EventTypeID = "gts.x.core.events.event.v1~lark.bench.events.tick.v1~"

// EventsDetail is the events scenario's breakdown.
type EventsDetail struct {
	N        int `json:"n"`
	Triggers int `json:"triggers"`
	Clients  int `json:"clients"`
	// Accepted: N POST /events (202), each matched against every trigger's filter in the
	// publishing transaction.
	AcceptS    float64 `json:"accept_s"`
	AcceptRate float64 `json:"accepted_per_s"`
	Accept     Summary `json:"accept_latency"`
	// Delivered: from the first publication until every invocation the events started has ended.
	DeliverS    float64 `json:"deliver_s"`
	DeliverRate float64 `json:"delivered_per_s"`
	// Triggered is the sum of the triggers' executions_triggered counters afterwards (N when nothing was
	// lost or doubled: each event matches exactly one trigger).
	Triggered int64 `json:"triggered"`
	// CELMicrosPerEvent is the CPU time of evaluating the Triggers filters against one event, in
	// this process (the same filters and payload), in microseconds; CELNanosPerFilter per filter.
	CELMicrosPerEvent float64 `json:"cel_us_per_event"`
	CELNanosPerFilter float64 `json:"cel_ns_per_filter"`
}

// eventFilter is trigger i's filter: every event matches exactly one of the triggers.
func eventFilter(i int) string { return fmt.Sprintf(`payload.k == "k%d" && payload.n >= 0`, i) }

func eventBody(i, triggers int) []byte {
	return fmt.Appendf(nil, `{"event_type_id":%q,"source":"bench","payload":{"k":"k%d","n":%d,"order":{"total":%d,"currency":"EUR"}}}`,
		EventTypeID, i%triggers, i, i%1000)
}

// Events publishes EventsN events to EventsTriggers triggers with CEL filters, each event
// matching one of them and starting the no-op function; it reports how fast events are accepted
// and delivered (their invocations ended), the CEL cost per event, and compares acceptance with
// the raw insert rate of the same rows (an event row and the invocation row it starts) in the
// same SQLite file.
func (r *Runner) Events(ctx context.Context) Scenario {
	o := r.Opts
	s := Scenario{Name: "events", Status: StatusOK, Unit: "events/s"}
	d := &EventsDetail{N: o.EventsN, Triggers: o.EventsTriggers, Clients: o.AsyncClients}
	s.Events = d
	r.logf("events: %d events, %d triggers with CEL filters, %d clients", d.N, d.Triggers, d.Clients)
	l, err := r.startLark(ctx, "events", o.AsyncClients)
	if err != nil {
		return failed(s, err)
	}
	defer l.discard()
	s.Profile = l.profile
	if err := registerNoop(ctx, l); err != nil {
		return failed(s, err)
	}
	ids := make([]string, d.Triggers)
	for i := range ids {
		body, err := json.Marshal(map[string]any{"event_type_id": EventTypeID, "entrypoint_id": NoopID,
			"event_filter_query": eventFilter(i)})
		if err != nil {
			return failed(s, err)
		}
		_, b, err := l.api.Call(ctx, http.MethodPost, "/triggers", l.token, body, http.StatusCreated)
		if err != nil {
			return failed(s, fmt.Errorf("create trigger %d: %w", i, err))
		}
		var t struct {
			ID string `json:"trigger_id"`
		}
		if err := json.Unmarshal(b, &t); err != nil || t.ID == "" {
			return failed(s, fmt.Errorf("create trigger %d: no trigger_id in %s", i, b))
		}
		ids[i] = t.ID
	}

	win := openWindow(l)
	first := time.Now()
	var next atomic.Int64
	res := Load{Workers: d.Clients, Count: int64(d.N), Do: func(ctx context.Context) error {
		i := int(next.Add(1) - 1)
		_, _, err := l.api.Call(ctx, http.MethodPost, "/events", l.token, eventBody(i, d.Triggers), http.StatusAccepted)
		return err
	}}.Run(ctx)
	d.AcceptS, d.AcceptRate, d.Accept = res.WindowS, res.Throughput, res.Latency
	s.Latency, s.Throughput = &d.Accept, res.Throughput
	s.Errors, s.ErrorSamples = res.Errors, res.ErrorSamples
	r.logf("events: accepted in %.1f s (%s); waiting for the invocations", d.AcceptS, rate(d.AcceptRate, "events/s"))
	done, err := r.waitBurnDown(ctx, l, "", first.Add(BurnDownLimit(d.N, res.Throughput, o.BurnDownMax)))
	win.close()
	s.ClientCPUS = win.clientCPU()
	s.CPU, s.MachineLoad = win.perUnit("event", res.Requests), win.machineLoad()
	if err != nil {
		s = failed(s, fmt.Errorf("delivery: %w", err))
	} else {
		d.DeliverS = done.Sub(first).Seconds()
		d.DeliverRate = float64(res.Requests) / d.DeliverS
		if d.Triggered, err = triggeredTotal(ctx, l, ids); err != nil {
			s = failed(s, err)
		} else if d.Triggered != res.Requests {
			s = failed(s, fmt.Errorf("%d events accepted but the triggers started %d invocations", res.Requests, d.Triggered))
		}
		if bad, err := r.notSucceeded(ctx, l); err != nil {
			s = failed(s, fmt.Errorf("check outcomes: %w", err))
		} else if len(bad) > 0 {
			s = failed(s, fmt.Errorf("invocations that did not succeed, e.g. %v", bad))
		}
	}
	usage, stopErr := l.stop()
	usage.CPUWindowS, _ = win.serverCPU()
	s.Process = &usage
	if res.Errors > 0 {
		s = failed(s, fmt.Errorf("%d of %d publications failed", res.Errors, d.N))
	}
	if stopErr != nil {
		s = failed(s, stopErr)
	}
	if d.CELMicrosPerEvent, err = celCost(d.Triggers, 2000); err != nil {
		s = failed(s, err)
	} else {
		d.CELNanosPerFilter = d.CELMicrosPerEvent * 1000 / float64(d.Triggers)
	}
	r.logf("events: delivered %s; CEL %.1f µs per event over %d filters", rate(d.DeliverRate, "events/s"), d.CELMicrosPerEvent, d.Triggers)

	bl := &Baseline{Name: "raw SQLite inserts (event + invocation row)", Unit: "events/s"}
	s.Baseline = bl
	s.Result = ResultNA // the issue asks for the figures and the ratio; it sets no target
	if o.Store != "sqlite" || stopErr != nil || res.Requests == 0 {
		return s
	}
	cpu0 := selfCPU()
	raw, err := RawEventInserts(ctx, filepath.Join(l.dataDir, "lark.db"), o.SQLiteSynchronous, d.N, 1000)
	if err != nil {
		return failed(s, err)
	}
	bl.Throughput = raw
	bl.CPUPerUnitMs = (selfCPU() - cpu0) * 1000 / float64(d.N)
	s.CPU.Compare(bl.CPUPerUnitMs, "this process's CPU while it inserted the rows, SQLite running in it")
	s.Ratio = s.Throughput / raw
	r.logf("events: raw %s, ratio %.3f", rate(raw, "events/s"), s.Ratio)
	return s
}

// triggeredTotal sums the triggers' executions_triggered counters over the last day.
func triggeredTotal(ctx context.Context, l *lark, ids []string) (int64, error) {
	var total int64
	for _, id := range ids {
		_, b, err := l.api.Call(ctx, http.MethodGet, "/triggers/"+id+"/metrics?window=24h", l.token, nil, http.StatusOK)
		if err != nil {
			return 0, fmt.Errorf("trigger metrics: %w", err)
		}
		var m struct {
			Metrics struct {
				Triggered *int64 `json:"executions_triggered"`
			} `json:"metrics"`
		}
		if err := json.Unmarshal(b, &m); err != nil || m.Metrics.Triggered == nil {
			return 0, fmt.Errorf("trigger metrics: no executions_triggered in %s", b)
		}
		total += *m.Metrics.Triggered
	}
	return total, nil
}

// celCost is the CPU time, in microseconds, of matching one event against n filters (compiled
// once, as the server caches them), averaged over rounds events.
func celCost(n, rounds int) (float64, error) {
	fs := make([]*eventfilter.Filter, n)
	for i := range fs {
		f, err := eventfilter.Compile(eventFilter(i))
		if err != nil {
			return 0, fmt.Errorf("compile filter %d: %w", i, err)
		}
		fs[i] = f
	}
	var payload map[string]any
	if err := json.Unmarshal([]byte(`{"k":"k7","n":7,"order":{"total":7,"currency":"EUR"}}`), &payload); err != nil {
		return 0, err
	}
	ev := eventfilter.Event{ID: "evt_1", TypeID: EventTypeID, Source: "bench", Payload: payload}
	c0 := selfCPU()
	matched := 0
	for range rounds {
		for _, f := range fs {
			ok, err := f.Match(ev)
			if err != nil {
				return 0, err
			}
			if ok {
				matched++
			}
		}
	}
	if matched != rounds {
		return 0, fmt.Errorf("CEL cost: %d matches over %d events, want one per event", matched, rounds)
	}
	return (selfCPU() - c0) * 1e6 / float64(rounds), nil
}

// RawEventInserts writes n event rows (copies of a real row of the events table) and n
// invocation rows (copies of a real invocation record) into scratch tables of the SQLite database
// at path, batch pairs per transaction, and returns the pairs written per second.
func RawEventInserts(ctx context.Context, path, synchronous string, n, batch int) (float64, error) {
	db, err := OpenSQLite(ctx, path, synchronous)
	if err != nil {
		return 0, fmt.Errorf("raw baseline: open %s: %w", path, err)
	}
	defer db.Close()
	record, err := sampleRecord(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("raw baseline: %w", err)
	}
	var doc string
	if err := db.QueryRowContext(ctx, `SELECT doc FROM events LIMIT 1`).Scan(&doc); err != nil {
		return 0, fmt.Errorf("raw baseline: a sample event: %w", err)
	}
	stmts := []string{
		`DROP TABLE IF EXISTS lark_bench_raw_events`, `DROP TABLE IF EXISTS lark_bench_raw_invocations`,
		// The events table's shape and indexes.
		`CREATE TABLE lark_bench_raw_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL,
  tenant_id TEXT NOT NULL, event_type_id TEXT NOT NULL, source TEXT NOT NULL, subject TEXT NOT NULL,
  received_at TEXT NOT NULL, doc TEXT NOT NULL, UNIQUE (tenant_id, id)) STRICT`,
		`CREATE INDEX lark_bench_raw_events_type ON lark_bench_raw_events (tenant_id, event_type_id, received_at)`,
		`CREATE INDEX lark_bench_raw_events_time ON lark_bench_raw_events (tenant_id, received_at)`,
		`CREATE TABLE lark_bench_raw_invocations (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, status TEXT NOT NULL,
  record TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL) STRICT`,
		`CREATE INDEX lark_bench_raw_invocations_status ON lark_bench_raw_invocations (tenant_id, status)`,
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return 0, err
		}
	}
	defer func() {
		for _, q := range stmts[:2] {
			_, _ = db.ExecContext(context.Background(), q)
		}
	}()
	start := time.Now()
	for lo := 0; lo < n; lo += batch {
		if err := rawEventBatch(ctx, db, lo, min(lo+batch, n), doc, record); err != nil {
			return 0, fmt.Errorf("raw baseline: %w", err)
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func rawEventBatch(ctx context.Context, db *sql.DB, lo, hi int, doc, record string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for i := lo; i < hi; i++ {
		now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
		if _, err := tx.ExecContext(ctx, `INSERT INTO lark_bench_raw_events (id, tenant_id, event_type_id, source, subject, received_at, doc) VALUES (?, ?, ?, 'bench', '', ?, ?)`,
			fmt.Sprintf("evt_%032x", i), BenchTenant, EventTypeID, now, doc); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO lark_bench_raw_invocations VALUES (?, ?, 'queued', ?, ?, ?)`,
			fmt.Sprintf("inv_%032x", i), BenchTenant, record, now, now); err != nil {
			return err
		}
	}
	return tx.Commit()
}

package workerhub

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/workerproto"
)

// Defaults of the workers' records (docs/workers.md, "Seeing the workers").
const (
	// DefaultRecordEvery is how often a node writes the workers it saw since its last write (so at
	// most one write per worker and node per interval, whatever the polls and heartbeats).
	DefaultRecordEvery = 10 * time.Second
	// OnlineWindow is how recently a worker must have been seen to be online.
	OnlineWindow = 30 * time.Second
)

// WorkerStore is what the service records the workers it sees in and lists them from (store.Store
// has it).
type WorkerStore interface {
	store.WorkerReader
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// sighting is what the node knows of one worker since it started: its key, capacity and version as
// its last poll said, when it saw it first and last, how many polls it has open, and whether it
// was seen since the last write.
type sighting struct {
	keyID       string
	capacity    int
	version     string
	first, last time.Time
	polling     int
	dirty       bool
}

// see notes a request of worker id at now, a poll's what it says of itself; s.mu is held.
func (s *Service) see(ctx context.Context, id string, poll *workerproto.PollRequest, now time.Time) *sighting {
	w := s.seen[id]
	if w == nil {
		w = &sighting{first: now}
		s.seen[id] = w
	}
	w.keyID, _ = ctx.Value(keyCtx{}).(string)
	if poll != nil {
		w.capacity, w.version = poll.Concurrency, poll.Version
	}
	w.last, w.dirty = now, true
	return w
}

// held counts the tasks each worker holds on this node now; s.mu is held.
func (s *Service) held() map[string]int {
	n := map[string]int{}
	for _, t := range s.tasks {
		if t.worker != "" {
			n[t.worker]++
		}
	}
	return n
}

// tenants is what key kid is bound to, sorted (empty: unbound).
func (s *Service) tenants(kid string) []string {
	return slices.Sorted(maps.Keys(s.cfg.Bindings[kid]))
}

// RunRecorder writes, every Config.RecordEvery until ctx ends, the workers seen since its last
// write (a worker with a poll open counts as seen at the write), one transaction per write. A
// failed write is logged and its workers written again at the next. Without Config.Store it only
// waits for ctx.
func (s *Service) RunRecorder(ctx context.Context) {
	if s.cfg.Store == nil {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(s.cfg.RecordEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.Record(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("workers: recording the workers seen failed; retried at the next write", "err", err)
		}
	}
}

// Record writes the workers seen since the last write (RunRecorder's step; tests call it).
// Sightings older than the heartbeat timeout with nothing to write are forgotten.
func (s *Service) Record(ctx context.Context) error {
	if s.cfg.Store == nil {
		return nil
	}
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	held := s.held()
	var ws []store.Worker
	var written []*sighting
	for id, w := range s.seen {
		if w.polling > 0 {
			w.last, w.dirty = now, true // a worker waiting in a poll is connected now
		}
		if !w.dirty {
			if now.Sub(w.last) > s.cfg.HeartbeatTimeout && held[id] == 0 {
				delete(s.seen, id)
			}
			continue
		}
		ws = append(ws, store.Worker{WorkerID: id, Node: s.cfg.Node, KeyID: w.keyID, Tenants: s.tenants(w.keyID), Capacity: w.capacity,
			Version: w.version, TasksHeld: held[id], FirstSeenAt: w.first, LastSeenAt: w.last})
		written = append(written, w)
		w.dirty = false
	}
	s.mu.Unlock()
	if len(ws) == 0 {
		return nil
	}
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error { return tx.RecordWorkers(ws) })
	if err != nil {
		s.mu.Lock()
		for _, w := range written {
			w.dirty = true
		}
		s.mu.Unlock()
		return err
	}
	s.stats.recorded.Add(int64(len(ws)))
	return nil
}

// WorkerStatus is whether a worker was seen lately (WorkerView.Status).
type WorkerStatus string

// Worker statuses.
const (
	StatusOnline  WorkerStatus = "online"
	StatusOffline WorkerStatus = "offline"
)

// WorkerView is a worker as GET /workers shows it: one row per worker id and node that saw it.
type WorkerView struct {
	// WorkerID is the id the worker polls with; Node the node that saw it.
	WorkerID string `json:"worker_id"`
	Node     string `json:"node"`
	// KeyID is the worker key it signs with; Tenants the tenants that key is bound to (empty: all).
	KeyID   string   `json:"key_id"`
	Tenants []string `json:"tenants"`
	// Status is online when the worker was seen in the last 30 s (OnlineWindow), else offline.
	Status WorkerStatus `json:"status"`
	// Capacity is the concurrency its last poll said (0: not said); Version what it says it
	// runs ("" if nothing).
	Capacity int    `json:"capacity"`
	Version  string `json:"version"`
	// TasksHeld is the tasks it holds on that node now (as of last_seen_at on another node; 0 when
	// offline).
	TasksHeld   int       `json:"tasks_held"`
	FirstSeenAt time.Time `json:"first_seen_at"`
	LastSeenAt  time.Time `json:"last_seen_at"`
}

// Workers lists the workers the nodes have seen, as sc may see them: every one for the platform
// operator, else those whose key is unbound or bound to sc's tenant (operator role or higher).
// The rows of this node hold the tasks their worker holds here now.
func (s *Service) Workers(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[WorkerView], error) {
	var out store.Page[WorkerView]
	if !sc.Operator {
		if err := auth.RequireTenantRole(sc, auth.RoleOperator, "reading workers"); err != nil {
			return out, err
		}
	}
	if s.cfg.Store == nil {
		return out, problem.New(problem.TypeUnavailable, "workers are not recorded by this server")
	}
	now := s.cfg.Clock.Now()
	tenantID := sc.TenantID
	if sc.Operator {
		tenantID = ""
	}
	page, err := s.cfg.Store.ListWorkers(ctx, store.WorkerQuery{ListQuery: q, TenantID: tenantID, OnlineSince: now.Add(-OnlineWindow)})
	if err != nil {
		return out, err
	}
	s.mu.Lock()
	held := s.held()
	s.mu.Unlock()
	out = store.Page[WorkerView]{NextCursor: page.NextCursor, PrevCursor: page.PrevCursor, HasMore: page.HasMore,
		Items: make([]WorkerView, 0, len(page.Items))}
	for _, w := range page.Items {
		v := WorkerView{WorkerID: w.WorkerID, Node: w.Node, KeyID: w.KeyID, Tenants: w.Tenants, Status: StatusOffline, Capacity: w.Capacity,
			Version: w.Version, FirstSeenAt: w.FirstSeenAt, LastSeenAt: w.LastSeenAt}
		if !w.LastSeenAt.Before(now.Add(-OnlineWindow)) {
			v.Status, v.TasksHeld = StatusOnline, w.TasksHeld
		}
		if w.Node == s.cfg.Node {
			v.TasksHeld = held[w.WorkerID]
		}
		if v.Tenants == nil {
			v.Tenants = []string{}
		}
		out.Items = append(out.Items, v)
	}
	return out, nil
}

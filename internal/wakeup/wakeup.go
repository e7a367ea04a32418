// Package wakeup carries wake-ups between the nodes of a cluster: a write on node A that makes work
// runnable (a start, a resumed workflow, a new schedule, a pending trigger batch) wakes the loops
// of every other node at once, instead of at their next poll.
//
// Each node runs one Hub. Announce is what the node's services call after such a commit (besides
// waking their own loop): it never blocks, and announcements that pile up while one is being sent
// are coalesced into the next, so a burst of starts costs a few notifications, not one each. The Hub
// sends each as a notification carrying the node's id (PostgreSQL NOTIFY, pgstore.Store.Notify) and
// listens for the others' on a connection of its own (pgstore.Store.Listen); it ignores its own, and
// on every other one calls the node's local wake-ups (the dispatcher, the schedule loop, the trigger
// flusher). A lost listening connection is reopened with backoff; on each (re)connection the local
// wake-ups run once, since notifications sent while it was down are lost. The loops keep their poll
// intervals as the fallback: a lost notification delays work, it never loses it.
//
// Finished carries the ends of sync workflows across nodes the same way: a sync invocation of a
// workflow waits on the node that took the request, while its later activations run wherever they
// are claimed; the node that commits its end tells the others (Finished), so the waiting request
// answers at once instead of at its next poll of the store. Stop carries control actions the same
// way: a cancel or suspend taken on one node stops the attempt on whichever node runs it (or hands
// it to a worker); a lost notification is made up for by that node's lease check.
//
// On the embedded SQLite store there is one node and no Hub: the services wake their loops
// directly.
package wakeup

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// MaxPendingFinished bounds the ends waiting to be sent; beyond it they are dropped (the waiting
// requests find them at their next poll of the store).
const MaxPendingFinished = 4096

// maxPayload bounds one notification's payload (PostgreSQL's limit is 8000 bytes).
const maxPayload = 7000

// finishedSep and stopSep start the list of ids of a Finished or a Stop notification, after the
// node id.
const (
	finishedSep = "\nfinished:"
	stopSep     = "\nstop:"
)

// Transport sends and receives the notifications (pgstore.Store implements it).
type Transport interface {
	// Notify sends payload to every listener.
	Notify(ctx context.Context, payload string) error
	// Listen calls f with each notification's payload until ctx ends or the connection fails,
	// calling ready once it listens.
	Listen(ctx context.Context, ready func(), f func(payload string)) error
}

// Options configure a Hub.
type Options struct {
	// Node is this node's id: its own notifications are ignored.
	Node string
	// Local are the node's wake-ups, each non-blocking, called on every notification of another node.
	Local []func()
	// Finished, when set, is called with the invocation ids another node announced the end of
	// (Hub.Finished); it must not block.
	Finished func(ids []string)
	// Stop, when set, is called with the invocation ids whose executions another node asked to
	// stop (Hub.Stop); it must not block.
	Stop func(ids []string)
	// MinBackoff and MaxBackoff bound the wait before reconnecting a lost listener (defaults 100 ms,
	// 10 s; doubling).
	MinBackoff, MaxBackoff time.Duration
	// Logger logs lost connections (default slog.Default()).
	Logger *slog.Logger
}

// Hub is a node's end of the wake-ups.
type Hub struct {
	t       Transport
	o       Options
	pending chan struct{}
	mu      sync.Mutex
	ended   []string // ids to send in Finished notifications
	stopped []string // ids to send in Stop notifications
}

// New returns a hub over t.
func New(t Transport, o Options) *Hub {
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Hub{t: t, o: o, pending: make(chan struct{}, 1)}
}

// Announce tells the other nodes that work may be runnable. It never blocks; announcements made
// while one is pending are one.
func (h *Hub) Announce() {
	select {
	case h.pending <- struct{}{}:
	default:
	}
}

// Finished tells the other nodes that invocation id ended (a sync workflow whose request may wait
// on another node). It never blocks; ends announced while one is being sent go in the next
// notification, a few hundred to one.
func (h *Hub) Finished(id string) {
	h.mu.Lock()
	if len(h.ended) < MaxPendingFinished && !strings.ContainsAny(id, ",\n") {
		h.ended = append(h.ended, id)
	}
	h.mu.Unlock()
	h.Announce()
}

// Stop tells the other nodes to stop the execution of invocation id, if one of them runs it (a
// control action taken here). It never blocks; stops asked while one is being sent go in the next
// notification.
func (h *Hub) Stop(id string) {
	h.mu.Lock()
	if len(h.stopped) < MaxPendingFinished && !strings.ContainsAny(id, ",\n") {
		h.stopped = append(h.stopped, id)
	}
	h.mu.Unlock()
	h.Announce()
}

// Run sends the announcements and listens for the other nodes' until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() { defer close(done); h.send(ctx) }()
	h.listen(ctx)
	<-done
}

func (h *Hub) send(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.pending:
		}
		h.mu.Lock()
		ended, stopped := h.ended, h.stopped
		h.ended, h.stopped = nil, nil
		h.mu.Unlock()
		var payloads []string
		if len(stopped) > 0 {
			payloads = idPayloads(h.o.Node+stopSep, stopped)
		}
		if len(ended) > 0 {
			payloads = append(payloads, idPayloads(h.o.Node+finishedSep, ended)...)
		}
		if len(payloads) == 0 {
			payloads = []string{h.o.Node}
		}
		for _, p := range payloads {
			if err := h.t.Notify(ctx, p); err != nil && ctx.Err() == nil {
				h.o.Logger.Warn("wake-up: notify failed; the other nodes find the work at their next poll", "err", err)
			}
		}
	}
}

// idPayloads packs ids into notifications of at most maxPayload bytes: head (the node id and the
// kind's separator), then the ids comma-separated. Each also wakes the other nodes' loops, as an
// announcement does.
func idPayloads(head string, ids []string) []string {
	var out []string
	var b strings.Builder
	for _, id := range ids {
		if b.Len() > 0 && b.Len()+1+len(id) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString(head)
		} else {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	return append(out, b.String())
}

func (h *Hub) listen(ctx context.Context) {
	backoff := h.o.MinBackoff
	for ctx.Err() == nil {
		connected := false
		err := h.t.Listen(ctx, func() {
			connected = true
			backoff = h.o.MinBackoff
			h.wakeLocal() // what was announced while not listening
		}, h.receive)
		if ctx.Err() != nil {
			return
		}
		h.o.Logger.Warn("wake-up: listening connection lost; reconnecting", "err", err, "was_listening", connected, "backoff", backoff.String())
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(backoff*2, h.o.MaxBackoff)
	}
}

// receive handles another node's notification: it wakes the local loops, then passes on the ids
// of a Finished or Stop notification.
func (h *Hub) receive(payload string) {
	node, rest, _ := strings.Cut(payload, "\n")
	if node == h.o.Node {
		return
	}
	h.wakeLocal()
	kind, ids, _ := strings.Cut(rest, ":")
	if ids == "" {
		return
	}
	switch {
	case kind == "finished" && h.o.Finished != nil:
		h.o.Finished(strings.Split(ids, ","))
	case kind == "stop" && h.o.Stop != nil:
		h.o.Stop(strings.Split(ids, ","))
	}
}

func (h *Hub) wakeLocal() {
	for _, f := range h.o.Local {
		f()
	}
}

package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/auth"
	"github.com/larkrun/lark/internal/eventfilter"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/gts"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/journal"
	"github.com/larkrun/lark/internal/obs"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/store"
)

// PublishRequest is the body of POST /events.
type PublishRequest struct {
	// EventID is the publisher's id for the event (optional; one is assigned otherwise). Publishing
	// the same id again returns the stored event and delivers nothing.
	EventID string `json:"event_id"`
	// EventTypeID is the GTS type id of the event (it ends with "~").
	EventTypeID string          `json:"event_type_id"`
	Payload     json.RawMessage `json:"payload"`
	Source      string          `json:"source"`
	Subject     string          `json:"subject"`
	// Time is when the event happened (RFC 3339), as the publisher says.
	Time *time.Time `json:"time"`
}

// Published is the outcome of Publish.
type Published struct {
	Event events.Event
	// Replayed is true when the tenant had already published an event with this id.
	Replayed bool
	// Delivered is how many waiting workflows the event resumed.
	Delivered int
}

var eventIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:\-]{0,254}$`)

// maxEventScan bounds how many stored events one wait examines when it is registered.
const maxEventScan = 1000

// Publish stores an event for the caller's tenant and, in the same transaction, delivers it to the
// tenant's suspended workflows waiting for its type whose filter matches (r_wait_event_v1): each
// waiting journal entry is resolved with the event and the workflow is queued to resume. The event
// is durable before Publish returns.
func (s *Service) Publish(ctx context.Context, sc auth.SecurityContext, req PublishRequest) (Published, error) {
	var out Published
	if !sc.Has(auth.RoleOperator) {
		return out, problem.Forbidden("publishing events needs the operator role")
	}
	if sc.Operator {
		return out, problem.Forbidden("the platform operator has no tenant to publish in; use a tenant token")
	}
	var issues []problem.Issue
	if id, err := gts.Parse(req.EventTypeID); err != nil || !id.IsType() {
		msg := "must be a GTS type id ending with ~"
		if err != nil {
			msg = err.Error()
		}
		issues = append(issues, problem.Issue{Path: "$.event_type_id", Code: "INVALID_VALUE", Message: msg})
	}
	if req.EventID != "" && !eventIDPattern.MatchString(req.EventID) {
		issues = append(issues, problem.Issue{Path: "$.event_id", Code: "INVALID_VALUE",
			Message: "must be 1-255 characters: letters, digits and . _ : - (starting with a letter or digit)"})
	}
	for _, f := range []struct{ path, v string }{{"$.source", req.Source}, {"$.subject", req.Subject}} {
		if len(f.v) > 255 {
			issues = append(issues, problem.Issue{Path: f.path, Code: "INVALID_VALUE", Message: "at most 255 characters"})
		}
	}
	var payload any
	if len(req.Payload) == 0 || string(req.Payload) == "null" {
		req.Payload = json.RawMessage("{}")
	}
	if len(req.Payload) > s.cfg.MaxPayloadBytes {
		return out, tooLarge("payload", len(req.Payload), s.cfg.MaxPayloadBytes)
	}
	if err := invocation.DecodeJSON(req.Payload, &payload); err != nil {
		issues = append(issues, problem.Issue{Path: "$.payload", Code: "INVALID_VALUE", Message: "must be JSON"})
	} else if path, deep := invocation.TooDeep("$.payload", payload); deep {
		issues = append(issues, problem.Issue{Path: path, Code: "TOO_DEEP",
			Message: fmt.Sprintf("the payload is nested more than %d levels deep", invocation.MaxJSONDepth)})
	}
	if len(issues) > 0 {
		return out, problem.Validation("the event is invalid", issues)
	}
	now := s.cfg.Clock.Now()
	e := events.Event{ID: req.EventID, TenantID: sc.TenantID, TypeID: req.EventTypeID, Payload: req.Payload,
		Source: req.Source, Subject: req.Subject, Time: req.Time, ReceivedAt: now, PublishedBy: sc.SubjectID,
		CorrelationID: obs.CorrelationID(ctx)}
	if e.ID == "" {
		e.ID = s.cfg.IDs.New("evt")
	}
	err := s.update(ctx, func(tx store.Tx) error {
		stored, inserted, err := tx.InsertEvent(e)
		if err != nil {
			return err
		}
		out = Published{Event: stored, Replayed: !inserted}
		if !inserted {
			return nil
		}
		out.Delivered, err = s.deliver(tx, stored, now)
		return err
	})
	if err != nil {
		return Published{}, problem.Internal(err)
	}
	obs.Logger(ctx).InfoContext(ctx, "event published", "event_id", out.Event.ID,
		"event_type_id", out.Event.TypeID, "replayed", out.Replayed, "delivered", out.Delivered)
	return out, nil
}

// deliver resolves the suspended workflows waiting for ev whose filter matches. Waits of ended
// workflows are removed; a waiting workflow that is not suspended at this moment (it is replaying)
// finds the event itself when it parks again (see registerWait). An invocation's waits are taken
// in the order they were registered, and the event resolves at most one of them.
func (s *Service) deliver(tx store.Tx, ev events.Event, now time.Time) (int, error) {
	waits, err := tx.EventWaits(ev.TenantID, ev.TypeID)
	if err != nil {
		return 0, err
	}
	n := 0
	m := newMatcher(ev)
	done := map[string]bool{} // invocations this event resolved a wait of, or that are not waiting
	for _, w := range waits {
		if done[w.InvocationID] || ev.ReceivedAt.Before(w.Since) || !m.matches(w.Filter) {
			continue
		}
		done[w.InvocationID] = true
		rec, err := tx.Invocation(w.TenantID, w.InvocationID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && rec.Status.Terminal()) {
			if err := tx.DeleteEventWaits(w.TenantID, w.InvocationID); err != nil {
				return n, err
			}
			continue
		}
		if err != nil {
			return n, err
		}
		if rec.Status != invocation.StatusSuspended {
			continue
		}
		resolved, err := s.resolveWait(tx, rec, w.Seq, ev, now)
		if err != nil {
			return n, err
		}
		if resolved {
			n++
		}
	}
	return n, nil
}

// registerWait records a workflow's wait as it suspends, in the completion transaction, in place
// of any wait the workflow registered before. The wait is satisfied at once by the earliest stored
// event of its type that matches its filter, was received since the invocation was created
// (w.Since) and has not satisfied an earlier wait of the invocation: events published before the
// workflow reached the wait are not lost.
func (s *Service) registerWait(tx store.Tx, rec invocation.Record, w events.Wait, now time.Time) error {
	if err := tx.DeleteEventWaits(w.TenantID, w.InvocationID); err != nil {
		return err
	}
	if err := tx.PutEventWait(w); err != nil {
		return err
	}
	var after int64
	for {
		evs, err := tx.EventsSince(store.EventsSinceQuery{TenantID: w.TenantID, TypeID: w.TypeID, Since: w.Since, AfterSeq: after, UnconsumedBy: w.InvocationID, Limit: maxEventScan})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if newMatcher(ev).matches(w.Filter) {
				_, err := s.resolveWait(tx, rec, w.Seq, ev, now)
				return err
			}
		}
		if len(evs) < maxEventScan {
			return nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// resolveWait completes the pending journal entry seq of a suspended workflow with ev, records that
// the invocation consumed ev, queues the workflow to resume now and removes its waits. The
// resolution carries the event's id and arrival seq (event_seq). It reports false, and changes
// nothing, when the invocation has consumed ev already. The timeline shows it as signal_received.
func (s *Service) resolveWait(tx store.Tx, rec invocation.Record, seq int, ev events.Event, now time.Time) (bool, error) {
	fresh, err := tx.ConsumeEvent(rec.TenantID, rec.ID, ev.Seq)
	if err != nil || !fresh {
		return false, err
	}
	data, err := json.Marshal(map[string]any{"seq": seq, "result": sandbox.OKResult(eventValue(ev)),
		"event_id": ev.ID, "event_seq": ev.Seq, "event_type_id": ev.TypeID})
	if err != nil {
		return false, err
	}
	e := invocation.Event{Type: invocation.EventJournalResolved, Data: data, At: now, LogicalAttempt: rec.Attempt,
		IdempotencyKey: eventKey(rec.ID, "wait-"+strings.TrimPrefix(journal.Key(rec.Generation, seq), "journal-"), rec.Attempt, invocation.EventJournalResolved)}
	if _, _, err := tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: []invocation.Event{e}, AppendOptions: store.AppendOptions{Schedule: &store.Scheduling{AvailableAt: &now}}}); err != nil {
		return false, err
	}
	return true, tx.DeleteEventWaits(rec.TenantID, rec.ID)
}

// eventValue is what r_wait_event_v1 returns as struct(ok=True, value=...): the event.
func eventValue(ev events.Event) map[string]any {
	var payload any
	_ = invocation.DecodeJSON(ev.Payload, &payload)
	v := map[string]any{"event_id": ev.ID, "event_type_id": ev.TypeID, "payload": payload,
		"received_at": ev.ReceivedAt.UTC().Format(time.RFC3339Nano)}
	if ev.Source != "" {
		v["source"] = ev.Source
	}
	if ev.Subject != "" {
		v["subject"] = ev.Subject
	}
	if ev.Time != nil {
		v["time"] = ev.Time.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// matcher evaluates waits' CEL filters against one event, decoding its payload once.
type matcher struct {
	ev      eventfilter.Event
	decoded bool
}

func newMatcher(ev events.Event) *matcher {
	return &matcher{ev: eventfilter.Event{ID: ev.ID, TypeID: ev.TypeID, Source: ev.Source, Subject: ev.Subject, Payload: ev.Payload}}
}

// matches reports whether filter selects the event: "" matches everything, and a filter that
// cannot be evaluated on this event (a missing key, a type mismatch) does not match.
func (m *matcher) matches(filter string) bool {
	if filter == "" {
		return true
	}
	f, err := eventfilter.Cached(filter)
	if err != nil {
		return false
	}
	if !m.decoded {
		var payload any
		if raw, ok := m.ev.Payload.(json.RawMessage); !ok || invocation.DecodeJSON(raw, &payload) != nil {
			return false
		}
		m.ev.Payload, m.decoded = payload, true
	}
	ok, err := f.Match(m.ev)
	return err == nil && ok
}

// checkFilter is the sandbox's compile check of an r_wait_event_v1 filter.
func checkFilter(expr string) error {
	_, err := eventfilter.Cached(expr)
	return err
}

// GetEvent reads one of the caller's tenant's events.
func (s *Service) GetEvent(ctx context.Context, sc auth.SecurityContext, id string) (events.Event, error) {
	e, err := s.cfg.Store.Event(ctx, sc.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return e, problem.NotFound("event %s not found", id)
	}
	if err != nil {
		return e, problem.Internal(err)
	}
	return e, nil
}

// ListEvents lists the caller's tenant's events.
func (s *Service) ListEvents(ctx context.Context, sc auth.SecurityContext, q store.ListQuery) (store.Page[events.Event], error) {
	return s.cfg.Store.ListEvents(ctx, sc.TenantID, q)
}

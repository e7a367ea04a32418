package sandbox

import (
	"context"
	"encoding/json"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"

	"github.com/larkrun/lark/internal/gts"
)

// Bounds on what one execution may emit with r_emit_v1 (kept emits: those of a step attempt that
// failed are dropped and no longer count). Beyond either, the call fails the execution with a
// non-retryable validation error: the same code would emit as much again.
const (
	// MaxEmits is the most events one execution may emit.
	MaxEmits = 100
	// MaxEmitBytes bounds the encoded payloads of the events one execution emits, together.
	MaxEmitBytes = 1 << 20
)

// Emit is an event emitted with r_emit_v1(event_type_id, payload). The sandbox only buffers it: the
// caller publishes it once what emitted it has committed (the attempt's outcome for a function, the
// step's or the call's journal entry for a workflow), in the same transaction.
type Emit struct {
	// TypeID is the event's GTS type id (it ends with "~").
	TypeID string
	// Payload is the event's body, encoded as JSON.
	Payload json.RawMessage
}

// EventChecker is implemented by a Host that can tell, where the code emits an event, whether its
// tenant would refuse it (a registered event type whose schema the payload fails, or an unregistered
// type under a policy that requires registration). r_emit_v1 asks it before buffering the event; a
// refusal fails the call with a validation error naming the reason, and nothing is emitted.
type EventChecker interface {
	CheckEvent(ctx context.Context, typeID string, payload json.RawMessage) error
}

// checkEmit asks the host's EventChecker, if it has one, about e.
func checkEmit(thread *starlark.Thread, name string, e Emit) error {
	r := runOf(thread)
	c, ok := r.host.(EventChecker)
	if !ok {
		return nil
	}
	var cerr error
	if err := r.blocking(func() { cerr = c.CheckEvent(r.ctx, e.TypeID, e.Payload) }); err != nil {
		return err
	}
	if cerr != nil {
		return errorf(name, "the event is refused: %v", cerr)
	}
	return nil
}

// emitBuffer holds an execution's emits not yet handed over, and counts the emits the execution
// keeps against MaxEmits and MaxEmitBytes: those held, and those handed over with a journal entry.
type emitBuffer struct {
	held         []Emit
	count, bytes int
}

// charge counts e against the bounds, or refuses it when it would exceed one.
func (b *emitBuffer) charge(name string, e Emit) error {
	if b.count >= MaxEmits {
		return errorf(name, "an execution may emit at most %d events", MaxEmits)
	}
	if b.bytes+len(e.Payload) > MaxEmitBytes {
		return errorf(name, "the payloads an execution emits may total at most %d bytes once encoded as JSON (%d so far, this one %d)",
			MaxEmitBytes, b.bytes, len(e.Payload))
	}
	b.count++
	b.bytes += len(e.Payload)
	return nil
}

// add charges e and holds it.
func (b *emitBuffer) add(name string, e Emit) error {
	if err := b.charge(name, e); err != nil {
		return err
	}
	b.held = append(b.held, e)
	return nil
}

// mark is the number of emits held, for take and drop.
func (b *emitBuffer) mark() int { return len(b.held) }

// take hands over the emits held since mark: they stay counted.
func (b *emitBuffer) take(mark int) []Emit {
	if mark >= len(b.held) {
		return nil
	}
	out := append([]Emit(nil), b.held[mark:]...)
	b.held = b.held[:mark]
	return out
}

// drop forgets the emits held since mark (a failed step attempt's): they no longer count.
func (b *emitBuffer) drop(mark int) {
	for _, e := range b.take(mark) {
		b.count--
		b.bytes -= len(e.Payload)
	}
}

// emitArgs checks the arguments of r_emit_v1: event_type_id a GTS type id (ending with "~"),
// payload a value that converts to JSON within the payload limit (None is {}).
func emitArgs(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (Emit, error) {
	name := b.Name()
	vals, err := bindArgs(name, args, kwargs)
	if err != nil {
		return Emit{}, err
	}
	typeID, ok := vals[0].(starlark.String)
	if !ok {
		return Emit{}, errorf(name, "event_type_id must be a string, not %s", vals[0].Type())
	}
	id, err := gts.Parse(string(typeID))
	if err != nil {
		return Emit{}, errorf(name, "event_type_id: %v", err)
	}
	if !id.IsType() {
		return Emit{}, errorf(name, "event_type_id must be a GTS type id ending with ~, got %s", truncate(string(typeID), 256))
	}
	var payload any = map[string]any{}
	if given(vals[1]) {
		if payload, err = toGo(thread, vals[1], name+" payload"); err != nil {
			if isLimitError(err) {
				return Emit{}, err
			}
			return Emit{}, errorf(name, "payload: %v", err)
		}
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return Emit{}, errorf(name, "payload: %v", err)
	}
	if limit := payloadLimit(thread); limit > 0 && int64(len(data)) > limit {
		// toGo's bound does not count the strings' escapes; this is the exact check.
		return Emit{}, &PayloadError{What: name + " payload", Limit: limit}
	}
	if err := thread.AddAllocBytes(int64(len(data))); err != nil {
		return Emit{}, err
	}
	return Emit{TypeID: string(typeID), Payload: data}, nil
}

// rEmit implements r_emit_v1(event_type_id, payload) in functions, and inside workflow steps: the
// event is buffered (Result.Emits; a step's go with its journal entry) and None is returned.
func rEmit(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	e, err := emitArgs(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	if err := checkEmit(thread, b.Name(), e); err != nil {
		return nil, err
	}
	if err := runOf(thread).emits.add(b.Name(), e); err != nil {
		return nil, err
	}
	return starlark.None, nil
}

// wfEmit implements r_emit_v1 in workflows. Inside a step function it is rEmit (the emits of a
// successful step attempt are recorded with the step's journal entry; a failed attempt's are
// dropped). In the workflow's own code the call takes a journal position: its entry carries the
// event, so it is published once, with the write that records the entry, and a replay returns
// without emitting again. Compensations may not emit (they are not journaled).
func wfEmit(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	r := runOf(thread)
	w := r.wf
	if w.compensating {
		return nil, errorf(b.Name(), "cannot be called in a compensation")
	}
	if w.depth > 0 {
		return rEmit(thread, b, args, kwargs)
	}
	e, err := emitArgs(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	seq, hash, je, err := w.lookup(thread, b.Name(), "", map[string]any{"event_type_id": e.TypeID, "payload": e.Payload})
	if err != nil {
		return nil, err
	}
	if je != nil {
		if !je.Done {
			return nil, w.corrupt(thread, je, "is pending")
		}
		return starlark.None, nil
	}
	if err := checkEmit(thread, b.Name(), e); err != nil {
		return nil, err
	}
	if err := r.emits.charge(b.Name(), e); err != nil {
		return nil, err
	}
	entry := JournalEntry{Seq: seq, Helper: b.Name(), ArgsHash: hash, Result: map[string]any{"event_type_id": e.TypeID}, Done: true, Emits: []Emit{e}}
	if err := w.record(thread, entry); err != nil {
		return nil, err
	}
	return starlark.None, nil
}

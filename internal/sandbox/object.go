package sandbox

import (
	"fmt"
	"slices"
	"sort"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"
)

// Object is the immutable Starlark value of a JSON object: the input of
// main, HTTP response bodies and the values of child invocations. Its keys
// keep their order (sorted, for objects decoded from Go maps). Fields are
// reachable as attributes when their key is an identifier
// (input.customer_id) and by index for any key (input["odd-key"]); an
// Object supports `in`, len, iteration over its keys, and the methods
// get(key, default=None), keys(), values() and items(). A key shadows the
// method of the same name for attribute access (so that input.items is the
// field "items" when there is one); index access always reaches keys.
type Object struct {
	keys   []string
	values []starlark.Value
	index  map[string]int // nil for small objects, which are searched linearly
}

var (
	_ starlark.IterableMapping = (*Object)(nil)
	_ starlark.Sequence        = (*Object)(nil)
	_ starlark.HasAttrs        = (*Object)(nil)
	_ starlark.Comparable      = (*Object)(nil)
	_ starlark.Printable       = (*Object)(nil)
)

// smallObject is the largest object searched linearly.
const smallObject = 8

// newObject returns an Object with the given keys, in order, and values.
// The keys must be distinct; the slices are retained.
func newObject(keys []string, values []starlark.Value) *Object {
	o := &Object{keys: keys, values: values}
	if len(keys) > smallObject {
		o.index = make(map[string]int, len(keys))
		for i, k := range keys {
			o.index[k] = i
		}
	}
	return o
}

func (o *Object) lookup(key string) (starlark.Value, bool) {
	if o.index != nil {
		i, ok := o.index[key]
		if !ok {
			return nil, false
		}
		return o.values[i], true
	}
	for i, k := range o.keys {
		if k == key {
			return o.values[i], true
		}
	}
	return nil, false
}

// String returns the object in dict syntax.
func (o *Object) String() string { return starlark.StringOf(o) }

// PrintTo writes the object in dict syntax.
func (o *Object) PrintTo(p *starlark.Printer) {
	p.WriteByte('{')
	for i, k := range o.keys {
		if p.Truncated() {
			break
		}
		if i > 0 {
			p.WriteString(", ")
		}
		p.WriteValue(starlark.String(k))
		p.WriteString(": ")
		p.WriteValue(o.values[i])
	}
	p.WriteByte('}')
}

// Type returns "object".
func (o *Object) Type() string { return "object" }

// Freeze does nothing: objects are immutable, and so is what they contain.
func (o *Object) Freeze() {}

// Truth reports whether the object has keys.
func (o *Object) Truth() starlark.Bool { return len(o.keys) > 0 }

// Hash fails: objects are not hashable (like dicts).
func (o *Object) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: object") }

// Len returns the number of keys.
func (o *Object) Len() int { return len(o.keys) }

// Iterate iterates over the keys.
func (o *Object) Iterate() starlark.Iterator { return &objectIterator{o: o} }

// Get implements o[key] and `key in o`; keys that are not strings are absent.
func (o *Object) Get(key starlark.Value) (starlark.Value, bool, error) {
	s, ok := key.(starlark.String)
	if !ok {
		return nil, false, nil
	}
	v, ok := o.lookup(string(s))
	return v, ok, nil
}

// Items returns the (key, value) pairs, in order.
func (o *Object) Items() []starlark.Tuple {
	items := make([]starlark.Tuple, len(o.keys))
	for i, k := range o.keys {
		items[i] = starlark.Tuple{starlark.String(k), o.values[i]}
	}
	return items
}

// Attr returns the field name, or the method name if there is no such
// field; nil if there is neither.
func (o *Object) Attr(name string) (starlark.Value, error) {
	if v, ok := o.lookup(name); ok {
		return v, nil
	}
	if m := objectMethods[name]; m != nil {
		return m.BindReceiver(o), nil
	}
	return nil, nil
}

// AttrNames returns the keys that are identifiers and the method names.
func (o *Object) AttrNames() []string {
	names := make([]string, 0, len(o.keys)+len(objectMethods))
	for _, k := range o.keys {
		if isIdentifier(k) {
			names = append(names, k)
		}
	}
	for name := range objectMethods {
		names = append(names, name)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// CompareSameType implements == and != between objects: equal objects
// have the same keys with equal values, in any order.
func (o *Object) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	other := y.(*Object)
	switch op {
	case syntax.EQL, syntax.NEQ:
		eq, err := o.equal(other, depth)
		if op == syntax.NEQ {
			eq = !eq
		}
		return eq, err
	}
	return false, fmt.Errorf("%s %s %s not implemented", o.Type(), op, y.Type())
}

func (o *Object) equal(other *Object, depth int) (bool, error) {
	if len(o.keys) != len(other.keys) {
		return false, nil
	}
	for i, k := range o.keys {
		v, ok := other.lookup(k)
		if !ok {
			return false, nil
		}
		if eq, err := starlark.EqualDepth(o.values[i], v, depth-1); err != nil || !eq {
			return false, err
		}
	}
	return true, nil
}

type objectIterator struct {
	o *Object
	i int
}

func (it *objectIterator) Next(p *starlark.Value) bool {
	if it.i >= len(it.o.keys) {
		return false
	}
	*p = starlark.String(it.o.keys[it.i])
	it.i++
	return true
}

func (it *objectIterator) Done() {}

var objectMethods = map[string]*starlark.Builtin{
	"get":    starlark.NewBuiltin("get", objectGet),
	"keys":   starlark.NewBuiltin("keys", objectKeys),
	"values": starlark.NewBuiltin("values", objectValues),
	"items":  starlark.NewBuiltin("items", objectItems),
}

func objectGet(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var key starlark.Value
	var dflt starlark.Value = starlark.None
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &key, &dflt); err != nil {
		return nil, err
	}
	if v, ok, _ := b.Receiver().(*Object).Get(key); ok {
		return v, nil
	}
	return dflt, nil
}

func objectKeys(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	o := b.Receiver().(*Object)
	if err := chargeList(thread, len(o.keys), 2); err != nil {
		return nil, err
	}
	elems := make([]starlark.Value, len(o.keys))
	for i, k := range o.keys {
		elems[i] = starlark.String(k)
	}
	return starlark.NewList(elems), nil
}

func objectValues(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	o := b.Receiver().(*Object)
	if err := chargeList(thread, len(o.values), 1); err != nil {
		return nil, err
	}
	return starlark.NewList(slices.Clone(o.values)), nil
}

func objectItems(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	o := b.Receiver().(*Object)
	if err := chargeList(thread, len(o.keys), 5); err != nil {
		return nil, err
	}
	elems := make([]starlark.Value, len(o.keys))
	for i, item := range o.Items() {
		elems[i] = item
	}
	return starlark.NewList(elems), nil
}

// chargeList charges a list of n elements, each taking slots list slots
// (a slot being a Value interface).
func chargeList(thread *starlark.Thread, n, slots int) error {
	return thread.AddAllocBytes(starlark.AllocListBytes + int64(n)*int64(slots)*starlark.AllocElemBytes)
}

// isIdentifier reports whether s is a Starlark identifier (and so may be
// used as an attribute name).
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// contextValue is the ctx argument of main: the invocation's identity as
// attributes, and log(msg, **fields).
type contextValue struct {
	info Info
	// Inside a workflow step: the step's name, its attempt (1-based) and 003 §1.3's idempotency key
	// SHA256(invocation | step | logical attempt | step_completed | "") — the same on every retry
	// and replay of the step, for the author to pass to external APIs.
	step        string
	stepAttempt int
	stepKey     string
}

var (
	_            starlark.HasAttrs = (*contextValue)(nil)
	ctxLog                         = starlark.NewBuiltin("log", ctxLogImpl)
	ctxAttrNames                   = []string{"attempt", "correlation_id", "entrypoint_id", "invocation_id", "log", "tenant_id"}
)

func (c *contextValue) String() string {
	return fmt.Sprintf("<context invocation_id=%q>", c.info.InvocationID)
}
func (c *contextValue) Type() string          { return "context" }
func (c *contextValue) Freeze()               {}
func (c *contextValue) Truth() starlark.Bool  { return true }
func (c *contextValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: context") }
func (c *contextValue) AttrNames() []string {
	if c.step != "" {
		return append(slices.Clone(ctxAttrNames), "idempotency_key", "step_attempt", "step_name")
	}
	return slices.Clone(ctxAttrNames)
}

func (c *contextValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "invocation_id":
		return starlark.String(c.info.InvocationID), nil
	case "step_name", "step_attempt", "idempotency_key":
		if c.step == "" {
			return nil, nil
		}
		switch name {
		case "step_name":
			return starlark.String(c.step), nil
		case "step_attempt":
			return starlark.MakeInt(c.stepAttempt), nil
		default:
			return starlark.String(c.stepKey), nil
		}
	case "tenant_id":
		return starlark.String(c.info.TenantID), nil
	case "entrypoint_id":
		return starlark.String(c.info.EntrypointID), nil
	case "correlation_id":
		return starlark.String(c.info.CorrelationID), nil
	case "attempt":
		return starlark.MakeInt(c.info.Attempt), nil
	case "log":
		return ctxLog.BindReceiver(c), nil
	}
	return nil, nil
}

// logBytesPerStep is how many bytes of a log message ctx.log counts as a step.
const logBytesPerStep = 64

// ctxLogImpl implements ctx.log(msg, **fields): the message (a string, or
// the string form of another value) and the fields (converted to JSON
// values; those that do not convert are logged as strings) go to Host.Log.
func ctxLogImpl(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	r := runOf(thread)
	if len(args) != 1 {
		return nil, fmt.Errorf("log: got %d positional arguments, want 1 (the message)", len(args))
	}
	msg, err := displayString(thread, args[0])
	if err != nil {
		return nil, err
	}
	msg = truncateLog(msg)
	// Handing the entry over is work too: a step per logBytesPerStep bytes.
	if err := thread.AddSteps(1 + uint64(len(msg))/logBytesPerStep); err != nil {
		return nil, err
	}
	var fields map[string]any
	if len(kwargs) > 0 {
		// The fields share what the message leaves of MaxLogEntryBytes.
		room := int64(MaxLogEntryBytes - len(msg))
		fields = make(map[string]any, len(kwargs))
		for _, kv := range kwargs {
			name := string(kv[0].(starlark.String))
			limit := max(room, 1)
			v, err := toGoLimit(thread, kv[1], "log field "+name, limit)
			if err != nil {
				if isAllocError(err) {
					return nil, err
				}
				if isPayloadError(err) {
					v = fmt.Sprintf("[field dropped: larger than the %d bytes left in this log entry]", limit)
				} else {
					s, err := displayString(thread, kv[1])
					if err != nil {
						return nil, err
					}
					v = truncate(s, int(limit))
				}
			}
			room -= jsonSize(v) + int64(len(name)) + 4
			fields[name] = v
		}
	}
	r.log(msg, fields)
	return starlark.None, nil
}

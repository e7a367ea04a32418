// Copyright 2017 The Bazel Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package starlark

// Lark patch: per-thread allocation accounting, bounded printing and
// nesting limits. See PATCHES.md at the root of this module.
//
// The interpreter has no memory limit of its own. This file adds an
// allocation budget to Thread: operations that build strings, lists,
// tuples, dicts, sets or big integers charge their approximate size to
// the thread before they allocate, and a charge that would exceed the
// budget fails with *AllocLimitError instead. Accounting is cumulative:
// memory is never credited back when it becomes garbage (the Go garbage
// collector decides that, not the interpreter), except for call frames,
// which are charged while they are live. The budget therefore bounds the
// total bytes a computation may allocate, which in turn bounds the live
// heap it can hold.

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/larkrun/lark/third_party/go.starlark.net/syntax"
)

// Approximate sizes, in bytes, charged by the allocation accounting.
// They are of the order of the Go allocations they stand for; they need
// not be exact.
const (
	AllocElemBytes      = 16   // one element of a list or tuple (a Value interface)
	AllocListBytes      = 32   // a list or tuple header
	AllocEntryBytes     = 128  // one entry of a dict or set (hash table entry, bucket share and load-factor slack)
	AllocDictBytes      = 512  // an empty dict or set (header and inline bucket)
	AllocFrameBytes     = 3072 // a Starlark call frame, mostly Go stack; charged while live
	AllocFuncBytes      = 64   // a function value created by def or lambda
	AllocStringOverhead = 16   // a string header, added to the length of strings built by formatting
)

// MaxNestingDepth bounds the nesting of values that are printed, hashed
// or encoded by recursive Go code (str, repr, hash of tuples, JSON), so
// that a deeply nested value cannot exhaust the goroutine stack, which
// would crash the process rather than fail the computation.
const MaxNestingDepth = 10000

// maxIntBits bounds the size of integers computed by a thread that has an
// allocation limit: arithmetic on larger integers takes time that is not
// interruptible by cancellation.
const maxIntBits = 1 << 20

// defaultPrintLimit bounds the string form produced by Value.String for
// the built-in containers when no thread is involved (e.g. in error
// messages); longer forms are truncated and end with "...".
const defaultPrintLimit = 1 << 20

// An AllocLimitError is the error of an operation refused because it
// would exceed the thread's allocation limit (see Thread.SetMaxAllocBytes).
type AllocLimitError struct {
	Requested int64 // bytes the refused operation asked for (saturated)
	Allocated int64 // bytes accounted before the refused charge
	Limit     int64 // the thread's limit
}

func (e *AllocLimitError) Error() string {
	return fmt.Sprintf("memory limit exceeded: an allocation of %d bytes would exceed the limit of %d bytes (%d bytes already allocated)",
		e.Requested, e.Limit, e.Allocated)
}

// SetMaxAllocBytes sets the thread's allocation budget in bytes; zero
// (the default) means no limit. Once a charge has been refused, every
// later charge is refused too, so that an error swallowed by a built-in
// cannot be used to continue allocating.
// It must not be called while the thread is executing.
func (thread *Thread) SetMaxAllocBytes(n int64) {
	if n < 0 {
		n = 0
	}
	thread.maxAllocBytes = n
}

// MaxAllocBytes returns the limit set by SetMaxAllocBytes.
func (thread *Thread) MaxAllocBytes() int64 { return thread.maxAllocBytes }

// AllocBytes returns the number of bytes currently accounted to the
// thread: the cumulative allocations charged so far plus its live call
// frames.
func (thread *Thread) AllocBytes() int64 { return thread.allocBytes }

// PeakAllocBytes returns the largest value AllocBytes has had.
func (thread *Thread) PeakAllocBytes() int64 { return thread.allocPeak }

// AllocLimitExceeded reports whether a charge has been refused.
func (thread *Thread) AllocLimitExceeded() bool { return thread.allocExceeded }

// AddAllocBytes charges n bytes to the thread's allocation budget, or
// credits -n bytes if n is negative. It returns an *AllocLimitError,
// and charges nothing, if the charge would exceed the limit. Applications
// call it from built-ins before they allocate on behalf of Starlark code.
// A nil thread accepts every charge.
func (thread *Thread) AddAllocBytes(n int64) error {
	if thread == nil {
		return nil
	}
	if n <= 0 {
		thread.allocBytes += n
		if thread.allocBytes < 0 {
			thread.allocBytes = 0
		}
		return nil
	}
	next := thread.allocBytes + n
	if next < 0 { // overflow
		next = math.MaxInt64
	}
	if thread.maxAllocBytes > 0 && (thread.allocExceeded || next > thread.maxAllocBytes) {
		thread.allocExceeded = true
		return &AllocLimitError{Requested: n, Allocated: thread.allocBytes, Limit: thread.maxAllocBytes}
	}
	thread.allocBytes = next
	if next > thread.allocPeak {
		thread.allocPeak = next
	}
	if n >= allocBytesPerStep {
		// Building a large value is work: one step per allocBytesPerStep bytes, so that code doing
		// little but copy large strings or lists reaches its step limit (and its scheduler's yield
		// points) as other code does.
		return thread.AddSteps(uint64(n / allocBytesPerStep))
	}
	return nil
}

// allocBytesPerStep is how many bytes allocated count as one step: copying or zeroing 64 bytes
// takes about as long as one bytecode instruction (~10 ns), with room for the GC work it causes.
const allocBytesPerStep = 64

// alloc is AddAllocBytes for internal use.
func (thread *Thread) alloc(n int64) error { return thread.AddAllocBytes(n) }

// allocN charges n items of size bytes each.
func (thread *Thread) allocN(n int, size int64) error {
	return thread.alloc(mulSat(int64(n), size))
}

// mulSat returns a*b, saturated to [0, MaxInt64].
func mulSat(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// limited reports whether the thread has an allocation limit.
func (thread *Thread) limited() bool { return thread != nil && thread.maxAllocBytes > 0 }

// printLimit returns the size limit for a string the thread is about to
// build without knowing its size in advance: the rest of its budget, or
// -1 (no limit).
func (thread *Thread) printLimit() int {
	if !thread.limited() {
		return -1
	}
	rest := thread.maxAllocBytes - thread.allocBytes
	if rest < 0 || thread.allocExceeded {
		return 0
	}
	if rest > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(rest)
}

// overLimit returns the error for a string that could not be built
// within the limit returned by printLimit.
func (thread *Thread) overLimit(wanted int) error {
	err := thread.alloc(max(int64(wanted), thread.maxAllocBytes-thread.allocBytes+1))
	if err == nil { // (cannot happen)
		err = &AllocLimitError{Requested: int64(wanted), Allocated: thread.allocBytes, Limit: thread.maxAllocBytes}
	}
	return err
}

// checkIntSize reports an error if x is an integer too large for a thread
// with an allocation limit.
func (thread *Thread) checkIntSize(x Value) error {
	if !thread.limited() {
		return nil
	}
	if i, ok := x.(Int); ok {
		if _, b := i.get(); b != nil && b.BitLen() > maxIntBits {
			return fmt.Errorf("integer too large (more than %d bits)", maxIntBits)
		}
	}
	return nil
}

// checkIntDigits reports an error if a string of n digits would denote
// an integer too large for a thread with an allocation limit.
func (thread *Thread) checkIntDigits(n int) error {
	if thread.limited() && n > maxIntBits/3 { // each digit is at least 3.3 bits in base 10
		return fmt.Errorf("integer literal too long (more than %d digits)", maxIntBits/3)
	}
	return nil
}

// bigBits returns the bit length of x if it is a big integer, or 0.
// (Integers of up to 64 bits are not charged: they take constant space,
// and the step budget bounds how many a computation creates.)
func bigBits(x Int) int {
	if _, b := x.get(); b != nil {
		return b.BitLen()
	}
	return 0
}

// seqAllocLen returns the number of bytes charged for a sequence value of
// the kind that x + y or x * n produces.
func seqElemSize(x Value) (n int, size int64, ok bool) {
	switch x := x.(type) {
	case String:
		return len(x), 1, true
	case Bytes:
		return len(x), 1, true
	case *List:
		return len(x.elems), AllocElemBytes, true
	case Tuple:
		return len(x), AllocElemBytes, true
	}
	return 0, 0, false
}

// chargeBinary charges the allocation of the result of x op y, before the
// operation is performed. It is called by the interpreter, whose Binary
// has no thread.
func (thread *Thread) chargeBinary(op syntax.Token, x, y Value) error {
	switch op {
	case syntax.PLUS:
		switch x := x.(type) {
		case Int:
			if y, ok := y.(Int); ok {
				if n := max(bigBits(x), bigBits(y)); n > 64 {
					return thread.alloc(int64(n/8) + 40)
				}
			}
			return nil
		case Float:
			return nil
		}
		if nx, size, ok := seqElemSize(x); ok {
			if ny, size2, ok := seqElemSize(y); ok && size == size2 {
				return thread.alloc(mulSat(int64(nx)+int64(ny), size) + AllocListBytes)
			}
		}
	case syntax.STAR:
		if xi, ok := x.(Int); ok {
			if yi, ok := y.(Int); ok {
				if n := bigBits(xi) + bigBits(yi); n > 64 {
					if n > 2*maxIntBits+128 && thread.limited() {
						return fmt.Errorf("integer too large (more than %d bits)", maxIntBits)
					}
					return thread.alloc(int64(n/8) + 40)
				}
				return nil
			}
			x, y = y, x // n * seq
		}
		if n, ok := y.(Int); ok {
			if nx, size, ok := seqElemSize(x); ok && nx > 0 {
				count, ok := n.Int64()
				if !ok {
					count = math.MaxInt64
				}
				return thread.alloc(mulSat(mulSat(int64(nx), count), size) + AllocListBytes)
			}
		}
	case syntax.LTLT:
		if xi, ok := x.(Int); ok {
			if s, err := AsInt32(y); err == nil && s > 0 {
				n := bigBits(xi) + s
				if n > 64 {
					return thread.alloc(int64(n/8) + 40)
				}
			}
		}
	case syntax.PIPE:
		switch x := x.(type) {
		case *Dict:
			if y, ok := y.(*Dict); ok {
				return thread.alloc(AllocDictBytes + mulSat(int64(x.Len())+int64(y.Len()), AllocEntryBytes))
			}
		case *Set:
			if y, ok := y.(*Set); ok {
				return thread.alloc(AllocDictBytes + mulSat(int64(x.Len())+int64(y.Len()), AllocEntryBytes))
			}
		}
	case syntax.MINUS, syntax.AMP, syntax.CIRCUMFLEX:
		if x, ok := x.(*Set); ok {
			if y, ok := y.(*Set); ok {
				n := int64(x.Len())
				if op == syntax.CIRCUMFLEX {
					n += int64(y.Len())
				}
				return thread.alloc(AllocDictBytes + mulSat(n, AllocEntryBytes))
			}
		}
	}
	return nil
}

// chargeResult charges the allocation of a value computed by an
// application-defined operator (e.g. struct + struct), after the fact,
// using its length if it has one.
func (thread *Thread) chargeResult(z Value) error {
	switch z.(type) {
	case String, Bytes, *List, Tuple, Int, Float, Bool, NoneType, *Dict, *Set:
		return nil // built-in results are charged in advance
	}
	if l, ok := z.(interface{ Len() int }); ok {
		return thread.allocN(l.Len(), 2*AllocElemBytes)
	}
	return nil
}

// chargeSlice charges the result of a slice operation.
func (thread *Thread) chargeSlice(x, res, step Value) error {
	switch res := res.(type) {
	case String, Bytes:
		if step == None {
			return nil // a substring shares the memory of its operand
		}
		n, _, _ := seqElemSize(res)
		return thread.alloc(int64(n))
	case *List:
		return thread.allocN(len(res.elems), AllocElemBytes)
	case Tuple:
		return thread.allocN(len(res), AllocElemBytes)
	}
	return nil
}

// chargeIterable charges n items of size bytes each for the elements of
// iterable, if its length is known, and reports whether it was.
func (thread *Thread) chargeLen(iterable Value, size int64) (known bool, err error) {
	n := Len(iterable)
	if n < 0 {
		return false, nil
	}
	return true, thread.allocN(n, size)
}

// An allocIterator charges size bytes to its thread for each element it
// yields, and stops early when the thread's budget is exhausted, leaving
// the error in err.
type allocIterator struct {
	Iterator
	thread *Thread
	size   int64
	err    error
}

// newAllocIterator returns an iterator over iterable that charges size
// bytes per element, unless the length of iterable is known, in which
// case it charges for all of them in advance.
func (thread *Thread) iterate(iterable Iterable, size int64) (*allocIterator, error) {
	it := &allocIterator{Iterator: iterable.Iterate(), thread: thread, size: size}
	if known, err := thread.chargeLen(iterable, size); err != nil {
		it.Done()
		return nil, err
	} else if known {
		it.size = 0
	}
	return it, nil
}

func (it *allocIterator) Next(p *Value) bool {
	if it.err != nil {
		return false
	}
	if err := it.thread.step(); err != nil {
		it.err = err
		return false
	}
	if it.size > 0 {
		if err := it.thread.alloc(it.size); err != nil {
			it.err = err
			return false
		}
	}
	return it.Iterator.Next(p)
}

// step counts one step of work done by a built-in function, as the
// interpreter counts one per instruction, so that built-ins that iterate
// (e.g. max(range(1 << 31))) spend the step budget and observe
// cancellation. It returns the cancellation error, if any.
func (thread *Thread) step() error { return thread.AddSteps(1) }

// AddSteps counts n steps of work done by an application's built-in (one
// per element processed, say), as the interpreter counts one per
// instruction: they spend the budget set by SetMaxExecutionSteps (calling
// OnMaxSteps when it is reached) and the returned error is the thread's
// cancellation, if it has been cancelled. Long built-ins call it as they
// go so that they stop at a deadline and their work is accounted.
func (thread *Thread) AddSteps(n uint64) error {
	if thread == nil {
		return nil
	}
	thread.Steps += n
	if thread.Steps >= thread.maxSteps && thread.maxSteps > 0 {
		if thread.OnMaxSteps != nil {
			thread.OnMaxSteps(thread)
		} else {
			thread.Cancel("too many steps")
		}
	}
	if reason := thread.cancelReason.Load(); reason != nil {
		return fmt.Errorf("Starlark computation cancelled: %s", *reason)
	}
	return nil
}

// A stepIterator counts a step per element (see Thread.step) and stops
// early when the thread is cancelled, leaving the error in err.
type stepIterator struct {
	Iterator
	thread *Thread
	err    error
}

// stepping returns an iterator over iter that counts steps.
func (thread *Thread) stepping(iter Iterator) *stepIterator {
	return &stepIterator{Iterator: iter, thread: thread}
}

func (it *stepIterator) Next(p *Value) bool {
	if it.err != nil {
		return false
	}
	if err := it.thread.step(); err != nil {
		it.err = err
		return false
	}
	return it.Iterator.Next(p)
}

// ---- bounded printing ----

// A Printer accumulates the string forms of values, as Value.String
// would produce them, with three differences: its output is bounded (a
// write that would exceed the limit is dropped and recorded), values
// nested more than MaxNestingDepth levels are written as "...", and
// cycles are detected across application-defined values that implement
// Printable. A Printer lets the string form of a large or deep value be
// computed, or refused, without exhausting memory or the goroutine stack.
type Printer struct {
	buf      []byte
	max      int // < 0 => no limit
	depth    int
	path     []Value // *List and *Dict values being printed, for cycle detection
	overflow bool
	deep     bool
	// thread, if set, is charged a step per value written (printStepsPerValue),
	// and err is the thread's cancellation if it was cancelled meanwhile.
	thread *Thread
	err    error
	// The last string quoted, by identity: a list holding the same string
	// many times (["x" * 10000] * 10000) is quoted once, not per element.
	lastStr    *byte
	lastLen    int
	lastQuoted string
}

// NewPrinter returns a Printer whose output may not exceed max bytes;
// a negative max means no limit.
func NewPrinter(max int) *Printer { return &Printer{max: max} }

// printStepsPerValue is the steps a Printer counts per value it writes
// (calibrated so that printing counts about as many steps per second as
// the interpreter's loops).
const printStepsPerValue = 3

// SetThread makes p count a step per value written to thread (see
// Thread.AddSteps); once the thread is cancelled, p stops writing (as if
// truncated) and Err returns the cancellation.
func (p *Printer) SetThread(thread *Thread) { p.thread = thread }

// Err returns the cancellation that stopped p, if any.
func (p *Printer) Err() error { return p.err }

// newPrinter returns a Printer bounded by the thread's remaining budget
// that counts steps on the thread.
func (thread *Thread) newPrinter() *Printer {
	return &Printer{max: thread.printLimit(), thread: thread}
}

// A Printable is a value that writes its own string form to a Printer,
// typically calling WriteValue for the values it contains, so that size
// and depth limits and cycle detection apply across it.
type Printable interface {
	Value
	PrintTo(p *Printer)
}

// Truncated reports whether a write was dropped because of the size limit.
func (p *Printer) Truncated() bool { return p.overflow }

// TooDeep reports whether a value was nested too deeply to be printed.
func (p *Printer) TooDeep() bool { return p.deep }

// Len returns the number of bytes written.
func (p *Printer) Len() int { return len(p.buf) }

// String returns the bytes written.
func (p *Printer) String() string { return unsafe.String(unsafe.SliceData(p.buf), len(p.buf)) }

// fits reports whether n more bytes fit, recording an overflow otherwise.
func (p *Printer) fits(n int) bool {
	if p.overflow {
		return false
	}
	if p.max >= 0 && n > p.max-len(p.buf) {
		p.overflow = true
		return false
	}
	if len(p.buf)+n > cap(p.buf) {
		p.grow(n)
	}
	return true
}

// grow makes room for n more bytes. Unlike append, it never grows the
// buffer beyond the limit, so that building a string that ends up too
// large does not allocate twice the limit first.
func (p *Printer) grow(n int) {
	need := len(p.buf) + n
	newCap := max(2*cap(p.buf), need, 64)
	if p.max >= 0 && newCap > p.max {
		newCap = max(p.max, need)
	}
	buf := make([]byte, len(p.buf), newCap)
	copy(buf, p.buf)
	p.buf = buf
}

// appendUnlimited appends s, ignoring the limit (used for a final "...").
func (p *Printer) appendUnlimited(s string) { p.buf = append(p.buf, s...) }

// WriteString writes s if it fits.
func (p *Printer) WriteString(s string) {
	if p.fits(len(s)) {
		p.buf = append(p.buf, s...)
	}
}

// WriteByte writes b if it fits.
func (p *Printer) WriteByte(b byte) error {
	if p.fits(1) {
		p.buf = append(p.buf, b)
	}
	return nil
}

// WriteRune writes r if it fits.
func (p *Printer) WriteRune(r rune) {
	if p.fits(utf8.RuneLen(r)) {
		p.buf = utf8.AppendRune(p.buf, r)
	}
}

// Write implements io.Writer; it never fails.
func (p *Printer) Write(b []byte) (int, error) {
	if p.fits(len(b)) {
		p.buf = append(p.buf, b...)
	}
	return len(b), nil
}

// WriteValue writes the string form of x.
func (p *Printer) WriteValue(x Value) {
	if p.overflow {
		return
	}
	if p.thread != nil {
		if err := p.thread.AddSteps(printStepsPerValue); err != nil {
			p.err, p.overflow = err, true
			return
		}
	}
	switch x := x.(type) {
	case nil:
		p.WriteString("<nil>") // indicates a bug

	// These four cases are duplicates of T.String(), for efficiency.
	case NoneType:
		p.WriteString("None")

	case Int:
		if n := bigBits(x); n > 0 && !p.fits(n/3+2) {
			return
		}
		p.WriteString(x.String())

	case Bool:
		if x {
			p.WriteString("True")
		} else {
			p.WriteString("False")
		}

	case String:
		if p.fits(len(x) + 2) {
			if ptr := unsafe.StringData(string(x)); ptr != p.lastStr || len(x) != p.lastLen || ptr == nil {
				p.lastStr, p.lastLen, p.lastQuoted = ptr, len(x), syntax.Quote(string(x), false)
			}
			p.WriteString(p.lastQuoted)
		}

	case Bytes:
		if p.fits(len(x) + 3) {
			p.WriteString(x.String())
		}

	case *List:
		if !p.enter() {
			return
		}
		p.WriteByte('[')
		if pathContains(p.path, x) {
			p.WriteString("...") // list contains itself
		} else {
			p.path = append(p.path, x)
			for i, elem := range x.elems {
				if p.overflow {
					break
				}
				if i > 0 {
					p.WriteString(", ")
				}
				p.WriteValue(elem)
			}
			p.path = p.path[:len(p.path)-1]
		}
		p.WriteByte(']')
		p.depth--

	case Tuple:
		if !p.enter() {
			return
		}
		p.WriteByte('(')
		for i, elem := range x {
			if p.overflow {
				break
			}
			if i > 0 {
				p.WriteString(", ")
			}
			p.WriteValue(elem)
		}
		if len(x) == 1 {
			p.WriteByte(',')
		}
		p.WriteByte(')')
		p.depth--

	case *Function:
		fmt.Fprintf(p, "<function %s>", x.Name())

	case *Builtin:
		if x.recv != nil {
			fmt.Fprintf(p, "<built-in method %s of %s value>", x.Name(), x.recv.Type())
		} else {
			fmt.Fprintf(p, "<built-in function %s>", x.Name())
		}

	case *Dict:
		if !p.enter() {
			return
		}
		p.WriteByte('{')
		if pathContains(p.path, x) {
			p.WriteString("...") // dict contains itself
		} else {
			sep := ""
			for e := x.ht.head; e != nil && !p.overflow; e = e.next {
				k, v := e.key, e.value
				p.WriteString(sep)
				p.WriteValue(k)
				p.WriteString(": ")
				p.path = append(p.path, x) // cycle check
				p.WriteValue(v)
				p.path = p.path[:len(p.path)-1]
				sep = ", "
			}
		}
		p.WriteByte('}')
		p.depth--

	case *Set:
		if !p.enter() {
			return
		}
		p.WriteString("set([")
		for e := x.ht.head; e != nil && !p.overflow; e = e.next {
			if e != x.ht.head {
				p.WriteString(", ")
			}
			p.WriteValue(e.key)
		}
		p.WriteString("])")
		p.depth--

	case Printable:
		if !p.enter() {
			return
		}
		x.PrintTo(p)
		p.depth--

	default:
		p.WriteString(x.String())
	}
}

// PrintWithPath writes x, which the application-defined value container
// contains, detecting cycles through container: if container is already
// being printed, it writes "..." instead. container must be comparable
// (typically a pointer).
func (p *Printer) PrintWithPath(container, x Value) {
	if pathContains(p.path, container) {
		p.WriteString("...")
		return
	}
	p.path = append(p.path, container)
	p.WriteValue(x)
	p.path = p.path[:len(p.path)-1]
}

// enter increments the depth, reporting false (after writing "...") if
// the limit is exceeded.
func (p *Printer) enter() bool {
	if p.depth >= MaxNestingDepth {
		p.deep = true
		p.WriteString("...")
		return false
	}
	p.depth++
	return true
}

// toString returns the string form of value v, truncated (with a final
// "...") after defaultPrintLimit bytes.
func toString(v Value) string {
	p := Printer{max: defaultPrintLimit}
	p.WriteValue(v)
	if p.overflow {
		p.appendUnlimited("...")
	}
	return p.String()
}

// StringOf returns the string form of v, as v.String() returns it for the
// built-in types: output longer than 1 MiB is truncated and ends with
// "...", and values nested too deeply are abbreviated. Printable
// application types use it to implement String.
func StringOf(v Value) string { return toString(v) }

// printValue returns the string form of x, charged to thread.
func (thread *Thread) printValue(x Value) (string, error) {
	p := thread.newPrinter()
	p.WriteValue(x)
	return thread.printed(p)
}

// printed returns the output of p, charged to thread, or the error of a
// truncated or too deep output.
func (thread *Thread) printed(p *Printer) (string, error) {
	if p.err != nil {
		return "", p.err
	}
	if p.deep {
		return "", fmt.Errorf("value nested too deeply (more than %d levels)", MaxNestingDepth)
	}
	if p.overflow {
		return "", thread.overLimit(p.Len())
	}
	if err := thread.alloc(int64(p.Len()) + AllocStringOverhead); err != nil {
		return "", err
	}
	return p.String(), nil
}

// ---- depth-limited hashing ----

// A DepthHasher is a value whose hash depends on values it contains, and
// that computes it using HashDepth, so that nesting is bounded across it.
type DepthHasher interface {
	Value
	HashDepth(depth int) (uint32, error)
}

// HashDepth returns the hash of x, which is nested depth levels inside the
// value being hashed. It fails if depth exceeds MaxNestingDepth.
func HashDepth(x Value, depth int) (uint32, error) {
	if depth > MaxNestingDepth {
		return 0, fmt.Errorf("value nested too deeply to hash (more than %d levels)", MaxNestingDepth)
	}
	switch x := x.(type) {
	case Tuple:
		return x.hashDepth(depth)
	case DepthHasher:
		return x.HashDepth(depth)
	}
	return x.Hash()
}

// Sizes charged by some built-ins, in bytes.
const (
	itemBytes          = 80 // a (key, value) tuple in a list, as built by dict.items()
	enumeratePairBytes = 64 // an (index, value) tuple in a list
	splitElemBytes     = 48 // a substring in a list, as built by split()
	maxPrealloc        = 1 << 24
)

// allocErr returns err if it is an *AllocLimitError, else wrapped, so that
// built-ins that decorate the errors of their helpers keep the type of an
// allocation failure.
func allocErr(err, wrapped error) error {
	var e *AllocLimitError
	if errors.As(err, &e) {
		return err
	}
	return wrapped
}

// countFields returns len(strings.Fields(s)) without allocating.
func countFields(s string) int {
	n := 0
	inField := false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !inField {
			n++
		}
		inField = !space
	}
	return n
}

// binary is Binary(op, x, y) for the interpreter: the result is charged
// to the thread, in advance where its size is known, and integers are
// bounded in size when the thread has an allocation limit.
func (thread *Thread) binary(op syntax.Token, x, y Value) (Value, error) {
	if err := thread.chargeBinary(op, x, y); err != nil {
		return nil, err
	}
	var z Value
	var err error
	if s, ok := x.(String); ok && op == syntax.PERCENT {
		z, err = thread.interpolate(string(s), y)
	} else {
		z, err = Binary(op, x, y)
	}
	if err != nil {
		return nil, err
	}
	switch z := z.(type) {
	case Int:
		if err := thread.checkIntSize(z); err != nil {
			return nil, err
		}
	case String, Bytes, *List, Tuple, Float, Bool, NoneType, *Dict, *Set:
		// charged in advance
	default:
		if err := thread.chargeResult(z); err != nil {
			return nil, err
		}
	}
	return z, nil
}

// LastReturnPosition returns the position of the last return executed
// by the thread (an explicit return statement, or the implicit return at
// the end of a function body), or the zero Position if none was. After
// Call returns a value, it is the position at which the called function
// returned.
func (thread *Thread) LastReturnPosition() syntax.Position {
	if thread.retFuncode == nil {
		return syntax.Position{}
	}
	return thread.retFuncode.Position(thread.retPC)
}

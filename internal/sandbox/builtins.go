package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/larkrun/lark/third_party/go.starlark.net/starlark"
	"github.com/larkrun/lark/third_party/go.starlark.net/starlarkstruct"
)

// helperImpls implements the function helpers (functionHelpers).
var helperImpls = map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
	"r_await":        rAwait,
	"r_await_all":    rAwaitAll,
	"r_http_get_v1":  rHTTP,
	"r_http_post_v1": rHTTP,
	"r_now_v1":       rNow,
	"r_rand_v1":      rRand,
	"r_exit":         rExit,
	"r_invoke_v1":    rInvoke,
	"r_emit_v1":      rEmit,
}

// bindArgs binds the arguments of a call of a helper to its parameters, as
// the helper table (helpers.go) defines them, so that the runtime accepts
// exactly the calls Check accepts. It returns one value per parameter, nil
// for an optional parameter not given.
func bindArgs(name string, args starlark.Tuple, kwargs []starlark.Tuple) ([]starlark.Value, error) {
	h := helperTable[tables().helpers[name]]
	if len(args) > h.MaxArgs {
		return nil, errorf(name, "got %d positional arguments, want at most %d; signature: %s", len(args), h.MaxArgs, h.Signature())
	}
	vals := make([]starlark.Value, len(h.Params))
	copy(vals, args)
	for _, kv := range kwargs {
		k := string(kv[0].(starlark.String))
		i := slices.Index(h.Params, k)
		if i < 0 {
			return nil, errorf(name, "unexpected keyword argument %s; signature: %s", k, h.Signature())
		}
		if vals[i] != nil {
			return nil, errorf(name, "got multiple values for parameter %s", k)
		}
		vals[i] = kv[1]
	}
	for i := range h.MinArgs {
		if vals[i] == nil {
			return nil, errorf(name, "missing argument for parameter %s; signature: %s", h.Params[i], h.Signature())
		}
	}
	return vals, nil
}

// given reports whether an optional argument was given and is not None.
func given(v starlark.Value) bool { return v != nil && v != starlark.None }

// rNow implements r_now_v1(): the host's current time, UTC, RFC 3339 with
// milliseconds.
func rNow(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if _, err := bindArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.String(runOf(thread).host.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")), nil
}

// rRand implements r_rand_v1(label=None): the hex SHA-256 of
// "<invocation id>|<label>|<n>", where n counts the earlier calls with the
// same label in this execution (None is the label ""). The values are
// deterministic: a retry or a replay of the same invocation sees the same
// sequence.
func rRand(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	vals, err := bindArgs(b.Name(), args, kwargs)
	if err != nil {
		return nil, err
	}
	label := ""
	if given(vals[0]) {
		s, ok := vals[0].(starlark.String)
		if !ok {
			return nil, errorf(b.Name(), "label must be a string or None, not %s", vals[0].Type())
		}
		label = string(s)
	}
	r := runOf(thread)
	if r.rand == nil {
		r.rand = map[string]int{}
	}
	n := r.rand[label]
	r.rand[label] = n + 1
	h := sha256.New()
	h.Write([]byte(r.info.InvocationID))
	h.Write([]byte{'|'})
	h.Write([]byte(label))
	h.Write([]byte{'|'})
	h.Write([]byte(strconv.Itoa(n)))
	return starlark.String(hex.EncodeToString(h.Sum(nil))), nil
}

// rExit implements r_exit(error): it ends the execution with the error
// envelope given as a dict, struct or Object with id, message, category
// and details (or a string, taken as the message).
func rExit(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	vals, err := bindArgs(b.Name(), args, kwargs)
	if err != nil {
		return nil, err
	}
	e, err := envelopeFrom(thread, b.Name(), vals[0])
	if err != nil {
		return nil, err
	}
	// Like fail(): where the user ended the run, and how it got there. Keys the author set win.
	stack := thread.CallStack()
	for i := len(stack) - 1; i >= 0; i-- {
		if pos := stack[i].Pos; pos.IsValid() && pos.Line > 0 && pos.Filename() != "<builtin>" {
			if _, ok := e.Details["line"]; !ok {
				e.withDetail("line", int(pos.Line))
			}
			if _, ok := e.Details["column"]; !ok {
				e.withDetail("column", int(pos.Col))
			}
			break
		}
	}
	if _, ok := e.Details["backtrace"]; !ok {
		e.withDetail("backtrace", truncateMiddle(stack.String(), maxBacktraceBytes))
	}
	runOf(thread).exit = e
	return nil, errExit
}

// envelopeFrom converts the argument of r_exit: id defaults to ErrRuntime
// (also when it is not a GTS id), category to non_retryable, message to
// "". details must convert to JSON; a value that is not an object is
// kept under details.value.
func envelopeFrom(thread *starlark.Thread, name string, v starlark.Value) (*Error, error) {
	if s, ok := v.(starlark.String); ok {
		return newError(ErrRuntime, CategoryNonRetryable, "%s", string(s)), nil
	}
	field := func(key string) starlark.Value {
		switch v := v.(type) {
		case *starlark.Dict:
			x, _, _ := v.Get(starlark.String(key))
			return x
		case starlark.HasAttrs:
			x, _ := v.Attr(key)
			return x
		}
		return nil
	}
	switch v.(type) {
	case *starlark.Dict, *Object, *starlarkstruct.Struct:
	default:
		return nil, errorf(name, "got %s, want an error envelope (a dict or struct with id, message, category, details)", v.Type())
	}
	e := &Error{TypeID: ErrRuntime, Category: CategoryNonRetryable}
	if id, ok := field("id").(starlark.String); ok && strings.HasPrefix(string(id), "gts.") {
		e.TypeID = truncate(string(id), 512)
	}
	if msg := field("message"); given(msg) {
		s, err := displayString(thread, msg)
		if err != nil {
			return nil, err
		}
		e.Message = truncate(s, maxMessageBytes)
	}
	if c := field("category"); given(c) {
		s, ok := c.(starlark.String)
		if !ok || !validCategory(string(s)) {
			return nil, errorf(name, "category must be one of retryable, non_retryable, resource_limit, timeout, canceled; got %s",
				truncate(c.String(), 64))
		}
		e.Category = string(s)
	}
	if d := field("details"); given(d) {
		x, err := toGoLimit(thread, d, "the error details", MaxErrorBytes)
		if err != nil {
			if isLimitError(err) {
				return nil, err
			}
			return nil, errorf(name, "details: %v", err)
		}
		if m, ok := x.(map[string]any); ok {
			e.Details = m
		} else {
			e.Details = map[string]any{"value": x}
		}
	}
	return e, nil
}

// envelopeValue returns e as the Starlark struct(id, message, category, details).
func envelopeValue(thread *starlark.Thread, e *Error) (starlark.Value, error) {
	var details starlark.Value = starlark.None
	if e.Details != nil {
		d, err := toStarlark(thread, e.Details)
		if err != nil {
			return nil, err
		}
		details = d
	}
	return makeStruct(thread, "id", starlark.String(e.TypeID), "message", starlark.String(e.Message),
		"category", starlark.String(e.Category), "details", details)
}

// makeStruct returns struct(k1=v1, ...) for alternating names and values.
func makeStruct(thread *starlark.Thread, kv ...any) (starlark.Value, error) {
	if err := thread.AddAllocBytes(int64(len(kv)) * starlark.AllocElemBytes); err != nil {
		return nil, err
	}
	d := make(starlark.StringDict, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		d[kv[i].(string)] = kv[i+1].(starlark.Value)
	}
	return starlarkstruct.FromStringDict(starlarkstruct.Default, d), nil
}

// responseValue returns struct(status_code, headers, body) for an HTTP
// answer: header names are lower-cased; the body is the parsed JSON, or
// an empty object if it is not JSON.
func responseValue(thread *starlark.Thread, resp *HTTPResponse) (starlark.Value, error) {
	if err := thread.AddAllocBytes(int64(len(resp.Body))); err != nil {
		return nil, err
	}
	var body any = map[string]any{}
	if len(resp.Body) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(resp.Body)))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil && !dec.More() {
			body = v
		}
	}
	b, err := toStarlark(thread, body)
	if err != nil {
		return nil, err
	}
	headers := make(map[string]any, len(resp.Headers))
	for k, v := range resp.Headers {
		headers[strings.ToLower(k)] = v
	}
	h, err := toStarlark(thread, headers)
	if err != nil {
		return nil, err
	}
	return makeStruct(thread, "status_code", starlark.MakeInt(resp.StatusCode), "headers", h, "body", b)
}

// rAwait implements r_await(promise).
func rAwait(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	vals, err := bindArgs(b.Name(), args, kwargs)
	if err != nil {
		return nil, err
	}
	p, ok := vals[0].(*Promise)
	if !ok {
		return nil, errorf(b.Name(), "got %s, want a promise (from r_http_get_v1, r_http_post_v1 or r_invoke_v1)", vals[0].Type())
	}
	return runOf(thread).await(thread, b.Name(), p)
}

// rAwaitAll implements r_await_all(promises): the values of a list or
// tuple of promises, in order. The calls behind them already run
// concurrently; a failure with exit_on_http_error ends the execution at
// the first such promise in list order.
func rAwaitAll(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	vals, err := bindArgs(b.Name(), args, kwargs)
	if err != nil {
		return nil, err
	}
	seq, ok := vals[0].(starlark.Indexable)
	if !ok || vals[0].Type() == "string" || vals[0].Type() == "bytes" {
		return nil, errorf(b.Name(), "got %s, want a list or tuple of promises", vals[0].Type())
	}
	n := seq.Len()
	ps := make([]*Promise, n)
	for i := range n {
		p, ok := seq.Index(i).(*Promise)
		if !ok {
			return nil, errorf(b.Name(), "element %d is a %s, not a promise", i, seq.Index(i).Type())
		}
		ps[i] = p
	}
	if err := chargeList(thread, n, 1); err != nil {
		return nil, err
	}
	r := runOf(thread)
	out := make([]starlark.Value, n)
	for i, p := range ps {
		v, err := r.await(thread, b.Name(), p)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return starlark.NewList(out), nil
}

// helperTimeout returns the timeout_ms argument (DefaultHelperTimeout if
// None), which must be positive.
func helperTimeout(name string, v starlark.Value) (time.Duration, error) {
	if !given(v) {
		return DefaultHelperTimeout, nil
	}
	var ms int64
	if err := starlark.AsInt(v, &ms); err != nil {
		return 0, errorf(name, "timeout_ms: %v", err)
	}
	if ms <= 0 {
		return 0, errorf(name, "timeout_ms must be positive, got %d", ms)
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		ms = math.MaxInt64 / int64(time.Millisecond)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// stringMap converts a dict or Object of strings (headers) to Go.
func stringMap(thread *starlark.Thread, name, what string, v starlark.Value) (map[string]string, error) {
	m, ok := v.(starlark.IterableMapping)
	if !ok {
		return nil, errorf(name, "%s must be a dict of strings, not %s", what, v.Type())
	}
	items := m.Items()
	if err := thread.AddAllocBytes(int64(len(items)) * goMapEntryBytes); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(items))
	for _, kv := range items {
		k, ok1 := kv[0].(starlark.String)
		v, ok2 := kv[1].(starlark.String)
		if !ok1 || !ok2 {
			return nil, errorf(name, "%s must map strings to strings, got %s: %s", what, kv[0].Type(), kv[1].Type())
		}
		out[string(k)] = string(v)
	}
	return out, nil
}

// retryPolicy is the retry argument of the HTTP helpers.
type retryPolicy struct {
	maxAttempts  int
	initialDelay time.Duration
	maxDelay     time.Duration
	multiplier   float64
}

// Defaults and bounds of retry policies.
const (
	defaultRetryAttempts = 3
	maxRetryAttempts     = 10
	defaultInitialDelay  = 100 * time.Millisecond
	defaultMaxDelay      = 10 * time.Second
	defaultMultiplier    = 2.0
)

// RetryKeys are the keys of the retry dict of the HTTP helpers: the ADR's own two, max_attempts
// (attempts in total, 1..10) and backoff_ms (the delay between them), and Lark's additions for an
// exponential backoff, initial_delay_ms, max_delay_ms and backoff_multiplier. Check refuses a
// literal dict with other keys, or with values of the wrong type, at registration.
var RetryKeys = []string{"max_attempts", "backoff_ms", "initial_delay_ms", "max_delay_ms", "backoff_multiplier"}

// parseRetry converts retry=None or a dict: max_attempts (1..10, default 3); either backoff_ms, a
// constant delay between attempts (0..3600000), or an exponential backoff of initial_delay_ms
// (default 100), max_delay_ms (default 10000) and backoff_multiplier (1..100, default 2). A
// mistake is a misuse of the helper (non-retryable validation error).
func parseRetry(name string, v starlark.Value) (retryPolicy, error) {
	p := retryPolicy{maxAttempts: 1}
	if !given(v) {
		return p, nil
	}
	m, ok := v.(starlark.IterableMapping)
	if !ok {
		return p, errorf(name, "retry must be None or a dict, not %s", v.Type())
	}
	p = retryPolicy{maxAttempts: defaultRetryAttempts, initialDelay: defaultInitialDelay, maxDelay: defaultMaxDelay, multiplier: defaultMultiplier}
	var constant, exponential bool
	ms := func(k starlark.String, v starlark.Value) (time.Duration, error) {
		var n int64
		if err := starlark.AsInt(v, &n); err != nil || n < 0 || n > int64(time.Hour/time.Millisecond) {
			return 0, errorf(name, "retry.%s must be an int in 0..3600000, not %s", string(k), truncate(v.String(), 64))
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	for _, kv := range m.Items() {
		k, _ := kv[0].(starlark.String)
		switch string(k) {
		case "max_attempts":
			if err := starlark.AsInt(kv[1], &p.maxAttempts); err != nil || p.maxAttempts < 1 || p.maxAttempts > maxRetryAttempts {
				return p, errorf(name, "retry.max_attempts must be an int in 1..%d, not %s", maxRetryAttempts, truncate(kv[1].String(), 64))
			}
		case "backoff_ms":
			d, err := ms(k, kv[1])
			if err != nil {
				return p, err
			}
			p.initialDelay, p.maxDelay, p.multiplier, constant = d, d, 1, true
		case "initial_delay_ms", "max_delay_ms":
			d, err := ms(k, kv[1])
			if err != nil {
				return p, err
			}
			if k == "initial_delay_ms" {
				p.initialDelay = d
			} else {
				p.maxDelay = d
			}
			exponential = true
		case "backoff_multiplier":
			f, ok := starlark.AsFloat(kv[1])
			if !ok || !(f >= 1 && f <= 100) {
				return p, errorf(name, "retry.backoff_multiplier must be a number in 1..100, not %s", truncate(kv[1].String(), 64))
			}
			p.multiplier, exponential = f, true
		default:
			return p, errorf(name, "retry has no key %s (want %s)", truncate(kv[0].String(), 64), strings.Join(RetryKeys, ", "))
		}
	}
	if constant && exponential {
		return p, errorf(name, "retry.backoff_ms (a constant delay) cannot be combined with initial_delay_ms, max_delay_ms or backoff_multiplier")
	}
	return p, nil
}

// delay returns the backoff before attempt n+1 (n >= 1).
func (p retryPolicy) delay(n int) time.Duration {
	d := float64(p.initialDelay) * math.Pow(p.multiplier, float64(n-1))
	if d > float64(p.maxDelay) {
		return p.maxDelay
	}
	return time.Duration(d)
}

// rHTTP implements r_http_get_v1(url, headers=None, timeout_ms=None,
// retry=None, exit_on_http_error=True) and r_http_post_v1(url, body, ...),
// whose body is converted to JSON. The request starts at once; the
// promise resolves to struct(ok=True, response=struct(status_code,
// headers, body)) for a 2xx answer, else struct(ok=False, error=envelope)
// (with response for a non-2xx answer). With retry, transport errors, 429
// and 5xx are retried with capped exponential backoff within the
// execution's deadline. With exit_on_http_error, a final non-2xx answer
// (ErrHTTP) or transport failure (ErrHTTPTransport) ends the execution
// like r_exit when the promise is awaited (or at the end of main).
// Errors never carry the URL's path, query or headers: only its host.
func rHTTP(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	name := b.Name()
	vals, err := bindArgs(name, args, kwargs)
	if err != nil {
		return nil, err
	}
	req := HTTPRequest{Method: "GET"}
	rest := vals[1:] // headers, timeout_ms, retry, exit_on_http_error
	if name == "r_http_post_v1" {
		req.Method = "POST"
		body, err := toGo(thread, vals[1], name+" body")
		if err != nil {
			if isLimitError(err) {
				return nil, err
			}
			return nil, errorf(name, "body: %v", err)
		}
		data, err := json.Marshal(body)
		if err != nil {
			return nil, errorf(name, "body: %v", err)
		}
		if err := thread.AddAllocBytes(int64(len(data))); err != nil {
			return nil, err
		}
		req.Body = data
		rest = vals[2:]
	}
	rawURL, ok := vals[0].(starlark.String)
	if !ok {
		return nil, errorf(name, "url must be a string, not %s", vals[0].Type())
	}
	u, err := url.Parse(string(rawURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errorf(name, "url must be an absolute http or https URL")
	}
	req.URL = string(rawURL)
	host := u.Hostname()
	if given(rest[0]) {
		if req.Headers, err = stringMap(thread, name, "headers", rest[0]); err != nil {
			return nil, err
		}
	}
	if req.Method == "POST" {
		if req.Headers == nil {
			req.Headers = map[string]string{}
		}
		if !hasHeader(req.Headers, "Content-Type") {
			req.Headers["Content-Type"] = "application/json"
		}
	}
	timeout, err := helperTimeout(name, rest[1])
	if err != nil {
		return nil, err
	}
	policy, err := parseRetry(name, rest[2])
	if err != nil {
		return nil, err
	}
	exitOnError := true
	if given(rest[3]) {
		b, ok := rest[3].(starlark.Bool)
		if !ok {
			return nil, errorf(name, "exit_on_http_error must be a bool, not %s", rest[3].Type())
		}
		exitOnError = bool(b)
	}

	r := runOf(thread)
	p, err := r.sched.submit(thread, name, func(p *Promise) {
		p.outcome = r.doHTTP(req, host, timeout, policy)
	})
	if err != nil {
		return nil, err
	}
	p.exitOnError = exitOnError
	return p, nil
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// doHTTP performs an HTTP call with its retries, on a worker goroutine.
func (r *run) doHTTP(req HTTPRequest, host string, timeout time.Duration, policy retryPolicy) *outcome {
	for attempt := 1; ; attempt++ {
		resp, err := r.httpAttempt(req, timeout)
		var o *outcome
		retryable := false
		switch {
		case err != nil:
			o = &outcome{err: transportError(err, host), host: host}
			retryable = o.err.TypeID == ErrHTTPTransport && o.err.Category == CategoryRetryable
		case resp.StatusCode < 200 || resp.StatusCode > 299:
			o = &outcome{http: &resp, host: host, err: newError(ErrHTTP, httpErrorCategory(resp.StatusCode),
				"HTTP %d from %s", resp.StatusCode, host).
				withDetail("status_code", resp.StatusCode).
				withDetail("host", host)}
			retryable = resp.StatusCode == 429 || resp.StatusCode >= 500
		default:
			return &outcome{http: &resp, host: host}
		}
		if policy.maxAttempts > 1 {
			o.err.withDetail("attempts", attempt)
		}
		if !retryable || attempt >= policy.maxAttempts || r.ctx.Err() != nil {
			return o
		}
		delay := policy.delay(attempt)
		if dl, ok := r.ctx.Deadline(); ok && time.Until(dl) <= delay {
			return o // no time left for another attempt
		}
		if sl, ok := r.host.(Sleeper); ok {
			if sl.Sleep(r.ctx, delay) != nil {
				return o
			}
			continue
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
			return o
		}
	}
}

// httpAttempt makes one attempt, within timeout and the execution's deadline.
func (r *run) httpAttempt(req HTTPRequest, timeout time.Duration) (HTTPResponse, error) {
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	req.Timeout = timeout
	if dl, ok := ctx.Deadline(); ok {
		req.Timeout = min(timeout, time.Until(dl))
	}
	resp, err := r.host.HTTP(ctx, req)
	if err == nil && ctx.Err() != nil && r.ctx.Err() == nil {
		// The host answered after the attempt's timeout: honor the timeout.
		err = newError(ErrTimeout, CategoryTimeout, "request timed out after %v", timeout)
	}
	return resp, err
}

// transportError is the envelope of a failed HTTP attempt: the host's
// *Error (with the URL's host added), or ErrHTTPTransport. The message of
// an error that is not an *Error is not used: it may contain the URL.
func transportError(err error, host string) *Error {
	var e *Error
	if errors.As(err, &e) && e != nil {
		e = e.clone()
		if e.TypeID == "" {
			e.TypeID = ErrHTTPTransport
		}
		if !validCategory(e.Category) {
			e.Category = CategoryRetryable
		}
		e.Message = truncate(e.Message, maxMessageBytes)
	} else {
		e = newError(ErrHTTPTransport, CategoryRetryable, "request to %s failed", host)
	}
	if e.Details == nil || e.Details["host"] == nil {
		e.withDetail("host", host)
	}
	return e
}

// rInvoke implements r_invoke_v1(entrypoint_id, params={}, timeout_ms=None):
// a child invocation through Host.Invoke. The promise resolves to
// struct(ok=True, value=...) or struct(ok=False, error=envelope).
func rInvoke(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	name := b.Name()
	vals, err := bindArgs(name, args, kwargs)
	if err != nil {
		return nil, err
	}
	id, ok := vals[0].(starlark.String)
	if !ok || id == "" {
		return nil, errorf(name, "entrypoint_id must be a non-empty string, not %s", vals[0].Type())
	}
	var params any = map[string]any{}
	if vals[1] != nil {
		params, err = toGo(thread, vals[1], name+" params")
		if err != nil {
			if isLimitError(err) {
				return nil, err
			}
			return nil, errorf(name, "params: %v", err)
		}
	}
	timeout, err := helperTimeout(name, vals[2])
	if err != nil {
		return nil, err
	}
	r := runOf(thread)
	req := InvokeRequest{EntrypointID: string(id), Params: params}
	p, err := r.sched.submit(thread, name, func(p *Promise) {
		ctx, cancel := context.WithTimeout(r.ctx, timeout)
		defer cancel()
		req.Timeout = timeout
		if dl, ok := ctx.Deadline(); ok {
			req.Timeout = min(timeout, time.Until(dl))
		}
		res, err := r.host.Invoke(ctx, req)
		switch {
		case err != nil:
			var e *Error
			if !errors.As(err, &e) || e == nil {
				e = newError(ErrRuntime, CategoryRetryable, "child invocation of %s failed", truncate(string(id), 256))
			}
			p.outcome = &outcome{err: e.clone()}
		case !res.OK && res.Error == nil:
			p.outcome = &outcome{err: newError(ErrRuntime, CategoryRetryable, "child invocation of %s failed", truncate(string(id), 256))}
		default:
			p.outcome = &outcome{invoke: &res}
		}
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// SecretPattern is how a request header value refers to a tenant secret: {{secret:NAME}}, NAME as
// secret names are spelled (a letter or '_', then letters, digits or '_', at most 64).
var SecretPattern = regexp.MustCompile(`\{\{secret:([A-Za-z_][A-Za-z0-9_]{0,63})\}\}`)

// secretMarker is the prefix every reference starts with: a header value without it has none.
const secretMarker = "{{secret:"

// Redacted replaces a substituted secret value in a response before the sandbox sees it.
const Redacted = "[REDACTED]"

// ErrUnknownSecret is what a SecretResolver returns (wrapped or not) for a name the tenant has no
// secret of.
var ErrUnknownSecret = errors.New("egress: no such secret")

// ErrSecretsUnavailable is what a SecretResolver returns when the server cannot open secrets (no
// master key configured).
var ErrSecretsUnavailable = errors.New("egress: secrets are not available on this server")

// Secret is a resolved secret: its value and the host patterns (DomainAllowed) it may be sent to.
type Secret struct {
	Value        string
	AllowedHosts []string
}

// SecretResolver resolves the secret references of one tenant's request (internal/secrets
// implements it). Errors must not contain values.
type SecretResolver interface {
	// ResolveSecret returns the named secret, ErrUnknownSecret when there is none (or when the
	// caller may not know of it), ErrSecretsUnavailable when secrets cannot be opened.
	ResolveSecret(ctx context.Context, name string) (Secret, error)
}

// templated is a request header whose value refers to secrets.
type templated struct {
	header string   // canonical name
	value  string   // the value with its references
	names  []string // the secrets it refers to, in order
}

// secretHeaders are the request's templated headers and the secrets they resolved to.
type secretHeaders struct {
	list    []templated
	secrets map[string]Secret
}

// HasSecretRef reports whether v contains a secret reference.
func HasSecretRef(v string) bool {
	return strings.Contains(v, secretMarker) && SecretPattern.MatchString(v)
}

// resolveSecrets finds the references in hdr and resolves each secret once. A reference that does
// not resolve fails the request; no value is put into hdr (substitute does, per hop).
func resolveSecrets(ctx context.Context, hdr http.Header, r SecretResolver, host string, sec *secrets) (*secretHeaders, error) {
	var sh *secretHeaders
	for k, vs := range hdr {
		v := vs[0]
		if !strings.Contains(v, secretMarker) {
			continue
		}
		m := SecretPattern.FindAllStringSubmatch(v, -1)
		if len(m) == 0 {
			continue
		}
		if sh == nil {
			sh = &secretHeaders{secrets: map[string]Secret{}}
		}
		t := templated{header: k, value: v}
		for _, g := range m {
			t.names = append(t.names, g[1])
		}
		sh.list = append(sh.list, t)
	}
	if sh == nil {
		return nil, nil
	}
	if r == nil {
		return nil, &Error{Kind: KindSecret, Host: host, Secret: sh.list[0].names[0],
			Msg: fmt.Sprintf("secret %q: secrets are not available for this request", sh.list[0].names[0])}
	}
	for _, t := range sh.list {
		for _, name := range t.names {
			if _, done := sh.secrets[name]; done {
				continue
			}
			s, err := r.ResolveSecret(ctx, name)
			switch {
			case errors.Is(err, ErrUnknownSecret):
				return nil, &Error{Kind: KindSecret, Host: host, Secret: name, Msg: fmt.Sprintf("secret %q is not defined", name)}
			case errors.Is(err, ErrSecretsUnavailable):
				return nil, &Error{Kind: KindSecret, Host: host, Secret: name,
					Msg: fmt.Sprintf("secret %q: secrets are not available on this server (no master key configured)", name)}
			case err != nil:
				if cerr := ctx.Err(); cerr != nil {
					return nil, ctxError(cerr, host)
				}
				return nil, &Error{Kind: KindTransport, Host: host, Secret: name, Msg: fmt.Sprintf("secret %q could not be read", name)}
			}
			sec.add(s.Value)
			sh.secrets[name] = s
		}
	}
	return sh, nil
}

// substitute sets the templated headers of one hop in out (a clone of the request's headers) for
// host. A header the hop does not carry any more (dropped when a redirect left the origin) stays
// out. When a referenced secret may not be sent to host, the first hop fails; on a redirect the
// header is dropped from out and from hdr (for the rest of the chain).
func (sh *secretHeaders) substitute(hdr, out http.Header, host string, hop int) error {
	if sh == nil {
		return nil
	}
	for _, t := range sh.list {
		if _, ok := hdr[t.header]; !ok {
			continue
		}
		allowed := true
		var refused string
		for _, name := range t.names {
			if !DomainAllowed(host, sh.secrets[name].AllowedHosts) {
				allowed, refused = false, name
				break
			}
		}
		if !allowed {
			if hop == 0 {
				return &Error{Kind: KindSecret, Host: host, Secret: refused,
					Msg: fmt.Sprintf("secret %q may not be sent to host %s (not in its allowed_hosts)", refused, host)}
			}
			hdr.Del(t.header)
			out.Del(t.header)
			continue
		}
		v := SecretPattern.ReplaceAllStringFunc(t.value, func(ref string) string {
			return sh.secrets[ref[len(secretMarker):len(ref)-2]].Value
		})
		if !validHeaderValue(v) {
			return &Error{Kind: KindBadRequest, Host: host, Msg: fmt.Sprintf("header %q: a secret's value is not a valid header value", t.header)}
		}
		out[t.header] = []string{v}
	}
	return nil
}

// scrub replaces every substituted value, and its JSON- and URL-escaped forms, in a response's
// headers and body by Redacted.
func (sh *secretHeaders) scrub(resp *Response) {
	if sh == nil {
		return
	}
	var forms []string
	for _, s := range sh.secrets {
		forms = append(forms, escapedForms(s.Value)...)
	}
	// Longest first, so that a value containing another is replaced whole.
	for i := range forms {
		for j := i + 1; j < len(forms); j++ {
			if len(forms[j]) > len(forms[i]) {
				forms[i], forms[j] = forms[j], forms[i]
			}
		}
	}
	body := string(resp.Body)
	for _, f := range forms {
		if f == "" {
			continue
		}
		body = strings.ReplaceAll(body, f, Redacted)
		for k, v := range resp.Headers {
			resp.Headers[k] = strings.ReplaceAll(v, f, Redacted)
		}
	}
	resp.Body = scrubJSON([]byte(body), sh.values())
}

func (sh *secretHeaders) values() []string {
	out := make([]string, 0, len(sh.secrets))
	for _, s := range sh.secrets {
		out = append(out, s.Value)
	}
	return out
}

// scrubJSON handles a JSON body that spells a value with escapes (\u0073k_live...) which the
// byte-level replacement cannot see but the sandbox's JSON decoding would undo: when a decoded
// string (or key) contains a value, the body is re-encoded with the value replaced. Bodies that
// are not JSON, or hold no value, are returned unchanged.
func scrubJSON(body []byte, values []string) []byte {
	if !bytes.Contains(body, []byte(`\`)) { // without an escape, decoding reveals nothing new
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return body
	}
	changed := false
	clean := func(s string) string {
		for _, val := range values {
			if val != "" && strings.Contains(s, val) {
				s = strings.ReplaceAll(s, val, Redacted)
				changed = true
			}
		}
		return s
	}
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case string:
			return clean(t)
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
			return t
		case map[string]any:
			out := make(map[string]any, len(t))
			for k, e := range t {
				out[clean(k)] = walk(e)
			}
			return out
		}
		return x
	}
	v = walk(v)
	if !changed {
		return body
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{}`) // cannot happen for decoded JSON; never return the unscrubbed body
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// escapedForms are the forms of v an echoing server commonly sends back: as is, as a JSON string's
// content (with and without HTML escaping), and URL-escaped.
func escapedForms(v string) []string {
	out := []string{v}
	add := func(f string) {
		for _, o := range out {
			if o == f {
				return
			}
		}
		out = append(out, f)
	}
	if b, err := json.Marshal(v); err == nil {
		add(string(b[1 : len(b)-1]))
	}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err == nil {
		s := strings.TrimSuffix(sb.String(), "\n")
		add(s[1 : len(s)-1])
	}
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	return out
}

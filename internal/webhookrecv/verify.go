package webhookrecv

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/webhook"
)

// Preset headers of the hmac formats.
const (
	HeaderGitHub256      = "X-Hub-Signature-256"
	HeaderGitHub1        = "X-Hub-Signature"
	HeaderStripe         = "Stripe-Signature"
	HeaderSlack          = "X-Slack-Signature"
	HeaderSlackTimestamp = "X-Slack-Request-Timestamp"
	// DefaultAPIKeyHeader is where an api_key is looked for when neither a header nor a query
	// parameter is configured.
	DefaultAPIKeyHeader = "X-API-Key"
)

// AuthError is an authentication failure: the delivery answers 401. Reason is recorded with the
// delivery (it never holds the secret or the signature).
type AuthError struct{ Reason string }

func (e *AuthError) Error() string { return "webhook authentication failed: " + e.Reason }

func authErr(reason string) error { return &AuthError{Reason: reason} }

// Verified is what an authenticated delivery proved.
type Verified struct {
	// ReplayKey, for the hmac types, identifies the signed request (a hash of the MAC and the
	// signed timestamp): the same signed request has the same key. Empty for the other types.
	ReplayKey string
	// SignedAt is the signed timestamp (stripe, slack, generic with a timestamp header).
	SignedAt *time.Time
}

// Message is the part of a delivery authentication looks at.
type Message struct {
	Header http.Header
	Query  url.Values
	Body   []byte
}

// Verify authenticates m against a (the trigger's configuration) and the secrets that are valid
// now (the current one first, then a replaced one still in its overlap). Every comparison is
// constant-time; the first secret that matches wins. A signed timestamp further than the
// tolerance from now (either way) fails.
func Verify(a webhook.Authentication, secrets [][]byte, m Message, now time.Time) (Verified, error) {
	switch a.Type {
	case webhook.AuthNone:
		return Verified{}, nil
	case webhook.AuthHMACSHA256, webhook.AuthHMACSHA1:
		return verifyHMAC(a, secrets, m, now)
	case webhook.AuthBasic:
		user, pass, ok := basicAuth(m.Header.Get("Authorization"))
		if !ok {
			return Verified{}, authErr("missing or malformed basic credentials")
		}
		userOK := equal([]byte(user), []byte(a.Username))
		for _, s := range secrets {
			if userOK&equal([]byte(pass), s) == 1 {
				return Verified{}, nil
			}
		}
		return Verified{}, authErr("wrong basic credentials")
	case webhook.AuthBearer:
		tok, ok := strings.CutPrefix(m.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" {
			return Verified{}, authErr("missing bearer token")
		}
		return Verified{}, matchAny([]byte(tok), secrets, "wrong bearer token")
	case webhook.AuthAPIKey:
		var key string
		if a.QueryParam != "" {
			key = m.Query.Get(a.QueryParam)
		} else {
			key = m.Header.Get(headerOr(a.Header, DefaultAPIKeyHeader))
		}
		if key == "" {
			return Verified{}, authErr("missing api key")
		}
		return Verified{}, matchAny([]byte(key), secrets, "wrong api key")
	}
	return Verified{}, authErr("unknown authentication type")
}

func headerOr(h, def string) string {
	if h == "" {
		return def
	}
	return h
}

// equal compares two values in constant time whatever their lengths (both are hashed first, so
// the time does not depend on where they differ or on the secret's length); 1 when equal.
func equal(a, b []byte) int {
	ha, hb := sha256.Sum256(a), sha256.Sum256(b)
	return subtle.ConstantTimeCompare(ha[:], hb[:])
}

func matchAny(v []byte, secrets [][]byte, reason string) error {
	ok := 0
	for _, s := range secrets {
		ok |= equal(v, s)
	}
	if ok == 1 {
		return nil
	}
	return authErr(reason)
}

func basicAuth(h string) (user, pass string, ok bool) {
	const prefix = "Basic "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(h[len(prefix):])
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

// signed is one signature candidate: the signed message and the MACs offered for it.
type signed struct {
	payload []byte
	macs    [][]byte
	at      *time.Time
}

func verifyHMAC(a webhook.Authentication, secrets [][]byte, m Message, now time.Time) (Verified, error) {
	newHash := sha256.New
	if a.Type == webhook.AuthHMACSHA1 {
		newHash = sha1.New
	}
	sig, err := parseSignature(a, m)
	if err != nil {
		return Verified{}, err
	}
	if sig.at != nil {
		tol := time.Duration(toleranceOf(a)) * time.Second
		if d := now.Sub(*sig.at); d > tol || d < -tol {
			return Verified{}, authErr("timestamp outside the tolerance")
		}
	}
	for _, s := range secrets {
		want := mac(newHash, s, sig.payload)
		for _, got := range sig.macs {
			if hmac.Equal(want, got) {
				h := sha256.New()
				h.Write(want)
				if sig.at != nil {
					h.Write([]byte(strconv.FormatInt(sig.at.Unix(), 10)))
				}
				return Verified{ReplayKey: hex.EncodeToString(h.Sum(nil)), SignedAt: sig.at}, nil
			}
		}
	}
	return Verified{}, authErr("signature does not match")
}

func mac(newHash func() hash.Hash, key, msg []byte) []byte {
	h := hmac.New(newHash, key)
	h.Write(msg)
	return h.Sum(nil)
}

// toleranceOf is the configured timestamp tolerance in seconds (default 300).
func toleranceOf(a webhook.Authentication) int {
	if a.TimestampToleranceSeconds > 0 {
		return a.TimestampToleranceSeconds
	}
	return DefaultToleranceSeconds
}

// maxSignatures bounds the signatures one header may offer (stripe sends one per secret).
const maxSignatures = 8

// parseSignature reads the signature a delivery offers, in the header layout of the trigger's
// format, with the message it signs and the signed timestamp when there is one.
func parseSignature(a webhook.Authentication, m Message) (signed, error) {
	switch a.Format {
	case webhook.FormatGitHub:
		return githubSignature(a, m)
	case webhook.FormatStripe:
		return stripeSignature(m)
	case webhook.FormatSlack:
		return slackSignature(m)
	default: // generic
		return genericSignature(a, m)
	}
}

// githubSignature reads X-Hub-Signature-256 (sha256=) or, for hmac_sha1, X-Hub-Signature (sha1=):
// a hex MAC of the body.
func githubSignature(a webhook.Authentication, m Message) (signed, error) {
	header, prefix := HeaderGitHub256, "sha256="
	if a.Type == webhook.AuthHMACSHA1 {
		header, prefix = HeaderGitHub1, "sha1="
	}
	v, ok := strings.CutPrefix(m.Header.Get(header), prefix)
	if !ok {
		return signed{}, authErr("missing signature header " + header)
	}
	b, err := hex.DecodeString(v)
	if err != nil {
		return signed{}, authErr("malformed signature")
	}
	return signed{payload: m.Body, macs: [][]byte{b}}, nil
}

// stripeSignature reads Stripe-Signature: t=<unix>,v1=<hex>[,v1=...] (at most maxSignatures MACs
// kept), signing "<t>.<body>".
func stripeSignature(m Message) (signed, error) {
	h := m.Header.Get(HeaderStripe)
	if h == "" {
		return signed{}, authErr("missing signature header " + HeaderStripe)
	}
	var ts string
	var macs [][]byte
	for _, part := range strings.Split(h, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil && len(macs) < maxSignatures {
				macs = append(macs, b)
			}
		}
	}
	at, err := unixTime(ts)
	if err != nil || len(macs) == 0 {
		return signed{}, authErr("malformed signature")
	}
	return signed{payload: append([]byte(ts+"."), m.Body...), macs: macs, at: &at}, nil
}

// slackSignature reads X-Slack-Signature (v0=<hex>) and X-Slack-Request-Timestamp, signing
// "v0:<timestamp>:<body>".
func slackSignature(m Message) (signed, error) {
	v, ok := strings.CutPrefix(m.Header.Get(HeaderSlack), "v0=")
	if !ok {
		return signed{}, authErr("missing signature header " + HeaderSlack)
	}
	ts := m.Header.Get(HeaderSlackTimestamp)
	at, err := unixTime(ts)
	if err != nil {
		return signed{}, authErr("missing or malformed timestamp header " + HeaderSlackTimestamp)
	}
	b, err := hex.DecodeString(v)
	if err != nil {
		return signed{}, authErr("malformed signature")
	}
	return signed{payload: append([]byte("v0:"+ts+":"), m.Body...), macs: [][]byte{b}, at: &at}, nil
}

// genericSignature reads the configured header (after its signature_prefix, hex or base64),
// signing the body or, with a timestamp header, "<timestamp>.<body>".
func genericSignature(a webhook.Authentication, m Message) (signed, error) {
	v := m.Header.Get(a.Header)
	if v == "" {
		return signed{}, authErr("missing signature header " + a.Header)
	}
	v, ok := strings.CutPrefix(v, a.SignaturePrefix)
	if !ok {
		return signed{}, authErr("malformed signature")
	}
	var b []byte
	var err error
	if a.SignatureEncoding == EncodingBase64 {
		b, err = base64.StdEncoding.DecodeString(v)
	} else {
		b, err = hex.DecodeString(v)
	}
	if err != nil {
		return signed{}, authErr("malformed signature")
	}
	s := signed{payload: m.Body, macs: [][]byte{b}}
	if a.TimestampHeader != "" {
		ts := m.Header.Get(a.TimestampHeader)
		at, err := unixTime(ts)
		if err != nil {
			return signed{}, authErr("missing or malformed timestamp header " + a.TimestampHeader)
		}
		s.payload, s.at = append([]byte(ts+"."), m.Body...), &at
	}
	return s, nil
}

func unixTime(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || len(s) > 12 {
		return time.Time{}, authErr("malformed timestamp")
	}
	return time.Unix(n, 0).UTC(), nil
}

package webhookrecv

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/webhook"
)

var now = time.Date(2026, 1, 27, 10, 0, 0, 0, time.UTC)

func sign(h func() hash.Hash, key, msg string) []byte {
	m := hmac.New(h, []byte(key))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func must(t *testing.T, a webhook.Authentication) webhook.Authentication {
	t.Helper()
	out, err := checkAuth(a)
	require.NoError(t, err)
	return out
}

func TestVerifySchemes(t *testing.T) {
	const secret, other = "whsec_the-secret", "whsec_another-one"
	body := []byte(`{"hello":"world"}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	old := strconv.FormatInt(now.Add(-301*time.Second).Unix(), 10)
	secrets := [][]byte{[]byte(other), []byte(secret)} // the second (a previous secret) matches

	cases := []struct {
		name   string
		auth   webhook.Authentication
		h      http.Header
		q      url.Values
		body   []byte
		ok     bool
		replay bool
	}{
		{"github sha256", webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatGitHub},
			hdr("X-Hub-Signature-256", "sha256="+hex.EncodeToString(sign(sha256.New, secret, string(body)))), nil, body, true, true},
		{"github sha256 other body", webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatGitHub},
			hdr("X-Hub-Signature-256", "sha256="+hex.EncodeToString(sign(sha256.New, secret, "x"))), nil, body, false, false},
		{"github sha256 no prefix", webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatGitHub},
			hdr("X-Hub-Signature-256", hex.EncodeToString(sign(sha256.New, secret, string(body)))), nil, body, false, false},
		{"github sha1", webhook.Authentication{Type: webhook.AuthHMACSHA1, Format: webhook.FormatGitHub},
			hdr("X-Hub-Signature", "sha1="+hex.EncodeToString(sign(sha1.New, secret, string(body)))), nil, body, true, true},
		{"github sha1 signed with sha256", webhook.Authentication{Type: webhook.AuthHMACSHA1, Format: webhook.FormatGitHub},
			hdr("X-Hub-Signature", "sha1="+hex.EncodeToString(sign(sha256.New, secret, string(body)))), nil, body, false, false},
		{"stripe", webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatStripe},
			hdr("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(sign(sha256.New, secret, ts+"."+string(body)))+",v0=abc"), nil, body, true, true},
		{"stripe old timestamp", webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatStripe},
			hdr("Stripe-Signature", "t="+old+",v1="+hex.EncodeToString(sign(sha256.New, secret, old+"."+string(body)))), nil, body, false, false},
		{"stripe timestamp swapped", webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatStripe},
			hdr("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(sign(sha256.New, secret, old+"."+string(body)))), nil, body, false, false},
		{"stripe no t", webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatStripe},
			hdr("Stripe-Signature", "v1="+hex.EncodeToString(sign(sha256.New, secret, string(body)))), nil, body, false, false},
		{"slack", webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatSlack},
			hdr("X-Slack-Request-Timestamp", ts, "X-Slack-Signature", "v0="+hex.EncodeToString(sign(sha256.New, secret, "v0:"+ts+":"+string(body)))), nil, body, true, true},
		{"slack old", webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatSlack},
			hdr("X-Slack-Request-Timestamp", old, "X-Slack-Signature", "v0="+hex.EncodeToString(sign(sha256.New, secret, "v0:"+old+":"+string(body)))), nil, body, false, false},
		{"generic hex", webhook.Authentication{Type: webhook.AuthHMACSHA256, Header: "X-Sig"},
			hdr("X-Sig", hex.EncodeToString(sign(sha256.New, secret, string(body)))), nil, body, true, true},
		{"generic base64 with timestamp", webhook.Authentication{Type: webhook.AuthHMACSHA256, Header: "X-Sig", SignatureEncoding: EncodingBase64, TimestampHeader: "X-Ts", SignaturePrefix: "v1,"},
			hdr("X-Ts", ts, "X-Sig", "v1,"+base64.StdEncoding.EncodeToString(sign(sha256.New, secret, ts+"."+string(body)))), nil, body, true, true},
		{"generic missing prefix", webhook.Authentication{Type: webhook.AuthHMACSHA256, Header: "X-Sig", SignaturePrefix: "sha256="},
			hdr("X-Sig", hex.EncodeToString(sign(sha256.New, secret, string(body)))), nil, body, false, false},
		{"basic", webhook.Authentication{Type: webhook.AuthBasic, Username: "u"},
			hdr("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+secret))), nil, body, true, false},
		{"basic wrong user", webhook.Authentication{Type: webhook.AuthBasic, Username: "u"},
			hdr("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("v:"+secret))), nil, body, false, false},
		{"basic lower-case scheme", webhook.Authentication{Type: webhook.AuthBasic, Username: "u"},
			hdr("Authorization", "basic "+base64.StdEncoding.EncodeToString([]byte("u:"+secret))), nil, body, true, false},
		{"bearer", webhook.Authentication{Type: webhook.AuthBearer}, hdr("Authorization", "Bearer "+secret), nil, body, true, false},
		{"bearer prefix of the secret", webhook.Authentication{Type: webhook.AuthBearer}, hdr("Authorization", "Bearer "+secret[:5]), nil, body, false, false},
		{"api key header", webhook.Authentication{Type: webhook.AuthAPIKey}, hdr("X-API-Key", secret), nil, body, true, false},
		{"api key query", webhook.Authentication{Type: webhook.AuthAPIKey, QueryParam: "key"}, nil, url.Values{"key": {secret}}, body, true, false},
		{"api key query wrong", webhook.Authentication{Type: webhook.AuthAPIKey, QueryParam: "key"}, nil, url.Values{"key": {"nope"}}, body, false, false},
		{"none", webhook.Authentication{Type: webhook.AuthNone}, nil, nil, body, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := must(t, c.auth)
			if c.h == nil {
				c.h = http.Header{}
			}
			v, err := Verify(a, secrets, Message{Header: c.h, Query: c.q, Body: c.body}, now)
			if !c.ok {
				var ae *AuthError
				require.ErrorAs(t, err, &ae)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.replay, v.ReplayKey != "")
			if c.replay {
				again, err := Verify(a, secrets, Message{Header: c.h, Query: c.q, Body: c.body}, now)
				require.NoError(t, err)
				require.Equal(t, v.ReplayKey, again.ReplayKey, "the same signed request has the same replay key")
			}
		})
	}
}

// TestStripeSignatureBound: at most maxSignatures v1 values of one header are tried.
func TestStripeSignatureBound(t *testing.T) {
	a := must(t, webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatStripe})
	ts := strconv.FormatInt(now.Unix(), 10)
	good := hex.EncodeToString(sign(sha256.New, "k", ts+".{}"))
	header := func(junk int) http.Header {
		v := "t=" + ts
		for i := 0; i < junk; i++ {
			v += ",v1=" + hex.EncodeToString(make([]byte, 32))
		}
		return hdr("Stripe-Signature", v+",v1="+good)
	}
	_, err := Verify(a, [][]byte{[]byte("k")}, Message{Header: header(maxSignatures - 1), Body: []byte("{}")}, now)
	require.NoError(t, err)
	_, err = Verify(a, [][]byte{[]byte("k")}, Message{Header: header(maxSignatures), Body: []byte("{}")}, now)
	require.Error(t, err)
}

func TestCheckAuth(t *testing.T) {
	a := must(t, webhook.Authentication{Type: webhook.AuthHMACSHA256, Format: webhook.FormatSlack})
	require.Equal(t, HeaderSlack, a.Header)
	require.Equal(t, HeaderSlackTimestamp, a.TimestampHeader)
	require.Equal(t, DefaultToleranceSeconds, a.TimestampToleranceSeconds)
	require.Equal(t, webhook.FormatGeneric, must(t, webhook.Authentication{Type: webhook.AuthHMACSHA256, Header: "x-sig"}).Format)
	// The type alone (002's example) is GitHub's signature.
	require.Equal(t, HeaderGitHub256, must(t, webhook.Authentication{Type: webhook.AuthHMACSHA256}).Header)
	require.Equal(t, HeaderGitHub1, must(t, webhook.Authentication{Type: webhook.AuthHMACSHA1}).Header)
	require.Equal(t, "X-Sig", must(t, webhook.Authentication{Type: webhook.AuthHMACSHA256, Header: "x-sig"}).Header)
	require.Equal(t, DefaultAPIKeyHeader, must(t, webhook.Authentication{Type: webhook.AuthAPIKey}).Header)
	require.Equal(t, "webhook", must(t, webhook.Authentication{Type: webhook.AuthBasic}).Username)
	for _, bad := range []webhook.Authentication{
		{},
		{Type: "md5"},
		{Type: webhook.AuthHMACSHA256, SignaturePrefix: "sha256="},
		{Type: webhook.AuthHMACSHA1, Format: webhook.FormatStripe},
		{Type: webhook.AuthHMACSHA256, Format: webhook.FormatGitHub, Header: "X-Other"},
		{Type: webhook.AuthHMACSHA256, Format: webhook.FormatGitHub, TimestampToleranceSeconds: 10},
		{Type: webhook.AuthHMACSHA256, Format: webhook.FormatStripe, TimestampToleranceSeconds: MaxToleranceSeconds + 1},
		{Type: webhook.AuthHMACSHA256, Header: "X-Sig", SignatureEncoding: "base32"},
		{Type: webhook.AuthHMACSHA256, Header: "bad header"},
		{Type: webhook.AuthNone, Header: "X-Sig"},
		{Type: webhook.AuthBearer, Username: "u"},
		{Type: webhook.AuthBasic, Username: "a:b"},
		{Type: webhook.AuthAPIKey, Header: "X-K", QueryParam: "k"},
		{Type: webhook.AuthAPIKey, QueryParam: "k&x"},
	} {
		_, err := checkAuth(bad)
		require.Error(t, err, "%+v", bad)
	}
}

func TestParseSource(t *testing.T) {
	p, err := parseSource("192.30.252.9/22")
	require.NoError(t, err)
	require.Equal(t, "192.30.252.0/22", p.String())
	p, err = parseSource("::ffff:10.0.0.1")
	require.NoError(t, err)
	require.Equal(t, "10.0.0.1/32", p.String())
	_, err = parseSource("10.0.0.0/40")
	require.Error(t, err)
}

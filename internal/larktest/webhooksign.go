package larktest

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/url"
	"strconv"
	"time"

	"github.com/larkrun/lark/internal/webhook"
)

// webhookAuth is what the harness kept of a webhook trigger at deploy: its authentication and its
// secret (shown once, in the create answer), so that t.webhook can sign as the sender would.
type webhookAuth struct {
	Auth   webhook.Authentication
	Secret string
}

// sign adds to hdr and q the credentials a sender of trigger w would send for body at now, as
// docs/webhooks.md describes them per authentication type and format.
func (w webhookAuth) sign(body []byte, now time.Time, hdr map[string]string, q url.Values) {
	a := w.Auth
	ts := strconv.FormatInt(now.Unix(), 10)
	mac := func(newHash func() hash.Hash, msg string) []byte {
		m := hmac.New(newHash, []byte(w.Secret))
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	newHash := sha256.New
	if a.Type == webhook.AuthHMACSHA1 {
		newHash = sha1.New
	}
	switch a.Type {
	case webhook.AuthHMACSHA256, webhook.AuthHMACSHA1:
		switch a.Format {
		case "github":
			name, prefix := "X-Hub-Signature-256", "sha256="
			if a.Type == webhook.AuthHMACSHA1 {
				name, prefix = "X-Hub-Signature", "sha1="
			}
			hdr[name] = prefix + hex.EncodeToString(mac(newHash, string(body)))
		case "stripe":
			hdr["Stripe-Signature"] = "t=" + ts + ",v1=" + hex.EncodeToString(mac(newHash, ts+"."+string(body)))
		case "slack":
			hdr["X-Slack-Request-Timestamp"] = ts
			hdr["X-Slack-Signature"] = "v0=" + hex.EncodeToString(mac(newHash, "v0:"+ts+":"+string(body)))
		default:
			msg := string(body)
			if a.TimestampHeader != "" {
				hdr[a.TimestampHeader] = ts
				msg = ts + "." + msg
			}
			sum := mac(newHash, msg)
			sig := hex.EncodeToString(sum)
			if a.SignatureEncoding == "base64" {
				sig = base64.StdEncoding.EncodeToString(sum)
			}
			hdr[a.Header] = a.SignaturePrefix + sig
		}
	case webhook.AuthBasic:
		user := a.Username
		if user == "" {
			user = "webhook"
		}
		hdr["Authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+w.Secret))
	case webhook.AuthBearer:
		hdr["Authorization"] = "Bearer " + w.Secret
	case webhook.AuthAPIKey:
		if a.QueryParam != "" {
			q.Set(a.QueryParam, w.Secret)
		} else {
			name := a.Header
			if name == "" {
				name = "X-API-Key"
			}
			hdr[name] = w.Secret
		}
	}
}

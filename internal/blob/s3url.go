package blob

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// S3Config is where the S3 store keeps its objects, as its URL says:
//
//	s3://BUCKET[/PREFIX]?endpoint=HOST:PORT&region=REGION&secure=false&conditional=false
//
// endpoint defaults to AWS S3 (s3.amazonaws.com), region to what the server tells, secure (TLS)
// to true, conditional to true (Create needs If-None-Match: see S3.Create). Credentials never go
// in the URL: they come from the environment (S3Credentials).
type S3Config struct {
	Bucket      string
	Prefix      string // ends with a slash, or is empty: every key is stored as Prefix+key
	Endpoint    string
	Region      string
	Secure      bool
	Conditional bool
}

// DefaultS3Endpoint is AWS S3's endpoint, used when the URL names none.
const DefaultS3Endpoint = "s3.amazonaws.com"

// ParseS3URL reads an s3:// URL. Its errors never repeat the URL's user information.
func ParseS3URL(raw string) (S3Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return S3Config{}, errors.New("s3 URL: not a URL") // url's error quotes the URL
	}
	if u.Scheme != "s3" {
		return S3Config{}, fmt.Errorf("s3 URL: scheme %q, want s3", u.Scheme)
	}
	if u.User != nil {
		return S3Config{}, errors.New("s3 URL: credentials do not belong in the URL; set LARK_S3_ACCESS_KEY and LARK_S3_SECRET_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	}
	cfg := S3Config{Bucket: u.Host, Endpoint: DefaultS3Endpoint, Secure: true, Conditional: true}
	if cfg.Bucket == "" {
		return S3Config{}, errors.New("s3 URL: no bucket (s3://BUCKET/optional/prefix)")
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		if err := ValidKey(p); err != nil {
			return S3Config{}, fmt.Errorf("s3 URL: prefix: %w", err)
		}
		cfg.Prefix = p + "/"
	}
	if err := cfg.setQuery(u.Query()); err != nil {
		return S3Config{}, fmt.Errorf("s3 URL: %w", err)
	}
	return cfg, nil
}

// setQuery applies the URL's parameters, refusing unknown ones (by name only: a value might be a
// secret put in the wrong place).
func (c *S3Config) setQuery(q url.Values) error {
	for name, vals := range q {
		v := vals[len(vals)-1]
		var err error
		switch name {
		case "endpoint":
			if v == "" || strings.ContainsAny(v, "/@") {
				return errors.New("endpoint: want HOST or HOST:PORT")
			}
			c.Endpoint = v
		case "region":
			c.Region = v
		case "secure":
			c.Secure, err = strconv.ParseBool(v)
		case "conditional":
			c.Conditional, err = strconv.ParseBool(v)
		default:
			return fmt.Errorf("unknown parameter %q (known: endpoint, region, secure, conditional)", name)
		}
		if err != nil {
			return fmt.Errorf("%s: want true or false", name)
		}
	}
	return nil
}

// String is the URL of the configuration (it holds no credentials).
func (c S3Config) String() string {
	q := url.Values{}
	q.Set("endpoint", c.Endpoint)
	if c.Region != "" {
		q.Set("region", c.Region)
	}
	q.Set("secure", strconv.FormatBool(c.Secure))
	if !c.Conditional {
		q.Set("conditional", "false")
	}
	return "s3://" + c.Bucket + "/" + c.Prefix + "?" + q.Encode()
}

// S3Credentials are the S3 store's access key and secret, and an optional session token.
type S3Credentials struct {
	AccessKey, SecretKey, SessionToken string
}

// String shows none of the credentials, so that one printed or logged by mistake leaks nothing.
func (c S3Credentials) String() string { return "S3Credentials{[REDACTED]}" }

// GoString is String, for %#v.
func (c S3Credentials) GoString() string { return c.String() }

// S3CredentialsFromEnv reads the credentials from getenv: LARK_S3_ACCESS_KEY and
// LARK_S3_SECRET_KEY, or else AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
func S3CredentialsFromEnv(getenv func(string) string) (S3Credentials, error) {
	if c := (S3Credentials{AccessKey: getenv("LARK_S3_ACCESS_KEY"), SecretKey: getenv("LARK_S3_SECRET_KEY")}); c.AccessKey != "" || c.SecretKey != "" {
		if c.AccessKey == "" || c.SecretKey == "" {
			return S3Credentials{}, errors.New("s3 credentials: set both LARK_S3_ACCESS_KEY and LARK_S3_SECRET_KEY")
		}
		return c, nil
	}
	c := S3Credentials{AccessKey: getenv("AWS_ACCESS_KEY_ID"), SecretKey: getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: getenv("AWS_SESSION_TOKEN")}
	if c.AccessKey == "" || c.SecretKey == "" {
		return S3Credentials{}, errors.New("s3 credentials: set LARK_S3_ACCESS_KEY and LARK_S3_SECRET_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	}
	return c, nil
}

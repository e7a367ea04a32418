package e2e

// Helpers for the execution end-to-end tests: HTTP calls that return their error instead of failing
// the test (safe from any goroutine, and usable against a server that is being killed).

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"
)

// poolClient is a keep-alive client that keeps up to n idle connections to one host (the default
// transport keeps 2, so concurrent callers would keep opening new connections).
func poolClient(n int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = n, n
	return &http.Client{Transport: tr, Timeout: httpTimeout}
}

// try sends one request like do, but returns transport errors instead of failing the test, so it
// may run on any goroutine and against a server that is dying.
func (p *larkProc) try(c *http.Client, method, path, token string, body []byte) (response, error) {
	return p.tryWithin(c, httpTimeout, method, path, token, body)
}

// tryWithin is try with a bound of its own for the whole exchange.
func (p *larkProc) tryWithin(c *http.Client, d time.Duration, method, path, token string, body []byte) (response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

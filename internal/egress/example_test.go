package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/larkrun/lark/internal/egress"
)

func ExampleClient_Do() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"hello":"world"}`)
	}))
	defer srv.Close()

	// AllowLoopback is only for tests such as this one, whose server listens on 127.0.0.1.
	c := egress.New(egress.Options{AllowLoopback: true})
	defer c.CloseIdleConnections()

	resp, err := c.Do(context.Background(), egress.Request{
		Method:         "GET",
		URL:            srv.URL + "/greeting",
		Headers:        map[string]string{"Accept": "application/json"},
		AllowedDomains: []string{"*"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode, resp.Headers["Content-Type"], string(resp.Body))

	// The cloud metadata endpoint is never reachable, whatever the allowlist says.
	_, err = c.Do(context.Background(), egress.Request{
		Method:         "GET",
		URL:            "http://169.254.169.254/latest/meta-data/",
		AllowedDomains: []string{"*"},
	})
	var e *egress.Error
	if errors.As(err, &e) {
		fmt.Println(e.Kind)
	}
	// Output:
	// 200 application/json {"hello":"world"}
	// forbidden_address
}

func ExampleDomainAllowed() {
	allowed := []string{"api.example.com", "*.partner.example"}
	for _, host := range []string{"api.example.com", "API.EXAMPLE.COM.", "eu.api.partner.example", "partner.example", "evilpartner.example", "93.184.216.34"} {
		fmt.Println(host, egress.DomainAllowed(host, allowed))
	}
	// Output:
	// api.example.com true
	// API.EXAMPLE.COM. true
	// eu.api.partner.example true
	// partner.example false
	// evilpartner.example false
	// 93.184.216.34 false
}

package cli

import (
	"fmt"
	"os"
	"testing"

	"github.com/larkrun/lark/internal/api/apispec"
)

// specChecker checks every request the CLI's tests send (through pkg/larkclient), and every answer they
// get, against the OpenAPI document (internal/api/openapi): the client is written against it and
// cannot drift from it unnoticed.
var specChecker *apispec.Checker

func TestMain(m *testing.M) {
	spec, err := apispec.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "load the OpenAPI document:", err)
		os.Exit(1)
	}
	specChecker = apispec.NewChecker(spec)
	code := m.Run()
	if errs := specChecker.Errors(); len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "the CLI's calls disagree with the OpenAPI document:\n")
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, " ", e)
		}
		code = 1
	}
	if code == 0 && len(specChecker.Seen()) == 0 {
		fmt.Fprintln(os.Stderr, "no call went through the OpenAPI check")
		code = 1
	}
	os.Exit(code)
}

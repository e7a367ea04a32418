package cli

import (
	"os"
	"testing"

	"github.com/larkrun/lark/internal/api/apispec"
)

// specChecker checks every request the CLI's tests send (through pkg/larkclient), and every answer they get, against the OpenAPI
// document (internal/api/openapi): what is written against it cannot drift from it unnoticed.
var specChecker *apispec.Checker

func TestMain(m *testing.M) {
	os.Exit(apispec.CheckedMain(m, func(c *apispec.Checker) { specChecker = c }))
}

package larkclient_test

import (
	"os"
	"testing"

	"github.com/larkrun/lark/internal/api/apispec"
)

// specChecker checks every request the client's examples and tests send, and every answer they get, against the OpenAPI
// document (internal/api/openapi): what is written against it cannot drift from it unnoticed.
var specChecker *apispec.Checker

func TestMain(m *testing.M) {
	os.Exit(apispec.CheckedMain(m, func(c *apispec.Checker) { specChecker = c }))
}

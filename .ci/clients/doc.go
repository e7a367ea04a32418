// Package clients is the home of the API clients CI generates from Lark's OpenAPI document
// (.ci/generated-clients): oapiclient (oapi-codegen) and ogenclient (ogen) are written here at CI
// time, never committed, and compiled; live_test.go drives the oapi-codegen client against a
// running `lark dev`. This module's go.mod and go.sum pin the generated code's runtime libraries.
package clients

package schema_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/larkrun/lark/internal/schema"
)

// decode decodes a JSON body the way the server does: numbers stay json.Number.
func decode(s string) map[string]any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		panic(err)
	}
	return m
}

func ExampleRegistry_ValidateEntrypoint() {
	r, err := schema.New()
	if err != nil {
		panic(err)
	}
	// Server-owned fields (version, tenant_id, owner, status) are filled in before validation.
	def := decode(`{
		"version": "1.0.0",
		"tenant_id": "t_123",
		"owner": {"owner_type": "user", "id": "u_456", "tenant_id": "t_123"},
		"status": "draft",
		"title": "Calculate Tax",
		"color": "blue",
		"schema": {"params": {"type": "object", "properties": {"amount": {"type": "numbr"}}}},
		"traits": {
			"invocation": {"supported": ["sync"], "default": "async"},
			"limits": {"timeout_seconds": 30, "memory_mb": 1024},
			"retry": {"max_attempts": 3}
		},
		"implementation": {
			"adapter": "gts.x.core.serverless.adapter.starlark.v1~",
			"kind": "code",
			"code": {"language": "starlark", "source": "def main(ctx, input):\n  return {}\n"}
		}
	}`)
	for _, is := range r.ValidateEntrypoint(schema.KindFunction, def) {
		fmt.Printf("%s [%s] %s\n", is.Path, is.Code, is.Message)
	}
	// Output:
	// $.color [unknown_field] unknown field 'color'
	// $.schema.params.properties.amount.type [invalid_schema] value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'
	// $.traits.invocation.default [invalid_value] default invocation mode 'async' is not in supported modes ['sync']
	// $.traits.limits.memory_mb [schema_mismatch] must be <= 512, got 1024
}

func ExampleRegistry_ValidateValue() {
	r, err := schema.New()
	if err != nil {
		panic(err)
	}
	params, issues := r.CompileUserSchema("$.schema.params", decode(`{
		"type": "object",
		"properties": {"invoice_id": {"type": "string"}, "amount": {"type": "number", "minimum": 0}},
		"required": ["invoice_id", "amount"]
	}`))
	if len(issues) > 0 {
		panic(issues)
	}
	for _, is := range r.ValidateValue(params, "$.params", decode(`{"amount": -5}`)) {
		fmt.Printf("%s [%s] %s\n", is.Path, is.Code, is.Message)
	}
	// Output:
	// $.params.amount [schema_mismatch] must be >= 0, got -5
	// $.params.invoice_id [missing_field] missing required property 'invoice_id'
}

package schema

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// nestedAllOf is {"allOf":[{"allOf":[ ... {"type":"object"} ... ]}]}, n levels of allOf.
func nestedAllOf(n int) string {
	return strings.Repeat(`{"allOf":[`, n) + `{"type":"object"}` + strings.Repeat(`]}`, n)
}

// TestSchemaBombRefusedFast: the nested allOf schema that took a minute of CPU to compile (36 KB,
// about 3,000 levels) is refused at once with SCHEMA_TOO_COMPLEX and the path of the first subschema
// past the limit.
func TestSchemaBombRefusedFast(t *testing.T) {
	r := newTestRegistry(t)
	bomb := nestedAllOf(3000)
	require.Greater(t, len(bomb), 36_000)
	start := time.Now()
	s, issues := r.CompileUserSchema("$.schema.params", []byte(bomb))
	took := time.Since(start)
	require.Nil(t, s)
	require.Len(t, issues, 1)
	require.Equal(t, CodeSchemaTooComplex, issues[0].Code)
	require.Less(t, took, time.Second, "refused fast")

	// Just past the depth limit: the path names the first subschema too deep.
	_, issues = r.CompileUserSchema("$.schema.params", []byte(nestedAllOf(MaxUserSchemaDepth+1)))
	require.Len(t, issues, 1)
	require.Equal(t, CodeSchemaTooComplex, issues[0].Code)
	require.Equal(t, "$.schema.params"+strings.Repeat(".allOf[0]", MaxUserSchemaDepth+1), issues[0].Path)
	require.Contains(t, issues[0].Message, "nested more than 32 levels")
}

// TestSchemaAtTheLimitsIsFast: the worst schemas within the limits compile and validate quickly
// (well under a second on an idle machine): allOf nested to the depth limit, a wide allOf tree filling the size limit, and
// $defs referencing each other up to the expansion limit.
func TestSchemaAtTheLimitsIsFast(t *testing.T) {
	r := newTestRegistry(t)
	// Wide: an allOf of allOfs nested to the limit, repeated to fill the size.
	deep := nestedAllOf(MaxUserSchemaDepth - 1)
	var parts []string
	for n := len(`{"allOf":[]}`); n+len(deep)+1 < MaxUserSchemaBytes; n += len(deep) + 1 {
		parts = append(parts, deep)
	}
	wide := `{"allOf":[` + strings.Join(parts, ",") + `]}`
	// Fan-out: def i references def i+1 twice; stop just under the expansion limit.
	var defs []string
	k := 11 // 2^13 - 2 = 8190 subschemas expanded
	for i := 0; i < k; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object"}`, k))
	fan := `{"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `}}`
	for name, doc := range map[string]string{"deep": nestedAllOf(MaxUserSchemaDepth), "wide": wide, "fan-out": fan} {
		t.Run(name, func(t *testing.T) {
			require.LessOrEqual(t, len(doc), MaxUserSchemaBytes)
			start := time.Now()
			s, issues := r.CompileUserSchema("$", []byte(doc))
			require.Empty(t, issues)
			require.Empty(t, r.ValidateValue(s, "$.params", map[string]any{"a": 1}))
			require.NotEmpty(t, r.ValidateValue(s, "$.params", "not an object"))
			// The unbounded 36 KB schema took 60 s; within the limits it takes well under a second
			// (0.2-0.4 s measured without the race detector). The bound leaves room for -race and load.
			require.Less(t, time.Since(start), 10*time.Second)
		})
	}
	// One more level of fan-out is past the limit.
	defs = defs[:0]
	k = 12 // 16,382
	for i := 0; i < k; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object"}`, k))
	_, issues := r.CompileUserSchema("$", []byte(`{"$ref":"#/$defs/d0","$defs":{`+strings.Join(defs, ",")+`}}`))
	require.Len(t, issues, 1)
	require.Equal(t, CodeSchemaTooComplex, issues[0].Code)
	require.Contains(t, issues[0].Message, "$refs are followed")
}

// TestSchemaSizeLimit: a schema over 64 KiB is refused before it is compiled.
func TestSchemaSizeLimit(t *testing.T) {
	r := newTestRegistry(t)
	big := `{"description":"` + strings.Repeat("x", MaxUserSchemaBytes) + `"}`
	_, issues := r.CompileUserSchema("$.schema.returns", []byte(big))
	require.Len(t, issues, 1)
	require.Equal(t, Issue{Path: "$.schema.returns", Code: CodeSchemaTooComplex,
		Message: fmt.Sprintf("schema is %d bytes, more than the %d allowed", len(big), MaxUserSchemaBytes)}, issues[0])
}

// TestCompileCanceled: a compilation whose context ends returns at once; a schema is compiled once
// however many callers ask for it at the same time.
func TestCompileCanceled(t *testing.T) {
	r := newTestRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, issues, err := r.CompileUserSchemaContext(ctx, "$", []byte(nestedAllOf(20)))
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, s)
	require.Empty(t, issues)
}

func newTestRegistry(t *testing.T) *Registry {
	t.Helper()
	r, err := New()
	require.NoError(t, err)
	return r
}

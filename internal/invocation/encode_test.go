package invocation

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEncodeRecordIsMarshal: EncodeRecord writes what json.Marshal writes, byte for byte, when the
// params and result are compact; members around them that look like them are left alone.
func TestEncodeRecordIsMarshal(t *testing.T) {
	t.Parallel()
	ms := int64(7)
	base := Record{ID: "inv_1", TenantID: `te"params":null`, EntrypointID: "ep", Status: StatusSucceeded, Mode: ModeSync,
		CorrelationID: "c", CreatedAt: t0, Metrics: Metrics{DurationMS: &ms},
		Error: &Error{Message: "m", Details: json.RawMessage(`{"params":null,"result":1}`)}}
	for name, pr := range map[string][2]json.RawMessage{
		"both":      {json.RawMessage(`{"p":"` + strings.Repeat("x", 1000) + `"}`), json.RawMessage(`{"r":[1,2,{"s":"\"params\":null"}]}`)},
		"no result": {json.RawMessage(`[1,2]`), nil},
		"no params": {nil, json.RawMessage(`"r"`)},
		"neither":   {nil, nil},
		"empty":     {json.RawMessage{}, json.RawMessage{}},
	} {
		t.Run(name, func(t *testing.T) {
			r := base
			r.Params, r.Result = pr[0], pr[1]
			got, err := EncodeRecord(r)
			require.NoError(t, err)
			if len(r.Params) == 0 {
				r.Params = nil // json.Marshal refuses an empty, non-nil RawMessage
			}
			want, err := json.Marshal(r)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}

// TestApplyWithDecodedOutcome: a terminal event whose Outcome is at hand applies as its Data
// decoded would, and counts the same execution.
func TestApplyWithDecodedOutcome(t *testing.T) {
	t.Parallel()
	ms := int64(12)
	out := Outcome{Result: json.RawMessage(`{"r":"big"}`), Metrics: &Metrics{DurationMS: &ms}, Cost: 0.5}
	data, err := json.Marshal(out)
	require.NoError(t, err)
	r, err := Apply(Record{}, created(t, "inv_1"))
	require.NoError(t, err)
	r, err = Apply(r, Event{Seq: 2, Type: EventStarted, At: t0})
	require.NoError(t, err)
	done := Event{Seq: 3, Type: EventSucceeded, Data: data, At: t0}
	fromData, err := Apply(r, done)
	require.NoError(t, err)
	xData, okData := ExecutionOf(done)
	done.Outcome = &out
	fromOutcome, err := Apply(r, done)
	require.NoError(t, err)
	require.Equal(t, fromData, fromOutcome)
	xOutcome, okOutcome := ExecutionOf(done)
	require.True(t, okData)
	require.True(t, okOutcome)
	require.Equal(t, xData, xOutcome)
}

// TestEncodeOutcomeIsMarshal: EncodeOutcome writes what json.Marshal writes when the result is
// compact, and copies a result that is not as it is.
func TestEncodeOutcomeIsMarshal(t *testing.T) {
	t.Parallel()
	ms := int64(3)
	for name, o := range map[string]Outcome{
		"result and metrics": {Result: json.RawMessage(`{"r":[1,2]}`), Metrics: &Metrics{DurationMS: &ms}, Cost: 0.25},
		"result only":        {Result: json.RawMessage(`"x"`)},
		"error":              {Error: &Error{Message: "boom"}, Metrics: &Metrics{DurationMS: &ms}},
		"nothing":            {},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(o)
			require.NoError(t, err)
			got, err := EncodeOutcome(o)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
	got, err := EncodeOutcome(Outcome{Result: json.RawMessage(`{ "r" : 1 }`)})
	require.NoError(t, err)
	require.Equal(t, `{"result":{ "r" : 1 }}`, string(got))
}

// TestEncodeRecordCopiesPayloads: params and result are copied as they are (json.Marshal would
// have re-scanned and compacted them), and the record decodes back.
func TestEncodeRecordCopiesPayloads(t *testing.T) {
	t.Parallel()
	r := Record{ID: "inv_1", TenantID: "t", Mode: ModeSync, CreatedAt: t0,
		Params: json.RawMessage(`{ "p" : 1 }`), Result: json.RawMessage(`[ 1, 2 ]`)}
	got, err := EncodeRecord(r)
	require.NoError(t, err)
	require.Contains(t, string(got), `"params":{ "p" : 1 },"result":[ 1, 2 ],`)
	var back Record
	require.NoError(t, json.Unmarshal(got, &back))
	require.JSONEq(t, `{"p":1}`, string(back.Params))
	require.JSONEq(t, `[1,2]`, string(back.Result))
	require.Equal(t, "inv_1", back.ID)
}

// TestEncodeRecordIsMarshalForEveryMember fills every member of Record, nested ones too, at
// random (each also left empty at times), and checks that EncodeRecord writes what json.Marshal
// writes. A member added to Record and not to appendRecord fails it.
func TestEncodeRecordIsMarshalForEveryMember(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 36))
	for i := range 2000 {
		var r Record
		fillRandom(rng, reflect.ValueOf(&r).Elem())
		// Params and Result are copied as they are: json.Marshal's HTML escaping of them is not
		// repeated (EncodeRecord), so here they hold nothing it would escape.
		for _, doc := range []*json.RawMessage{&r.Params, &r.Result} {
			if bytes.ContainsAny(*doc, "<>&") {
				*doc = json.RawMessage(`{"b":true}`)
			}
		}
		got, err := EncodeRecord(r)
		require.NoError(t, err)
		want, err := json.Marshal(r)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "record %d", i)
	}
}

// fillRandom sets v to a random value of its type, or leaves it zero one time in three.
func fillRandom(rng *rand.Rand, v reflect.Value) {
	if rng.IntN(3) == 0 {
		return
	}
	strs := []string{"a", "inv_01", "x<y>&z", `q"uote\`, "é", "tab\there", "\u2028", ""}
	switch {
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		docs := []string{`{"a":1}`, `[1,"x"]`, `"s"`, `null`, `{"h":"<b>"}`}
		v.SetBytes([]byte(docs[rng.IntN(len(docs))]))
		return
	case v.Type() == reflect.TypeFor[time.Time]():
		at := time.Date(2000+rng.IntN(50), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e9), time.UTC)
		if rng.IntN(4) == 0 {
			at = at.In(time.FixedZone("x", 3600*(rng.IntN(24)-12)))
		}
		v.Set(reflect.ValueOf(at))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(strs[rng.IntN(len(strs))])
	case reflect.Int, reflect.Int64:
		v.SetInt(rng.Int64N(1000) - 10)
	case reflect.Float64:
		fs := []float64{0.5, 1e-7, 3, 1e22, 0.0001}
		v.SetFloat(fs[rng.IntN(len(fs))])
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillRandom(rng, p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1+rng.IntN(2), 2)
		for i := range s.Len() {
			fillRandom(rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillRandom(rng, v.Field(i))
			}
		}
	default:
		panic("fillRandom: no value for " + v.Type().String())
	}
}

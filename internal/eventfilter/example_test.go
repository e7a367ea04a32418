package eventfilter_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/larkrun/lark/internal/eventfilter"
)

func Example() {
	f, err := eventfilter.Cached(`payload.total > 100 && payload.shipping.region in ["US-CA", "US-NY"]`)
	if err != nil {
		panic(err)
	}
	for _, body := range []string{
		`{"total": 150, "shipping": {"region": "US-CA"}}`,
		`{"total": 99.5, "shipping": {"region": "US-NY"}}`,
		`{"total": 250.25}`,
	} {
		dec := json.NewDecoder(strings.NewReader(body))
		dec.UseNumber()
		var payload any
		if err := dec.Decode(&payload); err != nil {
			panic(err)
		}
		ok, err := f.Match(eventfilter.Event{ID: "evt_1", TypeID: "order.created.v1", Payload: payload})
		fmt.Println(ok, err)
	}

	_, err = eventfilter.Compile(`payload.total >`)
	fmt.Println(err != nil)
	// Output:
	// true <nil>
	// false <nil>
	// false event filter "payload.total > 100 && payload.shipping.region in [\"US-CA\", \"US-NY\"]": evaluation failed: no such key: shipping
	// true
}

package bulklane_test

import (
	"context"
	"fmt"

	"github.com/larkrun/lark/internal/bulklane"
)

// A request with a large body enters its tenant's lane before reading it, gives the lane up while
// its call runs, and takes it again to encode its answer.
func Example() {
	lanes := bulklane.New()
	h, err := lanes.Enter(context.Background(), "acme")
	if err != nil {
		return
	}
	defer h.Leave()
	ctx := bulklane.With(context.Background(), h)
	fmt.Println("decoding the body in the lane")
	resume := bulklane.Pause(ctx)
	fmt.Println("running the call outside it")
	resume()
	fmt.Println("encoding the answer in the lane")
	// Output:
	// decoding the body in the lane
	// running the call outside it
	// encoding the answer in the lane
}

package running_test

import (
	"context"
	"fmt"

	"github.com/larkrun/lark/internal/running"
)

func ExampleSet() {
	var s running.Set
	ctx, cancel := context.WithCancel(context.Background())
	s.Track("inv_1", "n1/1/1", cancel)
	fmt.Println(s.Cancel("inv_1"), ctx.Err())
	s.Untrack("inv_1")
	fmt.Println(s.Cancel("inv_1"))
	// Output:
	// true context canceled
	// false
}

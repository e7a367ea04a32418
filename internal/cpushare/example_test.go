package cpushare_test

import (
	"context"
	"fmt"

	"github.com/larkrun/lark/internal/cpushare"
)

// An execution takes a slot before it interprets, yields at the end of each quantum, and gives the
// slot back when it ends (or while it waits on I/O).
func Example() {
	cpu := cpushare.New(1)
	ctx := context.Background()
	if err := cpu.Acquire(ctx, "acme"); err != nil {
		return
	}
	for quantum := 0; quantum < 3; quantum++ {
		// ... interpret about a millisecond of steps ...
		if err := cpu.Yield(ctx, "acme"); err != nil {
			return // the execution ended while it waited for its turn
		}
	}
	cpu.Release()
	fmt.Println("done")
	// Output: done
}

package loops_test

import (
	"fmt"

	"github.com/larkrun/lark/internal/loops"
)

func ExampleBell() {
	b := loops.NewBell()
	b.Ring()
	b.Ring() // coalesces with the first
	<-b.C()
	select {
	case <-b.C():
		fmt.Println("rung twice")
	default:
		fmt.Println("rung once")
	}
	// Output: rung once
}

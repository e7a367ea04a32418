package cron_test

import (
	"fmt"
	"time"

	"github.com/larkrun/lark/internal/cron"
)

// A schedule at 02:30 every day in New York meets the spring-forward gap on 2026-03-08: that day it
// runs once, at 03:00 EDT, the first valid instant after the gap.
func ExampleParseCron() {
	loc, _ := cron.LoadLocation("America/New_York")
	c, err := cron.ParseCron("30 2 * * *", loc)
	if err != nil {
		panic(err)
	}
	for _, t := range cron.NextN(c, time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC), 3) {
		fmt.Println(t.In(loc).Format("2006-01-02 15:04 MST"))
	}
	// Output:
	// 2026-03-07 02:30 EST
	// 2026-03-08 03:00 EDT
	// 2026-03-09 02:30 EDT
}

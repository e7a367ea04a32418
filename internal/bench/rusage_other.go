//go:build !unix

package bench

import "os"

func rusageOf(*os.ProcessState, *Usage) {}

func selfCPU() float64 { return 0 }

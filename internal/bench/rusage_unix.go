//go:build unix

package bench

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// rusageOf fills u's CPU and peak RSS from a reaped child's rusage.
func rusageOf(ps *os.ProcessState, u *Usage) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return
	}
	u.UserS = tv(ru.Utime)
	u.SysS = tv(ru.Stime)
	u.CPUS = u.UserS + u.SysS
	u.MaxRSSKiB = maxrssKiB(int64(ru.Maxrss))
}

// maxrssKiB converts ru_maxrss to KiB: Linux and the BSDs report KiB, Darwin bytes.
func maxrssKiB(v int64) int64 {
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return v / 1024
	}
	return v
}

func tv(t syscall.Timeval) float64 {
	return (time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond).Seconds()
}

// selfCPU is this process's user + system CPU seconds so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return tv(ru.Utime) + tv(ru.Stime)
}

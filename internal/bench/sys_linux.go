package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// childSysProcAttr kills a child if this process dies without stopping it (the signal goes with
// the parent's exit; Go does not retire the threads that start children).
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's utime and stime: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// procCPU is a running process's user + system CPU seconds so far, from /proc/PID/stat.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is parenthesized and may contain spaces: count from after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
	}
	return float64(utime+stime) / clockTicks, nil
}

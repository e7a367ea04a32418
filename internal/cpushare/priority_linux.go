package cpushare

import "syscall"

// threadNice is the calling thread's nice value (the raw getpriority system call answers 20 − nice).
func threadNice() (int, error) {
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		return 0, err
	}
	return 20 - p, nil
}

// setThreadNice sets the calling thread's nice value (on Linux, PRIO_PROCESS with a thread id is
// that thread alone).
func setThreadNice(nice int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
}

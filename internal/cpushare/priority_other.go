//go:build !linux

package cpushare

func threadNice() (int, error) { return 0, ErrPriorityUnsupported }

func setThreadNice(int) error { return ErrPriorityUnsupported }

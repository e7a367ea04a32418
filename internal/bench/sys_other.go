//go:build !linux

package bench

import (
	"errors"
	"syscall"
)

func childSysProcAttr() *syscall.SysProcAttr { return nil }

func procCPU(int) (float64, error) { return 0, errors.New("per-window CPU needs /proc (Linux)") }

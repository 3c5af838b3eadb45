//go:build !unix

package spawn

import "syscall"

func childProcAttr() *syscall.SysProcAttr { return nil }

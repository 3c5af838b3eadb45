//go:build linux

package main

import "syscall"

// childProcAttr makes the kernel kill a spawned container when the vertex
// dies, even by SIGKILL, so that none is left behind holding its socket.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

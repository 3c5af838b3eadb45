//go:build linux

package spawn

import "syscall"

// childProcAttr makes the kernel kill a spawned container when the vertex
// dies, even by SIGKILL, so that none is left behind holding its socket, and
// puts it in a process group of its own, so that Ctrl-C in a terminal stops
// the vertex alone, which then stops its containers once it has drained.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

//go:build unix && !linux

package spawn

import "syscall"

// childProcAttr puts a spawned container in a process group of its own, so
// that Ctrl-C in a terminal stops the vertex alone.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

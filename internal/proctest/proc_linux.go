//go:build linux

package proctest

import "syscall"

// sysProcAttr makes the kernel kill the server if the test binary dies
// without running its cleanups (e.g. on a -timeout panic).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

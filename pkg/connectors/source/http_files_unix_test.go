//go:build unix

package source_test

import (
	"syscall"
	"testing"
)

// needFiles makes sure the test process may open n files, raising its soft
// limit up to the hard one if it must, or skips the test saying why.
func needFiles(t *testing.T, n uint64) {
	t.Helper()
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	if l.Cur >= n {
		return
	}
	if l.Max < n {
		t.Skipf("needs %d open files and ulimit -Hn is %d", n, l.Max)
	}
	was := l
	l.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Skipf("needs %d open files, ulimit -n is lower, and raising it failed: %v", n, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was) })
}

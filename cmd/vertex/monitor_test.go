package main

import (
	"net"
	"testing"
)

// TestMonitorAddr checks that an --addr that cannot be bound is one line
// naming the flag and its value, exit 2.
func TestMonitorAddr(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for addr, want := range map[string]string{
		"127.0.0.1:99999":    `vertex: monitor: --addr ("127.0.0.1:99999"): port 99999 is out of range (at most 65535)` + "\n",
		held.Addr().String(): `vertex: monitor: --addr ("` + held.Addr().String() + `"): bind: address already in use` + "\n",
	} {
		if code, _, stderr := runVertex(t, "monitor", "--addr", addr, "--dir", t.TempDir()); code != 2 || stderr != want {
			t.Errorf("--addr %s: exit %d, %q; want 2, %q", addr, code, stderr, want)
		}
	}
}

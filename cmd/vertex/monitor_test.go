package main

import (
	"strings"
	"testing"
)

// TestMonitorAddr checks that an --addr that cannot be bound is one line
// naming the flag and its value, exit 2. (An address another process holds
// is waited for: internal/monitor's TestListenWhenFree.)
func TestMonitorAddr(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:99999": `vertex: monitor: --addr ("127.0.0.1:99999"): port 99999 is out of range (at most 65535)` + "\n",
		"no-port":         `vertex: monitor: --addr ("no-port"): want host:port, such as :2469 or 127.0.0.1:0: missing port in address` + "\n",
	} {
		if code, _, stderr := runVertex(t, "monitor", "--addr", addr, "--dir", t.TempDir()); code != 2 || stderr != want {
			t.Errorf("--addr %s: exit %d, %q; want 2, %q", addr, code, stderr, want)
		}
	}
}

// TestProcessorRuntimeAddr checks that a --runtime-addr that cannot be
// bound, for another reason than another process holding it, is one line
// naming the flag and its value, exit 2.
func TestProcessorRuntimeAddr(t *testing.T) {
	t.Setenv("NUMAFLOW_MONO_VERTEX_OBJECT", b64(numaflowObject))
	t.Setenv("NUMAFLOW_REPLICA", "0")
	code, _, stderr := runVertex(t, "processor", "--runtime-addr", "127.0.0.1:99999", "--metrics-addr", "127.0.0.1:0",
		"--uds-dir", t.TempDir(), "--runtime-errors-dir", t.TempDir())
	if want := `vertex: processor: --runtime-addr ("127.0.0.1:99999"): port 99999 is out of range (at most 65535)` + "\n"; code != 2 || !strings.HasSuffix(stderr, want) {
		t.Errorf("exit %d, %q; want 2, %q", code, stderr, want)
	}
}

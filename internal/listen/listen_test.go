package listen

import (
	"net"
	"testing"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/cli"
)

func TestTCP(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for addr, want := range map[string]string{
		"127.0.0.1:99999":    "port 99999 is out of range (at most 65535)",
		"127.0.0.1":          "want host:port, such as :2469 or 127.0.0.1:0: missing port in address",
		held.Addr().String(): "bind: address already in use",
	} {
		if ln, err := TCP(addr); err == nil || err.Error() != want {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("%s: %v; want %q", addr, err, want)
		}
	}
}

// The listener of --metrics-addr is bound by Bind and handed over once; an
// address in use is a usage error naming the flag.
func TestBindMetrics(t *testing.T) {
	f := &config.File{MonoVertex: &config.MonoVertex{}}
	ls, err := Bind(Flags{MetricsAddr: "127.0.0.1:0"}, f)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	ln := ls.Metrics()
	if ln == nil || ls.Metrics() != nil {
		t.Fatalf("Metrics: %v, then %v; want the listener once", ln, ls.Metrics())
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, err = Bind(Flags{MetricsAddr: addr}, f)
	want := `--metrics-addr ("` + addr + `"): bind: address already in use`
	if err == nil || err.Error() != want || !cli.IsUsage(err) {
		t.Fatalf("%v; want the usage error %q", err, want)
	}
	ls.Close()
	ls.Close()
}

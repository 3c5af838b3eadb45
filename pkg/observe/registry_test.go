package observe

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestNewRegistry gathers the Go runtime's and the process's metrics, and
// takes a metric of a vertex's beside them.
func TestNewRegistry(t *testing.T) {
	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "sluice_test_total"} {
		if !got[name] {
			t.Errorf("%s not gathered", name)
		}
	}
}

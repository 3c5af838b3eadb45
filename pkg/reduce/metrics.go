package reduce

import "github.com/prometheus/client_golang/prometheus"

// Metrics count what the readers of a reduce vertex do; one set serves all
// of a vertex's readers.
type Metrics struct {
	// Read counts messages read and kept in their windows; Late those
	// dropped because their windows had closed.
	Read, Late prometheus.Counter
	// Closed counts windows closed and reduced, once per reader that had the
	// window open; Results the results written, a reduce streamer's
	// written while their windows are open included.
	Closed, Results prometheus.Counter
}

// NewMetrics registers a reduce's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	return &Metrics{
		Read:    counter("sluice_reduce_read_total", "Messages a reduce read and kept in their windows."),
		Late:    counter("sluice_reduce_late_total", "Messages a reduce dropped as late: the watermark had closed every window of their event time."),
		Closed:  counter("sluice_reduce_windows_closed_total", "Windows the watermark closed and the reduce reduced."),
		Results: counter("sluice_reduce_results_total", "Results written downstream: of closed windows, and a reduce streamer's as its functions send them."),
	}
}

package vertex

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// droppingSource is a source that drops messages it cannot hold: core NATS.
type droppingSource interface {
	Dropped() uint64
}

// buildDropped registers sluice_source_dropped_total for a source r that
// drops messages.
func buildDropped(reg prometheus.Registerer, r isb.Reader) {
	d, ok := r.(droppingSource)
	if !ok {
		return
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_source_dropped_total",
		Help: "Messages the source received and dropped because its buffer was full: a core NATS source while the vertex is throttled."},
		func() float64 { return float64(d.Dropped()) }))
}

package vertex

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/pkg/connectors/source"
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

// httpSource is a source that counts its connections and the requests it
// cut: the http source.
type httpSource interface {
	Stats() source.HTTPStats
}

// buildHTTPStats registers the http source's metrics for r, when it is one:
// its connections by state, those refused or evicted at its
// maxConnections, and the bodies cut for their pace.
func buildHTTPStats(reg prometheus.Registerer, r isb.Reader) {
	h, ok := r.(httpSource)
	if !ok {
		return
	}
	for _, state := range []string{"waiting", "busy"} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_source_http_connections",
			Help:        "Connections open to the http source: waiting for a request (idle, or silent since they opened), or busy with one.",
			ConstLabels: prometheus.Labels{"state": state}},
			func() float64 {
				st := h.Stats()
				if state == "waiting" {
					return float64(st.Waiting)
				}
				return float64(st.Connections - st.Waiting)
			}))
	}
	for _, c := range []struct {
		name, help string
		value      func(source.HTTPStats) uint64
	}{
		{"sluice_source_http_connections_refused_total", "Connections the http source refused with 503 at maxConnections, every open one being busy with a request.",
			func(st source.HTTPStats) uint64 { return st.ConnectionsRefused }},
		{"sluice_source_http_connections_evicted_total", "Connections the http source closed at maxConnections to make room for a new one, the longest waiting for a request first.",
			func(st source.HTTPStats) uint64 { return st.ConnectionsEvicted }},
		{"sluice_source_http_body_timeouts_total", "Requests the http source answered 408 because their body did not arrive at the pace of readBodyTimeout and minBodyBytesPerSecond.",
			func(st source.HTTPStats) uint64 { return st.BodyTimeouts }},
		{"sluice_source_http_rejoined_total", "Requests to the http source that carried the X-Numaflow-Id of a message still in flight and waited for it, instead of being a second message.",
			func(st source.HTTPStats) uint64 { return st.Rejoined }},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(c.value(h.Stats())) }))
	}
}

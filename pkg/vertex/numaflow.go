package vertex

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluiceflow/sluice/pkg/forward"
)

// WithNumaflowMetrics also exports the vertex's numbers under the names and
// labels of Numaflow's MonoVertex data plane (monovtx_read_total{mvtx_name,
// mvtx_replica}, monovtx_pending_raw, ...), for what reads those: Numaflow's
// MonoVertex daemon, which computes rates and feeds its autoscaler from them,
// its UI and dashboards. They are read from the vertex's own counters at each
// scrape, so they cost nothing on the hot path; they are registered with the
// registerer of [WithRegisterer] without its vertex and replica labels. Use it
// for a MonoVertex.
//
// The counters are untyped, as a Prometheus text parser sees those of
// Numaflow's own data plane (whose counter families are named without the
// _total of their samples); Numaflow's daemon reads them as such, and would
// read a typed counter as zero. monovtx_pending_raw is a gauge, and
// monovtx_nack_time a histogram in microseconds with Numaflow's buckets.
func WithNumaflowMetrics() Option { return func(o *options) { o.numaflowMetrics = true } }

// numaflowCollector exports the vertex's counters under Numaflow's MonoVertex
// names, reading them at each scrape.
type numaflowCollector struct {
	v        *Vertex
	descs    []*prometheus.Desc
	values   []func() float64
	pending  *prometheus.Desc
	nackTime *prometheus.Desc
}

// numaflowNackBuckets are the upper bounds of Numaflow's monovtx_nack_time,
// in microseconds: forward.NackTimeBuckets, bucket for bucket.
var numaflowNackBuckets = prometheus.ExponentialBucketsRange(100, 900e6, len(forward.NackTimeBuckets))

var _ prometheus.Collector = (*numaflowCollector)(nil)

func newNumaflowCollector(v *Vertex) *numaflowCollector {
	labels := prometheus.Labels{"mvtx_name": v.spec.Name, "mvtx_replica": strconv.Itoa(v.o.replica)}
	c := &numaflowCollector{v: v,
		pending: prometheus.NewDesc("monovtx_pending_raw",
			"Messages the source has pending, as its Pending answered when last asked (every 5s), for Kafka the group's lag over every partition; -1 when it cannot tell (built-in sources).", nil, labels),
		nackTime: prometheus.NewDesc("monovtx_nack_time",
			"Time to nack a batch's nacked messages to the source, in microseconds (sluice_forward_nack_duration_seconds).", nil, labels)}
	m := v.metrics
	counter := func(name, help string, cnt prometheus.Counter) {
		c.descs = append(c.descs, prometheus.NewDesc(name, help, nil, labels))
		c.values = append(c.values, func() float64 { return counterValue(cnt) })
	}
	counter("monovtx_read_total", "Messages read from the source (sluice_forward_read_total).", m.Read)
	counter("monovtx_ack_total", "Messages acknowledged to the source (sluice_forward_ack_total).", m.Acked)
	counter("monovtx_nack_total", "Messages handed back to the source after a nack (sluice_forward_nack_total).", m.Nacked)
	counter("monovtx_dropped_total", "Messages dropped by the transformer, the UDF or onFailure: drop (sluice_forward_drop_total).", m.Dropped)
	counter("monovtx_sink_write_total", "Messages written to the sink (sluice_forward_write_total).", m.Written)
	counter("monovtx_sink_write_errors_total", "Messages the sink failed to write, once per attempt (sluice_forward_error_total{stage=\"write\"}).",
		m.Errors.WithLabelValues(forward.StageWrite))
	counter("monovtx_fallback_sink_write_total", "Messages written to the fallback sink (sluice_forward_fallback_total).", m.Fallback)
	counter("monovtx_onsuccess_sink_write_total", "Messages written to the on-success sink (sluice_forward_onsuccess_total).", m.OnSuccess)
	counter("monovtx_udf_error_total", "Failed calls of the map UDF (sluice_forward_error_total{stage=\"map\"}).",
		m.Errors.WithLabelValues(forward.StageMap))
	return c
}

// Describe sends the descriptors of every metric.
func (c *numaflowCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.pending
	ch <- c.nackTime
}

// Collect reads the counters and the pending count now.
func (c *numaflowCollector) Collect(ch chan<- prometheus.Metric) {
	for i, d := range c.descs {
		ch <- prometheus.MustNewConstMetric(d, prometheus.UntypedValue, c.values[i]())
	}
	// Numaflow's daemon reads replica 0's count as the whole source's.
	pending := -1.0
	if n, ok := c.v.sourcePending(); ok {
		pending = float64(n)
	} else if c.v.pendingGauge != nil && c.v.pendingGroup == nil {
		pending = float64(c.v.lastPending.Load())
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, pending)
	var h dto.Metric
	if err := c.v.metrics.NackTime.Write(&h); err == nil {
		buckets := map[float64]uint64{}
		for i, b := range h.GetHistogram().GetBucket() {
			if i < len(numaflowNackBuckets) {
				buckets[numaflowNackBuckets[i]] = b.GetCumulativeCount()
			}
		}
		ch <- prometheus.MustNewConstHistogram(c.nackTime, h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum()*1e6, buckets)
	}
}

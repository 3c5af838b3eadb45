package forward

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a forwarder's Prometheus metrics. Every name is listed in docs/observability.md.
type Metrics struct {
	Read     prometheus.Counter
	Written  prometheus.Counter
	Fallback prometheus.Counter
	// OnSuccess counts the messages written to the on-success sink.
	OnSuccess prometheus.Counter
	Acked     prometheus.Counter
	Dropped   prometheus.Counter
	Nacked    prometheus.Counter
	Errors    *prometheus.CounterVec // by stage: read, transform, map, write, fallback, onsuccess, ack, nack, cost
	// Failed counts the inputs a function failed (udf.Failed), by stage
	// (transform, map), once per failed call: each is retried or dropped.
	Failed    *prometheus.CounterVec
	Granted   prometheus.Counter
	Deposited prometheus.Counter
	// Retaken counts the tokens taken again for messages that went on in a
	// later epoch than their grant's (see throttle.Throttle.Send); they are in Granted too.
	Retaken prometheus.Counter
	Batch   prometheus.Histogram
	// NackTime times the hand-back of a batch's nacked messages to the
	// reader, once a batch that had any, in NackTimeBuckets.
	NackTime prometheus.Histogram
	// Bytes and BytesDeposited are Granted and Deposited of the byte limit
	// (rateLimit.bytes): the payload bytes of the messages read, and those
	// given back for dropped messages with excludeDropped.
	Bytes, BytesDeposited prometheus.Counter

	// ThrottleSignals counts the messages a sink refused with a throttle
	// signal (isb.ErrThrottled), once per refusal.
	ThrottleSignals prometheus.Counter
}

// NackTimeBuckets are the buckets of Metrics.NackTime, in seconds: those of
// Numaflow's monovtx_nack_time (10 from 100µs to 15 minutes, exponentially
// spaced), so that they can be exported under its name in microseconds.
var NackTimeBuckets = prometheus.ExponentialBucketsRange(100e-6, 900, 10)

// Stages of a forward iteration, the values of the error counter's stage label.
const (
	StageRead      = "read"
	StageTransform = "transform"
	StageMap       = "map"
	StageWrite     = "write"
	StageFallback  = "fallback"
	StageOnSuccess = "onsuccess"
	StageAck       = "ack"
	StageNack      = "nack"
	// StageCost counts the messages whose cost expression (rateLimit.cost)
	// gave no cost; they cost 1.
	StageCost = "cost"
)

// The help of the token counters. Only tokens kept for messages read count: the
// tokens of a grant that a read leaves unused go back at once and are in neither
// counter, so that granted minus deposited is what counted against the limit and
// a dry source moves neither.
const (
	grantedHelp   = "Tokens kept from the rate limiter's grants, one per message read (its cost, with rateLimit.cost); the tokens a read leaves unused go back at once and are not counted."
	depositedHelp = "Tokens kept and then given back to the rate limiter: with excludeDropped, those of dropped messages. Granted minus deposited is what counted against the limit."
)

// retakenHelp is the help of the counter of tokens taken again.
const retakenHelp = "Tokens taken again, and counted in sluice_ratelimit_granted_total too, because messages went on in a later epoch than their grant's: " +
	"a read or a write that returned in a later second, a batch that waited to be written, a message delivered again after a nack or a throttled sink."

// throttleSignalsHelp is the help of the counter of throttle signals.
const throttleSignalsHelp = "Messages a sink refused because it is rate limited (an HTTP sink's 429 or 503), once per refusal; " +
	"they are retried after the wait it asked for, use no retry step, and are not write errors."

// NewMetrics creates a forwarder's metrics and registers them with reg, which
// should carry the vertex and replica labels (prometheus.WrapRegistererWith). The
// throttled-seconds counters read tr at each scrape.
func NewMetrics(reg prometheus.Registerer, tr *Tracker) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	m := &Metrics{
		Read:     counter("sluice_forward_read_total", "Messages read from the source."),
		Written:  counter("sluice_forward_write_total", "Messages written to the sink."),
		Fallback: counter("sluice_forward_fallback_total", "Messages written to the fallback sink."),
		OnSuccess: counter("sluice_forward_onsuccess_total",
			"Messages written to the on-success sink: those the sink answered ON_SUCCESS (they are not in sluice_forward_write_total), and those bypass sends there."),
		Acked:   counter("sluice_forward_ack_total", "Messages acknowledged to the source."),
		Dropped: counter("sluice_forward_drop_total", "Messages dropped: by the transformer or the UDF (to_drop), by onFailure: drop, by a bypass to the sink that does not take them, or nacked more often than their nack allows."),
		Nacked: counter("sluice_forward_nack_total",
			"Messages read that a function or the sink nacked, handed back to be delivered again (once per delivery)."),
		Granted:         counter("sluice_ratelimit_granted_total", grantedHelp),
		Deposited:       counter("sluice_ratelimit_deposited_total", depositedHelp),
		Retaken:         counter("sluice_ratelimit_retaken_total", retakenHelp),
		ThrottleSignals: counter("sluice_forward_throttle_signals_total", throttleSignalsHelp),
		Bytes: counter("sluice_ratelimit_bytes_granted_total",
			"Payload bytes of the messages read, taken from the byte limit (rateLimit.bytes)."),
		BytesDeposited: counter("sluice_ratelimit_bytes_deposited_total",
			"Payload bytes given back to the byte limit: with excludeDropped, those of dropped messages."),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_forward_error_total", Help: "Errors by stage of the forward loop.",
		}, []string{"stage"}),
		Batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_forward_batch_duration_seconds",
			Help:    "Time from the read of a batch to its ack.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
	}
	m.Failed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_forward_udf_failed_total",
		Help: "Inputs a map or transformer failed (a result tagged U+005C__FAIL__), by stage, once per failed call; each is retried as its retryStrategy says, or dropped.",
	}, []string{"stage"})
	m.Failed.WithLabelValues(StageTransform)
	m.Failed.WithLabelValues(StageMap)
	m.NackTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_forward_nack_duration_seconds",
		Help:    "Time to hand a batch's nacked messages back to the source (every nack call of the batch), once a batch that had any.",
		Buckets: NackTimeBuckets,
	})
	reg.MustRegister(m.Errors, m.Batch, m.Failed, m.NackTime)
	for _, stage := range []string{StageRead, StageTransform, StageMap, StageWrite, StageFallback, StageOnSuccess, StageAck, StageNack, StageCost} {
		m.Errors.WithLabelValues(stage)
	}
	for _, r := range reasons {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "sluice_ratelimit_throttled_seconds_total",
			Help:        "Seconds the forwarder was paused, by reason; reasons can overlap.",
			ConstLabels: prometheus.Labels{"reason": r.String()},
		}, func() float64 { return tr.Seconds(r) }))
	}
	return m
}

package vertex

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/internal/udsconn"
)

// UDFCall is the oldest call outstanding to one of the vertex's user-defined
// functions, in /status.
type UDFCall struct {
	// Function is the function: map, batchmap, mapstream, sourcetransformer,
	// source, sink, fb-sink, ons-sink, reduce, reducestream, sessionreducer
	// or accumulator.
	Function string `json:"function"`
	// Call is the call (its RPC, such as MapFn, ReadFn, AckFn or SinkFn) and
	// Messages the messages it carries.
	Call     string `json:"call"`
	Messages int    `json:"messages"`
	// AgeSeconds is how long it has been outstanding, and DeadlineSeconds
	// how long it may be before it is abandoned (limits.udfTimeout, with a
	// source's readTimeout on top for its reads).
	AgeSeconds      float64 `json:"ageSeconds"`
	DeadlineSeconds float64 `json:"deadlineSeconds"`
	// Outstanding is how many calls to the function are outstanding.
	Outstanding int `json:"outstanding"`
}

// udfCalls returns the oldest call outstanding to each function that has one.
func (v *Vertex) udfCalls() []UDFCall {
	var out []UDFCall
	for _, o := range v.calls.Oldest() {
		out = append(out, UDFCall{Function: o.Function, Call: o.Call, Messages: o.Messages, AgeSeconds: o.Age.Seconds(),
			DeadlineSeconds: o.Deadline.Seconds(), Outstanding: o.Calls})
	}
	return out
}

// callsCollector exports sluice_udf_call_oldest_seconds: per function called
// (or connected to), the age of its oldest call outstanding, 0 when none.
type callsCollector struct {
	calls *udsconn.Calls
	desc  *prometheus.Desc
}

func newCallsCollector(calls *udsconn.Calls) *callsCollector {
	return &callsCollector{calls: calls, desc: prometheus.NewDesc("sluice_udf_call_oldest_seconds",
		"Seconds the oldest call outstanding to each user-defined function has waited for its answer, 0 when none; "+
			"past limits.udfTimeout the call is abandoned and retried.", []string{"function"}, nil)}
}

func (c *callsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *callsCollector) Collect(ch chan<- prometheus.Metric) {
	age := map[string]float64{}
	for _, o := range c.calls.Oldest() {
		age[o.Function] = o.Age.Seconds()
	}
	for _, f := range c.calls.Functions() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, age[f], f)
	}
}

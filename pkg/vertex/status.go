package vertex

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Status is a snapshot of a replica: its rate limiter's pool and share in the
// current epoch, why it is throttled, and what it has moved. It is the JSON of
// /status.
type Status struct {
	Vertex    string `json:"vertex"`
	Replica   int    `json:"replica"`
	RateLimit bool   `json:"rateLimit"`
	// Mode is the ramp mode of the rate limit, and Max the limit in force
	// (which a live change of the config sets).
	Mode string `json:"mode,omitempty"`
	Max  int64  `json:"max,omitempty"`
	// Epoch is the current epoch, whole seconds of the store clock.
	Epoch int64 `json:"epoch,omitempty"`
	// Pool is the vertex's token pool P in the current epoch, all replicas
	// together.
	Pool float64 `json:"pool,omitempty"`
	// Share is this replica's share of the pool in the current epoch, and
	// Granted what it has taken of it (less deposits).
	Share   int64 `json:"share,omitempty"`
	Granted int64 `json:"grantedThisEpoch,omitempty"`
	// ShadowThrottled, while rateLimit.shadow is on, is what the limit would
	// have throttled so far and let through.
	ShadowThrottled *int64 `json:"shadowThrottled,omitempty"`
	// Bytes is the byte limit (rateLimit.bytes), if any.
	Bytes *ByteStatus `json:"bytes,omitempty"`
	// PerKey is the per-key limit (rateLimit.perKey), if any.
	PerKey *KeyStatus `json:"perKey,omitempty"`
	// Region is the replica's region (rateLimit.regions), and Lent and
	// Borrowed the tokens it lent to the other replicas of the limit and
	// borrowed from them through the store's spare so far.
	Region   string `json:"region,omitempty"`
	Lent     int64  `json:"lent,omitempty"`
	Borrowed int64  `json:"borrowed,omitempty"`
	// Groups are the shared limits (rateLimit.groups) the vertex joined.
	Groups []GroupStatus `json:"groups,omitempty"`
	// StoreSyncs is the calls the replica made to its rate limit's store
	// so far, for its own pool and its groups' (each one round trip to
	// Redis).
	StoreSyncs int64 `json:"storeSyncs,omitempty"`
	// Replicas is the number of replicas the pool is split among (JSON
	// poolSize, a replica count), and Rank this one's rank among them.
	Replicas int `json:"poolSize,omitempty"`
	Rank     int `json:"rank"`
	// Throttled reports whether the replica is paused now, and Reasons why:
	// rate_limited, awaiting_agreement, store_unavailable, downstream_full,
	// downstream_throttled.
	Throttled bool     `json:"throttled"`
	Reasons   []string `json:"throttledReasons"`
	Running   bool     `json:"running"`
	// NotReady says, while the replica is not ready, what it waits for, as
	// /readyz does: the server-info file of each user-defined server that is
	// not ready or is stuck (a call abandoned at its deadline, until a call
	// to it succeeds), and the side inputs without a value (WithSideInputs).
	NotReady string `json:"notReady,omitempty"`
	// UDFCalls is the oldest call outstanding to each user-defined
	// function that has one, with its age.
	UDFCalls []UDFCall `json:"udfCalls,omitempty"`
	// Watermark is the vertex's watermark (RFC 3339, in milliseconds), and
	// WatermarkLag how far it is behind the clock, in seconds; both absent
	// while it has none.
	Watermark    string  `json:"watermark,omitempty"`
	WatermarkLag float64 `json:"watermarkLagSeconds,omitempty"`
	// ReadTotal and WriteTotal count the messages read and written so far
	// (for a reduce vertex, the messages read and the results written).
	ReadTotal  float64 `json:"readTotal"`
	WriteTotal float64 `json:"writeTotal"`
}

// GroupStatus is a replica's part of a shared limit (a group) in the
// current epoch.
type GroupStatus struct {
	Name string `json:"name"`
	// Max is the group's limit and Pool its pool P, all its members
	// together; Share this replica's share and Granted what it took of it.
	Max     int64   `json:"max"`
	Pool    float64 `json:"pool"`
	Share   int64   `json:"share"`
	Granted int64   `json:"grantedThisEpoch"`
	// Replicas is the number of replicas, of every member vertex, the pool
	// is split among (JSON poolSize, a replica count), and Rank this one's
	// rank among them.
	Replicas int `json:"poolSize"`
	Rank     int `json:"rank"`
	// Lent and Borrowed are the tokens of the group this replica lent and
	// borrowed so far.
	Lent     int64 `json:"lent"`
	Borrowed int64 `json:"borrowed"`
}

// Status returns a snapshot of the replica.
func (v *Vertex) Status() Status {
	s := Status{Vertex: v.spec.Name, Replica: v.o.replica, Running: v.running.Load(), Reasons: []string{}}
	if l := v.limiter; l != nil {
		ls := l.Status()
		s.RateLimit, s.Mode, s.Max, s.Epoch, s.Pool, s.Share, s.Granted, s.Replicas, s.Rank =
			true, ls.Mode.String(), ls.Max, ls.Epoch, ls.Pool(), ls.Share, ls.Granted, ls.Replicas, ls.Rank
		if ls.Shadow {
			s.ShadowThrottled = &ls.ShadowThrottled
		}
		s.PerKey = v.keyStatus()
		s.Bytes = v.byteStatus()
		s.Region, s.Lent, s.Borrowed, s.StoreSyncs = v.region(), ls.Lent, ls.Borrowed, ls.Syncs
		for _, g := range v.groups {
			gs := g.l.Status()
			s.StoreSyncs += gs.Syncs
			s.Groups = append(s.Groups, GroupStatus{Name: g.name, Max: gs.Max, Pool: gs.Pool(), Share: gs.Share,
				Granted: gs.Granted, Replicas: gs.Replicas, Rank: gs.Rank, Lent: gs.Lent, Borrowed: gs.Borrowed})
		}
	}
	throttled, reasons := v.tracker.Throttled()
	s.Throttled = throttled
	for _, r := range reasons {
		s.Reasons = append(s.Reasons, r.String())
	}
	if err := v.Ready(); err != nil {
		s.NotReady = err.Error()
	}
	s.UDFCalls = v.udfCalls()
	if lag, ok := v.watermarkLag(); ok {
		s.Watermark = v.watermark().Format("2006-01-02T15:04:05.000Z07:00")
		s.WatermarkLag = lag.Seconds()
	}
	s.ReadTotal, s.WriteTotal = v.moved()
	return s
}

// moved returns the messages read and written so far (for a reduce vertex,
// the messages read and the results written).
func (v *Vertex) moved() (read, written float64) {
	if m := v.reduceMetrics; m != nil { // read and late; the results written
		return counterValue(m.Read) + counterValue(m.Late), counterValue(m.Results)
	}
	return counterValue(v.metrics.Read), counterValue(v.metrics.Written)
}

// Written is how many messages the vertex has written to its sink or buffers.
func (v *Vertex) Written() float64 { return counterValue(v.metrics.Written) }

// IsSink reports whether the vertex writes to a sink rather than to buffers.
func (v *Vertex) IsSink() bool { return v.spec.Sink != nil }

// counterValue reads a counter's current value.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

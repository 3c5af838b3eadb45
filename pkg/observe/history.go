package observe

import (
	"math"
	"sync"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// DefaultHistory is how many epochs a [History] keeps by default: five
// minutes of one-second epochs.
const DefaultHistory = 300

// Epoch is one ended epoch of a replica's rate limiter, as /status/live
// serves it: the limiter's summary of the epoch (its pool, share and grants,
// as a [LimitEpoch]'s), and what the forwarder read, wrote and was paused
// for during it.
type Epoch struct {
	LimitEpoch
	// Cut is true in the first epoch after a cut of the pool by a throttle
	// signal (adaptive), Paused when a signal's pause held tokens back in
	// it, and Switched in the first epoch of a live change of the config.
	Cut      bool `json:"cut"`
	Paused   bool `json:"paused"`
	Switched bool `json:"switched"`
	// ShadowThrottled is what the limit would have throttled in the epoch
	// and let through (shadow).
	ShadowThrottled int64 `json:"shadowThrottled"`
	// Throttled is the seconds of the epoch the forwarder was paused, by
	// reason.
	Throttled Throttled `json:"throttledSeconds"`
	// Read and Written are the messages read and written in the epoch,
	// counted when it ends: what the forwarder reads of the next epoch's
	// share in the moment before the count falls in this one.
	Read    float64 `json:"read"`
	Written float64 `json:"written"`
}

// Throttled is seconds a forwarder was paused, by reason; reasons can
// overlap.
type Throttled struct {
	RateLimited         float64 `json:"rate_limited"`
	AwaitingAgreement   float64 `json:"awaiting_agreement"`
	StoreUnavailable    float64 `json:"store_unavailable"`
	DownstreamFull      float64 `json:"downstream_full"`
	DownstreamThrottled float64 `json:"downstream_throttled"`
}

// ThrottledBy returns the seconds of each reason that seconds gives.
func ThrottledBy(seconds func(ratelimit.Reason) float64) Throttled {
	return Throttled{
		RateLimited:         seconds(ratelimit.ReasonRateLimited),
		AwaitingAgreement:   seconds(ratelimit.ReasonAwaitingAgreement),
		StoreUnavailable:    seconds(ratelimit.ReasonStoreUnavailable),
		DownstreamFull:      seconds(ratelimit.ReasonDownstreamFull),
		DownstreamThrottled: seconds(ratelimit.ReasonDownstreamThrottled),
	}
}

// minus returns t less u, to the millisecond.
func (t Throttled) minus(u Throttled) Throttled {
	ms := func(a, b float64) float64 { return math.Round((a-b)*1000) / 1000 }
	return Throttled{
		RateLimited:         ms(t.RateLimited, u.RateLimited),
		AwaitingAgreement:   ms(t.AwaitingAgreement, u.AwaitingAgreement),
		StoreUnavailable:    ms(t.StoreUnavailable, u.StoreUnavailable),
		DownstreamFull:      ms(t.DownstreamFull, u.DownstreamFull),
		DownstreamThrottled: ms(t.DownstreamThrottled, u.DownstreamThrottled),
	}
}

// Totals are a forwarder's counts so far, which a [History] turns into
// counts per epoch.
type Totals struct {
	Read, Written float64
	Throttled     Throttled
}

// History keeps the last epochs of a replica in a ring of fixed size. Its
// [History.Observe] is a rate limiter's epoch observer
// ([ratelimit.WithEpochObserver]): it costs one call of totals per epoch and
// nothing per message. The zero value is not usable; call [NewHistory].
// History is safe for concurrent use.
type History struct {
	totals func() Totals

	mu   sync.Mutex
	ring []Epoch
	next int // where the next epoch goes
	n    int // epochs kept
	last Totals
	// switched is the last epoch a live change took effect in, and max
	// the limit it set; 0 when none did.
	switched, switchedMax int64
}

// NewHistory returns a history of the last size epochs (at least 1) whose
// per-epoch counts are the differences of what totals returns at the end
// of each epoch; totals may be nil, for no counts.
func NewHistory(size int, totals func() Totals) *History {
	h := &History{totals: totals, ring: make([]Epoch, max(size, 1))}
	if totals != nil {
		h.last = totals()
	}
	return h
}

// Observe records the epoch s summarises, with the counts that have moved
// since the last call.
func (h *History) Observe(s ratelimit.EpochSummary) {
	var t Totals
	if h.totals != nil {
		t = h.totals()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.next] = Epoch{LimitEpoch: LimitEpoch{Epoch: s.Epoch, Pool: float64(s.PoolMilli) / 1000, Replicas: s.Replicas,
		Share: s.Share, Granted: s.Granted, Max: s.Max}, Cut: s.Cut, Paused: s.Paused, Switched: s.Switched,
		ShadowThrottled: s.ShadowThrottled, Throttled: t.Throttled.minus(h.last.Throttled),
		Read: t.Read - h.last.Read, Written: t.Written - h.last.Written}
	h.last = t
	h.next = (h.next + 1) % len(h.ring)
	h.n = min(h.n+1, len(h.ring))
	if s.Switched {
		h.switched, h.switchedMax = s.Epoch, s.Max
	}
}

// Since returns the epochs kept after epoch since, oldest first (all of
// them for since 0).
func (h *History) Since(since int64) []Epoch {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Epoch, 0, h.n)
	for i := range h.n {
		e := h.ring[(h.next-h.n+i+len(h.ring))%len(h.ring)]
		if e.Epoch > since {
			out = append(out, e)
		}
	}
	return out
}

// LimitEpoch is one ended epoch of a limit: a vertex's message limit (in
// [Epoch]) or a limit beside it (its byte limit, a shared limit it joined),
// as /status/live serves it.
type LimitEpoch struct {
	// Epoch is the epoch, whole seconds of the store clock.
	Epoch int64 `json:"epoch"`
	// Pool is the limit's pool P in the epoch, all replicas together,
	// Replicas the number of replicas it was split among (JSON poolSize),
	// Share this replica's part, Granted what it took of it (less deposits)
	// and Max the limit in force.
	Pool     float64 `json:"pool"`
	Replicas int     `json:"poolSize"`
	Share    int64   `json:"share"`
	Granted  int64   `json:"granted"`
	Max      int64   `json:"max"`
}

// LimitSince returns the epochs kept after epoch since, oldest first, as
// [LimitEpoch]s: for a history of a limit beside the message limit, made
// with no totals.
func (h *History) LimitSince(since int64) []LimitEpoch {
	es := h.Since(since)
	out := make([]LimitEpoch, len(es))
	for i, e := range es {
		out[i] = e.LimitEpoch
	}
	return out
}

// LastChange returns the epoch of the last live change of the config the
// history saw take effect and the limit it set; ok is false when it saw
// none.
func (h *History) LastChange() (epoch, max int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.switched, h.switchedMax, h.switched != 0
}

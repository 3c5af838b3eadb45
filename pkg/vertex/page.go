package vertex

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// PageView is the JSON of /status/live, which the status page polls: the
// vertices the process runs, one for a MonoVertex, every vertex of a
// pipeline run in one process.
type PageView struct {
	// Pipeline is the pipeline's name; absent for a MonoVertex.
	Pipeline string       `json:"pipeline,omitempty"`
	Vertices []PageVertex `json:"vertices"`
}

// PageView returns the JSON of /status/live for this replica alone.
func (v *Vertex) PageView(since int64) PageView {
	return PageView{Vertices: []PageVertex{v.PageVertex(since)}}
}

// PageVertex is a replica's part of /status/live: every field of its [Status],
// its rate limit as it stands, and its last epochs.
type PageVertex struct {
	Status
	// Column is the vertex's column in the pipeline's graph, its depth from
	// the sources (0 for a MonoVertex and for sources), and To the
	// vertices it writes to; the pipeline sets both.
	Column int      `json:"column"`
	To     []string `json:"to,omitempty"`
	// Limit is the rate limit as it stands; nil without one.
	Limit *PageLimit `json:"limit,omitempty"`
	// Epochs are the last epochs of the rate limit after the epoch asked
	// for, oldest first, at most [observe.DefaultHistory]; without a rate
	// limit, the last seconds of the vertex's clock, with only what was
	// read, written and throttled.
	Epochs []observe.Epoch `json:"epochs"`
}

// PageLimit is a replica's rate limit as it stands: its config in force,
// its pool and the replicas it is split among, its closed loop and its
// per-key holds.
type PageLimit struct {
	// Store is where the replicas agree on who they are: none (the replica
	// alone), replicas (a fixed count of replicas), or shared (a store's
	// pool, such as Redis). StoreUp is false while the last sync with the
	// store failed.
	Store   string `json:"store"`
	StoreUp bool   `json:"storeUp"`
	// Shares are the shares of the pool in the current epoch of every
	// replica in it, by rank (this replica's is at Status.Rank).
	Shares []int64 `json:"shares"`
	// Config is the config in force.
	Config PageConfig `json:"config"`
	// LastChange is the last live change of the config this replica saw
	// take effect; nil when none did.
	LastChange *LiveChange `json:"lastChange,omitempty"`
	// Cuts is the cuts of the pool by throttle signals so far (adaptive),
	// PausedUntil the end of the pause a signal asked for while it lasts
	// (RFC 3339, store clock), and Ceiling the learnt ceiling that caps the
	// pool's climb (0 when there is none).
	Cuts        int64   `json:"cuts"`
	PausedUntil string  `json:"pausedUntil,omitempty"`
	Ceiling     float64 `json:"ceiling"`
	// TopKeys are the keys granted the most in the last epoch, most first,
	// with the per-key limit (perKey); absent without it.
	TopKeys []KeyCount `json:"topKeys,omitempty"`
	// BytesEpochs are the last epochs of the byte limit (rateLimit.bytes)
	// after the epoch asked for, oldest first; absent without one.
	// GroupEpochs are those of each shared limit (rateLimit.groups) the
	// vertex joined, by its name.
	BytesEpochs []observe.LimitEpoch            `json:"bytesEpochs,omitempty"`
	GroupEpochs map[string][]observe.LimitEpoch `json:"groupEpochs,omitempty"`
}

// PageConfig is the rate limit's config in force.
type PageConfig struct {
	Mode              string  `json:"mode"`
	Max               int64   `json:"max"`
	Min               int64   `json:"min"`
	RampUpSeconds     float64 `json:"rampUpSeconds"`
	Adaptive          bool    `json:"adaptive"`
	Shadow            bool    `json:"shadow"`
	OnStoreFailure    string  `json:"onStoreFailure"`
	StaleAfterSeconds float64 `json:"staleAfterSeconds"`
	CoolDownSeconds   float64 `json:"coolDownSeconds"`
}

// LiveChange is a live change of the config: the epoch it took effect in
// and the max it set.
type LiveChange struct {
	Epoch int64 `json:"epoch"`
	Max   int64 `json:"max"`
}

// KeyCount is a key and the per-key tokens it was granted in an epoch.
type KeyCount struct {
	Key    string `json:"key"`
	Tokens int64  `json:"tokens"`
}

// pageState is what the vertex keeps for /status/live: its history, fed
// by the limiter's epoch observer (or, without a rate limit, by
// recordSeconds), and the per-key limit's last top keys, fed by its own.
type pageState struct {
	history *observe.History
	// bytes is the byte limit's history, nil without one; each group
	// limiter keeps its own.
	bytes   *observe.History
	topKeys atomic.Pointer[[]KeyCount]
	// shared is true when the replicas share a store.
	shared bool
}

// newHistory returns the vertex's history of epochs, which reads its
// counters once per epoch.
func (v *Vertex) newHistory() *observe.History {
	return observe.NewHistory(observe.DefaultHistory, func() observe.Totals {
		read, written := v.moved()
		return observe.Totals{Read: read, Written: written, Throttled: observe.ThrottledBy(v.tracker.Seconds)}
	})
}

// observeKeys keeps the top keys of the per-key limit's last epoch.
func (v *Vertex) observeKeys(s ratelimit.KeyEpochSummary) {
	top := make([]KeyCount, len(s.Top))
	for i, k := range s.Top {
		top[i] = KeyCount{Key: k.Key, Tokens: k.Tokens}
	}
	v.page.topKeys.Store(&top)
}

// PageVertex returns the replica's part of /status/live, with the epochs after
// since.
func (v *Vertex) PageVertex(since int64) PageVertex {
	lv := PageVertex{Status: v.Status(), Epochs: v.page.history.Since(since)}
	l := v.limiter
	if l == nil {
		return lv
	}
	s, cfg := l.Status(), l.Config()
	ll := &PageLimit{Store: v.storeKind(), StoreUp: s.StoreUp, Shares: s.Shares(), Cuts: s.Cuts,
		Ceiling: float64(s.CeilingMilli) / 1000,
		Config: PageConfig{Mode: cfg.Mode.String(), Max: cfg.Max, Min: cfg.Min, RampUpSeconds: cfg.RampUpDuration.Seconds(),
			Adaptive: cfg.Adaptive, Shadow: cfg.Shadow, OnStoreFailure: cfg.OnStoreFailure.String(),
			StaleAfterSeconds: cfg.StaleAfter.Seconds(), CoolDownSeconds: cfg.CoolDownPeriod.Seconds()}}
	if ll.Shares == nil {
		ll.Shares = []int64{}
	}
	if !s.PausedUntil.IsZero() {
		ll.PausedUntil = s.PausedUntil.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	if e, m, ok := v.page.history.LastChange(); ok {
		ll.LastChange = &LiveChange{Epoch: e, Max: m}
	}
	if top := v.page.topKeys.Load(); top != nil {
		ll.TopKeys = *top
	}
	if v.page.bytes != nil {
		ll.BytesEpochs = v.page.bytes.LimitSince(since)
	}
	for _, g := range v.groups {
		if ll.GroupEpochs == nil {
			ll.GroupEpochs = map[string][]observe.LimitEpoch{}
		}
		ll.GroupEpochs[g.name] = g.history.LimitSince(since)
	}
	lv.Limit = ll
	return lv
}

// storeKind names where the replicas agree on who they are: none, replicas or
// shared.
func (v *Vertex) storeKind() string {
	switch rl := v.spec.Limits.RateLimit; {
	case rl == nil || rl.Store == nil:
		return "none"
	case v.page.shared:
		return "shared"
	default:
		return "replicas"
	}
}

// recordSeconds, for a vertex without a rate limit, records what it read,
// wrote and was throttled for in each second of its clock, at the second's
// end, until ctx is done.
func (v *Vertex) recordSeconds(ctx context.Context) {
	for {
		now := v.o.clock.Now()
		end := now.Truncate(time.Second).Add(time.Second)
		if !clock.SleepUntil(ctx, v.o.clock, end) {
			return
		}
		v.page.history.Observe(ratelimit.EpochSummary{Epoch: end.Unix() - 1})
	}
}

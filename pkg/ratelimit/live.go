package ratelimit

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"

	"go.uber.org/zap"
)

// liveConfig is the part of a Config that can change live, as it is encoded
// for the store: the fields [Fields] marks live (TestFieldsLiveConfig checks
// it), under the names the replicas of a vertex exchange.
type liveConfig struct {
	Max                 int64         `json:"max"`
	Min                 int64         `json:"min"`
	RampUpDuration      time.Duration `json:"rampUpDuration"`
	Mode                Mode          `json:"mode"`
	ThresholdPercentage int           `json:"thresholdPercentage"`
	CoolDownPeriod      time.Duration `json:"coolDownPeriod"`
	RampDownPercentage  int           `json:"rampDownPercentage"`
	Shadow              bool          `json:"shadow,omitempty"`
}

func (c Config) live() liveConfig {
	return liveConfig{Max: c.Max, Min: c.Min, RampUpDuration: c.RampUpDuration, Mode: c.Mode,
		ThresholdPercentage: c.ThresholdPercentage, CoolDownPeriod: c.CoolDownPeriod,
		RampDownPercentage: c.RampDownPercentage, Shadow: c.Shadow}
}

func (c Config) withLive(v liveConfig) Config {
	c.Max, c.Min, c.RampUpDuration, c.Mode = v.Max, v.Min, v.RampUpDuration, v.Mode
	c.ThresholdPercentage, c.CoolDownPeriod, c.RampDownPercentage = v.ThresholdPercentage, v.CoolDownPeriod, v.RampDownPercentage
	c.Shadow = v.Shadow
	return c
}

// liveSpec returns c's live settings, encoded for the store.
func (c Config) liveSpec() string {
	b, _ := json.Marshal(c.live()) // a struct of numbers and a bool
	return string(b)
}

// withSpec returns c with the live settings of spec, which must be valid.
func (c Config) withSpec(spec string) (Config, error) {
	var v liveConfig
	if err := json.Unmarshal([]byte(spec), &v); err != nil {
		return c, fmt.Errorf("ratelimit: live limit %q from the store: %w", spec, err)
	}
	n := c.withLive(v)
	if err := n.Validate(); err != nil {
		return c, fmt.Errorf("ratelimit: live limit %q from the store: %w", spec, err)
	}
	return n, nil
}

// NotLiveError names the first setting of a [Config] given to
// [Limiter.Update] that differs from the running one and cannot change live.
type NotLiveError struct {
	Field    string // a Config field name
	Old, New any
}

func (e *NotLiveError) Error() string {
	return fmt.Sprintf("ratelimit: %s (%v, was %v) cannot change while the limiter runs", e.Field, e.New, e.Old)
}

// Unwrap makes every NotLiveError match [ErrNotLive].
func (e *NotLiveError) Unwrap() error { return ErrNotLive }

// notLive returns the first Config field of [Fields] that is not live and
// differs between a and b, or nil.
func notLive(a, b Config) error {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for _, f := range Fields {
		if f.Live || f.Go == "" {
			continue
		}
		old, new := va.FieldByName(f.Go).Interface(), vb.FieldByName(f.Go).Interface()
		if old != new {
			return &NotLiveError{Field: f.Go, Old: old, New: new}
		}
	}
	return nil
}

// liveState is a replica's live changes of the limit: the change it
// proposes to the store, those it plans (plan, learn) and the switch that
// applies as an epoch begins (switchAt). [Limiter.Update] changes the
// Config fields that [Fields] marks live while the limiter runs.
//
// With a store, the change goes to the store at once (a sync is brought
// forward), which numbers it and picks the epoch it applies from: the first
// that begins at least a lead after the store took it (the longest of four
// sync intervals, 500ms and StaleAfter: [link.liveLead]), so that every
// replica learns it at a sync before then, or its lease has run out by then.
// Every replica switches at that one epoch boundary. The last change taken
// wins; a replica also proposes its own config when it registers, so the
// replica that started or changed last sets the vertex's limit. Without a
// store (or with a fixed pool) the change applies from the next epoch.
//
// In the epoch of the switch the pool is the one it would have had, capped
// by the new Max: never more than the smaller of the two limits. The new
// ramp goes on from there in the next epoch, as at start-up from a resumed
// pool: a raised Max is reached by ramping over the new RampUpDuration (at
// once with 0), a lowered one applies in the switching epoch.
//
// lead and log are set once; l.mu guards the rest.
type liveState struct {
	log      *zap.Logger
	lead     time.Duration      // a proposal's share.LimitChange.Lead
	proposal *share.LimitChange // to report at the next sync
	switches []limitSwitch      // planned, in order of epoch
	gen      int64              // the last change learned from the store
}

// limitSwitch is a change of the live limit to apply from epoch from.
type limitSwitch struct {
	from int64
	gen  int64 // the store's number of the change, 0 without a store
	cfg  Config
}

// liveLead is how long before its epoch the store takes a change of the
// limit: time for every replica to sync, and at least a lease, so that a
// replica that cannot learn of the change (cut off from the store) has
// stopped granting by the epoch it applies from, unless it keeps its last
// pool by onStoreFailure: lastKnown.
func (k *link) liveLead(staleAfter time.Duration) time.Duration {
	return max(4*k.interval, 500*time.Millisecond, staleAfter)
}

// Update changes the limit to cfg while the limiter runs: the fields that
// [Fields] marks live may differ from the running config; any other
// difference is an error that matches [ErrNotLive], a [*NotLiveError]
// naming the first, and cfg must be valid (see [Config.Validate]). Without
// a store the change applies from the next epoch; with one, every replica
// applies it from the same epoch, which the store picks (see
// [share.LimitChange]). Update does no I/O.
func (l *Limiter) Update(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := notLive(l.cfg, cfg); err != nil {
		return err
	}
	if l.link.store != nil {
		spec := cfg.liveSpec()
		if l.live.proposal == nil && spec == l.live.latest(l.cfg).liveSpec() {
			return nil
		}
		l.live.propose(spec)
		l.syncSoon()
		return nil
	}
	if cfg.live() == l.live.latest(l.cfg).live() {
		return nil
	}
	l.live.plan(limitSwitch{from: l.state.Load().epoch + 1, cfg: cfg})
	return nil
}

// Config returns the config in force in the current epoch, with its
// defaults filled in: the one New was given, or the last live change
// ([Limiter.Update]) that has taken effect.
func (l *Limiter) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

// latest returns the config in force once every planned switch has applied,
// cur until then. l.mu is held.
func (s *liveState) latest(cur Config) Config {
	if n := len(s.switches); n > 0 {
		return s.switches[n-1].cfg
	}
	return cur
}

// plan adds s to the switches, which stay in order of epoch: a later change
// replaces those planned from its epoch on. l.mu is held.
func (s *liveState) plan(sw limitSwitch) {
	i := len(s.switches)
	for i > 0 && s.switches[i-1].from >= sw.from {
		i--
	}
	s.switches = append(s.switches[:i], sw)
}

// propose makes spec, a config's live settings, the change to report at
// the next sync. l.mu is held.
func (s *liveState) propose(spec string) {
	s.proposal = &share.LimitChange{Spec: spec, Lead: s.lead}
}

// learn plans the changes of the live limit the store returned that the
// replica has not seen, cur being the config in force and epoch the current
// one. At the first sync the replica's own proposal has just been taken, so
// every change but the last belongs to the pool's past. A change learned
// after its epoch began (the replica missed syncs) applies from the next
// epoch, and is logged. It reports whether it proposed the limit in force
// again, for a store that lost it: the owner then syncs soon. l.mu is held.
func (s *liveState) learn(limits []share.LiveLimit, first bool, cur Config, epoch int64) (proposed bool) {
	if n := len(limits); !first && (n == 0 || limits[n-1].Gen < s.gen) {
		// The store lost its keys (a Redis that restarted empty, or all
		// replicas gone past its ttl): offer the limit in force again.
		s.log.Info("the store has lost the vertex's limit; offering this replica's again")
		s.gen = 0
		if s.proposal == nil {
			s.propose(s.latest(cur).liveSpec())
			proposed = true
		}
	}
	for i, c := range limits {
		if c.Gen <= s.gen {
			continue
		}
		s.gen = c.Gen
		if first && i < len(limits)-1 {
			continue
		}
		cfg, err := s.latest(cur).withSpec(c.Spec)
		if err != nil {
			s.log.Warn("ignoring a live limit from the store", zap.Error(err))
			continue
		}
		if first && cfg.live() == cur.live() {
			continue
		}
		from := c.From
		if from <= epoch {
			s.log.Warn("learned a change of the limit after its epoch began; applying it from the next",
				zap.Int64("fromEpoch", c.From), zap.Int64("epoch", epoch))
			from = epoch + 1
		}
		s.plan(limitSwitch{from: from, gen: c.Gen, cfg: cfg})
	}
	return proposed
}

// switchAt takes the last switch planned from epoch e or before, if any, as
// epoch e begins under cur, and returns its config when it changes cur's
// live settings, logged; the owner then moves to it: its ramp goes on from
// the pool it would have had in e (see liveState). l.mu is held.
func (s *liveState) switchAt(e int64, cur Config) (Config, bool) {
	n := 0
	for n < len(s.switches) && s.switches[n].from <= e {
		n++
	}
	if n == 0 {
		return cur, false
	}
	sw := s.switches[n-1]
	s.switches = append(s.switches[:0], s.switches[n:]...)
	if sw.cfg.live() == cur.live() {
		return cur, false
	}
	s.log.Info("rate limit changed", zap.Int64("fromEpoch", e),
		zap.Int64("max", sw.cfg.Max), zap.Int64("min", sw.cfg.Min), zap.Duration("rampUpDuration", sw.cfg.RampUpDuration),
		zap.Stringer("mode", sw.cfg.Mode), zap.Bool("shadow", sw.cfg.Shadow), zap.Int64("previousMax", cur.Max), zap.Int64("change", sw.gen))
	return sw.cfg, true
}

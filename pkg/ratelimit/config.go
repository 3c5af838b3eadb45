package ratelimit

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"

	"github.com/sluiceflow/sluice/internal/enum"
)

// Mode is how the token pool ramps from Min to Max. The zero value is [Relaxed],
// Numaflow's default.
type Mode uint8

const (
	// Relaxed raises the pool by one slope in each epoch that sees a call; epochs
	// without calls stall the ramp.
	Relaxed Mode = iota
	// Scheduled raises the pool by one slope every epoch, calls or not.
	Scheduled
	// OnlyIfUsed raises the pool by one slope in an epoch that sees a call when the
	// last epoch with a call used at least ThresholdPercentage of its share.
	OnlyIfUsed
	// GoBackN is OnlyIfUsed that also lowers the pool: by one slope after an epoch
	// that used less than ThresholdPercentage, and by RampDownPercentage of a slope
	// per idle epoch after more than CoolDownPeriod without calls.
	GoBackN
)

var modeNames = [...]string{Relaxed: "relaxed", Scheduled: "scheduled", OnlyIfUsed: "onlyIfUsed", GoBackN: "goBackN"}

// String returns the mode's name as written in a vertex's YAML.
func (m Mode) String() string { return enum.Name(modeNames[:], m, "Mode") }

// MarshalText returns the mode's YAML name.
func (m Mode) MarshalText() ([]byte, error) { return enum.Marshal(modeNames[:], m, "mode") }

// UnmarshalText parses a mode name as written in YAML (relaxed, scheduled,
// onlyIfUsed, goBackN) and rejects any other.
func (m *Mode) UnmarshalText(b []byte) error { return enum.Parse(m, modeNames[:], b, "mode") }

// Defaults of Numaflow's rateLimit block, applied by [DefaultConfig].
const (
	DefaultMin                 = 1
	DefaultRampUpDuration      = time.Second
	DefaultThresholdPercentage = 50
	DefaultCoolDownPeriod      = 5 * time.Second
	DefaultRampDownPercentage  = 50
	DefaultCutPercentage       = 50
	DefaultHoldBelowPercentage = 1
	DefaultProbeAfter          = 2 * time.Second
	DefaultForgetAfter         = 60 * time.Second
	// MaxTokens is the largest Max accepted: a trillion tokens per second.
	MaxTokens = 1_000_000_000_000
)

// Config is a vertex's rate limit: at most Max tokens per one-second epoch across all
// replicas, starting from Min and ramping to Max over RampUpDuration as Mode says.
//
// Every field is taken literally: Config{Max: 100} is a flat 100 per second
// (RampUpDuration 0 starts at Max). [DefaultConfig] fills in Numaflow's defaults.
type Config struct {
	// Max is the most tokens the vertex may take in one epoch. It must be 1 or more.
	Max int64
	// Min is the pool at start-up, 0 <= Min <= Max.
	Min int64
	// RampUpDuration is the time to ramp from Min to Max; 0 starts at Max.
	RampUpDuration time.Duration
	// Mode is the ramp policy.
	Mode Mode
	// ThresholdPercentage (0-100) is the utilization of an epoch's share at which
	// OnlyIfUsed and GoBackN ramp up.
	ThresholdPercentage int
	// CoolDownPeriod is how long GoBackN tolerates epochs without calls before it
	// ramps down for them.
	CoolDownPeriod time.Duration
	// RampDownPercentage (0-100) is the percentage of a slope GoBackN takes off per
	// idle epoch once the cool-down has passed.
	RampDownPercentage int
	// Pacing, when positive, spreads each epoch's share evenly over the second in
	// slices of this length instead of granting it all at the epoch's start. It must
	// be between 1ms and 500ms.
	Pacing time.Duration

	// StaleAfter is a replica's lease with a store (0 for the default 2s), the one
	// setting of it: the replica reports it at each sync and the store drops the
	// replica once it has been silent this long, and a replica that cannot reach
	// the store this long acts by OnStoreFailure.
	StaleAfter time.Duration
	// OnStoreFailure is what a replica does once its lease has run out.
	OnStoreFailure StoreFailurePolicy
	// ResumedRampUp starts a replica registering with a store from the pool the
	// last replica to leave gracefully saved, within the store's ttl.
	ResumedRampUp bool

	// Adaptive turns on closed-loop throttling: a throttle signal from what the
	// vertex protects ([Limiter.Signal]) cuts the pool by CutPercentage, at most
	// once per epoch, and with a Retry-After pauses every replica until then;
	// the pool then ramps back as Mode says. Off, Signal does nothing.
	Adaptive bool
	// CutPercentage (0-100) is the share of the pool a signal takes off:
	// P := max(Min, floor(P*(100-CutPercentage)/100)). 0 cuts nothing, and a
	// signal only pauses.
	CutPercentage int
	// HoldBelowPercentage (0-100) is how far below the learnt ceiling the
	// pool holds after a cut: the ceiling is the pool at which the last cut's
	// signal came, and the pool climbs back to the ceiling less
	// max(1 token, HoldBelowPercentage of it), fast far below it and slowly
	// near it (see [Limiter.Signal]).
	HoldBelowPercentage int
	// ProbeAfter is how long the pool holds below the learnt ceiling, from
	// the cut, before it probes above it, and at least one epoch at the
	// hold: by the hold's gap in the first epoch, then four times as much
	// more in each epoch without a signal (paced: one more gap each time a
	// token bucket downstream would have drained, or, its burst unknown,
	// each epoch, each probe refused in a row doubling the wait, at most
	// half of ForgetAfter). A probe's signal, and any under the ceiling at
	// a pool above the one that passed the epoch before, falls back to
	// that pool. 0 probes as soon as the hold is reached.
	ProbeAfter time.Duration
	// ForgetAfter is how long after the last cut the learnt ceiling is
	// forgotten, and the pool ramps as the mode says up to Max; 0 forgets it
	// at once (no ceiling is learnt).
	ForgetAfter time.Duration

	// Lend exchanges spare tokens through the store (see [share.Spare]): at
	// each sync, a replica that granted nothing since the last one lends
	// what is left of its epoch's share, less ReservePercentage of the
	// share, and a replica that ran out asks for as many as its share. The
	// tokens lent are of the current epoch only, and a replica never grants
	// what it lent: the replicas together never grant more than the pool.
	// The replicas of a limit's regions (see [WithRegion]) lend to each
	// other through one spare, and take from their own region's first.
	Lend bool
	// ReservePercentage (0-100) is the part of its share a replica keeps
	// when it lends, for its own callers should they come back in the epoch.
	ReservePercentage int

	// Shadow makes a [Shadow] way into the limiter never make its caller
	// wait: the pool, shares and grants are computed as usual, and what the
	// limit would have throttled is counted instead. It does not change the
	// limiter's own Acquire.
	Shadow bool
}

// DefaultStaleAfter is the default lease of a replica with its store.
const DefaultStaleAfter = share.DefaultStaleAfter

// withDefaults returns c with the defaults of its zero settings filled in.
func (c Config) withDefaults() Config {
	c.StaleAfter = share.Lease(c.StaleAfter)
	return c
}

// StoreFailurePolicy is what a replica does when it cannot reach its store past
// its lease. The zero value is LastKnown.
type StoreFailurePolicy uint8

const (
	// LastKnown keeps the last agreed replica count: availability first. If the other
	// replicas drop this one meanwhile, the vertex can exceed its limit.
	LastKnown StoreFailurePolicy = iota
	// Pause takes no tokens until the store is back: the limit is never exceeded.
	Pause
)

var policyNames = [...]string{LastKnown: "lastKnown", Pause: "pause"}

// String returns the policy's YAML name.
func (p StoreFailurePolicy) String() string {
	return enum.Name(policyNames[:], p, "StoreFailurePolicy")
}

// UnmarshalText parses lastKnown or pause.
func (p *StoreFailurePolicy) UnmarshalText(b []byte) error {
	return enum.Parse(p, policyNames[:], b, "onStoreFailure")
}

// DefaultConfig returns max with Numaflow's defaults: min 1, rampUpDuration 1s,
// relaxed mode, threshold 50%, cool-down 5s, ramp-down 50%, no pacing; and
// sluice's: not adaptive, with a cut of 50% when it is turned on.
func DefaultConfig(max int64) Config {
	return Config{
		Max:                 max,
		Min:                 DefaultMin,
		RampUpDuration:      DefaultRampUpDuration,
		ThresholdPercentage: DefaultThresholdPercentage,
		CoolDownPeriod:      DefaultCoolDownPeriod,
		RampDownPercentage:  DefaultRampDownPercentage,
		CutPercentage:       DefaultCutPercentage,
		HoldBelowPercentage: DefaultHoldBelowPercentage,
		ProbeAfter:          DefaultProbeAfter,
		ForgetAfter:         DefaultForgetAfter,
	}
}

// FieldError is one invalid field of a [Config]. Field (and Other, for a relation
// between two fields) are Go field names, so that callers can report them under
// their own names (a YAML path, a flag) with [FieldError.Render].
type FieldError struct {
	Field  string
	Value  any
	Reason string // "must be at least 1", or an operator such as ">" when Other is set
	// Other names the field that Value is compared with, if any, and OtherValue
	// its value: Min (50) > Max (10).
	Other      string
	OtherValue any
}

func (e *FieldError) Error() string {
	return "ratelimit: " + e.Render(func(f string) string { return f })
}

// Render returns the error with field names mapped by name, such as
// "spec.limits.rateLimit.min (50) > max (10)".
func (e *FieldError) Render(name func(field string) string) string {
	s := fmt.Sprintf("%s (%v) %s", name(e.Field), e.Value, e.Reason)
	if e.Other != "" {
		s += fmt.Sprintf(" %s (%v)", name(e.Other), e.OtherValue)
	}
	return s
}

// Unwrap makes every FieldError match [ErrInvalidConfig].
func (e *FieldError) Unwrap() error { return ErrInvalidConfig }

// Validate reports every invalid field together, each as a [*FieldError].
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, v any, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Value: v, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Max < 1:
		bad("Max", c.Max, "must be at least 1")
	case c.Max > MaxTokens:
		bad("Max", c.Max, "must be at most %d", int64(MaxTokens))
	}
	switch {
	case c.Min < 0:
		bad("Min", c.Min, "must not be negative")
	case c.Max >= 1 && c.Min > c.Max:
		errs = append(errs, &FieldError{Field: "Min", Value: c.Min, Reason: ">", Other: "Max", OtherValue: c.Max})
	}
	if c.RampUpDuration < 0 {
		bad("RampUpDuration", c.RampUpDuration, "must not be negative")
	}
	if int(c.Mode) >= len(modeNames) {
		bad("Mode", uint8(c.Mode), "is not a known mode")
	}
	// The mode parameters are checked whatever the mode: a bad value is a mistake
	// even where it is not used.
	if c.ThresholdPercentage < 0 || c.ThresholdPercentage > 100 {
		bad("ThresholdPercentage", c.ThresholdPercentage, "must be between 0 and 100")
	}
	if c.CoolDownPeriod < 0 {
		bad("CoolDownPeriod", c.CoolDownPeriod, "must not be negative")
	}
	if c.RampDownPercentage < 0 || c.RampDownPercentage > 100 {
		bad("RampDownPercentage", c.RampDownPercentage, "must be between 0 and 100")
	}
	if c.ReservePercentage < 0 || c.ReservePercentage > 100 {
		bad("ReservePercentage", c.ReservePercentage, "must be between 0 and 100")
	}
	if c.CutPercentage < 0 || c.CutPercentage > 100 {
		bad("CutPercentage", c.CutPercentage, "must be between 0 and 100")
	}
	if c.HoldBelowPercentage < 0 || c.HoldBelowPercentage > 100 {
		bad("HoldBelowPercentage", c.HoldBelowPercentage, "must be between 0 and 100")
	}
	if c.ProbeAfter < 0 {
		bad("ProbeAfter", c.ProbeAfter, "must not be negative")
	}
	if c.ForgetAfter < 0 {
		bad("ForgetAfter", c.ForgetAfter, "must not be negative")
	}
	if c.StaleAfter < 0 {
		bad("StaleAfter", c.StaleAfter, "must not be negative")
	}
	if int(c.OnStoreFailure) >= len(policyNames) {
		bad("OnStoreFailure", uint8(c.OnStoreFailure), "is not a known policy")
	}
	if c.Pacing != 0 && (c.Pacing < time.Millisecond || c.Pacing > 500*time.Millisecond) {
		bad("Pacing", c.Pacing, "must be 0 (off) or between 1ms and 500ms")
	}
	return errors.Join(errs...)
}

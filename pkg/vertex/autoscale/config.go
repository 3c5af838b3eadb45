package autoscale

import (
	"fmt"
	"time"
)

// Numaflow's defaults of its scale fields, which a [Config] from
// [DefaultConfig] holds.
const (
	DefaultMax              = 50
	DefaultLookback         = 120 * time.Second
	DefaultCooldown         = 90 * time.Second
	DefaultTargetProcessing = 20 * time.Second
	DefaultReplicasPerScale = 2
	MaxLookback             = 600 * time.Second
	maxReplicas             = 1 << 20 // far above what a cluster runs
	maxSeconds              = 365 * 24 * time.Hour
)

// Config is the rule's settings: Numaflow's scale fields (scale.min, max,
// lookbackSeconds, scaleUpCooldownSeconds, scaleDownCooldownSeconds,
// targetProcessingSeconds, replicasPerScaleUp, replicasPerScaleDown,
// disabled) as Go values, read as Numaflow reads them, and the processing
// rate of one replica where it is known. Its zero value is not valid; start
// from [DefaultConfig].
type Config struct {
	// Min and Max bound the replicas (scale.min, default 0; scale.max,
	// default 50).
	Min, Max int
	// Lookback is the time over which pending and the processing rate are
	// averaged (scale.lookbackSeconds, default 120 s, at most 600 s).
	Lookback time.Duration
	// ScaleUpCooldown and ScaleDownCooldown are the time after a change of
	// the count, either way, before the next scale-up and the next
	// scale-down (scale.scaleUpCooldownSeconds, scaleDownCooldownSeconds,
	// default 90 s each).
	ScaleUpCooldown, ScaleDownCooldown time.Duration
	// TargetProcessing is the time in which the replicas should drain what
	// is pending (scale.targetProcessingSeconds, default 20 s).
	TargetProcessing time.Duration
	// ReplicasPerScaleUp and ReplicasPerScaleDown are the most replicas
	// added or removed at once (scale.replicasPerScaleUp, Down, default 2).
	ReplicasPerScaleUp, ReplicasPerScaleDown int
	// Disabled leaves the count to someone else (scale.disabled): the rule
	// answers the current count.
	Disabled bool
	// ReplicaRate is the messages a second one replica processes when
	// neither the rate limit nor an empty backlog holds it back; 0 learns
	// it from the replicas' own rate when they are busy and not throttled.
	// It is sluice's, not one of Numaflow's fields.
	ReplicaRate float64
}

// DefaultConfig returns Numaflow's defaults: min 0, max 50, lookback 120 s,
// cool-downs 90 s, target processing 20 s, 2 replicas per scale-up and
// scale-down, the replica rate learnt.
func DefaultConfig() Config {
	return Config{Max: DefaultMax, Lookback: DefaultLookback,
		ScaleUpCooldown: DefaultCooldown, ScaleDownCooldown: DefaultCooldown,
		TargetProcessing:   DefaultTargetProcessing,
		ReplicasPerScaleUp: DefaultReplicasPerScale, ReplicasPerScaleDown: DefaultReplicasPerScale}
}

// Fields names each setting of a [Config] by its scale field's YAML name,
// as [RangeError] reports it; "replicaRate" is sluice's own.
var Fields = map[string]string{
	"Min": "min", "Max": "max", "Lookback": "lookbackSeconds",
	"ScaleUpCooldown": "scaleUpCooldownSeconds", "ScaleDownCooldown": "scaleDownCooldownSeconds",
	"TargetProcessing": "targetProcessingSeconds", "ReplicasPerScaleUp": "replicasPerScaleUp",
	"ReplicasPerScaleDown": "replicasPerScaleDown", "ReplicaRate": "replicaRate",
}

// Validate reports the first setting out of range as a [*RangeError],
// which matches [ErrRange]: min and max from 0 (min at most max), a
// lookback from 1 s to 600 s, cool-downs not negative, a target processing
// time of 1 s or more, at least one replica per scale-up and scale-down,
// and a replica rate not negative. Seconds are whole, as in Numaflow's
// fields.
func (c Config) Validate() error {
	bad := func(field string, value any, want string) error {
		return &RangeError{Field: Fields[field], Value: fmt.Sprint(value), Want: want}
	}
	secs := func(d time.Duration) string { return fmt.Sprint(int64(d / time.Second)) }
	whole := func(d time.Duration) bool { return d%time.Second == 0 }
	switch {
	case c.Min < 0 || c.Min > maxReplicas:
		return bad("Min", c.Min, fmt.Sprintf("from 0 to %d", maxReplicas))
	case c.Max < 0 || c.Max > maxReplicas:
		return bad("Max", c.Max, fmt.Sprintf("from 0 to %d", maxReplicas))
	case c.Min > c.Max:
		return bad("Min", c.Min, fmt.Sprintf("at most max (%d)", c.Max))
	case c.Lookback < time.Second || c.Lookback > MaxLookback || !whole(c.Lookback):
		return bad("Lookback", secs(c.Lookback), "whole seconds from 1 to 600")
	case c.ScaleUpCooldown < 0 || c.ScaleUpCooldown > maxSeconds || !whole(c.ScaleUpCooldown):
		return bad("ScaleUpCooldown", secs(c.ScaleUpCooldown), "whole seconds, 0 or more, at most a year")
	case c.ScaleDownCooldown < 0 || c.ScaleDownCooldown > maxSeconds || !whole(c.ScaleDownCooldown):
		return bad("ScaleDownCooldown", secs(c.ScaleDownCooldown), "whole seconds, 0 or more, at most a year")
	case c.TargetProcessing < time.Second || c.TargetProcessing > maxSeconds || !whole(c.TargetProcessing):
		return bad("TargetProcessing", secs(c.TargetProcessing), "whole seconds, 1 or more, at most a year")
	case c.ReplicasPerScaleUp < 1 || c.ReplicasPerScaleUp > maxReplicas:
		return bad("ReplicasPerScaleUp", c.ReplicasPerScaleUp, fmt.Sprintf("from 1 to %d", maxReplicas))
	case c.ReplicasPerScaleDown < 1 || c.ReplicasPerScaleDown > maxReplicas:
		return bad("ReplicasPerScaleDown", c.ReplicasPerScaleDown, fmt.Sprintf("from 1 to %d", maxReplicas))
	case !(c.ReplicaRate >= 0) || c.ReplicaRate > 1e12:
		return bad("ReplicaRate", c.ReplicaRate, "0 (learn it) or more")
	}
	return nil
}

package config

// Numaflow's defaults of a vertex's scale fields, and the longest lookback
// it reads.
const (
	DefaultScaleMax                = 50
	DefaultLookbackSeconds         = 120
	MaxLookbackSeconds             = 600
	DefaultCooldownSeconds         = 90
	DefaultTargetProcessingSeconds = 20
	DefaultReplicasPerScale        = 2
)

// Scale is a vertex's autoscaling (Numaflow's scale), with Numaflow's field
// names and defaults. Its getters read a nil Scale as all defaults;
// package vertexconfig makes the scaling rule's config of it and checks
// its ranges.
type Scale struct {
	// Disabled leaves the replicas to someone else (an HPA, KEDA).
	Disabled *bool `yaml:"disabled"`
	// Min and Max bound the replicas (default 0 and 50).
	Min *int64 `yaml:"min"`
	Max *int64 `yaml:"max"`
	// LookbackSeconds is the time over which pending and the processing
	// rate are averaged (default 120, read as at most 600).
	LookbackSeconds *int64 `yaml:"lookbackSeconds"`
	// ZeroReplicaSleepSeconds is Numaflow's wait before it wakes a source
	// scaled to zero to peek; sluice reads it and does not use it.
	ZeroReplicaSleepSeconds *int64 `yaml:"zeroReplicaSleepSeconds"`
	// TargetProcessingSeconds is the time in which the replicas should
	// drain what is pending (default 20).
	TargetProcessingSeconds *int64 `yaml:"targetProcessingSeconds"`
	// TargetBufferAvailability is Numaflow's target for the buffers of UDF
	// and sink vertices; sluice reads it and does not use it.
	TargetBufferAvailability *int64 `yaml:"targetBufferAvailability"`
	// ReplicasPerScale is Numaflow's deprecated form of ReplicasPerScaleUp
	// and ReplicasPerScaleDown, read where they are not set.
	ReplicasPerScale *int64 `yaml:"replicasPerScale"`
	// ScaleUpCooldownSeconds and ScaleDownCooldownSeconds are the time
	// after a change of the count before the next scale-up and scale-down
	// (default 90 each).
	ScaleUpCooldownSeconds   *int64 `yaml:"scaleUpCooldownSeconds"`
	ScaleDownCooldownSeconds *int64 `yaml:"scaleDownCooldownSeconds"`
	// ReplicasPerScaleUp and ReplicasPerScaleDown are the most replicas
	// added or removed at once (default 2, or replicasPerScale).
	ReplicasPerScaleUp   *int64 `yaml:"replicasPerScaleUp"`
	ReplicasPerScaleDown *int64 `yaml:"replicasPerScaleDown"`
	// Cron is Numaflow's time-based override of min and max; sluice
	// does not run it.
	Cron K8s `yaml:"cron"`
}

func orDefault(v *int64, def int64) int64 {
	if v == nil {
		return def
	}
	return *v
}

// GetDisabled returns disabled, false by default.
func (s *Scale) GetDisabled() bool { return s != nil && s.Disabled != nil && *s.Disabled }

// GetMin returns min, 0 by default.
func (s *Scale) GetMin() int64 {
	if s == nil {
		return 0
	}
	return orDefault(s.Min, 0)
}

// GetMax returns max, 50 by default.
func (s *Scale) GetMax() int64 {
	if s == nil {
		return DefaultScaleMax
	}
	return orDefault(s.Max, DefaultScaleMax)
}

// GetLookbackSeconds returns lookbackSeconds, 120 by default, and 600 for
// any more, as Numaflow reads it.
func (s *Scale) GetLookbackSeconds() int64 {
	if s == nil {
		return DefaultLookbackSeconds
	}
	return min(orDefault(s.LookbackSeconds, DefaultLookbackSeconds), MaxLookbackSeconds)
}

// GetScaleUpCooldownSeconds returns scaleUpCooldownSeconds, 90 by default.
func (s *Scale) GetScaleUpCooldownSeconds() int64 {
	if s == nil {
		return DefaultCooldownSeconds
	}
	return orDefault(s.ScaleUpCooldownSeconds, DefaultCooldownSeconds)
}

// GetScaleDownCooldownSeconds returns scaleDownCooldownSeconds, 90 by default.
func (s *Scale) GetScaleDownCooldownSeconds() int64 {
	if s == nil {
		return DefaultCooldownSeconds
	}
	return orDefault(s.ScaleDownCooldownSeconds, DefaultCooldownSeconds)
}

// GetTargetProcessingSeconds returns targetProcessingSeconds, 20 by default.
func (s *Scale) GetTargetProcessingSeconds() int64 {
	if s == nil {
		return DefaultTargetProcessingSeconds
	}
	return orDefault(s.TargetProcessingSeconds, DefaultTargetProcessingSeconds)
}

// GetReplicasPerScaleUp returns replicasPerScaleUp, else replicasPerScale,
// else 2.
func (s *Scale) GetReplicasPerScaleUp() int64 {
	if s == nil {
		return DefaultReplicasPerScale
	}
	return orDefault(s.ReplicasPerScaleUp, orDefault(s.ReplicasPerScale, DefaultReplicasPerScale))
}

// GetReplicasPerScaleDown returns replicasPerScaleDown, else
// replicasPerScale, else 2.
func (s *Scale) GetReplicasPerScaleDown() int64 {
	if s == nil {
		return DefaultReplicasPerScale
	}
	return orDefault(s.ReplicasPerScaleDown, orDefault(s.ReplicasPerScale, DefaultReplicasPerScale))
}

// scale warns of a lookback longer than Numaflow reads.
func (c *checker) scale(path string, s *Scale) {
	if s != nil && s.LookbackSeconds != nil && *s.LookbackSeconds > MaxLookbackSeconds {
		c.warn(path+".lookbackSeconds", "(%d) is read as %d, the longest lookback", *s.LookbackSeconds, MaxLookbackSeconds)
	}
}

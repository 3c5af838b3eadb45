package vertexconfig

import (
	"errors"
	"strconv"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
)

// Autoscale returns the scaling rule's config of a vertex's scale block
// (nil: Numaflow's defaults), read as Numaflow reads it: replicasPerScale
// where replicasPerScaleUp or Down is not set, a lookback of at most 600
// seconds. [Check] reports the fields out of range.
func Autoscale(s *config.Scale) autoscale.Config {
	return autoscale.Config{
		Min:                  int(clampCount(s.GetMin())),
		Max:                  int(clampCount(s.GetMax())),
		Lookback:             seconds(s.GetLookbackSeconds()),
		ScaleUpCooldown:      seconds(s.GetScaleUpCooldownSeconds()),
		ScaleDownCooldown:    seconds(s.GetScaleDownCooldownSeconds()),
		TargetProcessing:     seconds(s.GetTargetProcessingSeconds()),
		ReplicasPerScaleUp:   int(clampCount(s.GetReplicasPerScaleUp())),
		ReplicasPerScaleDown: int(clampCount(s.GetReplicasPerScaleDown())),
		Disabled:             s.GetDisabled(),
	}
}

// clampCount keeps a count within ±2^40, far outside every range the rule
// accepts, so that the conversion never wraps.
func clampCount(v int64) int64 { return max(min(v, 1<<40), -(1 << 40)) }

// seconds is v seconds, saturating far outside every range the rule accepts.
func seconds(v int64) time.Duration { return time.Duration(max(min(v, 1<<33), -(1<<33))) * time.Second }

// checkScale reports the first field of a scale block at path that the
// rule does not accept, with the value as written.
func checkScale(r config.Reporter, path string, s *config.Scale) {
	if s == nil {
		return
	}
	err := Autoscale(s).Validate()
	var re *autoscale.RangeError
	if !errors.As(err, &re) {
		return
	}
	written := map[string]*int64{"min": s.Min, "max": s.Max, "lookbackSeconds": s.LookbackSeconds,
		"scaleUpCooldownSeconds": s.ScaleUpCooldownSeconds, "scaleDownCooldownSeconds": s.ScaleDownCooldownSeconds,
		"targetProcessingSeconds": s.TargetProcessingSeconds, "replicasPerScaleUp": s.ReplicasPerScaleUp,
		"replicasPerScaleDown": s.ReplicasPerScaleDown}
	field, v := re.Field, written[re.Field]
	if v == nil && (field == "replicasPerScaleUp" || field == "replicasPerScaleDown") {
		field, v = "replicasPerScale", s.ReplicasPerScale
	}
	value := re.Value
	if v != nil {
		value = strconv.FormatInt(*v, 10)
	}
	r.Add(path+"."+field, "(%s) must be %s", value, re.Want)
}

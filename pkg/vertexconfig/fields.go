package vertexconfig

import (
	"strings"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// RateLimitField is one setting of a rateLimit block: its YAML path, the
// [ratelimit.Config] field it sets, and whether it can change while a
// replica runs.
type RateLimitField struct {
	// YAML is the setting's path under the rateLimit block, with a dot
	// before each nested name: "max", "adaptive.cutPercentage". In the path
	// of a mode's parameter, [ModeBlock] stands for the mode's name.
	YAML string
	// Go is the name of the ratelimit.Config field the setting sets, or ""
	// for a setting the vertex reads and the limiter does not (the store,
	// perKey).
	Go string
	// Live reports whether the setting can change while a replica runs: a
	// vertex takes it from a reloaded config ([LiveChange]). A nested
	// setting is live when its block is. For a setting of a Config field it
	// is the limiter's [ratelimit.Field.Live].
	Live bool
}

// ModeBlock stands for the mode's name in the YAML path of a mode's
// parameter: "modes.<mode>.thresholdPercentage" is written under
// modes.goBackN for [ratelimit.GoBackN].
const ModeBlock = "<mode>"

// RateLimitFields are the settings of a rateLimit block, one each, and every
// field of [ratelimit.Config] (tests fail when one of either is missing), in
// the order of [ratelimit.Fields]. [Check] names the limiter's errors by
// these paths; a reloaded config keeps a replica running only when it
// changes live settings alone; `vertex simulate --change` names a setting
// that cannot change by its path. A block can set a Config field by being
// there: modes sets Mode by the mode written in it, adaptive turns Adaptive
// on.
var RateLimitFields = withLive([]RateLimitField{
	{YAML: "max", Go: "Max"},
	{YAML: "min", Go: "Min"},
	{YAML: "rampUpDuration", Go: "RampUpDuration"},
	{YAML: "modes", Go: "Mode"},
	{YAML: "modes." + ModeBlock + ".thresholdPercentage", Go: "ThresholdPercentage"},
	{YAML: "modes." + ModeBlock + ".coolDownPeriod", Go: "CoolDownPeriod"},
	{YAML: "modes." + ModeBlock + ".rampDownPercentage", Go: "RampDownPercentage"},
	{YAML: "shadow", Go: "Shadow"},

	{YAML: "pacing", Go: "Pacing"},
	{YAML: "staleAfter", Go: "StaleAfter"},
	{YAML: "onStoreFailure", Go: "OnStoreFailure"},
	{YAML: "resumedRampUp", Go: "ResumedRampUp"},
	{YAML: "adaptive", Go: "Adaptive"},
	{YAML: "adaptive.cutPercentage", Go: "CutPercentage"},
	{YAML: "adaptive.holdBelowPercentage", Go: "HoldBelowPercentage"},
	{YAML: "adaptive.probeAfter", Go: "ProbeAfter"},
	{YAML: "adaptive.forgetAfter", Go: "ForgetAfter"},
	{YAML: "regions", Go: "Lend"},
	{YAML: "regions.reservePercentage", Go: "ReservePercentage"},

	// The vertex's, not the limiter's.
	{YAML: "adaptive.signals"},
	{YAML: "store"},
	{YAML: "ttl"},
	{YAML: "syncInterval"},
	{YAML: "excludeDropped"},
	{YAML: "perKey"},
	// A limit of payload bytes beside the messages' (a second limiter with
	// this block's ramp), and the cost of a message in tokens.
	{YAML: "bytes", Live: true},
	{YAML: "bytes.max", Live: true},
	{YAML: "bytes.min", Live: true},
	{YAML: "cost"},
	{YAML: "regions.proportions"},
	{YAML: "groups"},
})

// withLive returns fields with the liveness of each that sets a Config
// field taken from [ratelimit.Fields].
func withLive(fields []RateLimitField) []RateLimitField {
	for i, f := range fields {
		if lf, ok := ratelimit.FieldOf(f.Go); ok {
			fields[i].Live = lf.Live
		}
	}
	return fields
}

// RateLimitFieldOf returns the setting of [RateLimitFields] that sets the
// ratelimit.Config field named goName, and whether there is one.
func RateLimitFieldOf(goName string) (RateLimitField, bool) {
	for _, f := range RateLimitFields {
		if f.Go == goName && goName != "" {
			return f, true
		}
	}
	return RateLimitField{}, false
}

// Path returns f's YAML path with the name of mode m in place of
// [ModeBlock]: "modes.goBackN.coolDownPeriod".
func (f RateLimitField) Path(m ratelimit.Mode) string {
	return strings.Replace(f.YAML, ModeBlock, m.String(), 1)
}

// liveYAML returns the names of the live settings at the top of a rateLimit
// block, in the order of RateLimitFields.
func liveYAML() []string {
	var names []string
	for _, f := range RateLimitFields {
		if f.Live && !strings.Contains(f.YAML, ".") {
			names = append(names, f.YAML)
		}
	}
	return names
}

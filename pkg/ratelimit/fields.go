package ratelimit

import "strings"

// Field is one setting of a vertex's rateLimit block: its name in the YAML,
// the [Config] field it sets, and whether it can change while a replica
// runs.
type Field struct {
	// YAML is the setting's path under the rateLimit block, with a dot
	// before each nested name: "max", "adaptive.cutPercentage". In the path
	// of a mode's parameter, [ModeBlock] stands for the mode's name.
	YAML string
	// Go is the name of the Config field the setting sets, or "" for a
	// setting the vertex reads and the limiter does not (the store, perKey).
	Go string
	// Live reports whether the setting can change while a replica runs:
	// [Limiter.Update] takes a change of it, and a vertex takes it from a
	// reloaded config. A nested setting is live when its block is. Any
	// other change needs a restart: it matches [ErrNotLive].
	Live bool
}

// ModeBlock stands for the mode's name in the YAML path of a mode's
// parameter: "modes.<mode>.thresholdPercentage" is written under
// modes.goBackN for [GoBackN].
const ModeBlock = "<mode>"

// Fields are the settings of a rateLimit block, one each, and every field of
// [Config] (tests fail when one of either is missing). The config's
// validation names the limiter's errors by these paths; a reloaded config
// keeps a replica running only when it changes live settings alone;
// [Limiter.Update] refuses a change of any other Config field, and so does
// `vertex simulate --change`. A block can set a Config field by being
// there: modes sets Mode by the mode written in it, adaptive turns Adaptive
// on.
var Fields = []Field{
	{YAML: "max", Go: "Max", Live: true},
	{YAML: "min", Go: "Min", Live: true},
	{YAML: "rampUpDuration", Go: "RampUpDuration", Live: true},
	{YAML: "modes", Go: "Mode", Live: true},
	{YAML: "modes." + ModeBlock + ".thresholdPercentage", Go: "ThresholdPercentage", Live: true},
	{YAML: "modes." + ModeBlock + ".coolDownPeriod", Go: "CoolDownPeriod", Live: true},
	{YAML: "modes." + ModeBlock + ".rampDownPercentage", Go: "RampDownPercentage", Live: true},
	{YAML: "shadow", Go: "Shadow", Live: true},

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
}

// FieldOf returns the setting of Fields that sets the Config field named
// goName, and whether there is one.
func FieldOf(goName string) (Field, bool) {
	for _, f := range Fields {
		if f.Go == goName && goName != "" {
			return f, true
		}
	}
	return Field{}, false
}

// Path returns f's YAML path with the name of mode m in place of
// [ModeBlock]: "modes.goBackN.coolDownPeriod".
func (f Field) Path(m Mode) string {
	return strings.Replace(f.YAML, ModeBlock, m.String(), 1)
}

// LiveYAML returns the names of the live settings at the top of a rateLimit
// block, in the order of Fields.
func LiveYAML() []string {
	var names []string
	for _, f := range Fields {
		if f.Live && !strings.Contains(f.YAML, ".") {
			names = append(names, f.YAML)
		}
	}
	return names
}

package ratelimit

// Field is one field of [Config] and whether it can change while the
// limiter runs.
type Field struct {
	// Go is the name of the Config field.
	Go string
	// Live reports whether the field can change while the limiter runs:
	// [Limiter.Update] takes a change of it. A change of any other field
	// needs a new limiter: it matches [ErrNotLive].
	Live bool
}

// Fields are the fields of [Config], one each (tests fail when one is
// missing), and whether each can change live. [Limiter.Update] refuses a
// change of a field that is not live, naming the first in this order; a
// config format that sets the fields under names of its own (package
// vertexconfig's YAML paths of a rateLimit block) maps them to these, and
// reads whether each is live from here.
var Fields = []Field{
	{Go: "Max", Live: true},
	{Go: "Min", Live: true},
	{Go: "RampUpDuration", Live: true},
	{Go: "Mode", Live: true},
	{Go: "ThresholdPercentage", Live: true},
	{Go: "CoolDownPeriod", Live: true},
	{Go: "RampDownPercentage", Live: true},
	{Go: "Shadow", Live: true},

	{Go: "Pacing"},
	{Go: "StaleAfter"},
	{Go: "OnStoreFailure"},
	{Go: "ResumedRampUp"},
	{Go: "Adaptive"},
	{Go: "CutPercentage"},
	{Go: "HoldBelowPercentage"},
	{Go: "ProbeAfter"},
	{Go: "ForgetAfter"},
	{Go: "Lend"},
	{Go: "ReservePercentage"},
}

// FieldOf returns the field of Fields named goName, and whether there is
// one.
func FieldOf(goName string) (Field, bool) {
	for _, f := range Fields {
		if f.Go == goName && goName != "" {
			return f, true
		}
	}
	return Field{}, false
}

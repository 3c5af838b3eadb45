package simulate

import (
	"reflect"
	"strings"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// Flags maps the limiter config's fields, by their names in Go, to the
// flags of `vertex simulate` that set them: [RenderConfigError] names the
// flag the user typed with it, and [Override] takes from the flags those
// given beside -f.
var Flags = map[string]string{
	"Max":                 "--max",
	"Min":                 "--min",
	"RampUpDuration":      "--ramp-up",
	"Mode":                "--mode",
	"ThresholdPercentage": "--threshold",
	"CoolDownPeriod":      "--cool-down",
	"RampDownPercentage":  "--ramp-down",
	"CutPercentage":       "--cut",
	"HoldBelowPercentage": "--hold-below",
	"ProbeAfter":          "--probe-after",
	"ForgetAfter":         "--forget-after",
}

// Override returns base with the fields of [Flags] whose flag is set (set
// is given its name without dashes, "ramp-up") taken from flags.
func Override(base, flags ratelimit.Config, set func(name string) bool) ratelimit.Config {
	b, f := reflect.ValueOf(&base).Elem(), reflect.ValueOf(flags)
	for field, flag := range Flags {
		if set(strings.TrimPrefix(flag, "--")) {
			b.FieldByName(field).Set(f.FieldByName(field))
		}
	}
	return base
}

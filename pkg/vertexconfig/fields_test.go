package vertexconfig_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// TestRateLimitFieldsCoverConfig fails when a field of ratelimit.Config (a
// row of ratelimit.Fields) has no setting in RateLimitFields, or when a
// setting names a field the limiter does not have; each setting of a field
// is live as the limiter says, in the limiter's order, and a nested setting
// is live when its block is.
func TestRateLimitFieldsCoverConfig(t *testing.T) {
	fields := vertexconfig.RateLimitFields
	var goNames, yamlNames []string
	for _, f := range fields {
		if f.YAML == "" {
			t.Errorf("%+v has no YAML name", f)
		}
		yamlNames = append(yamlNames, f.YAML)
		if f.Go == "" {
			continue
		}
		lf, ok := ratelimit.FieldOf(f.Go)
		switch {
		case !ok:
			t.Errorf("RateLimitFields: %s (%s) is not a field of ratelimit.Config", f.Go, f.YAML)
		case lf.Live != f.Live:
			t.Errorf("%s: Live %v; the limiter's %s: %v", f.YAML, f.Live, f.Go, lf.Live)
		}
		goNames = append(goNames, f.Go)
		if g, _ := vertexconfig.RateLimitFieldOf(f.Go); g != f {
			t.Errorf("RateLimitFieldOf(%q) = %+v; want %+v", f.Go, g, f)
		}
	}
	var limiter []string
	for _, f := range ratelimit.Fields {
		limiter = append(limiter, f.Go)
	}
	if !slices.Equal(goNames, limiter) {
		t.Errorf("RateLimitFields set %v; want ratelimit.Fields' %v, in its order", goNames, limiter)
	}
	if s := slices.Sorted(slices.Values(yamlNames)); len(slices.Compact(s)) != len(yamlNames) {
		t.Errorf("a path is in RateLimitFields twice: %v", yamlNames)
	}
	// A reloaded config is told live or not by the settings at the top of
	// its rateLimit block, so a nested setting is live when its block is.
	for _, f := range fields {
		top, _, nested := strings.Cut(f.YAML, ".")
		if !nested {
			continue
		}
		i := slices.IndexFunc(fields, func(b vertexconfig.RateLimitField) bool { return b.YAML == top })
		switch {
		case i < 0:
			t.Errorf("%s: its block %s is not in RateLimitFields", f.YAML, top)
		case fields[i].Live != f.Live:
			t.Errorf("%s has Live %v, and its block %s %v", f.YAML, f.Live, top, fields[i].Live)
		}
	}
	if _, ok := vertexconfig.RateLimitFieldOf(""); ok {
		t.Error("RateLimitFieldOf(\"\") found a setting")
	}
}

func TestRateLimitFieldPath(t *testing.T) {
	for _, tt := range []struct {
		goName string
		mode   ratelimit.Mode
		want   string
	}{
		{"Max", ratelimit.Relaxed, "max"},
		{"CutPercentage", ratelimit.GoBackN, "adaptive.cutPercentage"},
		{"CoolDownPeriod", ratelimit.GoBackN, "modes.goBackN.coolDownPeriod"},
		{"ThresholdPercentage", ratelimit.OnlyIfUsed, "modes.onlyIfUsed.thresholdPercentage"},
	} {
		f, ok := vertexconfig.RateLimitFieldOf(tt.goName)
		if got := f.Path(tt.mode); !ok || got != tt.want {
			t.Errorf("RateLimitFieldOf(%q).Path(%s) = %q, %v; want %q", tt.goName, tt.mode, got, ok, tt.want)
		}
	}
}

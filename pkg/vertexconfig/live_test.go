package vertexconfig_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

const liveBase = `
apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: mv
spec:
  limits:
    readBatchSize: 10
    rateLimit:
      max: 300
      min: 300
      rampUpDuration: 0s
      store:
        redisStore:
          mode: single
          url: redis://127.0.0.1:6379
  source:
    generator:
      rpu: 100
      duration: 1s
  sink:
    log: {}
`

func TestLiveChange(t *testing.T) {
	base := parse(t, liveBase)
	for _, tt := range []struct {
		name, from, to string
		want           string // "" for a live change
	}{
		{"same", "", "", ""},
		{"max", "max: 300", "max: 600", ""},
		{"min and ramp", "min: 300\n      rampUpDuration: 0s", "min: 1\n      rampUpDuration: 10s", ""},
		{"mode", "rampUpDuration: 0s", "rampUpDuration: 0s\n      modes:\n        goBackN:\n          coolDownPeriod: 3s", ""},
		{"shadow", "rampUpDuration: 0s", "rampUpDuration: 0s\n      shadow: true", ""},
		{"pod labels", "spec:\n  limits:", "spec:\n  metadata:\n    labels:\n      a: b\n  limits:", ""},
		{"store", "redis://127.0.0.1:6379", "redis://127.0.0.1:6380", "spec.limits.rateLimit.store.redisStore.url changed"},
		{"name", "name: mv", "name: other", "metadata.name changed"},
		{"batch", "readBatchSize: 10", "readBatchSize: 20", "spec.limits.readBatchSize changed"},
		{"source", "rpu: 100", "rpu: 200", "spec.source.generator.rpu changed"},
		{"sync", "rampUpDuration: 0s", "rampUpDuration: 0s\n      syncInterval: 50ms", "spec.limits.rateLimit.syncInterval was added"},
		{"udf", "  sink:", "  udf:\n    builtin:\n      name: cat\n  sink:", "spec.udf was added"},
		{"bytes added", "rampUpDuration: 0s", "rampUpDuration: 0s\n      bytes: {max: 1000, min: 5}", "spec.limits.rateLimit.bytes was added"},
		{"cost", "rampUpDuration: 0s", "rampUpDuration: 0s\n      cost: len(payload)", "spec.limits.rateLimit.cost was added"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next := parse(t, strings.Replace(liveBase, tt.from, tt.to, 1))
			err := vertexconfig.LiveChange(base, next)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("LiveChange = %v; want a live change", err)
			case tt.want != "" && (!errors.Is(err, ratelimit.ErrNotLive) || !strings.HasPrefix(err.Error(), tt.want)):
				t.Fatalf("LiveChange = %v; want %q, matching ErrNotLive", err, tt.want)
			}
		})
	}
}

func parse(t *testing.T, yaml string) *config.File {
	t.Helper()
	f, err := vertexconfig.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRateLimitFieldsInTable fails when a setting of a rateLimit block is not
// in RateLimitFields, so that a new one says whether it can change live, or
// when the table names one the block does not have. A block the table
// names settings in (adaptive, modes) has each of its settings there; in
// modes, a mode's name is ModeBlock.
func TestRateLimitFieldsInTable(t *testing.T) {
	rows := map[string]bool{}
	for _, f := range vertexconfig.RateLimitFields {
		rows[f.YAML] = true
	}
	nested := func(p string) bool {
		for r := range rows {
			if strings.HasPrefix(r, p+".") {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		for i := range typ.NumField() {
			sf := typ.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if !sf.IsExported() || name == "" || name == "-" {
				continue
			}
			var m ratelimit.Mode
			if path == "modes" && m.UnmarshalText([]byte(name)) == nil {
				name = vertexconfig.ModeBlock
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			seen[p] = true
			switch {
			case nested(p):
				walk(p, sf.Type)
			case !rows[p]:
				t.Errorf("rateLimit.%s is not in RateLimitFields: add it with whether it can change live", p)
			}
		}
	}
	walk("", reflect.TypeFor[config.RateLimit]())
	for r := range rows {
		if !seen[r] {
			t.Errorf("RateLimitFields has %s, which a rateLimit block does not", r)
		}
	}
}

// TestLiveChangeFollowsFields changes each setting at the top of a rateLimit
// block alone: LiveChange takes the live ones of RateLimitFields and
// refuses the others, naming them.
func TestLiveChangeFollowsFields(t *testing.T) {
	base := parse(t, liveBase)
	for _, f := range vertexconfig.RateLimitFields {
		if strings.Contains(f.YAML, ".") {
			continue
		}
		t.Run(f.YAML, func(t *testing.T) {
			if f.Live && f.Go == "" {
				t.Skip("a limiter of its own: its values change live, its presence does not (TestLiveChangeBytes)")
			}
			next := parse(t, liveBase)
			rl := reflect.ValueOf(next.MonoVertex.Spec.Limits.RateLimit).Elem()
			v := fieldByYAML(t, rl, f.YAML)
			if v.Kind() == reflect.Slice {
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			} else if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			} else {
				v.SetZero()
			}
			err := vertexconfig.LiveChange(base, next)
			switch {
			case f.Live && err != nil:
				t.Fatalf("LiveChange = %v; %s is live", err, f.YAML)
			case !f.Live && (!errors.Is(err, ratelimit.ErrNotLive) || !strings.HasPrefix(err.Error(), "spec.limits.rateLimit."+f.YAML+" ")):
				t.Fatalf("LiveChange = %v; want spec.limits.rateLimit.%s named, matching ErrNotLive", err, f.YAML)
			}
		})
	}
}

// fieldByYAML returns the field of struct v whose YAML name is name.
func fieldByYAML(t *testing.T, v reflect.Value, name string) reflect.Value {
	t.Helper()
	for i := range v.NumField() {
		if n, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); n == name {
			return v.Field(i)
		}
	}
	t.Fatalf("%s has no field %s", v.Type(), name)
	return reflect.Value{}
}

// TestLiveChangeBytes: the byte limit's max and min change live.
func TestLiveChangeBytes(t *testing.T) {
	withBytes := strings.Replace(liveBase, "rampUpDuration: 0s", "rampUpDuration: 0s\n      bytes: {max: 1000}", 1)
	next := strings.Replace(withBytes, "bytes: {max: 1000}", "bytes: {max: 2000, min: 100}", 1)
	if err := vertexconfig.LiveChange(parse(t, withBytes), parse(t, next)); err != nil {
		t.Fatalf("bytes.max and bytes.min changed: %v", err)
	}
	if err := vertexconfig.LiveChange(parse(t, withBytes), parse(t, liveBase)); err == nil || !strings.Contains(err.Error(), "spec.limits.rateLimit.bytes was removed") {
		t.Fatalf("bytes removed: %v", err)
	}
}

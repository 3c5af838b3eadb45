package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/config"
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
	} {
		t.Run(tt.name, func(t *testing.T) {
			next := parse(t, strings.Replace(liveBase, tt.from, tt.to, 1))
			err := base.LiveChange(next)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("LiveChange = %v; want a live change", err)
			case tt.want != "" && (!errors.Is(err, config.ErrNotLive) || !strings.HasPrefix(err.Error(), tt.want)):
				t.Fatalf("LiveChange = %v; want %q, matching ErrNotLive", err, tt.want)
			}
		})
	}
}

func parse(t *testing.T, yaml string) *config.File {
	t.Helper()
	f, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

package vertexconfig

import (
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
)

func TestAutoscale(t *testing.T) {
	t.Run("numaflow's defaults", func(t *testing.T) {
		if got, want := Autoscale(nil), autoscale.DefaultConfig(); got != want {
			t.Fatalf("Autoscale(nil) = %+v, want %+v", got, want)
		}
	})
	t.Run("every field", func(t *testing.T) {
		f := mustLoad(t, "../../config/testdata/good/monovertex-kubernetes.yaml")
		got := Autoscale(f.MonoVertex.Spec.Scale)
		want := autoscale.Config{Min: 1, Max: 10, Lookback: 120 * time.Second, ScaleUpCooldown: 90 * time.Second,
			ScaleDownCooldown: 120 * time.Second, TargetProcessing: 20 * time.Second,
			ReplicasPerScaleUp: 2, ReplicasPerScaleDown: 1}
		if got != want {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	t.Run("deprecated replicasPerScale and a long lookback", func(t *testing.T) {
		f := mustParse(t, minimalMonoVertex+"  scale:\n    replicasPerScale: 4\n    replicasPerScaleDown: 1\n    lookbackSeconds: 900\n    disabled: true\n")
		got := Autoscale(f.MonoVertex.Spec.Scale)
		if got.ReplicasPerScaleUp != 4 || got.ReplicasPerScaleDown != 1 || got.Lookback != 600*time.Second || !got.Disabled {
			t.Fatalf("got %+v, want up 4, down 1, lookback 600 s, disabled", got)
		}
		if len(f.Warnings) != 1 || f.Warnings[0].Path != "spec.scale.lookbackSeconds" ||
			!strings.Contains(f.Warnings[0].Msg, "(900) is read as 600") {
			t.Fatalf("warnings %v, want one that lookbackSeconds 900 is read as 600", f.Warnings)
		}
	})
	t.Run("value as written", func(t *testing.T) {
		_, err := Parse([]byte(minimalMonoVertex + "  scale:\n    scaleUpCooldownSeconds: -99999999999999\n"))
		if err == nil || !strings.Contains(err.Error(), "spec.scale.scaleUpCooldownSeconds (-99999999999999) must be whole seconds, 0 or more") {
			t.Fatalf("error %v, want the value as written", err)
		}
	})
}

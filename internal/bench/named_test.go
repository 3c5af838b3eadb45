package bench

import (
	"testing"

	"github.com/sluiceflow/sluice/config"
)

func TestPairedRatio(t *testing.T) {
	for _, tt := range []struct {
		name string
		a, b []float64
		want float64
	}{
		{"pairs", []float64{10, 30, 20}, []float64{10, 10, 10}, 2},
		{"a zero of b is left out", []float64{10, 30, 20}, []float64{0, 10, 10}, 2.5},
		{"shorter b", []float64{10, 30, 20}, []float64{5}, 2},
		{"none", []float64{10}, []float64{0}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Runs{Rates: tt.a}).PairedRatio(Runs{Rates: tt.b}); got != tt.want {
				t.Errorf("%v / %v: %v; want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestNamed(t *testing.T) {
	max := uint64(100)
	f := &config.File{MonoVertex: &config.MonoVertex{}}
	f.MonoVertex.Spec.Limits = &config.Limits{RateLimit: &config.RateLimit{Max: &max}}
	tg := NewTarget(f)
	for _, name := range []string{VariantBytes, VariantCost, VariantGroup, VariantPage} {
		if v, ok := tg.Named(name); !ok || v.Name != name || !IsNamed(name) {
			t.Errorf("%s: %q, %v, IsNamed %v; want the variant", name, v.Name, ok, IsNamed(name))
		}
	}
	v, _ := tg.Named(VariantCost)
	if rl := v.file.MonoVertex.Spec.Limits.RateLimit; rl.Cost == nil || *rl.Cost != CostExpr || f.MonoVertex.Spec.Limits.RateLimit.Cost != nil {
		t.Errorf("cost: %v, the target's %v; want %q on a copy", rl.Cost, f.MonoVertex.Spec.Limits.RateLimit.Cost, CostExpr)
	}
	if _, ok := tg.Named("fast"); ok || IsNamed("fast") {
		t.Error("fast is a variant")
	}
}

package simulate_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/simulate"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// GroupOf finds the two vertices of config/examples/shared-limit.yaml that
// join partner-api, and SetDemands gives each its demand by name.
func TestGroupOfAndSetDemands(t *testing.T) {
	f, err := vertexconfig.Load("../../config/examples/shared-limit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := simulate.GroupOf(f.Pipeline, "nope"); ok {
		t.Fatal("group nope found")
	}
	cfg, members, ok := simulate.GroupOf(f.Pipeline, "partner-api")
	if !ok || cfg.Max != 100 || simulate.MemberNames(members) != "orders, refunds" {
		t.Fatalf("%v, %+v, %q; want max 100, orders and refunds", ok, cfg, simulate.MemberNames(members))
	}
	epochs, err := simulate.SetDemands(members, []string{"refunds=,,5", "orders=1"})
	if err != nil || epochs != 3 || !slices.Equal(members[0].Demand, []int{1}) || !slices.Equal(members[1].Demand, []int{simulate.NoCall, simulate.NoCall, 5}) {
		t.Fatalf("%d, %v, %v / %v; want 3 epochs", epochs, err, members[0].Demand, members[1].Demand)
	}
	for arg, want := range map[string]string{
		"payments=1": `("payments=1"): want VERTEX=LIST, VERTEX one of orders, refunds`,
		"orders":     `("orders"): want VERTEX=LIST, VERTEX one of orders, refunds`,
	} {
		if _, err := simulate.SetDemands(members, []string{arg}); err == nil || err.Error() != want {
			t.Errorf("%s: %v; want %q", arg, err, want)
		}
	}
}

// Override takes from the flags the fields whose flag is set, and no other.
func TestOverride(t *testing.T) {
	base := ratelimit.Config{Max: 100, Min: 10, RampUpDuration: time.Second}
	flags := ratelimit.Config{Max: 200, Min: 20, RampUpDuration: time.Minute}
	got := simulate.Override(base, flags, func(name string) bool { return name == "ramp-up" || name == "min" })
	if want := (ratelimit.Config{Max: 100, Min: 20, RampUpDuration: time.Minute}); got != want {
		t.Errorf("%+v; want %+v", got, want)
	}
}

package autoscale

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

var start = time.Unix(1_700_000_000, 0)

// fast is a config whose cool-downs and lookback do not get in the way,
// with replicas of 100 a second.
func fast() Config {
	c := DefaultConfig()
	c.Min, c.Max, c.ReplicaRate = 1, 20, 100
	c.Lookback, c.ScaleUpCooldown, c.ScaleDownCooldown = time.Second, 0, 0
	c.ReplicasPerScaleUp, c.ReplicasPerScaleDown = 100, 100
	return c
}

func newScaler(t *testing.T, cfg Config) (*Scaler, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(start)
	s, err := New(cfg, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func own(pool, max float64) []Limit { return []Limit{{Pool: pool, Max: max}} }

func TestBacklogUnderLimitScalesUp(t *testing.T) {
	s, _ := newScaler(t, fast())
	// 2 replicas at 100/s each, busy, the pool (1000) far above them; 600
	// pending: 200/s arrive plus 600/20s to drain = 230/s = 3 replicas.
	d := s.Decide(Observation{Replicas: 2, Pending: 600, Rate: 200, Limits: own(1000, 1000)})
	if d.Replicas != 3 || d.Reason != Backlog || d.Fits != 10 {
		t.Fatalf("decision %+v, want 3 replicas for the backlog, fits 10", d)
	}
}

func TestAtLimitDoesNotScaleUp(t *testing.T) {
	s, _ := newScaler(t, fast())
	// The pool of 300/s keeps 3 replicas busy; the backlog asks for many more.
	d := s.Decide(Observation{Replicas: 3, Pending: 100_000, Rate: 300, Throttled: true, Limits: own(300, 300)})
	if d.Replicas != 3 || d.Reason != AtLimit || d.Wanted <= 3 {
		t.Fatalf("decision %+v, want 3 replicas held at the limit", d)
	}
	// Past what the pool keeps busy, it scales down to it.
	d = s.Decide(Observation{Replicas: 6, Pending: 100_000, Rate: 300, Throttled: true, Limits: own(300, 300)})
	if d.Replicas != 3 || d.Reason != AtLimit {
		t.Fatalf("decision %+v, want 6 replicas down to the 3 the pool keeps busy", d)
	}
}

func TestUnknownRateHoldsWhileThrottled(t *testing.T) {
	cfg := fast()
	cfg.ReplicaRate = 0
	s, clk := newScaler(t, cfg)
	d := s.Decide(Observation{Replicas: 2, Pending: 10_000, Rate: 50, Throttled: true, Limits: own(50, 50)})
	if d.Replicas != 2 || d.Reason != AtLimit || d.ReplicaRate != 0 {
		t.Fatalf("throttled, rate unknown: %+v, want 2 held", d)
	}
	// Busy and not throttled: the replicas' rate is learnt, 150/s each.
	clk.Advance(time.Second)
	d = s.Decide(Observation{Replicas: 2, Pending: 100_000, Rate: 300, Limits: own(1000, 1000)})
	if d.ReplicaRate != 150 || d.Fits != 7 || d.Replicas != 7 {
		t.Fatalf("learning: %+v, want rate 150, fits and replicas ceil(1000/150)=7", d)
	}
}

func TestRampAddsReplicasAsThePoolGrows(t *testing.T) {
	s, clk := newScaler(t, fast())
	replicas := 1
	for i, pool := range []float64{100, 150, 250, 350, 450, 500, 500} {
		d := s.Decide(Observation{Replicas: replicas, Pending: 1_000_000, Rate: pool, Throttled: true, Limits: own(pool, 500)})
		want := ceilReplicas(pool / 100)
		if i > 0 && pool < 500 {
			want++ // one replica of headroom while ramping
		}
		if d.Replicas != want || d.Fits != want || d.Ramping != (i > 0 && pool < 500) {
			t.Fatalf("epoch %d, pool %v: %+v, want %d replicas", i, pool, d, want)
		}
		replicas = d.Replicas
		clk.Advance(time.Second)
	}
}

func TestCutHoldsTheCount(t *testing.T) {
	cfg := fast()
	cfg.Lookback = 5 * time.Second
	s, clk := newScaler(t, cfg)
	obs := Observation{Replicas: 4, Pending: 100_000, Rate: 200, Throttled: true, Cut: true, Limits: own(200, 1000)}
	for i := range 5 {
		if d := s.Decide(obs); d.Replicas != 4 || d.Reason != Cut {
			t.Fatalf("%d s after the cut: %+v, want 4 held", i, d)
		}
		obs.Cut = false
		obs.Limits = own(200+float64(i+1)*50, 1000)
		clk.Advance(time.Second)
	}
	// A lookback after the cut, the pool (450, ramping) sets the count.
	if d := s.Decide(obs); d.Replicas != 6 || d.Reason != Ramping {
		t.Fatalf("a lookback after the cut: %+v, want ceil(450/100)+1 = 6", d)
	}
}

func TestPausedDoesNotScaleUp(t *testing.T) {
	s, _ := newScaler(t, fast())
	d := s.Decide(Observation{Replicas: 2, Pending: 100_000, Paused: true, Limits: own(1000, 1000)})
	if d.Replicas != 2 || d.Reason != Paused {
		t.Fatalf("paused: %+v, want 2 held", d)
	}
}

func TestCoolDowns(t *testing.T) {
	cfg := fast()
	cfg.ScaleUpCooldown, cfg.ScaleDownCooldown = 10*time.Second, 30*time.Second
	s, clk := newScaler(t, cfg)
	up := Observation{Replicas: 1, Pending: 100_000, Rate: 100, Limits: own(500, 500)}
	if d := s.Decide(up); d.Replicas != 5 {
		t.Fatalf("first: %+v, want 5", d)
	}
	clk.Advance(9 * time.Second)
	up.Replicas = 5
	up.Limits = own(800, 800)
	if d := s.Decide(up); d.Replicas != 5 || d.Reason != CoolDown {
		t.Fatalf("9 s after a change: %+v, want 5 in the cool-down", d)
	}
	clk.Advance(time.Second)
	if d := s.Decide(up); d.Replicas != 8 {
		t.Fatalf("10 s after: %+v, want 8", d)
	}
	down := Observation{Replicas: 8, Pending: 10, Rate: 100, Limits: own(800, 800)}
	clk.Advance(29 * time.Second)
	if d := s.Decide(down); d.Replicas != 8 || d.Reason != CoolDown {
		t.Fatalf("29 s after: %+v, want 8 in the scale-down cool-down", d)
	}
	clk.Advance(time.Second)
	if d := s.Decide(down); d.Replicas >= 8 || d.Reason != Backlog {
		t.Fatalf("30 s after: %+v, want fewer than 8", d)
	}
}

func TestReplicasPerScale(t *testing.T) {
	cfg := fast()
	cfg.ReplicasPerScaleUp, cfg.ReplicasPerScaleDown = 2, 3
	s, clk := newScaler(t, cfg)
	if d := s.Decide(Observation{Replicas: 1, Pending: 100_000, Rate: 100, Limits: own(2000, 2000)}); d.Replicas != 3 {
		t.Fatalf("up: %+v, want 1+2", d)
	}
	clk.Advance(time.Second)
	if d := s.Decide(Observation{Replicas: 10, Pending: 1, Rate: 10}); d.Replicas != 7 {
		t.Fatalf("down: %+v, want 10-3", d)
	}
}

func TestMinMax(t *testing.T) {
	cfg := fast()
	cfg.Min, cfg.Max = 2, 4
	s, clk := newScaler(t, cfg)
	for _, c := range []struct {
		name string
		obs  Observation
		want int
		why  Reason
	}{
		{"above max", Observation{Replicas: 9, Pending: 100_000, Rate: 900}, 4, Bounds},
		{"below min", Observation{Replicas: 1, Pending: 0, Rate: 0}, 2, Bounds},
		{"wants more than max", Observation{Replicas: 3, Pending: 100_000, Rate: 300}, 4, Bounds},
		{"idle, held at min", Observation{Replicas: 2}, 2, Bounds},
		{"at its count", Observation{Replicas: 3, Rate: 300}, 3, Steady},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk.Advance(2 * time.Second) // a new lookback
			if d := s.Decide(c.obs); d.Replicas != c.want || d.Reason != c.why {
				t.Fatalf("%+v, want %d for %v", d, c.want, c.why)
			}
		})
	}
}

func TestDisabled(t *testing.T) {
	cfg := fast()
	cfg.Disabled = true
	s, _ := newScaler(t, cfg)
	if d := s.Decide(Observation{Replicas: 30, Pending: 100_000, Rate: 100}); d.Replicas != 30 || d.Reason != Disabled {
		t.Fatalf("%+v, want 30 left alone", d)
	}
}

func TestFromZeroStartsAtMin(t *testing.T) {
	cfg := fast()
	cfg.Min = 0
	s, clk := newScaler(t, cfg)
	if d := s.Decide(Observation{Replicas: 0}); d.Replicas != 0 {
		t.Fatalf("nothing pending: %+v, want 0", d)
	}
	clk.Advance(2 * time.Second)
	// A backlog and a full pool: one replica first, not the pool's worth.
	if d := s.Decide(Observation{Replicas: 0, Pending: 100_000, Limits: own(1000, 1000)}); d.Replicas != 1 || d.Reason != FromZero {
		t.Fatalf("backlog: %+v, want 1", d)
	}
	cfg.Min = 3
	s, _ = newScaler(t, cfg)
	if d := s.Decide(Observation{Replicas: 0, Pending: 100_000}); d.Replicas != 3 || d.Reason != FromZero {
		t.Fatalf("min 3: %+v, want 3", d)
	}
}

func TestSharedGroupCountsItsOwnPool(t *testing.T) {
	s, _ := newScaler(t, fast())
	// The vertex's own limit lets 1000/s through, the group it joins 300/s.
	d := s.Decide(Observation{Replicas: 1, Pending: 100_000, Rate: 100, Limits: []Limit{
		{Pool: 1000, Max: 1000}, {Name: "shared", Pool: 300, Max: 300}}})
	if d.Replicas != 3 || d.Fits != 3 {
		t.Fatalf("%+v, want the group's pool to fit 3", d)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"negative min", func(c *Config) { c.Min = -1 }, "scale.min (-1) must be from 0 to 1048576"},
		{"min above max", func(c *Config) { c.Min, c.Max = 5, 2 }, "scale.min (5) must be at most max (2)"},
		{"lookback 0", func(c *Config) { c.Lookback = 0 }, "scale.lookbackSeconds (0) must be whole seconds from 1 to 600"},
		{"lookback 601", func(c *Config) { c.Lookback = 601 * time.Second }, "scale.lookbackSeconds (601) must be whole seconds from 1 to 600"},
		{"negative cool-down", func(c *Config) { c.ScaleDownCooldown = -time.Second }, "scale.scaleDownCooldownSeconds (-1) must be whole seconds, 0 or more, at most a year"},
		{"target 0", func(c *Config) { c.TargetProcessing = 0 }, "scale.targetProcessingSeconds (0) must be whole seconds, 1 or more, at most a year"},
		{"per scale-up 0", func(c *Config) { c.ReplicasPerScaleUp = 0 }, "scale.replicasPerScaleUp (0) must be from 1 to 1048576"},
		{"per scale-down 0", func(c *Config) { c.ReplicasPerScaleDown = 0 }, "scale.replicasPerScaleDown (0) must be from 1 to 1048576"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.set(&cfg)
			_, err := New(cfg)
			if err == nil || err.Error() != c.want || !errors.Is(err, ErrRange) {
				t.Fatalf("error %v, want %q matching ErrRange", err, c.want)
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestReasonNames(t *testing.T) {
	for r := Steady; r <= Disabled; r++ {
		var back Reason
		if err := back.UnmarshalText([]byte(r.String())); err != nil || back != r {
			t.Fatalf("%v: %v, %v", r, back, err)
		}
	}
}

func TestUnreadableValues(t *testing.T) {
	s, clk := newScaler(t, fast())
	for _, o := range []Observation{
		{Replicas: 3, Pending: 100, Rate: math.NaN(), Limits: own(math.NaN(), 1000)},
		{Replicas: 3, Pending: 100, Rate: math.Inf(1), Limits: own(math.Inf(1), math.Inf(1))},
		{Replicas: 3, Pending: -5, Rate: -1, Limits: []Limit{{Pool: 500}}},
	} {
		d := s.Decide(o)
		if d.Replicas < 1 || d.Replicas > 20 {
			t.Fatalf("%+v: %+v, want a count within [min, max]", o, d)
		}
		clk.Advance(2 * time.Second)
	}
}

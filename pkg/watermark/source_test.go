package watermark_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// t0 is the start of every test clock.
var t0 = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// step is one move of a source test: advance the clock, optionally read a
// batch from a partition, then check the watermark.
type step struct {
	advance   time.Duration
	partition int32
	read      []time.Duration // event times as offsets from t0; none: no read
	remove    bool            // remove the partition instead of reading
	want      time.Time
}

func TestSourceWatermark(t *testing.T) {
	none := watermark.None()
	cases := []struct {
		name  string
		cfg   watermark.Config
		steps []step
	}{
		{"no read yet: none", watermark.Config{}, []step{
			{want: none},
			{advance: time.Hour, want: none},
		}},
		{"smallest event time of the batch", watermark.Config{}, []step{
			{read: []time.Duration{5 * time.Second, 2 * time.Second, 9 * time.Second}, want: at(2 * time.Second)},
		}},
		{"monotonic: an older batch does not move it back", watermark.Config{}, []step{
			{read: []time.Duration{10 * time.Second}, want: at(10 * time.Second)},
			{advance: time.Second, read: []time.Duration{3 * time.Second}, want: at(10 * time.Second)},
			{advance: time.Second, read: []time.Duration{12 * time.Second}, want: at(12 * time.Second)},
		}},
		{"maxDelay holds it back", watermark.Config{MaxDelay: 4 * time.Second}, []step{
			{read: []time.Duration{10 * time.Second}, want: at(6 * time.Second)},
			{read: []time.Duration{11 * time.Second}, want: at(7 * time.Second)},
		}},
		{"minimum over partitions: a slow partition holds it", watermark.Config{}, []step{
			{partition: 0, read: []time.Duration{10 * time.Second}, want: at(10 * time.Second)},
			{partition: 1, read: []time.Duration{20 * time.Second}, want: at(10 * time.Second)},
			{partition: 0, read: []time.Duration{30 * time.Second}, want: at(20 * time.Second)},
			{partition: 1, read: []time.Duration{40 * time.Second}, want: at(30 * time.Second)},
		}},
		{"a removed partition stops holding it", watermark.Config{}, []step{
			{partition: 0, read: []time.Duration{10 * time.Second}, want: at(10 * time.Second)},
			{partition: 1, read: []time.Duration{20 * time.Second}, want: at(10 * time.Second)},
			{partition: 0, remove: true, want: at(20 * time.Second)},
			{partition: 1, remove: true, want: at(20 * time.Second)},
		}},
		{"an empty batch is no read", watermark.Config{}, []step{
			{partition: 0, read: []time.Duration{10 * time.Second}, want: at(10 * time.Second)},
			{partition: 1, read: []time.Duration{}, want: at(10 * time.Second)},
		}},
		{"disabled: always none", watermark.Config{Disabled: true}, []step{
			{read: []time.Duration{10 * time.Second}, want: none},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runSteps(t, c.cfg, c.steps) })
	}
}

func TestSourceIdle(t *testing.T) {
	s := time.Second
	idle := func(threshold, stepInterval, incrementBy time.Duration) *watermark.IdleSource {
		return &watermark.IdleSource{Threshold: threshold, StepInterval: stepInterval, IncrementBy: incrementBy}
	}
	cases := []struct {
		name  string
		cfg   watermark.Config
		steps []step
	}{
		{"no idleSource: stays", watermark.Config{}, []step{
			{read: []time.Duration{-time.Minute}, want: at(-time.Minute)},
			{advance: time.Hour, want: at(-time.Minute)},
		}},
		{"steps of incrementBy every stepInterval after threshold", watermark.Config{IdleSource: idle(5*s, 2*s, 3*s)}, []step{
			{read: []time.Duration{-time.Minute}, want: at(-time.Minute)},
			{advance: 4 * s, want: at(-time.Minute)},        // 4s idle: under threshold
			{advance: s, want: at(-time.Minute + 3*s)},      // 5s: first step
			{advance: s, want: at(-time.Minute + 3*s)},      // 1s after the step: under stepInterval
			{advance: s, want: at(-time.Minute + 6*s)},      // 2s after: second step
			{advance: 10 * s, want: at(-time.Minute + 9*s)}, // one step per call, however long
			{advance: 0, want: at(-time.Minute + 9*s)},
		}},
		{"stepInterval 0: a step at every call", watermark.Config{IdleSource: idle(5*s, 0, s)}, []step{
			{read: []time.Duration{-time.Minute}, want: at(-time.Minute)},
			{advance: 5 * s, want: at(-time.Minute + s)},
			{advance: 0, want: at(-time.Minute + 2*s)},
			{advance: 0, want: at(-time.Minute + 3*s)},
		}},
		{"bounded by now less maxDelay", watermark.Config{MaxDelay: 10 * s, IdleSource: idle(5*s, 0, time.Hour)}, []step{
			{read: []time.Duration{-time.Minute}, want: at(-time.Minute - 10*s)},
			{advance: 5 * s, want: at(5*s - 10*s)},
			{advance: s, want: at(6*s - 10*s)},
		}},
		{"event times ahead of now: no step", watermark.Config{IdleSource: idle(5*s, 0, s)}, []step{
			{read: []time.Duration{time.Minute}, want: at(time.Minute)},
			{advance: 10 * s, want: at(time.Minute)},
		}},
		{"a read ends the idle spell, never moves it back", watermark.Config{IdleSource: idle(5*s, 0, 10*s)}, []step{
			{read: []time.Duration{-time.Minute}, want: at(-time.Minute)},
			{advance: 5 * s, want: at(-time.Minute + 10*s)},
			{read: []time.Duration{-time.Minute + 2*s}, want: at(-time.Minute + 10*s)},
			{advance: 4 * s, want: at(-time.Minute + 10*s)}, // 4s since the read: not idle
			{advance: s, want: at(-time.Minute + 12*s)},     // idle again: 2s + 10s
		}},
		{"an idle partition stops holding an active one back", watermark.Config{IdleSource: idle(5*s, 0, 20*s)}, []step{
			{partition: 0, read: []time.Duration{-time.Minute}, want: at(-time.Minute)},
			{partition: 1, read: []time.Duration{-30 * s}, want: at(-time.Minute)},
			{advance: 3 * s, partition: 1, read: []time.Duration{-20 * s}, want: at(-time.Minute)},
			{advance: 2 * s, partition: 1, read: []time.Duration{-10 * s}, want: at(-40 * s)}, // 0 idle: -60+20
			{advance: s, partition: 1, read: []time.Duration{0}, want: at(-20 * s)},
			{advance: s, partition: 1, read: []time.Duration{s}, want: at(0)},
			{advance: s, partition: 1, read: []time.Duration{2 * s}, want: at(2 * s)}, // 1 now holds
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runSteps(t, c.cfg, c.steps) })
	}
}

func runSteps(t *testing.T, cfg watermark.Config, steps []step) {
	t.Helper()
	clk := clock.NewManual(t0)
	src, err := watermark.NewSource(cfg, watermark.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		clk.Advance(st.advance)
		if st.remove {
			src.Remove(st.partition)
		}
		if st.read != nil {
			times := make([]time.Time, len(st.read))
			for j, d := range st.read {
				times[j] = at(d)
			}
			src.Observe(st.partition, times...)
		}
		if got := src.Watermark(); !got.Equal(st.want) {
			t.Fatalf("step %d (clock %s): watermark %s, want %s", i, clk.Now().Sub(t0), got, st.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   watermark.Config
		field string // "" for valid
	}{
		{"zero", watermark.Config{}, ""},
		{"full", watermark.Config{MaxDelay: time.Second, IdleSource: &watermark.IdleSource{Threshold: time.Second, IncrementBy: time.Second}}, ""},
		{"negative maxDelay", watermark.Config{MaxDelay: -1}, "maxDelay"},
		{"no threshold", watermark.Config{IdleSource: &watermark.IdleSource{IncrementBy: time.Second}}, "idleSource.threshold"},
		{"negative stepInterval", watermark.Config{IdleSource: &watermark.IdleSource{Threshold: 1, StepInterval: -1, IncrementBy: 1}}, "idleSource.stepInterval"},
		{"no incrementBy", watermark.Config{IdleSource: &watermark.IdleSource{Threshold: time.Second}}, "idleSource.incrementBy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *watermark.ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, watermark.ErrInvalidConfig) {
				t.Fatalf("Validate: %v, want a ConfigError for %s", err, c.field)
			}
			if _, err := watermark.NewSource(c.cfg); !errors.Is(err, watermark.ErrInvalidConfig) {
				t.Fatalf("NewSource: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestNone(t *testing.T) {
	if got := watermark.None().UnixMilli(); got != -1 {
		t.Fatalf("None in ms: %d, want -1", got)
	}
	if !watermark.IsNone(time.UnixMilli(-1)) || watermark.IsNone(time.UnixMilli(0)) {
		t.Fatal("IsNone")
	}
	if got := watermark.Millis(time.Unix(0, -1)); got.UnixMilli() != -1 {
		t.Fatalf("Millis rounds down: %d ms, want -1", got.UnixMilli())
	}
}

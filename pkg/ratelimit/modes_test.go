package ratelimit

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestSlope(t *testing.T) {
	tests := []struct {
		delta  int64
		rampUp time.Duration
		want   int64
	}{
		{100, 10 * time.Second, 10_000},
		{10, 3 * time.Second, 3_333},        // 3333.33 rounds down
		{20, 3 * time.Second, 6_667},        // 6666.67 rounds up
		{1, 2000 * time.Second, 1},          // 0.5 rounds half up
		{1, 2001 * time.Second, 0},          // 0.49975 rounds down
		{5, 500 * time.Millisecond, 10_000}, // sub-second ramps are faster than one epoch
		{7, 0, 7_000},
		{MaxTokens, time.Nanosecond, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := slopeOf(tt.delta, tt.rampUp); got != tt.want {
			t.Errorf("slopeOf(%d, %v) = %d; want %d", tt.delta, tt.rampUp, got, tt.want)
		}
	}
}

func TestShareOfSumsToPool(t *testing.T) {
	for _, pool := range []int64{0, 999, 1000, 1999, 2000, 997_000, 997_999, MaxTokens * milli} {
		for n := 1; n <= 17; n++ {
			sum := int64(0)
			for i := range n {
				s := shareOf(pool, n, i)
				if s < pool/milli/int64(n) || s > pool/milli/int64(n)+1 {
					t.Fatalf("shareOf(%d, %d, %d) = %d; not floor or ceil", pool, n, i, s)
				}
				sum += s
			}
			if sum != pool/milli {
				t.Fatalf("shares of %d among %d sum to %d; want %d", pool, n, sum, pool/milli)
			}
		}
	}
	if shareOf(5000, 3, 3) != 0 || shareOf(5000, 0, 0) != 0 || shareOf(5000, 2, -1) != 0 {
		t.Fatal("a rank outside the replica count must get nothing")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings, one per expected error
	}{
		{"ok", Config{Max: 1}, nil},
		{"max zero", Config{Max: 0}, []string{"Max (0) must be at least 1"}},
		{"max too big", Config{Max: MaxTokens + 1}, []string{"Max (1000000000001) must be at most"}},
		{"min above max", Config{Max: 10, Min: 50}, []string{"Min (50) > Max (10)"}},
		{"negative min", Config{Max: 10, Min: -1}, []string{"Min (-1) must not be negative"}},
		{"negative ramp", Config{Max: 10, RampUpDuration: -time.Second}, []string{"RampUpDuration (-1s) must not be negative"}},
		{"threshold", Config{Max: 10, Mode: OnlyIfUsed, ThresholdPercentage: 101}, []string{"ThresholdPercentage (101) must be between 0 and 100"}},
		{"goBackN", Config{Max: 10, Mode: GoBackN, ThresholdPercentage: -1, CoolDownPeriod: -time.Second, RampDownPercentage: 200},
			[]string{"ThresholdPercentage (-1)", "CoolDownPeriod (-1s)", "RampDownPercentage (200)"}},
		{"unknown mode", Config{Max: 10, Mode: Mode(9)}, []string{"Mode (9) is not a known mode"}},
		{"pacing", Config{Max: 10, Pacing: time.Second}, []string{"Pacing (1s) must be 0 (off) or between 1ms and 500ms"}},
		{"all at once", Config{Max: 0, Min: -1, RampUpDuration: -1}, []string{"Max (0)", "Min (-1)", "RampUpDuration (-1ns)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v; want ErrInvalidConfig", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v; want a *FieldError", err)
			}
			if got := len(strings.Split(err.Error(), "\n")); got != len(tt.want) {
				t.Errorf("got %d errors (%v); want %d", got, err, len(tt.want))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q; want it to say %q", err, w)
				}
			}
			if _, err := New(tt.cfg); err == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
}

func TestFieldErrorRender(t *testing.T) {
	fe := &FieldError{Field: "Min", Value: int64(50), Reason: ">", Other: "Max", OtherValue: int64(10)}
	got := fe.Render(func(f string) string { return "spec.limits.rateLimit." + strings.ToLower(f) })
	if want := "spec.limits.rateLimit.min (50) > spec.limits.rateLimit.max (10)"; got != want {
		t.Fatalf("Render = %q; want %q", got, want)
	}
}

func TestModeText(t *testing.T) {
	for _, m := range []Mode{Relaxed, Scheduled, OnlyIfUsed, GoBackN} {
		b, err := m.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Mode
		if err := back.UnmarshalText(b); err != nil || back != m {
			t.Fatalf("round trip of %v: %v, %v", m, back, err)
		}
	}
	var m Mode
	if err := m.UnmarshalText([]byte("GoBackN")); err == nil {
		t.Fatal("mode names are case-sensitive, as in Numaflow's YAML")
	}
	if Mode(7).String() != "Mode(7)" {
		t.Fatal(Mode(7).String())
	}
	if _, err := Mode(7).MarshalText(); err == nil {
		t.Fatal("marshalled an unknown mode")
	}
}

func TestReasonString(t *testing.T) {
	for r, want := range map[Reason]string{
		NotThrottled: "none", ReasonRateLimited: "rate_limited", ReasonAwaitingAgreement: "awaiting_agreement",
		ReasonStoreUnavailable: "store_unavailable", ReasonDownstreamFull: "downstream_full",
		ReasonDownstreamThrottled: "downstream_throttled", Reason(42): "Reason(42)",
	} {
		if got := r.String(); got != want {
			t.Errorf("Reason(%d).String() = %q; want %q", uint8(r), got, want)
		}
	}
}

package ratelimit

import (
	"testing"
	"time"
)

func TestStoreClockSamples(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	ms := time.Millisecond
	// The store's clock reads 3s ahead of the local one.
	const ahead = 3 * time.Second
	type sample struct {
		t0, rtt time.Duration // request sent at base+t0, reply after rtt
		seenAt  time.Duration // the store read its clock this far into the round trip
		skew    time.Duration // the local clock's step, from this sample on
		stepped bool
	}
	tests := []struct {
		name    string
		samples []sample
		// want is the offset's distance from the truth at the end, at most.
		want time.Duration
	}{
		{"first sample is taken", []sample{{0, 2 * ms, ms, 0, false}}, 2 * ms},
		{"a slow reply leaves a precise offset alone", []sample{
			{0, 2 * ms, ms, 0, false},
			{100 * ms, 900 * ms, 899 * ms, 0, false}, // held on the way back
		}, 2 * ms},
		{"a precise sample replaces a rough one", []sample{
			{0, 800 * ms, 10 * ms, 0, false},
			{900 * ms, 2 * ms, ms, 0, false},
		}, 2 * ms},
		{"a step forward is followed", []sample{
			{0, 2 * ms, ms, 0, false},
			{100 * ms, 2 * ms, ms, 5 * time.Second, true},
		}, 2 * ms},
		{"a step back is followed", []sample{
			{0, 2 * ms, ms, 0, false},
			{100 * ms, 2 * ms, ms, -5 * time.Second, true},
		}, 2 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newStoreClock(base)
			skew := time.Duration(0)
			for i, s := range tt.samples {
				skew = s.skew
				t0 := base.Add(s.t0 + skew)
				t1 := t0.Add(s.rtt)
				store := base.Add(s.t0 + s.seenAt + ahead)
				if got := c.sample(t0, t1, store); (got != 0) != s.stepped {
					t.Fatalf("sample %d: stepped %v; want %v", i, got, s.stepped)
				}
			}
			// The truth: store time = local - skew + ahead.
			local := base.Add(10*time.Second + skew)
			truth := base.Add(10*time.Second + ahead).UnixNano()
			if d := time.Duration(c.nanos(local) - truth); d > tt.want || d < -tt.want {
				t.Fatalf("store clock off by %v; want at most %v", d, tt.want)
			}
		})
	}
}

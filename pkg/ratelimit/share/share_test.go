package share

import (
	"fmt"
	"testing"
	"time"
)

// at is a store's time, ms milliseconds into epoch e.
func at(e int64, ms int) time.Time { return time.Unix(e, int64(ms)*int64(time.Millisecond)) }

func TestLease(t *testing.T) {
	for _, tt := range []struct{ in, want time.Duration }{
		{0, DefaultStaleAfter},
		{-time.Second, DefaultStaleAfter},
		{5 * time.Second, 5 * time.Second},
	} {
		if got := Lease(tt.in); got != tt.want {
			t.Errorf("Lease(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if got := (Report{StaleAfter: tt.in}).Lease(); got != tt.want {
			t.Errorf("Report{StaleAfter: %v}.Lease() = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestSignaled(t *testing.T) {
	lead := 200 * time.Millisecond
	tests := []struct {
		name string
		a    Adaptation
		s    Signal
		now  time.Time
		want Adaptation
	}{
		{"a first cut applies from the next epoch the lead allows",
			Adaptation{}, Signal{Epoch: 10, Cut: true, Pool: 900, Lead: lead}, at(10, 100),
			Adaptation{From: 11, Pool: 900}},
		{"a lead across the boundary moves it one epoch on",
			Adaptation{}, Signal{Epoch: 10, Cut: true, Pool: 900, Lead: lead}, at(10, 900),
			Adaptation{From: 12, Pool: 900}},
		{"a signal from before the last cut took effect cuts nothing",
			Adaptation{From: 12, Pool: 900}, Signal{Epoch: 11, Cut: true, Pool: 800, Lead: lead}, at(11, 500),
			Adaptation{From: 12, Pool: 900}},
		{"a signal in the epoch of the last cut cuts again",
			Adaptation{From: 12, Pool: 900}, Signal{Epoch: 12, Cut: true, Pool: 810, Lead: lead}, at(12, 100),
			Adaptation{From: 13, Pool: 810}},
		{"a signal that arrives late still applies after its own epoch",
			Adaptation{}, Signal{Epoch: 20, Cut: true, Pool: 500, Lead: lead}, at(5, 0),
			Adaptation{From: 21, Pool: 500}},
		{"a cut keeps its signal's ceiling and the rate that passed",
			Adaptation{From: 12, Pool: 900, Ceiling: 1_800, Floor: 1_500}, Signal{Epoch: 12, Cut: true, Pool: 810, Ceiling: 1_000, Floor: 950, Lead: lead}, at(12, 100),
			Adaptation{From: 13, Pool: 810, Ceiling: 1_000, Floor: 950}},
		{"a signal that cuts nothing keeps the last ceiling",
			Adaptation{From: 12, Pool: 900, Ceiling: 1_800}, Signal{Epoch: 11, Cut: true, Pool: 800, Ceiling: 1_000, Lead: lead}, at(11, 500),
			Adaptation{From: 12, Pool: 900, Ceiling: 1_800}},
		{"a pause extends the last pause",
			Adaptation{PauseUntil: at(10, 500)}, Signal{Epoch: 10, PauseUntil: at(11, 0)}, at(10, 100),
			Adaptation{PauseUntil: at(11, 0)}},
		{"a shorter pause leaves the longer",
			Adaptation{PauseUntil: at(11, 0)}, Signal{Epoch: 10, PauseUntil: at(10, 500)}, at(10, 100),
			Adaptation{PauseUntil: at(11, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Signaled(tt.s, tt.now); got != tt.want {
				t.Errorf("Signaled = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestProposeLimit(t *testing.T) {
	lead := 2 * time.Second
	var limits []LiveLimit
	limits = ProposeLimit(limits, LimitChange{Spec: "a", Lead: lead}, at(100, 500))
	limits = ProposeLimit(limits, LimitChange{Spec: "a", Lead: lead}, at(101, 0)) // the same: kept
	if got, want := fmt.Sprint(limits), "[{1 a 103}]"; got != want {
		t.Fatalf("after a, a: %s, want %s", got, want)
	}
	// A second change proposed at once applies after the first's epoch.
	limits = ProposeLimit(limits, LimitChange{Spec: "b", Lead: 0}, at(101, 0))
	limits = ProposeLimit(limits, LimitChange{Spec: "c", Lead: lead}, at(110, 0))
	if got, want := fmt.Sprint(limits), "[{2 b 104} {3 c 113}]"; got != want {
		t.Fatalf("after b, c: %s, want %s (the last %d)", got, want, MaxLiveLimits)
	}
}

func TestFloorDiv(t *testing.T) {
	for _, tt := range []struct{ a, b, want int64 }{{7, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 3, 0}, {7, -2, -4}} {
		if got := floorDiv(tt.a, tt.b); got != tt.want {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

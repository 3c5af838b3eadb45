package simulate

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseQuota parses a downstream's quota: "fixed:RATE" (a fixed window of
// RATE requests a second) or "bucket:RATE:BURST" (a token bucket refilled
// at RATE a second, holding up to BURST), with changes "K:RATE" (from epoch
// K on, the quota is RATE; epochs from 2 to epochs, in order) and the
// Retry-After it answers refused requests with (0 for none).
func ParseQuota(s string, changes []string, retryAfter time.Duration, epochs int) (Downstream, error) {
	kind, rest, _ := strings.Cut(strings.TrimSpace(s), ":")
	nums := strings.Split(rest, ":")
	var vals []int
	for _, n := range nums {
		v, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("(%q): %q is not a whole number of requests, 0 or more", s, n)
		}
		vals = append(vals, v)
	}
	if retryAfter < 0 {
		return nil, fmt.Errorf("retry-after (%v) must not be negative", retryAfter)
	}
	var cs []QuotaChange
	for _, c := range changes {
		k, r, ok := strings.Cut(c, ":")
		e, err1 := strconv.Atoi(k)
		rate, err2 := strconv.Atoi(r)
		if !ok || err1 != nil || err2 != nil || rate < 0 {
			return nil, fmt.Errorf("change (%q): want K:RATE, from epoch K on a quota of RATE a second", c)
		}
		if e < 2 || e > epochs {
			return nil, fmt.Errorf("change (%q): epoch %d is not from 2 to %d, the epochs of --demand", c, e, epochs)
		}
		if n := len(cs); n > 0 && e <= cs[n-1].Epoch {
			return nil, fmt.Errorf("change (%q): epoch %d is not after the change before's, %d", c, e, cs[n-1].Epoch)
		}
		cs = append(cs, QuotaChange{Epoch: e, Rate: rate})
	}
	switch {
	case kind == "fixed" && len(vals) == 1:
		return &FixedWindow{Rate: vals[0], Changes: cs, RetryAfter: retryAfter}, nil
	case kind == "bucket" && len(vals) == 2:
		if vals[1] < 1 {
			return nil, fmt.Errorf("(%q): the burst must be at least 1", s)
		}
		return &TokenBucket{Rate: vals[0], Burst: vals[1], Changes: cs, RetryAfter: retryAfter}, nil
	}
	return nil, fmt.Errorf("(%q) must be fixed:RATE or bucket:RATE:BURST, e.g. fixed:150", s)
}

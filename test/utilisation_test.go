package test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
)

// Utilisation on the wall clock.
//
// A replica that the machine does not run for part of a second grants less
// in that second, through no fault of the limiter: on two cores that the
// rest of the suite keeps busy, that happens in some second of most runs.
// So what no epoch may exceed (the pool, a key's limit) is asserted of every
// epoch, exactly, and so is what the replicas agree on (their shares sum to
// the pool); what the replicas reach when they take all they may (the whole
// pool, a key's whole limit) is asserted of most epochs of a window, and of
// at least a few, never of each. Where a test waits for a rate, it waits
// until it has seen it, within a bound, rather than for a fixed time.

// epochWait bounds a wait for epochs that reach a rate: a few seconds on an
// idle machine, many more on a busy one.
const epochWait = 60 * time.Second

// mostReach checks that at least need of epochs, and at least half of them,
// have got(e) >= want, and reports the others; what names the check.
func mostReach(t *testing.T, what string, epochs []int64, want int64, need int, got func(e int64) int64) {
	t.Helper()
	var short []string
	for _, e := range epochs {
		if g := got(e); g < want {
			short = append(short, fmt.Sprintf("%d:%d", e, g))
		}
	}
	reached := len(epochs) - len(short)
	if reached < need || reached*2 < len(epochs) {
		t.Errorf("%s: %d of %d epochs reached %d, want at least %d and half; short of it (epoch:got) %v",
			what, reached, len(epochs), want, need, short)
	} else if len(short) > 0 {
		t.Logf("%s: %d of %d epochs reached %d; short of it (epoch:got) %v", what, reached, len(epochs), want, short)
	}
}

// countReach is how many of epochs have got(e) >= want.
func countReach(epochs []int64, want int64, got func(e int64) int64) int {
	n := 0
	for _, e := range epochs {
		if got(e) >= want {
			n++
		}
	}
	return n
}

// untilEpochs are the options of a wait for epochs of real processes: a
// minute at most, a look every 200 ms (each reads the processes' logs), and
// on to the caller's assertions, which say what was not reached, if it ends.
var untilEpochs = []runtest.WaitOption{runtest.Within(epochWait), runtest.Every(200 * time.Millisecond), runtest.Soft()}

// logged reports whether every one of procs has logged epoch e.
func logged(t *testing.T, procs []*proc, e int64) bool {
	t.Helper()
	for _, p := range procs {
		if _, ok := p.epochs(t)[e]; !ok {
			return false
		}
	}
	return true
}

// replicaEpochs is the replicas' epoch logs side by side: what they granted
// and shared, by epoch.
type replicaEpochs struct {
	granted, shares map[int64]int64
	// eligible counts, by epoch, the replicas that took part in a pool of
	// the size readEpochs was given; shares adds up their shares alone.
	eligible map[int64]int
}

// readEpochs reads the epoch logs of procs so far: those that were
// eligible among n are counted in eligible and shares.
func readEpochs(t *testing.T, procs []*proc, n int) replicaEpochs {
	t.Helper()
	r := replicaEpochs{granted: map[int64]int64{}, shares: map[int64]int64{}, eligible: map[int64]int{}}
	for _, p := range procs {
		for e, l := range p.epochs(t) {
			r.granted[e] += l.Granted
			if l.Eligible && l.Replicas == n {
				r.eligible[e]++
				r.shares[e] += l.Share
			}
		}
	}
	return r
}

// full returns, in order, the epochs from from to to (inclusive) in which all
// n replicas were eligible among n (n as given to readEpochs).
func (r replicaEpochs) full(n int, from, to int64) []int64 {
	var out []int64
	for e := range r.granted {
		if e >= from && e <= to && r.eligible[e] == n {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// grantedIn is what the replicas granted in e.
func (r replicaEpochs) grantedIn(e int64) int64 { return r.granted[e] }

// forever is an epoch after every other.
const forever = int64(1) << 62

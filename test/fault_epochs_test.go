package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The epochs of a token row's replicas side by side, and the checks of
// what must hold in them.

// replicaEpoch is one replica's account of one epoch: its debug log line
// "epoch", or an EpochSummary of an in-process limiter.
type replicaEpoch struct {
	Epoch    int64
	Pool     float64
	Share    int64
	Granted  int64
	Replicas int `json:"poolSize"`
	Rank     int
	Eligible bool
	TS       time.Time `json:"ts"` // when the replica logged it
}

// epochGrid is the replicas' epochs side by side, with their logs for
// failure messages, and the fault: which replica it hit (-1 for the store)
// and when.
type epochGrid struct {
	logs    [][]string               // per replica, its log lines
	byRep   []map[int64]replicaEpoch // per replica, by epoch
	epochs  []int64                  // every epoch any replica logged, in order
	hit     int
	faultAt time.Time
}

// newEpochGrid reads the replicas' logs; the fault is hit, at faultAt.
func newEpochGrid(t *testing.T, logs []string, hit int, faultAt time.Time) *epochGrid {
	t.Helper()
	g := &epochGrid{hit: hit, faultAt: faultAt}
	seen := map[int64]bool{}
	for _, log := range logs {
		lines := strings.Split(strings.TrimSpace(log), "\n")
		eps := map[int64]replicaEpoch{}
		for _, line := range lines {
			if !strings.Contains(line, `"msg":"epoch"`) {
				continue
			}
			var e replicaEpoch
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("epoch log %q: %v", line, err)
			}
			eps[e.Epoch] = e
			seen[e.Epoch] = true
		}
		g.logs = append(g.logs, lines)
		g.byRep = append(g.byRep, eps)
	}
	g.epochs = slices.Sorted(maps.Keys(seen))
	return g
}

// granted is what every replica granted in e.
func (g *epochGrid) granted(e int64) int64 {
	var n int64
	for _, eps := range g.byRep {
		n += eps[e].Granted
	}
	return n
}

// allowed is the most the replicas may grant together in e: the whole
// tokens of their pool, the largest should they differ (replicas that
// joined in different epochs are a slope apart on a ramp). After the fault's
// epoch, the pool of the replica it hit counts only when no other logged e:
// its view is what the fault may have made stale (in the fault's epoch it
// granted on the view it had before the fault).
func (g *epochGrid) allowed(e int64) int64 {
	pool, found := 0.0, false
	for i, eps := range g.byRep {
		if l, ok := eps[e]; ok && !g.stale(i, e) {
			pool, found = math.Max(pool, l.Pool), true
		}
	}
	if !found && g.hit >= 0 {
		pool = g.byRep[g.hit][e].Pool
	}
	return int64(math.Floor(pool + 1e-9))
}

// stale reports whether replica i's view of e may be stale: it was hit by
// the fault, before e.
func (g *epochGrid) stale(i int, e int64) bool { return i == g.hit && e > g.faultAt.Unix() }

// agreed reports whether all n replicas were eligible in e among n.
func (g *epochGrid) agreed(e int64, n int) bool {
	count := 0
	for _, eps := range g.byRep {
		if l, ok := eps[e]; ok && l.Eligible && l.Replicas == n {
			count++
		}
	}
	return count == n
}

// poolCheck is what checkPool found.
type poolCheck struct {
	epochs, over int
	worst        string // granted/allowed of the worst epoch
	overEpochs   []int64
}

// checkPool adds up every epoch's grants and compares them with what the
// epoch allowed. It fills in row's Epochs, OverMax and Worst.
func (g *epochGrid) checkPool(row *faultRow) poolCheck {
	var c poolCheck
	worst := -1.0
	for _, e := range g.epochs {
		granted, allowed := g.granted(e), g.allowed(e)
		c.epochs++
		if granted > allowed {
			c.over++
			c.overEpochs = append(c.overEpochs, e)
		}
		if r := float64(granted) / float64(max(allowed, 1)); r > worst {
			worst = r
			c.worst = fmt.Sprintf("%d/%d", granted, allowed)
		}
	}
	row.Epochs, row.OverMax, row.Worst = c.epochs, c.over, c.worst
	return c
}

// reportOver fails t once per epoch over its pool (the first few in full:
// each replica's view of it and its log around it).
func (g *epochGrid) reportOver(t *testing.T, c poolCheck, what string) {
	t.Helper()
	for i, e := range c.overEpochs {
		if i == 3 {
			t.Errorf("%d more epochs over their pool: %v", len(c.overEpochs)-i, c.overEpochs[i:])
			return
		}
		t.Errorf("%s: epoch %d (%s the fault): granted %d, allowed %d\n%s",
			what, e, g.since(e), g.granted(e), g.allowed(e), g.describe(e))
	}
}

// since says where epoch e begins from the fault: "+3.2s after".
func (g *epochGrid) since(e int64) string {
	d := time.Unix(e, 0).Sub(g.faultAt).Round(100 * time.Millisecond)
	if d < 0 {
		return (-d).String() + " before"
	}
	return "+" + d.String() + " after"
}

// describe is each replica's view of epoch e and its log around it.
func (g *epochGrid) describe(e int64) string {
	var b strings.Builder
	for i, eps := range g.byRep {
		mark := ""
		if i == g.hit {
			mark = " (hit by the fault)"
		}
		if l, ok := eps[e]; ok {
			fmt.Fprintf(&b, "  replica %d%s: granted %d, share %d, pool %g, replicas %d, rank %d, eligible %v\n",
				i, mark, l.Granted, l.Share, l.Pool, l.Replicas, l.Rank, l.Eligible)
		} else {
			fmt.Fprintf(&b, "  replica %d%s: no epoch line\n", i, mark)
		}
	}
	for i := range g.byRep {
		fmt.Fprintf(&b, "  replica %d's log around it:\n", i)
		for _, l := range g.around(i, e, 10) {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	return b.String()
}

// around returns up to n lines of replica i's log from the second before e
// to the one after it (logs are timed on the local clock, which is the
// store's on this machine).
func (g *epochGrid) around(i int, e int64, n int) []string {
	from, to := time.Unix(e-1, 0), time.Unix(e+2, 0)
	var out []string
	for _, line := range g.logs[i] {
		var l struct{ TS time.Time }
		if json.Unmarshal([]byte(line), &l) != nil || l.TS.Before(from) || !l.TS.Before(to) {
			continue
		}
		out = append(out, line)
	}
	if len(out) > n { // the lines nearest e's end, where its line is
		mid := slices.IndexFunc(out, func(l string) bool { return strings.Contains(l, `"epoch":`+strconv.FormatInt(e, 10)) })
		lo := min(max(mid-n/2, 0), len(out)-n)
		out = out[lo : lo+n]
	}
	return out
}

// table prints the replicas' grants, shares and replica counts over epochs, one
// line per replica, for the log of a run.
func (g *epochGrid) table(from, to int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epochs %d..%d, granted/share/replicas per replica (- absent, * not eligible), then the sum:\n", from, to)
	for i, eps := range g.byRep {
		fmt.Fprintf(&b, "  replica %d:", i)
		for e := from; e <= to; e++ {
			l, ok := eps[e]
			switch {
			case !ok:
				b.WriteString(" -")
			case !l.Eligible:
				fmt.Fprintf(&b, " %d/%d/%d*", l.Granted, l.Share, l.Replicas)
			default:
				fmt.Fprintf(&b, " %d/%d/%d", l.Granted, l.Share, l.Replicas)
			}
		}
		b.WriteByte('\n')
	}
	b.WriteString("  sum:      ")
	for e := from; e <= to; e++ {
		fmt.Fprintf(&b, " %d", g.granted(e))
	}
	return b.String()
}

// checkTakeover checks that in every epoch from the one by which the others
// must have dropped the replica hit (its lease and the margin after the
// fault) to the last one that ended before backAt, the others were eligible
// among the rest and their shares made up the whole pool. It returns
// the epochs checked and those that failed.
func (g *epochGrid) checkTakeover(t *testing.T, backAt time.Time) (checked, missed int) {
	t.Helper()
	from := g.faultAt.Add(tokenStaleAfter + tokenMargin)
	first := from.Unix() + 1 // the first epoch that begins after from
	for e := first; e+1 <= backAt.Unix(); e++ {
		checked++
		var shares, granted int64
		ok := true
		for i, eps := range g.byRep {
			if i == g.hit {
				continue
			}
			l, found := eps[e]
			ok = ok && found && l.Eligible && l.Replicas == tokenReplicas-1
			shares += l.Share
			granted += l.Granted
		}
		if allowed := g.allowed(e); !ok || shares != allowed {
			missed++
			t.Errorf("epoch %d (%s the fault): the others' shares make %d of %d (granted %d); they should have taken replica %d's share\n%s",
				e, g.since(e), shares, allowed, granted, g.hit, g.describe(e))
		}
	}
	return checked, missed
}

// checkAgreed checks that every epoch from first to last had all replicas
// eligible among all of them; what names the check.
func (g *epochGrid) checkAgreed(t *testing.T, first, last int64, what string) bool {
	t.Helper()
	if first > last {
		t.Errorf("%s: no epoch to check (%d > %d)", what, first, last)
		return false
	}
	ok := true
	for e := first; e <= last; e++ {
		if !g.agreed(e, tokenReplicas) {
			ok = false
			t.Errorf("%s: epoch %d (%s the fault) is not agreed by all %d replicas\n%s",
				what, e, g.since(e), tokenReplicas, g.describe(e))
		}
	}
	return ok
}

// untilPhase sleeps until the next epoch boundary plus phase.
func untilPhase(phase time.Duration) time.Time {
	now := time.Now()
	at := now.Truncate(time.Second).Add(time.Second + phase)
	time.Sleep(time.Until(at))
	return at
}

// roundPhase spreads the moment of a fault over the epoch from round to
// round: 150 ms into it in the first round, then 370 ms later in each.
func roundPhase(round int) time.Duration {
	return time.Duration((150+370*round)%1000) * time.Millisecond
}

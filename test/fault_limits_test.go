package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The freeze and cut rows again, on vertices with per-key limits and with
// closed-loop throttling, under pause.

const (
	variantFreeze = 5 * time.Second // beyond the lease
	keyMax        = 25              // per key and second; ten keys want more
)

// keyVertex is the vertex of the per-key rows: ten keys, each wanting far
// more than its 25 a second, 250 in all, under the vertex's 300.
func keyVertex() tokenVertex {
	var keys []string
	for i := range 10 {
		keys = append(keys, "k"+strconv.Itoa(i))
	}
	return tokenVertex{name: "perkey-fault", policy: "pause",
		extra:  fmt.Sprintf("      perKey:\n        max: %d\n", keyMax),
		source: fmt.Sprintf("    generator:\n      rpu: 2000\n      keys: [%s]\n", strings.Join(keys, ", "))}
}

// perKeyCases freeze one of three replicas for 5 s, and separately cuts
// it off from the store for 10 s, on a vertex that also limits each of ten
// keys to 25 a second over the replicas. No key may get more than 25 in an
// epoch, and no epoch more than 300; the freeze and cut rows' other checks
// apply too.
func perKeyCases() []tokenFaultCase {
	holds := "no key over its max; no epoch over max; and as without perKey"
	return []tokenFaultCase{{
		name: "perKey/freeze",
		row:  faultRow{Fault: fmt.Sprintf("perKey: one replica frozen %v", variantFreeze), Policy: "pause", Holds: holds},
		run: func(t *testing.T, round int, row *faultRow) {
			g, grid := freezeRun(t, round, row, variantFreeze, keyVertex(), nil)
			checkKeys(t, row, g.procs, grid)
		},
	}, {
		name: "perKey/cut",
		row:  faultRow{Fault: fmt.Sprintf("perKey: one replica cut off from the store %v", cutFor), Policy: "pause", Holds: holds},
		run: func(t *testing.T, round int, row *faultRow) {
			res := cutRun(t, round, "cut", keyVertex(), nil)
			res.checkPause(t, row)
			checkKeys(t, row, res.g.procs, res.grid)
		},
	}}
}

// checkKeys adds up each key's grants per epoch over the replicas (their
// "perKey epoch" lines) and fails t for every key over keyMax in an epoch.
func checkKeys(t *testing.T, row *faultRow, procs []*proc, grid *epochGrid) {
	t.Helper()
	sums := keyEpochs(t, procs)
	if len(sums) < 5 {
		t.Errorf("%d epochs with per-key grants; want at least 5", len(sums))
	}
	over := 0
	for _, e := range slices.Sorted(maps.Keys(sums)) {
		for _, k := range slices.Sorted(maps.Keys(sums[e])) {
			if sums[e][k] <= keyMax {
				continue
			}
			over++
			t.Errorf("epoch %d (%s the fault): key %s granted %d over the replicas, max %d\n%s%s",
				e, grid.since(e), k, sums[e][k], keyMax, keyGrants(t, grid, e, k), grid.describe(e))
		}
	}
	if over > 0 {
		row.Note = noteOnce(row.Note, "key over its max")
		row.OverMax += over
	}
}

// keyGrants says what each replica granted key k in epoch e.
func keyGrants(t *testing.T, grid *epochGrid, e int64, k string) string {
	var b strings.Builder
	for i, lines := range grid.logs {
		mark := ""
		if i == grid.hit {
			mark = " (hit by the fault)"
		}
		var n int64
		for _, line := range lines {
			if !strings.Contains(line, `"msg":"perKey epoch"`) || !strings.Contains(line, `"epoch":`+strconv.FormatInt(e, 10)) {
				continue
			}
			var l keyEpochLog
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("perKey epoch log %q: %v", line, err)
			}
			if l.Epoch == e {
				n += l.Top[k]
			}
		}
		fmt.Fprintf(&b, "  replica %d%s: %d of key %s\n", i, mark, n, k)
	}
	return b.String()
}

// adaptiveQuota is what the endpoint of the adaptive rows accepts a second:
// a third of the vertex's max, so that its pool is cut again and again.
const adaptiveQuota = 100

// adaptiveFaultVertex is the vertex of the adaptive rows: it calls an
// endpoint with a quota, ramping from 30 to 300 over 10 s, and halves its
// pool at each 429.
func adaptiveFaultVertex(t *testing.T) tokenVertex {
	srv := httptest.NewServer(newCapped(adaptiveQuota))
	t.Cleanup(srv.Close)
	return tokenVertex{name: "adaptive-fault", policy: "pause", min: 30, ramp: "10s",
		extra: "      adaptive:\n        cutPercentage: 50\n",
		sink:  fmt.Sprintf("    http:\n      url: %s/api\n      concurrency: 20\n", srv.URL)}
}

// adaptiveCases freeze one of three replicas for 5 s, and separately
// cuts it off from the store for 10 s, on a vertex whose pool an endpoint's
// 429s cut: the fault comes right after the store decided a cut, before
// the epoch it applies from. No epoch may grant more than the pool in force
// (the epoch lines' pool); the freeze and cut rows' other checks apply too.
func adaptiveCases() []tokenFaultCase {
	holds := "no epoch over the cut pool; and as without adaptive"
	return []tokenFaultCase{{
		name: "adaptive/freeze",
		row:  faultRow{Fault: fmt.Sprintf("adaptive: one replica frozen %v, a cut in flight", variantFreeze), Policy: "pause", Holds: holds},
		run: func(t *testing.T, round int, row *faultRow) {
			freezeRun(t, round, row, variantFreeze, adaptiveFaultVertex(t), waitCutInFlight)
		},
	}, {
		name: "adaptive/cut",
		row:  faultRow{Fault: fmt.Sprintf("adaptive: one replica cut off from the store %v, a cut in flight", cutFor), Policy: "pause", Holds: holds},
		run: func(t *testing.T, round int, row *faultRow) {
			cutRun(t, round, "cut", adaptiveFaultVertex(t), waitCutInFlight).checkPause(t, row)
		},
	}}
}

// waitCutInFlight waits (at most 30 s) until a replica logs that a throttle
// signal paused it: the store has just decided a cut of the pool, which
// applies from an epoch still to come ("pool cut by a throttle signal" is
// logged when it does).
func waitCutInFlight(t *testing.T, g *tokenGroup) {
	t.Helper()
	seen := make([]int, len(g.procs)) // lines already looked at, per replica
	for i, p := range g.procs {
		seen[i] = strings.Count(p.stderrText(), "\n")
	}
	for range 3000 {
		for i, p := range g.procs {
			lines := strings.Split(p.stderrText(), "\n")
			for _, line := range lines[seen[i]:] {
				if strings.Contains(line, `"msg":"paused by a throttle signal"`) {
					t.Logf("replica %d: %s", i, line)
					return
				}
			}
			seen[i] = max(len(lines)-1, 0) // the last may be partly written
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no throttle signal within 30s:\n%s", g.logTails(12))
}

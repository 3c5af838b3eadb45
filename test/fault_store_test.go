package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
)

// storeHolds is what must hold when the store itself fails.
const storeHolds = "no epoch over max; the replicas agree again within 3 epochs"

// storeCases kill the Redis that three replicas share 300 a
// second through and starts it again half a second later with its data
// lost, under each onStoreFailure policy; and, separately, fails the master
// of a Sentinel-managed Redis over to its replica. No epoch may grant more
// than 300 over the replicas, and within 3 epochs of the store's return the
// three agree on a pool of all of them again.
func storeCases() []tokenFaultCase {
	var cases []tokenFaultCase
	for _, policy := range []string{"pause", "lastKnown"} {
		cases = append(cases, tokenFaultCase{
			name: "store/restart/" + policy,
			row:  faultRow{Fault: "store restarted, data lost", Policy: policy, Holds: storeHolds},
			run: func(t *testing.T, round int, row *faultRow) {
				srv := redistest.Start(t, redistest.Options{})
				storeRun(t, round, row, true, tokenVertex{name: "restarted", policy: policy, stores: []string{singleStore(srv.Addr)}},
					func(t *testing.T) {
						srv.Kill()
						time.Sleep(500 * time.Millisecond)
						srv.Restart(t)
					})
			},
		}, tokenFaultCase{
			name: "store/sentinel/" + policy,
			row:  faultRow{Fault: "Sentinel failover", Policy: policy, Holds: storeHolds},
			run: func(t *testing.T, round int, row *faultRow) {
				sn := redistest.StartSentinel(t, redistest.Options{})
				store := fmt.Sprintf("          mode: sentinel\n          sentinel:\n            masterName: %s\n            endpoints: [%s]",
					sn.MasterName, strings.Join(sn.Endpoints(), ", "))
				storeRun(t, round, row, false, tokenVertex{name: "failover", policy: policy, stores: []string{store}},
					func(t *testing.T) { sn.Failover(t) })
			},
		})
	}
	return cases
}

// storeRun starts the replicas of v, lets fault hit their store at a phase
// of the epoch that differs from round to round, and checks the epochs: none
// over max, and all of them agreed from the third after the store is back
// (when fault returns). When the fault surely loses the store's data (lost),
// a replica must have seen the store hold the pool for it.
func storeRun(t *testing.T, round int, row *faultRow, lost bool, v tokenVertex, fault func(t *testing.T)) {
	g := startTokenGroup(t, v)
	time.Sleep(2 * time.Second) // steady state before the fault
	faultAt := untilPhase(roundPhase(round))
	fault(t)
	back := time.Now()
	time.Sleep(5 * time.Second) // agreed within 3 epochs, and 2 more
	g.stop(t)

	grid := g.grid(t, -1, faultAt)
	lastFull := g.lastFull()
	t.Logf("store fault at %s, back at %s (epoch %d)\n%s", faultAt.Format("15:04:05.000"), back.Format("15:04:05.000"),
		back.Unix(), grid.table(faultAt.Unix()-2, lastFull))
	c := grid.checkPool(row)
	grid.reportOver(t, c, "over max")
	if c.over > 0 {
		row.Note = noteOnce(row.Note, "over max")
	}
	if !grid.checkAgreed(t, back.Unix()+3, lastFull, "agreed within 3 epochs of the store's return") {
		row.Note = noteOnce(row.Note, "late agreement")
	}
	held := 0
	for _, p := range g.procs {
		if strings.Contains(p.stderrText(), "the store lost its last writes") {
			held++
		}
	}
	t.Logf("%d of %d replicas saw the store hold the replica count after it lost writes", held, len(g.procs))
	if lost && held == 0 {
		t.Errorf("no replica saw the store hold the replica count, which lost its data:\n%s", g.logTails(12))
	}
}

package test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
)

// freezeHolds is what must hold when a replica is frozen.
const freezeHolds = "no epoch over max; the others take its share after its lease; it rejoins within 2 epochs of waking"

// freezeCases freeze one of three replicas sharing 300 a second through
// Redis (SIGSTOP, then SIGCONT) for 15, 5, 2 and 0.5 seconds, under each
// onStoreFailure policy, as a stop-the-world pause or a starved container
// would. No epoch may grant more than 300 over the replicas; once its lease
// has run out the other two share all 300; within 2 epochs of waking it is
// one of the agreed replicas again.
func freezeCases() []tokenFaultCase {
	var cases []tokenFaultCase
	for _, d := range []time.Duration{15 * time.Second, 5 * time.Second, 2 * time.Second, 500 * time.Millisecond} {
		for _, policy := range []string{"pause", "lastKnown"} {
			cases = append(cases, tokenFaultCase{
				name: fmt.Sprintf("freeze/%v/%s", d, policy),
				row:  faultRow{Fault: fmt.Sprintf("one replica frozen %v", d), Policy: policy, Holds: freezeHolds},
				run: func(t *testing.T, round int, row *faultRow) {
					freezeRun(t, round, row, d, tokenVertex{name: "frozen", policy: policy}, nil)
				},
			})
		}
	}
	return cases
}

// freezeRun starts the replicas of v on a Redis of their own, freezes one of
// them (a different one each round) for d, and checks the epochs. The
// freeze comes at a phase of the epoch that differs from round to round, or,
// with ready, as soon as ready returns. It returns the replicas and their
// epochs, for the checks of the variants.
func freezeRun(t *testing.T, round int, row *faultRow, d time.Duration, v tokenVertex, ready func(*testing.T, *tokenGroup)) (*tokenGroup, *epochGrid) {
	srv := redistest.Start(t, redistest.Options{})
	v.stores = []string{singleStore(srv.Addr)}
	g := startTokenGroup(t, v)
	time.Sleep(2 * time.Second) // steady state before the fault
	hit := round % tokenReplicas
	victim := g.procs[hit].cmd.Process

	var frozen time.Time
	if ready != nil {
		ready(t, g)
		frozen = time.Now()
	} else {
		frozen = untilPhase(roundPhase(round))
	}
	if err := victim.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	if err := victim.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	awoken := time.Now()
	time.Sleep(4 * time.Second) // rejoined within 2 epochs, and 2 more
	g.stop(t)

	grid := g.grid(t, hit, frozen)
	t.Logf("replica %d frozen at %s for %v, woke in epoch %d\n%s", hit, frozen.Format("15:04:05.000"), d,
		awoken.Unix(), grid.table(frozen.Unix()-2, g.lastFull()))

	c := grid.checkPool(row)
	grid.reportOver(t, c, "over max")
	for _, e := range c.overEpochs {
		switch k := e - awoken.Unix(); {
		case k == 0:
			row.Note = noteOnce(row.Note, "over max in the epoch it woke in")
		case k > 0:
			row.Note = noteOnce(row.Note, fmt.Sprintf("over max %d epochs after the wake", k))
		default:
			row.Note = noteOnce(row.Note, "over max while frozen")
		}
	}
	if _, missed := grid.checkTakeover(t, awoken); missed > 0 {
		row.Note = noteOnce(row.Note, "no takeover")
	}
	if !grid.checkAgreed(t, awoken.Unix()+2, g.lastFull(), "rejoin within 2 epochs of waking") {
		row.Note = noteOnce(row.Note, "late rejoin")
	}
	return g, grid
}

// noteOnce adds s to a row's note unless it is there.
func noteOnce(note, s string) string {
	switch {
	case note == "":
		return s
	case strings.Contains(note, s):
		return note
	}
	return note + "; " + s
}

package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/faultproxy"
	"github.com/sluiceflow/sluice/internal/redistest"
)

// The rows in this file reach Redis through a fault proxy per replica, so
// that a fault hits one replica only.

// startProxiedGroup starts a Redis, a proxy to it for each replica and the
// replicas of v, each through its own proxy.
func startProxiedGroup(t *testing.T, v tokenVertex) (*tokenGroup, []*faultproxy.Proxy) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	var proxies []*faultproxy.Proxy
	v.stores = nil
	for range tokenReplicas {
		p := faultproxy.New(t, srv.Addr)
		proxies = append(proxies, p)
		v.stores = append(v.stores, singleStore(p.Addr()))
	}
	return startTokenGroup(t, v), proxies
}

// cutFor is how long a replica is cut off from the store.
const cutFor = 10 * time.Second

// cutCases cut one of three replicas off from the store for 10 s
// (its connections reset, new ones refused) and, separately, black-holes its
// connections for 10 s (accepted, never answered), under each
// onStoreFailure policy. With pause no epoch may grant more than 300 over the
// replicas, and the other two share all of it during the cut. With
// lastKnown the cut replica goes on with its last share while the others
// take it too: the worst epoch is measured, and must stay within 300 plus
// that share.
func cutCases() []tokenFaultCase {
	var cases []tokenFaultCase
	for _, kind := range []string{"cut", "blackhole"} {
		fault := map[string]string{"cut": "one replica cut off from the store 10s", "blackhole": "one replica's store connections black-holed 10s"}[kind]
		cases = append(cases, tokenFaultCase{
			name: "cut/" + kind + "/pause",
			row:  faultRow{Fault: fault, Policy: "pause", Holds: "no epoch over max; the others take all of it during the cut"},
			run: func(t *testing.T, round int, row *faultRow) {
				res := cutRun(t, round, kind, tokenVertex{name: "cut", policy: "pause"}, nil)
				res.checkPause(t, row)
			},
		}, tokenFaultCase{
			name: "cut/" + kind + "/lastKnown",
			row:  faultRow{Fault: fault, Policy: "lastKnown", Holds: "the worst epoch within max plus the cut replica's last share"},
			run: func(t *testing.T, round int, row *faultRow) {
				res := cutRun(t, round, kind, tokenVertex{name: "cut", policy: "lastKnown"}, nil)
				res.checkLastKnown(t, row)
			},
		})
	}
	return cases
}

// cutResult is what a cut run saw.
type cutResult struct {
	g      *tokenGroup
	grid   *epochGrid // hit by the cut at its start
	healed time.Time
}

// cutRun starts the replicas of v, each through its own proxy, and cuts or
// black-holes the connections of one of them (a different one each round)
// for cutFor: at a phase of the epoch that differs from round to round, or,
// with ready, as soon as ready returns.
func cutRun(t *testing.T, round int, kind string, v tokenVertex, ready func(*testing.T, *tokenGroup)) cutResult {
	g, proxies := startProxiedGroup(t, v)
	time.Sleep(2 * time.Second) // steady state before the fault
	var cutAt time.Time
	if ready != nil {
		ready(t, g)
		cutAt = time.Now()
	} else {
		cutAt = untilPhase(roundPhase(round))
	}
	hit := round % tokenReplicas
	switch kind {
	case "cut":
		proxies[hit].Cut()
	case "blackhole":
		proxies[hit].Blackhole(faultproxy.Both)
	default:
		t.Fatalf("unknown fault %q", kind)
	}
	time.Sleep(cutFor)
	proxies[hit].Heal()
	healed := time.Now()
	time.Sleep(4 * time.Second) // back, and 2 more epochs
	g.stop(t)
	res := cutResult{g: g, grid: g.grid(t, hit, cutAt), healed: healed}
	t.Logf("replica %d: %s at %s for %v\n%s", hit, kind, cutAt.Format("15:04:05.000"), cutFor,
		res.grid.table(cutAt.Unix()-2, g.lastFull()))
	return res
}

// checkPause checks a cut under pause: no epoch over its pool, the others
// take the cut replica's share after its lease; and notes a late return.
func (r cutResult) checkPause(t *testing.T, row *faultRow) {
	c := r.grid.checkPool(row)
	r.grid.reportOver(t, c, "over max")
	if c.over > 0 {
		row.Note = noteOnce(row.Note, "over max")
	}
	if _, missed := r.grid.checkTakeover(t, r.healed); missed > 0 {
		row.Note = noteOnce(row.Note, "no takeover")
	}
	r.noteReturn(t, row)
}

// checkLastKnown measures the worst epoch of a cut under lastKnown and
// checks it against its bound: the pool plus the cut replica's share in the
// last epoch before the cut.
func (r cutResult) checkLastKnown(t *testing.T, row *faultRow) {
	c := r.grid.checkPool(row)
	hit := r.grid.hit
	last, ok := r.grid.byRep[hit][r.grid.faultAt.Unix()-1]
	if !ok {
		t.Fatalf("replica %d logged no epoch before the cut", hit)
	}
	for _, e := range r.grid.epochs {
		bound := r.grid.allowed(e) + last.Share
		if r.grid.granted(e) > bound {
			t.Errorf("epoch %d (%s the cut): granted %d, over the bound %d (pool plus the cut replica's last share %d)\n%s",
				e, r.grid.since(e), r.grid.granted(e), bound, last.Share, r.grid.describe(e))
		}
	}
	row.Note = noteOnce(row.Note, fmt.Sprintf("expected bound %d", tokenMax+last.Share))
	if c.over > 0 {
		t.Logf("%d epochs over max, the worst %s (lastKnown: measured, not a failure)", c.over, c.worst)
	}
	r.noteReturn(t, row)
}

// noteReturn notes a cut replica that is not back among the agreed replicas within
// 3 epochs of the heal.
func (r cutResult) noteReturn(t *testing.T, row *faultRow) {
	for e := r.healed.Unix() + 1; e <= min(r.healed.Unix()+3, r.g.lastFull()); e++ {
		if r.grid.agreed(e, tokenReplicas) {
			return
		}
	}
	t.Logf("replica %d not back among the agreed replicas within 3 epochs of the heal", r.grid.hit)
	row.Note = noteOnce(row.Note, "not back within 3 epochs of the heal")
}

// killCases kill one of three replicas with SIGKILL in the middle
// of a sync, between the request and its reply (its proxy holds the replies
// back while a request goes through), under each onStoreFailure policy. No
// epoch may grant more than 300, and the other two share all of it after its
// lease.
func killCases() []tokenFaultCase {
	var cases []tokenFaultCase
	for _, policy := range []string{"pause", "lastKnown"} {
		cases = append(cases, tokenFaultCase{
			name: "kill/" + policy,
			row: faultRow{Fault: "kill -9 of a replica mid-sync", Policy: policy,
				Holds: "no epoch over max; its share reclaimed after its lease"},
			run: func(t *testing.T, round int, row *faultRow) { killInSyncRun(t, round, row, policy) },
		})
	}
	return cases
}

func killInSyncRun(t *testing.T, round int, row *faultRow, policy string) {
	g, proxies := startProxiedGroup(t, tokenVertex{name: "killed", policy: policy})
	time.Sleep(2 * time.Second) // steady state before the fault
	untilPhase(roundPhase(round))
	hit := round % tokenReplicas
	p, victim := proxies[hit], g.procs[hit]
	sent, answered := p.Forwarded(faultproxy.ToServer), p.Forwarded(faultproxy.ToClient)
	p.Delay(faultproxy.ToClient, 700*time.Millisecond)
	for i := 0; p.Forwarded(faultproxy.ToServer) == sent; i++ {
		if i == 400 {
			t.Fatalf("replica %d sent no request within 2s", hit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // Redis has answered; the proxy holds the reply
	held := p.Forwarded(faultproxy.ToClient) == answered
	victim.cmd.Process.Kill()
	killedAt := time.Now()
	<-victim.done
	if !held {
		t.Logf("a reply reached replica %d before the kill (the delay began mid-reply)", hit)
	}
	time.Sleep(6 * time.Second) // its lease, the others' takeover, and 2 more epochs
	g.stop(t)

	grid := g.grid(t, hit, killedAt)
	t.Logf("replica %d killed mid-sync at %s\n%s", hit, killedAt.Format("15:04:05.000"), grid.table(killedAt.Unix()-2, g.lastFull()))
	c := grid.checkPool(row)
	grid.reportOver(t, c, "over max")
	if c.over > 0 {
		row.Note = noteOnce(row.Note, "over max")
	}
	if checked, missed := grid.checkTakeover(t, g.stopped); checked == 0 || missed > 0 {
		if checked == 0 {
			t.Errorf("no epoch after the lease of the killed replica to check")
		}
		row.Note = noteOnce(row.Note, "no takeover")
	}
}

package memstore_test

import (
	"fmt"
	"testing"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// liveRecord is what the replicas of a store did in one epoch: the tokens
// granted in all, and the max each replica had in force.
type liveRecord struct {
	granted int64
	max     map[string]int64
}

// watchLive advances the clock by steps sync intervals, draining every
// replica at each, and records each epoch.
func watchLive(p *replicas, steps int, epochs map[int64]*liveRecord) {
	for range steps {
		clear(p.kept)
		p.drain()
		for e, k := range p.kept {
			if epochs[e] == nil {
				epochs[e] = &liveRecord{max: map[string]int64{}}
			}
			epochs[e].granted += k
		}
		for id, r := range p.reps {
			s := r.l.Status()
			rec := epochs[s.Epoch]
			if rec == nil {
				rec = &liveRecord{max: map[string]int64{}}
				epochs[s.Epoch] = rec
			}
			rec.max[id] = s.Max
		}
		p.clk.Advance(ratelimit.DefaultSyncInterval)
	}
}

// TestUpdateSwitchesEveryReplicaAtOneEpoch runs three replicas of a flat
// limit of 300 on a memstore and changes it on one replica to 600, then on
// another to 150: every replica switches at the same epoch boundary, the
// switching epoch grants no more than the smaller limit, and the epochs
// around it grant exactly their limit.
func TestUpdateSwitchesEveryReplicaAtOneEpoch(t *testing.T) {
	cfg := ratelimit.Config{Max: 300, Min: 1}
	p := newReplicas(t, cfg)
	for _, id := range []string{"a", "b", "c"} {
		p.join(id)
	}
	epochs := map[int64]*liveRecord{}
	step := func(n int) { watchLive(p, n, epochs) }
	step(35) // agreed, at 300
	change := func(id string, max int64) int64 {
		c := cfg
		c.Max = max
		if err := p.reps[id].l.Update(c); err != nil {
			t.Fatal(err)
		}
		return p.clk.Now().Unix()
	}
	up := change("b", 600)
	step(40)
	down := change("c", 150)
	step(40)

	var seq []string
	for e := up - 1; e <= down+3; e++ {
		r := epochs[e]
		maxes := map[int64]bool{}
		for _, m := range r.max {
			maxes[m] = true
		}
		if len(maxes) != 1 || len(r.max) != 3 {
			t.Fatalf("epoch %d: the replicas had max %v; want one max on all three", e, r.max)
		}
		seq = append(seq, fmt.Sprintf("%d:%d", r.max["a"], r.granted))
	}
	// Update came 500ms into an epoch (35 steps): with a lead of a lease
	// (staleAfter, 2s) the change applies from the third epoch after it.
	want := "[300:300 300:300 300:300 300:300 600:300 600:600 600:600 600:600 150:150]"
	if fmt.Sprint(seq) != want {
		t.Errorf("max:granted per epoch from before the first change\n got %v\nwant %s", seq, want)
	}
}

// TestJoiningReplicaSetsTheLimit starts a fourth replica with another max:
// the last to start sets the vertex's limit, and the others follow it at
// one epoch.
func TestJoiningReplicaSetsTheLimit(t *testing.T) {
	p := newReplicas(t, ratelimit.Config{Max: 300, Min: 1})
	p.join("a")
	p.join("b")
	epochs := map[int64]*liveRecord{}
	watchLive(p, 30, epochs)
	p.cfg.Max = 400
	p.join("c")
	watchLive(p, 40, epochs)
	for id, r := range p.reps {
		if s := r.l.Status(); s.Max != 400 || s.Pool() != 400 || s.Replicas != 3 {
			t.Errorf("%s: max %d, pool %v among %d; want 400 among 3", id, s.Max, s.Pool(), s.Replicas)
		}
	}
}

// TestStoreThatLostTheLimit flushes the store under a running pool: the
// replicas offer the limit in force again, and a later change still
// reaches every replica.
func TestStoreThatLostTheLimit(t *testing.T) {
	cfg := ratelimit.Config{Max: 300, Min: 1}
	p := newReplicas(t, cfg)
	p.join("a")
	p.join("b")
	epochs := map[int64]*liveRecord{}
	watchLive(p, 30, epochs)
	up := cfg
	up.Max = 600
	if err := p.reps["a"].l.Update(up); err != nil {
		t.Fatal(err)
	}
	watchLive(p, 30, epochs)
	p.store.Flush()
	watchLive(p, 30, epochs)
	down := cfg
	down.Max = 150
	if err := p.reps["b"].l.Update(down); err != nil {
		t.Fatal(err)
	}
	watchLive(p, 30, epochs)
	for id, r := range p.reps {
		if s := r.l.Status(); s.Max != 150 || s.Pool() != 150 || s.Replicas != 2 {
			t.Errorf("%s: max %d, pool %v among %d; want 150 among 2", id, s.Max, s.Pool(), s.Replicas)
		}
	}
}

package ratelimit

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"

	"go.uber.org/zap"
)

// The rules of the quota, one by one: issueConfig's limit (20 to 400,
// relaxed, cut by 20%, hold 1% below the ceiling, probe after 2s, forget
// after 60s), the quota's state set by hand and an epoch of the manual
// clock's seconds, e, at store-clock nanoseconds e*epochNanos.

// newTestQuota returns the quota of a limiter of cfg without a store.
func newTestQuota(cfg Config) *quota {
	return &quota{cfg: newQuotaConfig(cfg.withDefaults(), false, false), log: zap.NewNop()}
}

// at returns the store-clock nanoseconds of ms milliseconds into epoch e.
func at(e, ms int64) int64 { return e*epochNanos + ms*int64(time.Millisecond) }

// A signal without a store plans one cut, from the next epoch, however
// many signals come in the epoch; a 429 teaches the pool as the ceiling, a
// 503 none.
func TestQuotaSignalPlansOneCut(t *testing.T) {
	for _, tt := range []struct {
		name  string
		teach bool
		want  cutPlan
	}{
		{"rate limited", true, cutPlan{ok: true, from: 11, pool: 80_000, ceiling: 100_000, epoch: 10}},
		{"unavailable", false, cutPlan{ok: true, from: 11, pool: 80_000, epoch: 10}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := issueConfig()
			q, r := newTestQuota(cfg), newRamp(cfg, 0)
			for _, ms := range []int64{250, 500, 900} {
				if q.signal(&r, at(10, ms), 100_000, tt.teach, 0, 0) {
					t.Fatal("a signal without a store asks for a sync")
				}
				if q.signals.planned != tt.want {
					t.Fatalf("after the signal at %dms: planned %+v; want %+v", ms, q.signals.planned, tt.want)
				}
			}
			if tt.teach && (q.signals.taught != 10 || q.signals.at != at(0, 250)) {
				t.Errorf("taught %d at %dns; want epoch 10 at 250ms", q.signals.taught, q.signals.at)
			}
		})
	}
}

// Under a learnt ceiling a signal at a pool above the one that passed the
// epoch before falls back to it; without a ceiling, or at the pool that
// passed, it cuts by CutPercentage.
func TestQuotaSignalFallsBackUnderACeiling(t *testing.T) {
	for _, tt := range []struct {
		name     string
		ceiling  bool
		passed   int64 // the pool of epoch 9, which passed
		wantPool int64
	}{
		{"no ceiling", false, 90_000, 80_000},
		{"under a ceiling", true, 90_000, 90_000},
		{"at the pool that passed", true, 100_000, 80_000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := issueConfig()
			q, r := newTestQuota(cfg), newRamp(cfg, 0)
			if tt.ceiling {
				q.learn(120_000, 0, 60_000, 5)
			}
			r.record(9, tt.passed, 0, 0)
			q.signal(&r, at(10, 100), 100_000, true, 0, 0)
			if p := q.signals.planned; p.pool != tt.wantPool || p.floor != tt.passed || p.ceiling != 100_000 {
				t.Errorf("planned %+v; want pool %d, floor %d, ceiling 100000", p, tt.wantPool, tt.passed)
			}
		})
	}
}

// With a store a signal is a report for the store, sent at once: the cut
// of the first signal of the epoch, and the latest pause asked for.
func TestQuotaSignalWithAStore(t *testing.T) {
	cfg := issueConfig()
	q, r := newTestQuota(cfg), newRamp(cfg, 0)
	q.cfg.shared = true
	if !q.signal(&r, at(10, 100), 100_000, true, at(12, 0), 200*time.Millisecond) {
		t.Fatal("no sync asked for")
	}
	if !q.signal(&r, at(10, 300), 90_000, true, at(13, 0), 200*time.Millisecond) {
		t.Fatal("no sync asked for the second pause")
	}
	want := share.Signal{Epoch: 10, Cut: true, Pool: 80_000, Ceiling: 100_000, PauseUntil: time.Unix(0, at(13, 0)),
		Lead: 200 * time.Millisecond}
	if q.signals.pending == nil || !reflect.DeepEqual(*q.signals.pending, want) {
		t.Fatalf("pending %+v; want %+v", q.signals.pending, want)
	}
	if q.signals.planned.ok {
		t.Error("a replica of a store planned a cut of its own")
	}
	// A signal that neither cuts nor pauses is not sent.
	q.signals.pending, q.cfg.cutPct = nil, 0
	if q.signal(&r, at(11, 0), 80_000, true, 0, 0) || q.signals.pending != nil {
		t.Errorf("a signal with nothing to report: pending %+v", q.signals.pending)
	}
}

// A cut applied makes its pool the ramp's and learns its ceiling: the pool
// climbs back at the mode's slope, capped ever closer to the hold.
func TestQuotaApplyCut(t *testing.T) {
	cfg := issueConfig()
	q, r := newTestQuota(cfg), newRamp(cfg, 0)
	q.signals.planned = cutPlan{ok: true, from: 11, pool: 80_000, ceiling: 100_000, epoch: 10}
	if !q.cutDue(11) || q.cutDue(10) {
		t.Fatal("the cut is not due from epoch 11")
	}
	q.applyCut(&r, 11)
	if q.signals.planned.ok || q.signals.cuts.Load() != 1 {
		t.Errorf("planned %+v, %d cuts; want none planned, one cut", q.signals.planned, q.signals.cuts.Load())
	}
	if want := (ceiling{known: true, pool: 100_000, cut: 80_000, from: 11}); q.ceil != want {
		t.Errorf("ceiling %+v; want %+v", q.ceil, want)
	}
	if p := q.poolAt(&r, 11); p != 80_000 {
		t.Errorf("pool of the cut's epoch %d; want 80000", p)
	}
	r.record(11, 80_000, 80, 80)
	// The slope would give 118 tokens; the cap is the hold, 99, less seven
	// eighths of the 19 tokens left to it.
	if p := q.poolAt(&r, 12); p != 99_000-2_375 {
		t.Errorf("pool of the epoch after %d; want %d", p, 99_000-2_375)
	}
}

// From the hold, a probe climbs above it by more than the mode's slope
// when the probe asks for more.
func TestQuotaProbeClimbsFromTheHold(t *testing.T) {
	cfg := issueConfig()
	cfg.RampUpDuration = 380 * time.Second // a slope of one token
	q, r := newTestQuota(cfg), newRamp(cfg, 0)
	q.learn(150_000, 0, 120_000, 10)
	q.recordHeld(12, 149_000) // the first epoch at the hold
	q.recordHeld(13, 150_000)
	r.record(13, 150_000, 150, 150)
	if !q.probing(14) {
		t.Fatal("not probing at epoch 14")
	}
	// The second probe: 5 gaps above the hold of 149, where the slope
	// gives 151.
	if p := q.poolAt(&r, 14); p != 154_000 {
		t.Errorf("pool of the second probe %d; want 154000", p)
	}
}

// The pacing trial begins at the replica's first own signal, and is judged
// by the epochs after it.
func TestQuotaPacingTrial(t *testing.T) {
	begun := pacingTrial{pace: AdaptivePacing, base: 150_000, burst: 120, at: 1, from: 10, until: 20, started: true, in: true}
	for _, tt := range []struct {
		name      string
		set       func(q *quota)
		cur       *epochState // the epoch that ends after the signal's
		accepted  int64
		wantPace  time.Duration
		wantIn    bool
		wantBurst int64 // the bucket's, tokens
	}{
		{"kept when the refused pool passes paced", nil, &epochState{epoch: 12, pool: 150_000}, 150, AdaptivePacing, false, 120},
		{"on while below the refused pool", nil, &epochState{epoch: 12, pool: 140_000}, 140, AdaptivePacing, true, 0},
		{"on while paused", nil, &epochState{epoch: 12, pool: 150_000, heldAny: true}, 150, AdaptivePacing, true, 0},
		{"ended by a refusal paced", func(q *quota) { q.signals.taught, q.signals.last = 12, 12 }, &epochState{epoch: 12, pool: 150_000}, 150, 0, false, 0},
		{"ended after its epochs", nil, &epochState{epoch: 20, pool: 140_000}, 140, 0, false, 0},
		{"never with Config.Pacing", func(q *quota) { q.cfg.pacing = 50 * time.Millisecond; q.trial = pacingTrial{} }, &epochState{epoch: 12, pool: 150_000}, 150, 50 * time.Millisecond, false, 0},
		{"never without pacing", func(q *quota) { q.cfg.unpaced = true; q.trial = pacingTrial{} }, &epochState{epoch: 12, pool: 150_000}, 150, 0, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := newTestQuota(issueConfig())
			q.signals.taught, q.signals.last = 10, 10
			q.tryPacing(&epochState{epoch: 10, pool: 150_000}, 120)
			if q.trial != begun || q.pacing() != AdaptivePacing {
				t.Fatalf("trial %+v, pacing %v; want %+v", q.trial, q.pacing(), begun)
			}
			if tt.set != nil {
				tt.set(q)
			}
			q.tryPacing(tt.cur, tt.accepted)
			if q.pacing() != tt.wantPace || q.trial.in != tt.wantIn || q.seen.bucket.burst != tt.wantBurst {
				t.Errorf("pacing %v, in %v, burst %d; want %v, %v, %d", q.pacing(), q.trial.in, q.seen.bucket.burst,
					tt.wantPace, tt.wantIn, tt.wantBurst)
			}
		})
	}
}

// At the end of the epoch of its own signal, the replica's planned cut
// learns what the downstream accepted in it.
func TestQuotaLearnsWhatWasAccepted(t *testing.T) {
	plan := cutPlan{ok: true, from: 11, pool: 120_000, ceiling: 150_000, floor: 140_000, epoch: 10}
	for _, tt := range []struct {
		name      string
		set       func(q *quota)
		probe     bool
		accepted  int64
		want      cutPlan // its pool, ceiling and floor
		wantTrial int64
	}{
		// A fixed window: the ceiling one above what it accepted, the cut
		// to that at most, to it at once for a probe.
		{"window", nil, false, 130, cutPlan{pool: 120_000, ceiling: 131_000, floor: 130_000}, 0},
		{"window, a probe", nil, true, 130, cutPlan{pool: 130_000, ceiling: 131_000, floor: 130_000}, 0},
		{"window, more than the ceiling", nil, false, 200, cutPlan{pool: 120_000, ceiling: 150_000, floor: 140_000}, 0},
		// The first signal tries pacing: the refused pool again, no ceiling.
		{"trial", func(q *quota) { q.trial = pacingTrial{} }, false, 130, cutPlan{pool: 150_000}, 150_000},
		// Paced, lagging: the average of the clean epochs before, 120.
		{"lag", func(q *quota) {
			q.cfg.pacing = 100 * time.Millisecond
			q.seen.recent, q.seen.clean = [lagWindow]int64{120, 120, 120, 120, 120}, 5
		}, false, 100, cutPlan{pool: 120_000, ceiling: 121_000}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := newTestQuota(issueConfig())
			q.accepting.Store(true)
			q.trial.started = true
			q.signals.taught, q.signals.last = 10, 10
			q.signals.planned = plan
			q.signals.planned.probe = tt.probe
			if tt.set != nil {
				tt.set(q)
			}
			cur := &epochState{epoch: 10, pool: 150_000, eligible: true}
			cur.accepted.Store(tt.accepted)
			q.ended(cur)
			p := q.signals.planned
			if p.pool != tt.want.pool || p.ceiling != tt.want.ceiling || p.floor != tt.want.floor || q.trialPool != tt.wantTrial {
				t.Errorf("planned pool %d, ceiling %d, floor %d, trial pool %d; want %d, %d, %d, %d", p.pool, p.ceiling, p.floor,
					q.trialPool, tt.want.pool, tt.want.ceiling, tt.want.floor, tt.wantTrial)
			}
		})
	}
}

// Paced, with the burst of a token bucket known, a drain tells the
// bucket's rate: one of 150 a second and a burst of 50, full, drained by
// 160 in each of three epochs and 170 in the fourth, which it refused at
// its end.
func TestQuotaLearnBucket(t *testing.T) {
	drained := drain{run: []int64{160, 160, 160}, a: 170, at: 1}
	plan := cutPlan{ok: true, from: 11, pool: 136_000, ceiling: 170_000, epoch: 10}
	for _, tt := range []struct {
		name      string
		burst     int64
		d         drain
		wantOK    bool
		want      cutPlan
		wantBurst int64
	}{
		// The rate less 1% and 2 tokens over the drain's 4 seconds; the
		// cut to the hold below it.
		{"a drain", 50, drained, true, cutPlan{pool: 148_000, ceiling: 150_000 - 875, floor: 148_000}, 50},
		{"no burst known", 0, drained, false, plan, 0},
		{"too short a drain", 50, drain{run: []int64{160}, a: 170, at: 1}, true, plan, 50},
		{"no rate explains it", 50, drain{run: []int64{0, 400, 400}, a: 400, at: 0.1}, true, plan, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := newTestQuota(issueConfig())
			q.seen.bucket = bucketSeen{burst: tt.burst}
			p := plan
			if ok := q.learnBucket(&p, tt.d, false); ok != tt.wantOK {
				t.Fatalf("learnBucket = %v; want %v", ok, tt.wantOK)
			}
			if p.pool != tt.want.pool || p.ceiling != tt.want.ceiling || p.floor != tt.want.floor || q.seen.bucket.burst != tt.wantBurst {
				t.Errorf("planned pool %d, ceiling %d, floor %d, burst %d; want %d, %d, %d, %d", p.pool, p.ceiling, p.floor,
					q.seen.bucket.burst, tt.want.pool, tt.want.ceiling, tt.want.floor, tt.wantBurst)
			}
		})
	}
}

// What the store says throttle signals did: a cut not known yet is planned,
// but at the first sync one that took effect already is the pool's past;
// a pause is joined.
func TestQuotaAdapt(t *testing.T) {
	cut := share.Adaptation{From: 12, Pool: 80_000, Ceiling: 100_000, Floor: 90_000}
	for _, tt := range []struct {
		name      string
		a         share.Adaptation
		stamp     int64
		first     bool
		adaptive  bool
		wantPlan  cutPlan
		wantPause int64
	}{
		{"a cut", cut, 11, false, true, cutPlan{ok: true, from: 12, pool: 80_000, ceiling: 100_000, floor: 90_000}, 0},
		{"a cut to come, first sync", cut, 11, true, true, cutPlan{ok: true, from: 12, pool: 80_000, ceiling: 100_000, floor: 90_000}, 0},
		{"a cut past, first sync", cut, 12, true, true, cutPlan{}, 0},
		{"a pause", share.Adaptation{PauseUntil: time.Unix(0, at(13, 0))}, 11, false, true, cutPlan{}, at(13, 0)},
		{"not adaptive", cut, 11, false, false, cutPlan{}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := newTestQuota(issueConfig())
			q.cfg.shared, q.cfg.adaptive = true, tt.adaptive
			if got := q.adapt(tt.a, tt.stamp, tt.first); got != tt.wantPause {
				t.Errorf("pause until %d; want %d", got, tt.wantPause)
			}
			if q.signals.planned != tt.wantPlan {
				t.Errorf("planned %+v; want %+v", q.signals.planned, tt.wantPlan)
			}
		})
	}
}

// A report whose sync failed is merged with the one made since: the
// earlier cut and the later pause.
func TestQuotaUnsent(t *testing.T) {
	q := newTestQuota(issueConfig())
	q.signals.pending = &share.Signal{Epoch: 12, Cut: true, Pool: 70_000, PauseUntil: time.Unix(0, at(12, 0))}
	q.unsent(&share.Signal{Epoch: 11, Cut: true, Pool: 80_000, Ceiling: 100_000, PauseUntil: time.Unix(0, at(14, 0))})
	want := share.Signal{Epoch: 11, Cut: true, Pool: 80_000, Ceiling: 100_000, PauseUntil: time.Unix(0, at(14, 0))}
	if !reflect.DeepEqual(*q.signals.pending, want) {
		t.Errorf("pending %+v; want %+v", *q.signals.pending, want)
	}
}

// A live change of the limit keeps the ceiling and takes the new bounds.
func TestQuotaRelimit(t *testing.T) {
	cfg := issueConfig()
	q := newTestQuota(cfg)
	q.learn(150_000, 0, 120_000, 10)
	q.trialPool = 150_000
	cfg.Min, cfg.Max = 30, 300
	q.relimit(cfg)
	if !q.ceil.known || q.ceil.pool != 150_000 || q.cfg.min != 30_000 || q.cfg.max != 300_000 || q.trialPool != 0 {
		t.Errorf("after a change: ceiling %+v, bounds %d-%d, trial pool %d", q.ceil, q.cfg.min, q.cfg.max, q.trialPool)
	}
}

// On the manual clock: what the downstream accepted in the epoch of a
// signal is the quota the next epoch's pool is cut to, one token below the
// ceiling it teaches.
func TestAcceptedCutsToTheWindowAtOnce(t *testing.T) {
	cfg := issueConfig()
	cfg.RampUpDuration = 0
	tl := newTestLimiter(t, cfg, WithoutPacing())
	if got := takeAll(tl); got != 400 {
		t.Fatalf("took %d; want 400", got)
	}
	tl.Accepted(150)
	tl.Signal(0)
	tl.clk.Advance(time.Second)
	if s := tl.Status(); s.PoolMilli != 150_000 || s.CeilingMilli != 151_000 || s.Cuts != 1 {
		t.Errorf("pool %d, ceiling %d, %d cuts; want 150000, 151000, 1", s.PoolMilli, s.CeilingMilli, s.Cuts)
	}
}

package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
)

// steppedClock is the wall clock plus an offset that the test steps, as
// when a host's clock is set while the replica runs. Its readings carry the
// offset in their monotonic part too, so the limiter sees the step whichever
// part it reads.
type steppedClock struct{ offset atomic.Int64 }

var _ clock.Clock = (*steppedClock)(nil)

func (c *steppedClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *steppedClock) AfterFunc(d time.Duration, f func()) clock.Timer { return time.AfterFunc(d, f) }

func (c *steppedClock) step(d time.Duration) { c.offset.Add(int64(d)) }

// clockCases run three limiters sharing 300 a second through a real
// Redis in this process, each taken from in a loop by a goroutine of its
// own, and steps the clock of one of them 5 s forward or back mid-run, under
// each onStoreFailure policy. No epoch may grant more than 300: neither by
// the epochs the limiters report (EpochSummary.Granted) nor by the wall
// second in which the grants were handed out.
func clockCases() []tokenFaultCase {
	var cases []tokenFaultCase
	for _, step := range []time.Duration{5 * time.Second, -5 * time.Second} {
		for _, policy := range []ratelimit.StoreFailurePolicy{ratelimit.Pause, ratelimit.LastKnown} {
			cases = append(cases, tokenFaultCase{
				name: fmt.Sprintf("clock/%+v/%s", step, policy),
				row: faultRow{Fault: fmt.Sprintf("one replica's clock stepped %+v", step), Policy: policy.String(),
					Holds: "no epoch over max, by the epochs reported and by the wall second of each grant"},
				run: func(t *testing.T, round int, row *faultRow) { clockStepRun(t, round, row, step, policy) },
			})
		}
	}
	return cases
}

// stepPhases are the moments of the epoch at which the clock is stepped, by
// round: just before the epoch's end first, where the limiter's tick can
// come before the sync that measures the store clock again.
var stepPhases = []time.Duration{980 * time.Millisecond, 450 * time.Millisecond, 995 * time.Millisecond, 700 * time.Millisecond}

// handout is one grant as its taker saw it.
type handout struct {
	tokens int
	epoch  int64     // the grant's epoch
	at     time.Time // when Acquire returned it, on the wall clock
}

// wallEpoch is the second in which a grant was spent: its own epoch when
// it was handed out then (with a little slack at the boundaries), else the
// wall second it was handed out in.
func (h handout) wallEpoch() int64 {
	// Far less than the step, far more than a taker's delay between
	// Acquire's return and its reading of the clock on a loaded machine.
	const slack = 300 * time.Millisecond
	from, to := time.Unix(h.epoch, 0).Add(-slack), time.Unix(h.epoch+1, 0).Add(slack)
	if h.at.Before(from) || !h.at.Before(to) {
		return h.at.Unix()
	}
	return h.epoch
}

// lockedLog is a log that a limiter writes and the test reads.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) Sync() error { return nil }

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// logger is a JSON logger at debug level into l, shaped as the vertex's.
func (l *lockedLog) logger(replica int) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.TimeEncoderOfLayout(time.RFC3339Nano)
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), l, zap.DebugLevel)
	return zap.New(core).With(zap.Int("replica", replica))
}

// clockStepRun starts the three limiters, steps the clock of one of them,
// and checks the epochs.
func clockStepRun(t *testing.T, round int, row *faultRow, step time.Duration, policy ratelimit.StoreFailurePolicy) {
	srv := redistest.Start(t, redistest.Options{})
	cfg := ratelimit.DefaultConfig(tokenMax)
	cfg.Min, cfg.RampUpDuration, cfg.OnStoreFailure = tokenMax, 0, policy
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	clocks := make([]*steppedClock, tokenReplicas)
	logs := make([]*lockedLog, tokenReplicas)
	limiters := make([]*ratelimit.Limiter, tokenReplicas)
	handouts := make([][]handout, tokenReplicas)
	var takers sync.WaitGroup
	for i := range tokenReplicas {
		clocks[i], logs[i] = &steppedClock{}, &lockedLog{}
		store, err := redisstore.New(srv.Client(t), "clockstep", redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		log := logs[i].logger(i)
		l, err := ratelimit.New(cfg, ratelimit.WithStore(store), ratelimit.WithClock(clocks[i]),
			ratelimit.WithReplicaID(fmt.Sprintf("clockstep-%d", i)), ratelimit.WithLogger(log),
			ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) {
				log.Debug("epoch", zap.Int64("epoch", s.Epoch), zap.Float64("pool", float64(s.PoolMilli)/1000),
					zap.Int64("share", s.Share), zap.Int64("granted", s.Granted), zap.Int("poolSize", s.Replicas),
					zap.Int("rank", s.Rank), zap.Bool("eligible", s.Eligible))
			}))
		if err != nil {
			t.Fatal(err)
		}
		limiters[i] = l
		takers.Add(1)
		go func() {
			defer takers.Done()
			for ctx.Err() == nil {
				g, err := l.Acquire(ctx, 50)
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, ratelimit.ErrRateLimited) {
						t.Errorf("limiter %d: Acquire: %v", i, err)
						return
					}
					continue
				}
				if g.Tokens > 0 {
					handouts[i] = append(handouts[i], handout{tokens: g.Tokens, epoch: g.Epoch(), at: time.Now()})
				}
			}
		}()
	}
	grid := func(hit int, faultAt time.Time) *epochGrid {
		var ls []string
		for _, l := range logs {
			ls = append(ls, l.String())
		}
		return newEpochGrid(t, ls, hit, faultAt)
	}
	agreed := false
	for range 100 { // 20s
		if g := grid(-1, time.Time{}); slices.ContainsFunc(g.epochs, func(e int64) bool { return g.agreed(e, tokenReplicas) }) {
			agreed = true
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !agreed {
		t.Fatalf("the limiters did not agree on a pool of %d within 20s", tokenReplicas)
	}
	time.Sleep(2 * time.Second) // steady state before the fault
	hit := round % tokenReplicas
	steppedAt := untilPhase(stepPhases[round%len(stepPhases)])
	clocks[hit].step(step)
	time.Sleep(7 * time.Second) // past the step back and 2 more epochs
	cancel()
	for _, l := range limiters {
		l.Close(context.Background())
	}
	takers.Wait()
	stopped := time.Now()

	g := grid(hit, steppedAt)
	t.Logf("limiter %d's clock stepped %+v at %s\n%s", hit, step, steppedAt.Format("15:04:05.000"),
		g.table(steppedAt.Unix()-2, stopped.Unix()-1))
	c := g.checkPool(row)
	g.reportOver(t, c, "over max by the epochs reported")
	if c.over > 0 {
		row.Note = noteOnce(row.Note, "over max by the epochs reported")
	}

	// The wall seconds: the grants as they were spent.
	wall := map[int64]int64{}
	for _, hs := range handouts {
		for _, h := range hs {
			wall[h.wallEpoch()] += int64(h.tokens)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(wall)) {
		if wall[s] <= tokenMax {
			continue
		}
		row.OverMax++
		if worse(fmt.Sprintf("%d/%d", wall[s], tokenMax), row.Worst) {
			row.Worst = fmt.Sprintf("%d/%d", wall[s], tokenMax)
		}
		row.Note = noteOnce(row.Note, "over max by the wall second")
		t.Errorf("over max by the wall second: second %d (%s the step) had %d tokens handed out, max %d\n%s%s",
			s, g.since(s), wall[s], tokenMax, describeHandouts(handouts, s, hit), g.describe(s))
	}
}

// describeHandouts lists the grants each limiter handed out in wall second
// s, by the epoch they were granted from.
func describeHandouts(handouts [][]handout, s int64, hit int) string {
	var b strings.Builder
	for i, hs := range handouts {
		by := map[int64]int{}
		for _, h := range hs {
			if h.wallEpoch() == s {
				by[h.epoch] += h.tokens
			}
		}
		mark := ""
		if i == hit {
			mark = " (clock stepped)"
		}
		fmt.Fprintf(&b, "  limiter %d%s handed out in it:", i, mark)
		for _, e := range slices.Sorted(maps.Keys(by)) {
			fmt.Fprintf(&b, " %d of epoch %d;", by[e], e)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

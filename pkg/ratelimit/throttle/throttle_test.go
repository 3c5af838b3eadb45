package throttle

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

var t0 = time.Unix(1_700_000_000, 0)

// epochLimiter grants share tokens an epoch, a second of clk, and counts
// the tokens kept in each epoch. Its first stale grants are of the epoch
// before the current one, as a limiter's fast path grants after a freeze.
type epochLimiter struct {
	clk   *clock.Manual
	share int

	mu    sync.Mutex
	epoch int64
	left  int
	stale int
	kept  map[int64]int
}

func newEpochLimiter(clk *clock.Manual, share int) *epochLimiter {
	return &epochLimiter{clk: clk, share: share, epoch: clk.Now().Unix(), left: share, kept: map[int64]int{}}
}

func (l *epochLimiter) roll() {
	if e := l.clk.Now().Unix(); e != l.epoch {
		l.epoch, l.left = e, l.share
	}
}

func (l *epochLimiter) TryAcquire(n int) (ratelimit.Grant, ratelimit.Reason) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stale > 0 {
		k := min(n, l.stale)
		l.stale -= k
		return ratelimit.GrantOf(k, l.clk.Now().Unix()-1), ratelimit.NotThrottled
	}
	l.roll()
	k := min(n, l.left)
	l.left -= k
	if k == 0 {
		return ratelimit.Grant{}, ratelimit.ReasonRateLimited
	}
	return ratelimit.GrantOf(k, l.epoch), ratelimit.NotThrottled
}

func (l *epochLimiter) Acquire(ctx context.Context, n int) (ratelimit.Grant, error) {
	for {
		if g, _ := l.TryAcquire(n); g.Tokens > 0 {
			return g, nil
		}
		_, left := l.Epoch()
		if !clock.Sleep(ctx, l.clk, left) {
			return ratelimit.Grant{}, ctx.Err()
		}
	}
}

func (l *epochLimiter) Settle(g ratelimit.Grant, used int) ratelimit.Grant {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll()
	if g.Epoch() == l.epoch {
		l.left += g.Tokens - used
	}
	l.kept[g.Epoch()] += used
	return ratelimit.GrantOf(used, g.Epoch())
}

func (l *epochLimiter) Epoch() (int64, time.Duration) {
	now := l.clk.Now()
	return now.Unix(), time.Unix(now.Unix()+1, 0).Sub(now)
}

func (l *epochLimiter) FreshAfter(d, _ time.Duration) (time.Duration, int64) { return d, 0 }

// keptIn returns the tokens kept in each epoch, from t0's on, up to n.
func (l *epochLimiter) keptIn(n int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int, n)
	for i := range out {
		out[i] = l.kept[t0.Unix()+int64(i)]
	}
	return out
}

// pauses records the reasons a throttle waited for.
type pauses struct {
	mu      sync.Mutex
	reasons []ratelimit.Reason
	active  int
}

func (p *pauses) Begin(r ratelimit.Reason) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reasons = append(p.reasons, r)
	p.active++
}

func (p *pauses) End(ratelimit.Reason) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active--
}

// env returns an Env on clk whose counters and pauses the test reads.
func env(clk clock.Clock) (Env, *pauses) {
	c := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "c"}) }
	p := &pauses{}
	return Env{Pauses: p, Clock: clk, Metrics: Metrics{Granted: c(), Deposited: c(), Retaken: c(),
		Bytes: c(), BytesDeposited: c(), CostErrors: c()}}, p
}

// batchOf returns n messages of size bytes each.
func batchOf(n, size int) []isb.ReadMessage {
	b := make([]isb.ReadMessage, n)
	for i := range b {
		b[i].Value = make([]byte, size)
	}
	return b
}

// waitTimers waits until clk has n timers pending.
func waitTimers(t *testing.T, clk *clock.Manual, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, n); err != nil {
		t.Fatalf("%d timers pending; want %d", clk.Pending(), n)
	}
}

// async runs f and returns a channel closed when it returned.
func async(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

func wait(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the throttle did not return")
	}
}

// TestNil: a nil throttle grants every request in full, in epoch 0, and
// pays nothing after a read.
func TestNil(t *testing.T) {
	th := (*Throttle)(nil).With(Env{})
	g, err := th.acquire(context.Background(), 7)
	if err != nil || g.Tokens != 7 || th.stale(g) {
		t.Fatalf("acquire(7) = %v, %v (stale %v); want 7 fresh tokens", g, err, th.stale(g))
	}
	if tok, ok := th.Pay(context.Background(), Tokens{grant: g}, batchOf(7, 10)); !ok || tok.Refundable() || tok.N() != 7 {
		t.Fatalf("Pay = %v, %v; want 7 tokens, nothing paid", tok, ok)
	}
}

// TestPayIsAllOfOneEpoch: a batch's bytes are taken all of one epoch: an
// epoch with fewer left than the batch's 50 gives back what it granted and
// the throttle waits for the next, paused as rate_limited, which grants all
// 50.
func TestPayIsAllOfOneEpoch(t *testing.T) {
	clk := clock.NewManual(t0)
	bytes := newEpochLimiter(clk, 100)
	g, _ := bytes.TryAcquire(70)
	bytes.Settle(g, 70) // 30 left
	e, p := env(clk)
	th := (&Throttle{Bytes: bytes}).With(e)
	done := async(func() {
		if _, ok := th.Pay(context.Background(), Tokens{grant: ratelimit.GrantOf(5, t0.Unix())}, batchOf(5, 10)); !ok {
			t.Error("Pay reported false")
		}
	})
	waitTimers(t, clk, 1)
	clk.Advance(time.Second)
	wait(t, done)
	if got, want := bytes.keptIn(2), []int{70, 50}; !slices.Equal(got, want) {
		t.Fatalf("bytes kept per epoch %v; want %v", got, want)
	}
	if !slices.Equal(p.reasons, []ratelimit.Reason{ratelimit.ReasonRateLimited}) || p.active != 0 {
		t.Fatalf("paused for %v, %d active; want rate_limited once, ended", p.reasons, p.active)
	}
	if n := testutil.ToFloat64(e.Metrics.Bytes); n != 50 {
		t.Fatalf("bytes counted %v; want 50", n)
	}
}

// TestPayOverEpochs: a batch bigger than an epoch's share collects it over
// as many epochs as it takes, each granting no more than its share.
func TestPayOverEpochs(t *testing.T) {
	clk := clock.NewManual(t0)
	bytes := newEpochLimiter(clk, 20)
	e, _ := env(clk)
	th := (&Throttle{Bytes: bytes}).With(e)
	done := async(func() { th.Pay(context.Background(), Tokens{grant: ratelimit.GrantOf(5, t0.Unix())}, batchOf(5, 10)) })
	for range 3 {
		waitTimers(t, clk, 1)
		clk.Advance(time.Second)
	}
	wait(t, done)
	if got, want := bytes.keptIn(4), []int{0, 20, 20, 10}; !slices.Equal(got, want) {
		t.Fatalf("bytes kept per epoch %v; want %v", got, want)
	}
}

// TestPayCost: messages that cost more than a token take the rest from
// the message limit; a batch that costs less gives its read's tokens back.
func TestPayCost(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cost        int
		kept, extra int
	}{
		{"more", 3, 4, 8},
		{"less", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			lim := newEpochLimiter(clk, 100)
			e, _ := env(clk)
			th := (&Throttle{Limiter: lim, Cost: func(*isb.Message) (int, error) { return tc.cost, nil }}).With(e)
			tok, _ := th.Take(context.Background(), 4)
			tok, ok := th.Pay(context.Background(), tok, batchOf(4, 1))
			if !ok || tok.N() != tc.kept || tok.paid.cost.Tokens != tc.extra {
				t.Fatalf("Pay = %d read tokens, %d extra, %v; want %d, %d", tok.N(), tok.paid.cost.Tokens, ok, tc.kept, tc.extra)
			}
		})
	}
}

// TestRenewRefusesAStaleGrant: a grant of an epoch that has ended, as a
// limiter's fast path may make after a freeze, is given back and asked for
// again StaleTokenPause later: renew returns the current epoch's tokens.
func TestRenewRefusesAStaleGrant(t *testing.T) {
	clk := clock.NewManual(t0)
	lim := newEpochLimiter(clk, 100)
	lim.stale = 5
	e, _ := env(clk)
	th := (&Throttle{Limiter: lim}).With(e)
	var g ratelimit.Grant
	done := async(func() { g, _ = th.renew(context.Background(), 5, true) })
	waitTimers(t, clk, 1)
	clk.Advance(StaleTokenPause)
	wait(t, done)
	if g.Tokens != 5 || g.Epoch() != t0.Unix() {
		t.Fatalf("renew = %d tokens of epoch %d; want 5 of %d", g.Tokens, g.Epoch(), t0.Unix())
	}
	if n := testutil.ToFloat64(e.Metrics.Retaken); n != 5 {
		t.Fatalf("retaken %v; want 5", n)
	}
}

// TestSendLateBatchInParts: a batch whose read returned in a later epoch
// than its grant goes on with that epoch's tokens, in parts as they come,
// never on the grant it was read with.
func TestSendLateBatchInParts(t *testing.T) {
	clk := clock.NewManual(t0)
	lim := newEpochLimiter(clk, 3)
	e, _ := env(clk)
	th := (&Throttle{Limiter: lim}).With(e)
	tok, _ := th.Take(context.Background(), 3)
	clk.Advance(time.Second) // the read returns in the next epoch
	type part struct {
		n     int
		epoch int64
	}
	var parts []part
	var unsent []isb.ReadMessage
	done := async(func() {
		unsent = th.Send(context.Background(), tok, batchOf(5, 1), func(tok Tokens, b []isb.ReadMessage) {
			parts = append(parts, part{len(b), tok.Grant().Epoch()})
		})
	})
	waitTimers(t, clk, 1)
	clk.Advance(time.Second)
	wait(t, done)
	want := []part{{3, t0.Unix() + 1}, {2, t0.Unix() + 2}}
	if !slices.Equal(parts, want) || len(unsent) != 0 {
		t.Fatalf("parts %v, %d unsent; want %v, none", parts, len(unsent), want)
	}
	if got := lim.keptIn(3); !slices.Equal(got, []int{0, 3, 2}) {
		t.Fatalf("kept per epoch %v; want none of the read's epoch", got)
	}
}

// TestSendUnsent: a batch that cannot have tokens before hard ends comes
// back unsent.
func TestSendUnsent(t *testing.T) {
	clk := clock.NewManual(t0)
	lim := newEpochLimiter(clk, 0)
	e, _ := env(clk)
	th := (&Throttle{Limiter: lim}).With(e)
	hard, cancel := context.WithCancel(context.Background())
	var unsent []isb.ReadMessage
	done := async(func() {
		unsent = th.Send(hard, Tokens{grant: ratelimit.GrantOf(2, t0.Unix()-1)}, batchOf(2, 1), func(Tokens, []isb.ReadMessage) {
			t.Error("sent without tokens")
		})
	})
	waitTimers(t, clk, 1)
	cancel()
	wait(t, done)
	if len(unsent) != 2 {
		t.Fatalf("%d unsent; want 2", len(unsent))
	}
}

// TestFreshen: a write's grant of the current epoch is left as it is; one
// of an epoch that has ended is renewed for the messages written, kept and
// counted as retaken, and so are the bytes the batch paid.
func TestFreshen(t *testing.T) {
	clk := clock.NewManual(t0)
	lim, bytes := newEpochLimiter(clk, 100), newEpochLimiter(clk, 1000)
	e, _ := env(clk)
	th := (&Throttle{Limiter: lim, Bytes: bytes}).With(e)
	tok, _ := th.Take(context.Background(), 4)
	tok, _ = th.Pay(context.Background(), tok, batchOf(4, 10))
	var sent Tokens
	th.Send(context.Background(), tok, batchOf(4, 10), func(tok Tokens, _ []isb.ReadMessage) { sent = tok })
	before := sent.grant
	if !sent.Freshen(context.Background(), 4) || sent.grant != before {
		t.Fatalf("Freshen of a current grant changed it: %v; want %v", sent.grant, before)
	}
	clk.Advance(time.Second)
	if !sent.Freshen(context.Background(), 4) || sent.grant.Epoch() != t0.Unix()+1 || sent.grant.Tokens != 4 {
		g := sent.grant
		t.Fatalf("Freshen of a stale grant = %d tokens of %d; want 4 of %d", g.Tokens, g.Epoch(), t0.Unix()+1)
	}
	if got := lim.keptIn(2); !slices.Equal(got, []int{4, 4}) {
		t.Fatalf("message tokens kept per epoch %v; want 4 in each", got)
	}
	if got := bytes.keptIn(2); !slices.Equal(got, []int{40, 40}) {
		t.Fatalf("bytes kept per epoch %v; want 40 in each", got)
	}
	if n := testutil.ToFloat64(e.Metrics.Retaken); n != 4 {
		t.Fatalf("retaken %v; want 4", n)
	}
}

// TestTakeGroups: a read takes no more than the group with the fewest
// tokens grants, and gives the rest of the vertex's tokens back.
func TestTakeGroups(t *testing.T) {
	clk := clock.NewManual(t0)
	lim, grp := newEpochLimiter(clk, 100), newEpochLimiter(clk, 3)
	e, _ := env(clk)
	th := (&Throttle{Limiter: lim, Groups: []Limiter{grp}}).With(e)
	tok, _ := th.Take(context.Background(), 10)
	if groups := tok.paid.groups; tok.N() != 3 || len(groups) != 1 || groups[0].Tokens != 3 {
		t.Fatalf("Take = %d tokens, groups %v; want 3 of each", tok.N(), groups)
	}
}

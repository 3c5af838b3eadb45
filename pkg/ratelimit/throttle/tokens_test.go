package throttle

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// tokensRig is a throttle on real limiters and a manual clock.
type tokensRig struct {
	clk   *clock.Manual
	lim   *grants // messages
	bytes *grants // payload bytes, when set
	grp   *grants // a shared limit, when set
	th    *Throttle
	e     Env
}

// rigOpts are what a tokensRig limits besides messages.
type rigOpts struct {
	bytes, group int64                           // limits, 0 for none
	cost         func(*isb.Message) (int, error) // nil for a token a message
}

func newTokens(t *testing.T, max int64, o rigOpts) *tokensRig {
	t.Helper()
	clk := clock.NewManual(t0)
	r := &tokensRig{clk: clk, lim: newGrants(t, clk, max)}
	th := &Throttle{Limiter: r.lim, Cost: o.cost}
	if o.bytes > 0 {
		r.bytes = newGrants(t, clk, o.bytes)
		th.Bytes = r.bytes
	}
	if o.group > 0 {
		r.grp = newGrants(t, clk, o.group)
		th.Groups = []Limiter{r.grp}
	}
	r.e, _ = env(clk)
	r.th = th.With(r.e)
	return r
}

// sent takes tokens for a read of batch, pays for it and sends it on, as
// a forwarder does, and returns the tokens it went on with.
func (r *tokensRig) sent(t *testing.T, batch []isb.ReadMessage) Tokens {
	t.Helper()
	ctx := context.Background()
	tok, err := r.th.Take(ctx, len(batch))
	if err != nil || tok.N() != len(batch) {
		t.Fatalf("Take(%d) = %d tokens, %v", len(batch), tok.N(), err)
	}
	tok, ok := r.th.Pay(ctx, tok, batch)
	if !ok {
		t.Fatal("Pay reported false")
	}
	var out Tokens
	parts := 0
	r.th.Send(ctx, tok, batch, func(tok Tokens, _ []isb.ReadMessage) { out, parts = tok, parts+1 })
	if parts != 1 {
		t.Fatalf("sent in %d parts; want 1", parts)
	}
	return out
}

// use keeps n tokens of g's current epoch, as another batch would.
func use(t *testing.T, g *grants, n int) {
	t.Helper()
	got, _ := g.TryAcquire(n)
	if got.Tokens != n {
		t.Fatalf("took %d; want %d", got.Tokens, n)
	}
	g.Settle(got, n)
}

// drive runs f, advancing the clock a second each time f waits on it (a
// timer beyond those pending when it began, or a caller waiting for tokens
// of lims), at most epochs times, and returns f's result.
func drive(t *testing.T, clk *clock.Manual, epochs int, f func() bool, lims ...*grants) bool {
	t.Helper()
	base := clk.Pending()
	var ok bool
	done := async(func() { ok = f() })
	for range epochs + 1 {
		finished := false
		runtest.WaitFor(t, "the throttle to return or wait on the clock", func() bool {
			select {
			case <-done:
				finished = true
				return true
			default:
			}
			waiting := clk.Pending() > base
			for _, l := range lims {
				waiting = waiting || l.Status().Waiting > 0
			}
			return waiting
		})
		if finished {
			return ok
		}
		clk.Advance(time.Second)
	}
	t.Fatalf("the throttle still waits after %d epochs", epochs)
	return false
}

// TestFreshenRenewsInANewEpoch: Freshen leaves a grant of the current epoch
// as it is, and renews one of an epoch that has ended from the current
// epoch, all of one epoch, for the messages written, at most those kept:
// the tokens of an ended epoch are never spent, and no epoch grants more
// than the limit.
func TestFreshenRenewsInANewEpoch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batch   int
		drop    int // dropped before the write
		later   int // epochs the write is after the read
		usedNew int // taken by other batches in the write's epoch
		write   int // Freshen(write)
		granted []int64
		epoch   int64 // of the write's grant, from t0's
	}{
		{"current", 4, 0, 0, 0, 4, []int64{4}, 0},
		{"ended", 4, 0, 1, 0, 4, []int64{4, 4}, 1},
		{"ended, a whole epoch's share", 10, 0, 1, 0, 10, []int64{10, 10}, 1},
		{"ended, the new epoch short", 4, 0, 1, 8, 4, []int64{4, 8, 4}, 2},
		{"ended, part of the batch written", 4, 0, 1, 0, 2, []int64{4, 2}, 1},
		{"ended, after dropped messages", 4, 1, 1, 0, 4, []int64{3, 3}, 1},
		{"ended long ago", 4, 0, 3, 0, 4, []int64{4, 0, 0, 4}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTokens(t, 10, rigOpts{})
			tok := r.sent(t, batchOf(tc.batch, 1))
			tok.Drop(tc.drop)
			before := tok.Grant()
			r.clk.Advance(time.Duration(tc.later) * time.Second)
			if tc.usedNew > 0 {
				use(t, r.lim, tc.usedNew)
			}
			if !drive(t, r.clk, 2, func() bool { return tok.Freshen(context.Background(), tc.write) }, r.lim) {
				t.Fatal("Freshen reported false")
			}
			n := min(tc.write, tc.batch-tc.drop)
			if tc.later == 0 {
				n = before.Tokens
				if tok.Grant() != before {
					t.Fatalf("Freshen of a current grant changed it to %v; want %v", tok.Grant(), before)
				}
			}
			if g := tok.Grant(); g.Tokens != n || g.Epoch() != t0.Unix()+tc.epoch {
				t.Fatalf("grant %d of epoch %d; want %d of %d", g.Tokens, g.Epoch()-t0.Unix(), n, tc.epoch)
			}
			if got := r.lim.in(len(tc.granted)); !slices.Equal(got, tc.granted) {
				t.Fatalf("granted per epoch %v; want %v", got, tc.granted)
			}
			r.lim.atMost(t, len(tc.granted), 10)
			if retaken := testutil.ToFloat64(r.e.Metrics.Retaken); tc.later > 0 && retaken != float64(n) {
				t.Fatalf("retaken %v; want %d", retaken, n)
			}
		})
	}
}

// TestFreshenRepays: a batch written in a later epoch than it paid its
// bytes or its cost in pays them again from the current epoch, what it
// still carries after Refund; they never count in the epoch that ended.
func TestFreshenRepays(t *testing.T) {
	costs3 := func(*isb.Message) (int, error) { return 3, nil }
	for _, tc := range []struct {
		name   string
		o      rigOpts
		goesOn []bool  // nil: all
		msgs   []int64 // message tokens per epoch
		bytes  []int64 // bytes per epoch
	}{
		{"bytes", rigOpts{bytes: 1000}, nil, []int64{4, 4}, []int64{40, 40}},
		{"bytes after a refund", rigOpts{bytes: 1000}, []bool{true, false, true, false}, []int64{2, 2}, []int64{20, 20}},
		{"cost", rigOpts{cost: costs3}, nil, []int64{12, 12}, nil},
		{"cost after a refund", rigOpts{cost: costs3}, []bool{true, false, true, true}, []int64{9, 9}, nil},
		{"bytes and cost", rigOpts{bytes: 1000, cost: costs3}, nil, []int64{12, 12}, []int64{40, 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTokens(t, 100, tc.o)
			batch := batchOf(4, 10)
			tok := r.sent(t, batch)
			kept := 4
			if tc.goesOn != nil {
				tok.Refund(batch, tc.goesOn)
				for _, on := range tc.goesOn {
					if !on {
						kept--
					}
				}
				tok.Drop(4 - kept)
			}
			r.clk.Advance(time.Second)
			if !tok.Freshen(context.Background(), kept) {
				t.Fatal("Freshen reported false")
			}
			if got := r.lim.in(2); !slices.Equal(got, tc.msgs) {
				t.Fatalf("message tokens per epoch %v; want %v", got, tc.msgs)
			}
			if r.bytes != nil {
				if got := r.bytes.in(2); !slices.Equal(got, tc.bytes) {
					t.Fatalf("bytes per epoch %v; want %v", got, tc.bytes)
				}
			}
			// A second Freshen in the same epoch takes nothing more.
			if !tok.Freshen(context.Background(), kept) || !slices.Equal(r.lim.in(2), tc.msgs) {
				t.Fatalf("a second Freshen took more: %v; want %v", r.lim.in(2), tc.msgs)
			}
		})
	}
}

// TestGiveBackToTheirEpoch: Drop and Refund give tokens back to the epoch
// they came from while it is current, and never to a later one: given back
// after it ended, they are lost, and the current epoch's count is left as
// it is.
func TestGiveBackToTheirEpoch(t *testing.T) {
	costs3 := func(*isb.Message) (int, error) { return 3, nil }
	goesOn := []bool{true, false, true, false}
	for _, tc := range []struct {
		name string
		o    rigOpts
		// giveBack gives back the tokens of the dropped messages.
		giveBack func(tok *Tokens, batch []isb.ReadMessage)
		of       func(r *tokensRig) *grants // the limiter they go back to
		max      int64
		// granted in the batch's epoch before and after, while it is current
		before, after int64
	}{
		{"Drop", rigOpts{}, func(tok *Tokens, _ []isb.ReadMessage) { tok.Drop(2) },
			func(r *tokensRig) *grants { return r.lim }, 10, 4, 2},
		{"Drop in two steps", rigOpts{}, func(tok *Tokens, _ []isb.ReadMessage) { tok.Drop(1); tok.Drop(2) },
			func(r *tokensRig) *grants { return r.lim }, 10, 4, 1},
		{"Refund of bytes", rigOpts{bytes: 1000}, func(tok *Tokens, b []isb.ReadMessage) { tok.Refund(b, goesOn) },
			func(r *tokensRig) *grants { return r.bytes }, 1000, 40, 20},
		{"Refund of cost", rigOpts{cost: costs3}, func(tok *Tokens, b []isb.ReadMessage) { tok.Refund(b, goesOn) },
			func(r *tokensRig) *grants { return r.lim }, 100, 12, 8},
		{"Refund of cost and Drop", rigOpts{cost: costs3}, func(tok *Tokens, b []isb.ReadMessage) { tok.Refund(b, goesOn); tok.Drop(2) },
			func(r *tokensRig) *grants { return r.lim }, 100, 12, 6},
		{"Refund of a group", rigOpts{group: 10}, func(tok *Tokens, b []isb.ReadMessage) { tok.Refund(b, goesOn) },
			func(r *tokensRig) *grants { return r.grp }, 10, 4, 2},
	} {
		for _, ended := range []bool{false, true} {
			name := tc.name + "/current"
			if ended {
				name = tc.name + "/ended"
			}
			t.Run(name, func(t *testing.T) {
				r := newTokens(t, tc.max, tc.o)
				batch := batchOf(4, 10)
				tok := r.sent(t, batch)
				lim := tc.of(r)
				if got := lim.in(1)[0]; got != tc.before {
					t.Fatalf("granted %d; want %d", got, tc.before)
				}
				if !ended {
					tc.giveBack(&tok, batch)
					if got := lim.in(1)[0]; got != tc.after {
						t.Fatalf("granted %d after giving back; want %d", got, tc.after)
					}
					return
				}
				r.clk.Advance(time.Second)
				use(t, lim, int(tc.max)) // the whole of the next epoch
				tc.giveBack(&tok, batch)
				if got, want := lim.in(2), []int64{tc.before, tc.max}; !slices.Equal(got, want) {
					t.Fatalf("granted per epoch %v; want %v: nothing given to the later epoch", got, want)
				}
				if g, _ := lim.TryAcquire(1); g.Tokens != 0 {
					t.Fatal("the later epoch has tokens again")
				}
			})
		}
	}
}

// TestRetake: Retake takes n tokens for messages sent again, from epoch
// from or a later one, all of one epoch while an epoch's share will do,
// kept, and leaves tok on the last grant; hard ending first reports false.
func TestRetake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int64
		used    int   // taken in the first epoch before
		n       int   // Retake(n, ...)
		from    int64 // from t0's epoch
		granted []int64
		epoch   int64 // of tok's grant
	}{
		{"now", 10, 0, 3, 0, []int64{3}, 0},
		{"from an epoch that ended", 10, 0, 3, -2, []int64{3}, 0},
		{"from the next epoch", 10, 0, 3, 1, []int64{0, 3}, 1},
		{"from two epochs on", 10, 0, 3, 2, []int64{0, 0, 3}, 2},
		{"more than the epoch has left", 10, 8, 4, 0, []int64{8, 4}, 1},
		{"more than an epoch's share", 3, 0, 5, 0, []int64{0, 3, 2}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTokens(t, tc.max, rigOpts{})
			tok := r.sent(t, batchOf(1, 1))
			tok.Drop(1) // the batch's own token is not counted below
			if tc.used > 0 {
				use(t, r.lim, tc.used)
			}
			if !drive(t, r.clk, 3, func() bool { return tok.Retake(context.Background(), tc.n, t0.Unix()+tc.from) }, r.lim) {
				t.Fatal("Retake reported false")
			}
			if got := r.lim.in(len(tc.granted)); !slices.Equal(got, tc.granted) {
				t.Fatalf("granted per epoch %v; want %v", got, tc.granted)
			}
			r.lim.atMost(t, len(tc.granted), tc.max)
			if e := tok.Grant().Epoch() - t0.Unix(); e != tc.epoch {
				t.Fatalf("tok's grant of epoch %d; want %d", e, tc.epoch)
			}
			if n := testutil.ToFloat64(r.e.Metrics.Retaken); n != float64(tc.n) {
				t.Fatalf("retaken %v; want %d", n, tc.n)
			}
		})
	}
	t.Run("hard ends first", func(t *testing.T) {
		r := newTokens(t, 10, rigOpts{})
		tok := r.sent(t, batchOf(1, 1))
		hard, cancel := context.WithCancel(context.Background())
		base := r.clk.Pending()
		done := async(func() {
			if tok.Retake(hard, 3, t0.Unix()+1) {
				t.Error("Retake reported true")
			}
		})
		waitTimers(t, r.clk, base+1)
		cancel()
		wait(t, done)
		if got := r.lim.in(1); !slices.Equal(got, []int64{1}) {
			t.Fatalf("granted %v; want the batch's 1 only", got)
		}
	})
}

// TestRenewAll: RenewAll takes n tokens for messages delivered again, of
// the current epoch, all of one epoch when an epoch's share will do, keeps
// them for the n messages and makes them tok's grant; hard ending first
// reports false and keeps none.
func TestRenewAll(t *testing.T) {
	for _, tc := range []struct {
		name    string
		later   int // epochs after the read
		used    int // taken in the renewal's epoch before
		n       int
		granted []int64
		epoch   int64
	}{
		{"in the read's epoch", 0, 0, 4, []int64{8}, 0},
		{"in a later epoch", 1, 0, 4, []int64{4, 4}, 1},
		{"part of the batch", 1, 0, 2, []int64{4, 2}, 1},
		{"the epoch short", 1, 8, 4, []int64{4, 8, 4}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTokens(t, 10, rigOpts{})
			tok := r.sent(t, batchOf(4, 1))
			r.clk.Advance(time.Duration(tc.later) * time.Second)
			if tc.used > 0 {
				use(t, r.lim, tc.used)
			}
			if !drive(t, r.clk, 2, func() bool { return tok.RenewAll(context.Background(), tc.n) }, r.lim) {
				t.Fatal("RenewAll reported false")
			}
			if got := r.lim.in(len(tc.granted)); !slices.Equal(got, tc.granted) {
				t.Fatalf("granted per epoch %v; want %v", got, tc.granted)
			}
			r.lim.atMost(t, len(tc.granted), 10)
			if g := tok.Grant(); g.Tokens != tc.n || g.Epoch()-t0.Unix() != tc.epoch {
				t.Fatalf("grant %d of epoch %d; want %d of %d", g.Tokens, g.Epoch()-t0.Unix(), tc.n, tc.epoch)
			}
			// The renewed tokens are the batch's: dropping one gives it back
			// to the renewal's epoch.
			tok.Drop(1)
			if got := r.lim.in(len(tc.granted))[tc.epoch]; got != tc.granted[tc.epoch]-1 {
				t.Fatalf("granted %d in epoch %d after Drop(1); want %d", got, tc.epoch, tc.granted[tc.epoch]-1)
			}
		})
	}
	t.Run("hard ends first", func(t *testing.T) {
		r := newTokens(t, 10, rigOpts{})
		tok := r.sent(t, batchOf(4, 1))
		use(t, r.lim, 6)
		hard, cancel := context.WithCancel(context.Background())
		done := async(func() {
			if tok.RenewAll(hard, 4) {
				t.Error("RenewAll reported true")
			}
		})
		runtest.WaitFor(t, "RenewAll to wait for tokens", func() bool { return r.lim.Status().Waiting > 0 })
		cancel()
		wait(t, done)
		if got := r.lim.in(1); !slices.Equal(got, []int64{10}) {
			t.Fatalf("granted %v; want the 10 taken before only", got)
		}
	})
}

// TestSendTakesTheEpochItGoesOnIn: a batch read on a grant of an epoch
// that has ended goes on with the current epoch's tokens, in parts as they
// come, never on its read's: on a real limiter, no epoch grants more than
// its share.
func TestSendTakesTheEpochItGoesOnIn(t *testing.T) {
	r := newTokens(t, 3, rigOpts{})
	tok, _ := r.th.Take(context.Background(), 3)
	r.clk.Advance(time.Second) // the read returns in the next epoch
	var parts []int64
	drive(t, r.clk, 3, func() bool {
		unsent := r.th.Send(context.Background(), tok, batchOf(5, 1), func(tok Tokens, b []isb.ReadMessage) {
			parts = append(parts, int64(len(b)), tok.Grant().Epoch()-t0.Unix())
		})
		return len(unsent) == 0
	}, r.lim)
	if want := []int64{3, 1, 2, 2}; !slices.Equal(parts, want) {
		t.Fatalf("parts (size, epoch) %v; want %v", parts, want)
	}
	// The read's 3 were granted in its epoch, and given back once it had
	// ended: lost, not spent again.
	if got := r.lim.in(3); !slices.Equal(got, []int64{3, 3, 2}) {
		t.Fatalf("granted per epoch %v; want the read's epoch's 3 and no more in each", got)
	}
}

// TestPayOnARealLimiter: a batch pays its bytes, and its cost beyond a
// token a message, all of one epoch when an epoch's share will do: an epoch
// with fewer left gives back what it granted and the batch pays in the
// next; a batch bigger than a share pays over as many epochs as it takes,
// none granting more than its share.
func TestPayOnARealLimiter(t *testing.T) {
	costs := func(m *isb.Message) (int, error) { return len(m.Value), nil }
	for _, tc := range []struct {
		name    string
		max     int64 // of the limit paid
		o       rigOpts
		used    int // taken before in the first epoch
		batch   []isb.ReadMessage
		granted []int64 // of the limit paid, per epoch
	}{
		{"bytes that fit", 100, rigOpts{bytes: 100}, 30, batchOf(5, 10), []int64{80}},
		{"bytes the epoch is short of", 100, rigOpts{bytes: 100}, 70, batchOf(5, 10), []int64{70, 50}},
		{"bytes bigger than an epoch", 20, rigOpts{bytes: 20}, 0, batchOf(5, 10), []int64{0, 20, 20, 10}},
		{"cost that fits", 100, rigOpts{cost: costs}, 30, batchOf(5, 3), []int64{45}},
		{"cost the epoch is short of", 100, rigOpts{cost: costs}, 88, batchOf(5, 3), []int64{93, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			max := int64(1000)
			if tc.o.cost != nil {
				max = tc.max
			}
			r := newTokens(t, max, tc.o)
			paid := r.lim
			if r.bytes != nil {
				paid = r.bytes
			}
			if tc.used > 0 {
				use(t, paid, tc.used)
			}
			tok, _ := r.th.Take(context.Background(), len(tc.batch))
			if !drive(t, r.clk, len(tc.granted), func() bool {
				_, ok := r.th.Pay(context.Background(), tok, tc.batch)
				return ok
			}, paid) {
				t.Fatal("Pay reported false")
			}
			if got := paid.in(len(tc.granted)); !slices.Equal(got, tc.granted) {
				t.Fatalf("granted per epoch %v; want %v", got, tc.granted)
			}
			paid.atMost(t, len(tc.granted), tc.max)
		})
	}
}

// TestHardEndsFirst: Freshen, Pay, Retake and RenewAll report false when
// hard ends while they wait for tokens.
func TestHardEndsFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    rigOpts
		f    func(r *tokensRig, hard context.Context) bool
	}{
		{"Freshen", rigOpts{}, func(r *tokensRig, hard context.Context) bool {
			tok := r.sent(t, batchOf(4, 1))
			r.clk.Advance(time.Second)
			use(t, r.lim, 8)
			return tok.Freshen(hard, 4)
		}},
		{"Pay", rigOpts{bytes: 10}, func(r *tokensRig, hard context.Context) bool {
			tok, _ := r.th.Take(context.Background(), 4)
			use(t, r.bytes, 8)
			_, ok := r.th.Pay(hard, tok, batchOf(4, 1))
			return ok
		}},
		{"Retake", rigOpts{}, func(r *tokensRig, hard context.Context) bool {
			tok := r.sent(t, batchOf(4, 1))
			return tok.Retake(hard, 4, t0.Unix()+1)
		}},
		{"RenewAll", rigOpts{}, func(r *tokensRig, hard context.Context) bool {
			tok := r.sent(t, batchOf(4, 1))
			use(t, r.lim, 6)
			return tok.RenewAll(hard, 4)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTokens(t, 10, tc.o)
			hard, cancel := context.WithCancel(context.Background())
			base := r.clk.Pending()
			var ok bool
			done := async(func() { ok = tc.f(r, hard) })
			runtest.WaitFor(t, "a wait for tokens", func() bool {
				return r.clk.Pending() > base || r.lim.Status().Waiting > 0 ||
					(r.bytes != nil && r.bytes.Status().Waiting > 0)
			})
			cancel()
			wait(t, done)
			if ok {
				t.Fatal("reported true")
			}
		})
	}
}

package throttle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// grants is a real message limiter on a manual clock and the tokens it
// granted, less deposits, in each epoch.
type grants struct {
	*ratelimit.Limiter
	mu    sync.Mutex
	ended map[int64]int64
}

// newGrants returns a limiter of max tokens an epoch on clk.
func newGrants(t *testing.T, clk *clock.Manual, max int64) *grants {
	t.Helper()
	g := &grants{ended: map[int64]int64{}}
	lim, err := ratelimit.New(ratelimit.Config{Max: max, Min: max}, ratelimit.WithClock(clk), ratelimit.WithoutPacing(),
		ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.ended[s.Epoch] = s.Granted
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close(context.Background()) })
	g.Limiter = lim
	return g
}

// in returns the tokens granted, less deposits, in each of n epochs from
// t0's: the current one's as the limiter has them now.
func (g *grants) in(n int) []int64 {
	st := g.Status()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]int64, n)
	for i := range out {
		e := t0.Unix() + int64(i)
		if e == st.Epoch {
			out[i] = st.Granted
		} else {
			out[i] = g.ended[e]
		}
	}
	return out
}

// atMost fails unless every epoch of the first n granted at most max.
func (g *grants) atMost(t *testing.T, n int, max int64) {
	t.Helper()
	for i, k := range g.in(n) {
		if k > max {
			t.Errorf("epoch %d granted %d; the limit is %d", i, k, max)
		}
	}
}

// keyed returns a message for each of keys ("" for none), valued by its key
// and its place among its key's messages: a0, a1, b0, -0 (keyless).
func keyed(keys ...string) []isb.ReadMessage {
	seen := map[string]int{}
	msgs := make([]isb.ReadMessage, len(keys))
	for i, k := range keys {
		name := k
		if k == "" {
			name = "-"
		} else {
			msgs[i].Keys = []string{k}
		}
		msgs[i].Value = []byte(name + strconv.Itoa(seen[k]))
		seen[k]++
	}
	return msgs
}

// times returns n copies of key.
func times(n int, key string) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = key
	}
	return keys
}

// names returns key's values from, to-1.
func names(key string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, key+strconv.Itoa(i))
	}
	return out
}

// values returns the values of msgs.
func values(msgs []isb.ReadMessage) []string {
	out := make([]string, len(msgs))
	for i := range msgs {
		out[i] = string(msgs[i].Value)
	}
	return out
}

// source is a ReadFunc's messages; each read checks that it takes no more
// than the hold has room for.
type source struct {
	t     *testing.T
	h     *Hold
	msgs  []isb.ReadMessage
	reads int // messages read
}

func (s *source) read(_ context.Context, buf []isb.ReadMessage) (int, error) {
	if room := s.h.MaxHeld - int(s.h.Metrics.Held()); len(buf) > room {
		s.t.Errorf("a read of up to %d with room for %d held", len(buf), room)
	}
	n := copy(buf, s.msgs)
	s.msgs = s.msgs[n:]
	s.reads += n
	return n, nil
}

// holdRig is a hold on a real key limiter and a manual clock, reading from
// a source.
type holdRig struct {
	clk  *clock.Manual
	keys *ratelimit.KeyLimiter
	th   *Throttle
	h    *Hold
	src  *source
	p    *pauses
}

// newHold returns a hold of at most maxHeld messages, reading at most
// readSize, under a key limit of keyMax and the vertex limit lim (nil: none),
// on clk, reading msgs.
func newHold(t *testing.T, clk *clock.Manual, lim Limiter, keyMax int64, maxHeld, readSize int, msgs []isb.ReadMessage) *holdRig {
	t.Helper()
	keys, err := ratelimit.NewKeyLimiter(ratelimit.KeyConfig{Max: keyMax}, ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	e, p := env(clk)
	th := (&Throttle{Limiter: lim, PerKey: &PerKey{Limiter: keys, MaxHeld: maxHeld}}).With(e)
	h := th.NewHold(readSize, readSize)
	return &holdRig{clk: clk, keys: keys, th: th, h: h, src: &source{t: t, h: h, msgs: msgs}, p: p}
}

// read is one read of up to n messages through the hold.
func (r *holdRig) read(t *testing.T, n int) []string {
	t.Helper()
	buf := make([]isb.ReadMessage, n)
	k, err := r.h.Read(context.Background(), buf, r.src.read)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return values(buf[:k])
}

// drain reads through the hold, at most readSize a read, until a read
// returns nothing, and returns what the reads returned.
func (r *holdRig) drain(t *testing.T) []string {
	t.Helper()
	var out []string
	for range 50 {
		got := r.read(t, r.h.readSize)
		if len(got) == 0 {
			return out
		}
		out = append(out, got...)
	}
	t.Fatal("the hold returned messages at every read")
	return nil
}

// cycle is a forwarder's read: the vertex's tokens for up to n messages
// (Take), the read through the hold, its payment (Pay) and the batch sent
// on (Send). It returns the messages sent on.
func (r *holdRig) cycle(t *testing.T, n int) []string {
	t.Helper()
	ctx := context.Background()
	tok, err := r.th.Take(ctx, n)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	buf := make([]isb.ReadMessage, tok.N())
	k, err := r.h.Read(ctx, buf, r.src.read)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	tok, _ = r.th.Pay(ctx, tok, buf[:k])
	var out []string
	r.th.Send(ctx, tok, buf[:k], func(_ Tokens, b []isb.ReadMessage) { out = append(out, values(b)...) })
	return out
}

// TestHoldReadsOverTheKeyLimit: of what a read returns, the messages whose
// key has no tokens left in the epoch are held and the others go on, in
// their order; keyless messages go on whatever the key limit.
func TestHoldReadsOverTheKeyLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keyMax int64
		keys   []string
		out    []string
		held   int64
	}{
		{"under the limit", 3, []string{"a", "b", "a", "b"}, []string{"a0", "b0", "a1", "b1"}, 0},
		{"over it", 2, []string{"a", "b", "a", "a", "b", "a"}, []string{"a0", "b0", "a1", "b1"}, 2},
		{"one key over it", 1, []string{"a", "a", "b", "c", "a"}, []string{"a0", "b0", "c0"}, 2},
		{"keyless", 1, []string{"", "a", "", "a", "", "", "a"}, []string{"-0", "a0", "-1", "-2", "-3"}, 2},
		{"keyless only", 1, []string{"", "", "", ""}, []string{"-0", "-1", "-2", "-3"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			r := newHold(t, clk, nil, tc.keyMax, 100, 10, keyed(tc.keys...))
			if got := r.read(t, 10); !slices.Equal(got, tc.out) {
				t.Fatalf("read %v; want %v", got, tc.out)
			}
			if held := r.h.Metrics.Held(); held != tc.held {
				t.Fatalf("%d held; want %d", held, tc.held)
			}
			if n := testutil.ToFloat64(r.h.Metrics.HeldTotal); n != float64(tc.held) {
				t.Fatalf("held total %v; want %d", n, tc.held)
			}
		})
	}
}

// TestHeldGoOnInALaterEpoch: a held message goes on in a later epoch, once
// its key has tokens, in its order within the key and before new messages;
// a new message of a key with held messages is held behind them.
func TestHeldGoOnInALaterEpoch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keyMax int64
		keys   []string
		later  []string   // read at the start of the second epoch
		epochs [][]string // what goes on in each epoch
	}{
		{"one key", 2, times(5, "a"), nil, [][]string{{"a0", "a1"}, {"a2", "a3"}, {"a4"}, nil}},
		{"before new messages", 2, times(4, "a"), []string{"b", "c"},
			[][]string{{"a0", "a1"}, {"a2", "a3", "b0", "c0"}, nil}},
		{"new behind held of its key", 2, times(5, "a"), []string{"b", "a", "a"},
			[][]string{{"a0", "a1"}, {"a2", "a3", "b0"}, {"a4", "a5"}, {"a6"}, nil}},
		{"keys in the order first held", 1, []string{"a", "b", "a", "b", "c", "c", "a"}, nil,
			[][]string{{"a0", "b0", "c0"}, {"a1", "b1", "c1"}, {"a2"}, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			r := newHold(t, clk, nil, tc.keyMax, 100, 10, keyed(tc.keys...))
			var later []isb.ReadMessage
			if tc.later != nil {
				// valued after the first messages of their keys
				all := keyed(append(slices.Clone(tc.keys), tc.later...)...)
				later = all[len(tc.keys):]
			}
			for i, want := range tc.epochs {
				if i == 1 {
					r.src.msgs = append(r.src.msgs, later...)
				}
				if got := r.drain(t); !slices.Equal(got, want) {
					t.Fatalf("epoch %d: %v went on; want %v", i, got, want)
				}
				clk.Advance(time.Second)
			}
			if held := r.h.Metrics.Held(); held != 0 {
				t.Fatalf("%d still held", held)
			}
		})
	}
}

// TestHeldTakeVertexTokensWhenTheyGoOn reads through the hold as a
// forwarder does (Take, Read, Pay, Send) under a vertex limit and a key
// limit. Held messages give their vertex tokens back at once and take them
// again when they go on, so every second grants exactly what goes on, and
// no key goes on more than its limit in a second, in its order.
//
//   - hot key first: 20 messages of a, then a, b, c and d in turn, under 12
//     a second and 3 a key: b, c and d, read behind 20 held messages of a,
//     still get their 3 in each second while they last, then a alone has 3
//     a second;
//   - keyless: 30 messages of which every third is of a, under 25 and 2:
//     the 20 keyless ones are under the vertex limit only.
func TestHeldTakeVertexTokensWhenTheyGoOn(t *testing.T) {
	hot := times(20, "a")
	for range 9 {
		hot = append(hot, "b", "c", "d", "a")
	}
	keyless := make([]string, 30)
	for i := range 10 {
		keyless[3*i] = "a"
	}
	for _, tc := range []struct {
		name              string
		vertexMax, keyMax int64
		keys              []string
		perEpoch          []int
		first             map[string]int // per key in the first three epochs
	}{
		{"hot key first", 12, 3, hot, []int{12, 12, 12, 3, 3, 3, 3, 3, 3, 2}, map[string]int{"a": 3, "b": 3, "c": 3, "d": 3}},
		{"keyless", 25, 2, keyless, []int{22, 2, 2, 2, 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			lim := newGrants(t, clk, tc.vertexMax)
			r := newHold(t, clk, lim, tc.keyMax, 100, 10, keyed(tc.keys...))
			var got []int
			last := map[string]int{}
			for epoch := range len(tc.perEpoch) + 1 {
				n := 0
				byKey := map[string]int{}
				for range 20 {
					if lim.Status().Throttled != ratelimit.NotThrottled {
						break
					}
					out := r.cycle(t, 10)
					if len(out) == 0 {
						break
					}
					n += len(out)
					for _, v := range out {
						k := v[:1]
						byKey[k]++
						j, _ := strconv.Atoi(v[1:])
						if l, ok := last[k]; ok && j != l+1 {
							t.Fatalf("epoch %d: %s went on after %s%d", epoch, v, k, l)
						}
						last[k] = j
					}
				}
				for k, c := range byKey {
					if k != "-" && c > int(tc.keyMax) {
						t.Errorf("epoch %d: %d of key %s; limit %d", epoch, c, k, tc.keyMax)
					}
				}
				if epoch == 0 && tc.first == nil && (byKey["-"] != 20 || byKey["a"] != 2) {
					t.Errorf("first epoch %v; want the 20 keyless and 2 of a", byKey)
				}
				if epoch < 3 && tc.first != nil && fmt.Sprint(byKey) != fmt.Sprint(tc.first) {
					t.Errorf("epoch %d: %v; want %v", epoch, byKey, tc.first)
				}
				if n > 0 {
					got = append(got, n)
				}
				clk.Advance(time.Second)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.perEpoch) {
				t.Fatalf("went on per epoch %v; want %v", got, tc.perEpoch)
			}
			granted := lim.in(len(tc.perEpoch))
			for i, n := range tc.perEpoch {
				if granted[i] != int64(n) {
					t.Errorf("epoch %d: vertex limiter granted %d; want %d, what went on (granted %v)", i, granted[i], n, granted)
				}
			}
			if r.src.reads != len(tc.keys) || r.h.Metrics.Held() != 0 {
				t.Fatalf("%d of %d read, %d held; want all read and gone on", r.src.reads, len(tc.keys), r.h.Metrics.Held())
			}
		})
	}
}

// TestHoldIsBounded: a read takes no more new messages than the hold has
// room for (the source checks every read), and a full hold reads nothing.
func TestHoldIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name             string
		maxHeld, readBuf int
		out              []string
		read             int
	}{
		{"smaller than a read", 5, 10, []string{"a0", "a1", "a2"}, 8},
		{"a read's size", 10, 10, []string{"a0", "a1", "a2"}, 13},
		{"larger than a read", 25, 10, []string{"a0", "a1", "a2"}, 28},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			r := newHold(t, clk, nil, 3, tc.maxHeld, tc.readBuf, keyed(times(100, "a")...))
			if got := r.drain(t); !slices.Equal(got, tc.out) {
				t.Fatalf("went on %v; want %v", got, tc.out)
			}
			if held := r.h.Metrics.Held(); held != int64(tc.maxHeld) || r.src.reads != tc.read {
				t.Fatalf("%d held, %d read; want a full hold of %d, %d read", held, r.src.reads, tc.maxHeld, tc.read)
			}
			if got := r.read(t, tc.readBuf); len(got) != 0 || r.src.reads != tc.read {
				t.Fatalf("a full hold read %d more and returned %v", r.src.reads-tc.read, got)
			}
			// The next epoch's 3 go on and make room for 3 more.
			clk.Advance(time.Second)
			if got := r.drain(t); !slices.Equal(got, []string{"a3", "a4", "a5"}) || r.src.reads != tc.read+3 {
				t.Fatalf("next epoch: went on %v, %d read; want a3-a5, %d", got, r.src.reads, tc.read+3)
			}
		})
	}
}

// nacks records what a hold hands back.
type nacks struct {
	msgs   [][]string
	delays []time.Duration
	err    error
}

func (n *nacks) nack(_ context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	n.msgs = append(n.msgs, values(msgs))
	n.delays = append(n.delays, delay)
	return n.err
}

// TestFullHoldHandsBack: once the hold is full and no key can go on before
// the next epoch, Wait hands back the newest held messages of the keys that
// hold the most, a read's worth (at most half the hold), to come again no
// sooner than what stays held of their key can have gone, and at least a
// second later. A hold with room, or a key that may go on, hands nothing
// back.
func TestFullHoldHandsBack(t *testing.T) {
	for _, tc := range []struct {
		name          string
		keyMax        int64
		maxHeld, read int
		keys          []string
		next          bool // Wait in the next epoch
		back          []string
		delay         time.Duration
		thenOn        []string // what goes on in the next epoch
	}{
		{"one hot key", 1, 6, 10, append(times(6, "a"), "b", "b"), false,
			[]string{"a3", "a4", "a5"}, 2 * time.Second, []string{"a1", "b1"}},
		{"two hot keys", 1, 4, 10, []string{"a", "a", "a", "b", "b", "b"}, false,
			[]string{"a2", "b2"}, time.Second, []string{"a1", "b1"}},
		{"less than a second's backlog", 3, 4, 10, times(7, "a"), false,
			[]string{"a5", "a6"}, time.Second, []string{"a3", "a4"}},
		{"a read's worth", 2, 10, 2, times(14, "a"), false,
			[]string{"a10", "a11"}, 4 * time.Second, []string{"a2", "a3"}},
		{"a backlog of many seconds", 1, 200, 100, times(201, "a"), false,
			names("a", 101, 201), maxSpillDelay, []string{"a1"}},
		{"not full", 1, 6, 10, times(4, "a"), false, nil, 0, []string{"a1"}},
		{"a key may go on", 1, 4, 10, times(5, "a"), true, nil, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			r := newHold(t, clk, nil, tc.keyMax, tc.maxHeld, tc.read, keyed(tc.keys...))
			r.drain(t)
			held := r.h.Metrics.Held()
			if tc.next {
				clk.Advance(time.Second)
			}
			n := &nacks{}
			r.h.Wait(context.Background(), n.nack)
			if tc.back == nil {
				if len(n.msgs) != 0 || r.h.Metrics.Held() != held {
					t.Fatalf("handed back %v; want nothing", n.msgs)
				}
				return
			}
			if len(n.msgs) != 1 || !slices.Equal(n.msgs[0], tc.back) || n.delays[0] != tc.delay {
				t.Fatalf("handed back %v, delays %v; want %v once, %v", n.msgs, n.delays, tc.back, tc.delay)
			}
			if n.delays[0] < time.Second {
				t.Fatalf("delay %v; want at least a second", n.delays[0])
			}
			if got := r.h.Metrics.Held(); got != held-int64(len(tc.back)) {
				t.Fatalf("%d held; want %d", got, held-int64(len(tc.back)))
			}
			if got := testutil.ToFloat64(r.h.Metrics.HandedBackTotal); got != float64(len(tc.back)) {
				t.Fatalf("handed back total %v; want %d", got, len(tc.back))
			}
			clk.Advance(time.Second)
			if got := r.drain(t); !slices.Equal(got[:min(len(got), len(tc.thenOn))], tc.thenOn) {
				t.Fatalf("next epoch %v; want it to begin with %v", got, tc.thenOn)
			}
		})
	}
}

// TestFullHoldWaits: a full hold whose keys cannot go on before the next
// epoch, with no NackFunc (a reader that cannot take messages back) or one
// that failed once, waits for the next epoch, paused as rate_limited, and
// hands nothing back.
func TestFullHoldWaits(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail bool // the NackFunc fails at the first full hold
	}{
		{"no NackFunc", false},
		{"a NackFunc that failed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			r := newHold(t, clk, nil, 1, 4, 10, keyed(times(20, "a")...))
			r.drain(t)
			var nack NackFunc
			n := &nacks{err: errors.New("refused")}
			if tc.fail {
				nack = n.nack
				r.h.Wait(context.Background(), nack)
				if len(n.msgs) != 1 {
					t.Fatalf("handed back %v; want one try", n.msgs)
				}
				r.drain(t) // fills the hold again
			}
			held := r.h.Metrics.Held()
			if held != 4 {
				t.Fatalf("%d held; want a full hold of 4", held)
			}
			timers := clk.Pending()
			done := async(func() { r.h.Wait(context.Background(), nack) })
			waitTimers(t, clk, timers+1)
			select {
			case <-done:
				t.Fatal("Wait returned before the next epoch")
			default:
			}
			r.p.mu.Lock()
			reasons, active := slices.Clone(r.p.reasons), r.p.active
			r.p.mu.Unlock()
			if !slices.Equal(reasons, []ratelimit.Reason{ratelimit.ReasonRateLimited}) || active != 1 {
				t.Fatalf("paused for %v, %d active; want rate_limited, active", reasons, active)
			}
			clk.Advance(time.Second)
			wait(t, done)
			if r.p.active != 0 || len(n.msgs) > 1 || r.h.Metrics.Held() != held {
				t.Fatalf("%d pauses active, handed back %v, %d held; want none, nothing more, %d", r.p.active, n.msgs, r.h.Metrics.Held(), held)
			}
			if got := r.drain(t); len(got) != 1 {
				t.Fatalf("next epoch %v; want a key's one", got)
			}
		})
	}
}

// TestHoldRelease: Release hands back every message still held, in the
// order their keys were first held and in their order within a key, and
// empties the hold.
func TestHoldRelease(t *testing.T) {
	clk := clock.NewManual(t0)
	r := newHold(t, clk, nil, 1, 100, 10, keyed("b", "a", "b", "a", "c", "a", "b", "", "c"))
	if got := r.drain(t); !slices.Equal(got, []string{"b0", "a0", "c0", "-0"}) {
		t.Fatalf("went on %v", got)
	}
	want := []string{"b1", "b2", "a1", "a2", "c1"}
	if got := values(r.h.Release()); !slices.Equal(got, want) {
		t.Fatalf("Release = %v; want %v", got, want)
	}
	if held := r.h.Metrics.Held(); held != 0 || r.h.Release() != nil {
		t.Fatalf("%d held after Release, or a second Release returned some", held)
	}
	clk.Advance(time.Second)
	if got := r.drain(t); len(got) != 0 {
		t.Fatalf("released messages went on: %v", got)
	}
}

// TestHoldCountsTheModesKey: a message counts under its first key, or
// with AllKeys under its whole key list as one key.
func TestHoldCountsTheModesKey(t *testing.T) {
	lists := [][]string{{"a", "x"}, {"a", "y"}, {"a", "x"}, {"a"}, {"b", "x"}}
	for _, tc := range []struct {
		mode ratelimit.KeyMode
		out  []string
	}{
		{ratelimit.FirstKey, []string{"m0", "m4"}},
		{ratelimit.AllKeys, []string{"m0", "m1", "m3", "m4"}},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			msgs := make([]isb.ReadMessage, len(lists))
			for i, keys := range lists {
				msgs[i].Keys, msgs[i].Value = keys, []byte("m"+strconv.Itoa(i))
			}
			r := newHold(t, clock.NewManual(t0), nil, 1, 100, 10, msgs)
			r.h.Mode = tc.mode
			if got := r.read(t, 10); !slices.Equal(got, tc.out) {
				t.Fatalf("went on %v; want %v", got, tc.out)
			}
		})
	}
}

// redelivery is a source that takes messages back: handed back with a
// delay, a message is read again once that much of clk has passed, before
// new ones.
type redelivery struct {
	clk   *clock.Manual
	due   []time.Time
	back  []isb.ReadMessage
	src   *source
	nacks int
}

func (d *redelivery) nack(_ context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	d.nacks++
	for _, m := range msgs {
		d.back = append(d.back, m)
		d.due = append(d.due, d.clk.Now().Add(delay))
	}
	return nil
}

func (d *redelivery) read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	n := 0
	for i := 0; i < len(d.back) && n < len(buf); {
		if d.clk.Now().Before(d.due[i]) {
			i++
			continue
		}
		buf[n] = d.back[i]
		n++
		d.back, d.due = slices.Delete(d.back, i, i+1), slices.Delete(d.due, i, i+1)
	}
	k, err := d.src.read(ctx, buf[n:])
	return n + k, err
}

// TestFullHoldKeepsOtherKeysGoing reads 30 messages of a hot key a, then 3
// each of b and c, under a key limit of 3 a second and a hold of 5, from a
// source that takes messages back: once the hold is full of a, the newest
// of them go back to come again later, so the reads go on and b and c get
// their 3 in the first second. Every message goes on exactly once, no key
// more than 3 a second, and nothing is left held or handed back.
func TestFullHoldKeepsOtherKeysGoing(t *testing.T) {
	keys := append(times(30, "a"), "b", "c", "b", "c", "b", "c")
	clk := clock.NewManual(t0)
	r := newHold(t, clk, nil, 3, 5, 10, keyed(keys...))
	d := &redelivery{clk: clk, src: r.src}
	seen := map[string]bool{}
	for epoch := 0; len(seen) < len(keys); epoch++ {
		if epoch == 40 {
			t.Fatalf("%d of %d went on in 40 epochs", len(seen), len(keys))
		}
		byKey := map[string]int{}
		for range 50 {
			r.h.Wait(context.Background(), d.nack)
			buf := make([]isb.ReadMessage, 10)
			n, err := r.h.Read(context.Background(), buf, d.read)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range values(buf[:n]) {
				if seen[v] {
					t.Fatalf("%s went on twice", v)
				}
				seen[v] = true
				byKey[v[:1]]++
			}
			if full, _ := r.h.full(); n == 0 && !full {
				break
			}
		}
		for k, c := range byKey {
			if c > 3 {
				t.Fatalf("epoch %d: %d of key %s; limit 3", epoch, c, k)
			}
		}
		if epoch == 0 && (byKey["a"] != 3 || byKey["b"] != 3 || byKey["c"] != 3) {
			t.Fatalf("first epoch %v; want 3 each of a, b and c", byKey)
		}
		clk.Advance(time.Second)
	}
	if d.nacks == 0 || testutil.ToFloat64(r.h.Metrics.HandedBackTotal) == 0 {
		t.Fatal("nothing handed back; want the full hold to make room")
	}
	if r.h.Metrics.Held() != 0 || len(d.back) != 0 {
		t.Fatalf("%d held, %d handed back still; want none", r.h.Metrics.Held(), len(d.back))
	}
}

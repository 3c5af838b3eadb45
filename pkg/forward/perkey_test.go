package forward

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// epochSink records the epoch (second of its clock) each message is written
// in, with its key and value, and wakes waiters at each write.
type epochSink struct {
	clk    clock.Clock
	mu     sync.Mutex
	writes []epochWrite
	wake   chan struct{}
}

type epochWrite struct {
	epoch int64
	key   string
	value string
}

func newEpochSink(clk clock.Clock) *epochSink { return &epochSink{clk: clk, wake: make(chan struct{})} }

func (s *epochSink) Write(_ context.Context, msgs []isb.Message, errs []error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.clk.Now().Unix()
	for _, m := range msgs {
		key, _ := ratelimit.FirstKey.KeyOf(m.Keys)
		s.writes = append(s.writes, epochWrite{e, key, string(m.Value)})
	}
	close(s.wake)
	s.wake = make(chan struct{})
	return nil
}

// waitFor waits until n messages are written, at most 10 s.
func (s *epochSink) waitFor(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		got, wake := len(s.writes), s.wake
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-wake:
		case <-timeout:
			t.Fatalf("%d messages written; want %d", got, n)
		}
	}
}

// perEpoch returns the messages written in each epoch from first, and per
// epoch and key.
func (s *epochSink) perEpoch(first int64) ([]int, map[int64]map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total []int
	byKey := map[int64]map[string]int{}
	for _, w := range s.writes {
		i := int(w.epoch - first)
		for len(total) <= i {
			total = append(total, 0)
		}
		total[i]++
		if byKey[w.epoch] == nil {
			byKey[w.epoch] = map[string]int{}
		}
		byKey[w.epoch][w.key]++
	}
	return total, byKey
}

// checkOrder fails unless each key's values were written in increasing order.
func (s *epochSink) checkOrder(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	last := map[string]int{}
	for _, w := range s.writes {
		v, _ := strconv.Atoi(w.value)
		if l, ok := last[w.key]; ok && v <= l {
			t.Fatalf("key %q: %d written after %d", w.key, v, l)
		}
		last[w.key] = v
	}
}

// keyedBuffer returns a memory buffer holding a message per key of keys
// ("" for none), valued by position.
func keyedBuffer(t *testing.T, keys []string) *memory.Buffer {
	t.Helper()
	return keyedBufferOn(t, keys, nil)
}

// keyedBufferOn is keyedBuffer whose delayed nacks wait on clk.
func keyedBufferOn(t *testing.T, keys []string, clk clock.Clock) *memory.Buffer {
	t.Helper()
	b := memory.New("in", len(keys)+1, 20*time.Millisecond, clk)
	msgs := make([]isb.Message, len(keys))
	for i, k := range keys {
		msgs[i] = isb.Message{Value: []byte(strconv.Itoa(i))}
		if k != "" {
			msgs[i].Keys = []string{k}
		}
	}
	if err := b.Write(context.Background(), msgs, make([]error, len(keys))); err != nil {
		t.Fatal(err)
	}
	return b
}

var epochStart = time.Unix(1_700_000_000, 0)

// keyedRig is a forwarder with a flat vertex limit and a per-key limit on
// one manual clock, writing to an epochSink.
type keyedRig struct {
	*harness
	clk     *clock.Manual
	sink    *epochSink
	keys    *ratelimit.KeyLimiter
	metrics *throttle.KeyMetrics
	granted map[int64]int64 // the vertex limiter's grants per epoch
	mu      sync.Mutex
}

func startKeyed(t *testing.T, in isb.Reader, vertexMax, keyMax int64, maxHeld int, opts Options) *keyedRig {
	t.Helper()
	r := &keyedRig{clk: clock.NewManual(epochStart), granted: map[int64]int64{}}
	lim, err := ratelimit.New(ratelimit.Config{Max: vertexMax, Min: vertexMax}, ratelimit.WithClock(r.clk),
		ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.granted[s.Epoch] = s.Granted
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close(context.Background()) })
	if r.keys, err = ratelimit.NewKeyLimiter(ratelimit.KeyConfig{Max: keyMax}, ratelimit.WithClock(r.clk)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.keys.Close() })
	r.sink = newEpochSink(r.clk)
	r.metrics = throttle.NewKeyMetrics(prometheus.NewRegistry())
	opts.MaxIdlePause = time.Millisecond // dry reads pause on the wall clock, briefly
	r.harness = start(t, Deps{Reader: in, Mapper: udf.Cat{}, Sink: r.sink, Throttle: &throttle.Throttle{Limiter: lim, PerKey: &throttle.PerKey{Limiter: r.keys, MaxHeld: maxHeld, Metrics: r.metrics}}}, opts)
	return r
}

// run waits for the cumulative writes of each epoch in turn, moving the
// clock to the next epoch in between, and checks the writes per epoch.
func (r *keyedRig) run(t *testing.T, perEpoch []int) {
	t.Helper()
	total := 0
	for i, n := range perEpoch {
		total += n
		r.sink.waitFor(t, total)
		r.waitAcked(t, uint64(total)) // done with the write, tokens and all
		if i < len(perEpoch)-1 {
			r.clk.Advance(time.Second)
		}
	}
	r.stop(t)
	got, _ := r.sink.perEpoch(epochStart.Unix())
	if fmt.Sprint(got) != fmt.Sprint(perEpoch) {
		t.Fatalf("written per epoch %v; want %v", got, perEpoch)
	}
	if !r.f.opts.Streaming { // streaming writes batches as they are ready
		r.sink.checkOrder(t)
	}
}

// keyedModes are the forwarder's modes.
var keyedModes = append([]struct {
	name string
	set  func(*Options)
}{{"sequential", func(*Options) {}}}, pipelinedModes...)

// TestPerKeyLimitHoldsOnlyTheKeysOverIt reads 20 messages of key a and then
// a, b, c and d in turn, 9 of each, under a vertex limit of 12 a second and 3
// a key: b, c and d, read behind 20 held messages of a, still get their 3 in
// the first second; every second has exactly 12 while they last (held
// messages gave their vertex tokens back, and took them again when they went
// on), then a alone has 3 a second, in its order.
func TestPerKeyLimitHoldsOnlyTheKeysOverIt(t *testing.T) {
	var keys []string
	for range 20 {
		keys = append(keys, "a")
	}
	for range 9 {
		keys = append(keys, "b", "c", "d", "a")
	}
	for _, mode := range keyedModes {
		t.Run(mode.name, func(t *testing.T) {
			in := keyedBuffer(t, keys)
			opts := Options{BatchSize: 10}
			mode.set(&opts)
			r := startKeyed(t, in, 12, 3, 100, opts)
			r.run(t, []int{12, 12, 12, 3, 3, 3, 3, 3, 3, 2})
			_, byKey := r.sink.perEpoch(epochStart.Unix())
			for e, ks := range byKey {
				for k, n := range ks {
					if n > 3 {
						t.Errorf("epoch %d: key %s written %d times; limit 3", e, k, n)
					}
				}
				if e < epochStart.Unix()+3 && (ks["b"] != 3 || ks["c"] != 3 || ks["d"] != 3) {
					t.Errorf("epoch %d: %v; want 3 each for b, c and d", e, ks)
				}
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			for e := epochStart.Unix(); e < epochStart.Unix()+3; e++ {
				if r.granted[e] != 12 {
					t.Errorf("vertex limiter granted %d in epoch %d; want 12, what was written", r.granted[e], e)
				}
			}
			if s := in.Stats(); s.Acked != uint64(len(keys)) || s.InFlight != 0 || s.Pending != 0 {
				t.Fatalf("source %+v; want all acked", s)
			}
			if held, total := r.metrics.Held(), testutil.ToFloat64(r.metrics.HeldTotal); held != 0 || total == 0 {
				t.Fatalf("held %d now, %v in all; want none left, some held on the way", held, total)
			}
		})
	}
}

// noNack is a reader that cannot take messages back.
type noNack struct{ b *memory.Buffer }

func (r noNack) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	return r.b.Read(ctx, buf)
}

func (r noNack) Ack(ctx context.Context, msgs []isb.ReadMessage) error { return r.b.Ack(ctx, msgs) }

// TestFullHoldStopsReading holds at most 5 messages from a reader that
// cannot take messages back: once the hold is full the forwarder reads
// nothing new, and reads on as held messages go.
func TestFullHoldStopsReading(t *testing.T) {
	for _, mode := range keyedModes {
		t.Run(mode.name, func(t *testing.T) {
			keys := make([]string, 30)
			for i := range keys {
				keys[i] = "a"
			}
			in := keyedBuffer(t, keys)
			opts := Options{BatchSize: 10}
			mode.set(&opts)
			r := startKeyed(t, noNack{in}, 100, 3, 5, opts)
			for epoch := range 10 {
				r.sink.waitFor(t, 3*(epoch+1))
				r.waitAcked(t, uint64(3*(epoch+1)))
				if epoch < 8 { // while the source has more than the hold takes
					r.waitThrottled(t, ratelimit.ReasonRateLimited) // for the next epoch
					if held := r.metrics.Held(); held != 5 {
						t.Fatalf("epoch %d: %d held; want a full hold of 5", epoch, held)
					}
					if s := in.Stats(); s.Pending != 30-3*(epoch+1)-5 {
						t.Fatalf("epoch %d: %d unread; want the source read no further than the hold", epoch, s.Pending)
					}
				}
				if epoch < 9 {
					r.clk.Advance(time.Second)
				}
			}
			r.stop(t)
			got, _ := r.sink.perEpoch(epochStart.Unix())
			if fmt.Sprint(got) != "[3 3 3 3 3 3 3 3 3 3]" {
				t.Fatalf("written per epoch %v", got)
			}
			if !opts.Streaming { // streaming writes batches as they are ready
				r.sink.checkOrder(t)
			}
		})
	}
}

// TestHeldMessagesAreHandedBackOnShutdown: a reader that takes messages
// back gets the held ones when the forwarder stops, none acked.
func TestHeldMessagesAreHandedBackOnShutdown(t *testing.T) {
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = "a"
	}
	in := keyedBuffer(t, keys)
	r := startKeyed(t, in, 100, 3, 100, Options{BatchSize: 10})
	r.sink.waitFor(t, 3)
	r.stop(t)
	if s := in.Stats(); s.Acked != 3 || s.InFlight != 0 || s.Pending != 7 {
		t.Fatalf("source %+v; want 3 acked and the 7 held back in the buffer", s)
	}
	if held := r.metrics.Held(); held != 0 {
		t.Fatalf("%d held after shutdown", held)
	}
}

// TestFullHoldHandsBackToTheSource reads 30 messages of a hot key a, then 3
// each of b and c, with a key limit of 3 a second and a hold of 5, from a
// buffer that takes messages back: once the hold is full of a, the newest of
// them go back to the buffer, to come again a second later, so the reads go
// on and b and c get their 3 in the first second. a then gets 3 a second:
// never more in an epoch (asserted exactly), and, over the run, every slot
// but at most one epoch's (a message handed back as the test moves the
// clocks comes one epoch later); every message is written exactly once.
func TestFullHoldHandsBackToTheSource(t *testing.T) {
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = "a"
	}
	keys = append(keys, "b", "c", "b", "c", "b", "c")
	for _, mode := range keyedModes {
		t.Run(mode.name, func(t *testing.T) {
			bclk := clock.NewManual(epochStart)
			in := keyedBufferOn(t, keys, bclk)
			opts := Options{BatchSize: 10}
			mode.set(&opts)
			r := startKeyed(t, in, 100, 3, 5, opts)
			// 9 in the first epoch (a, b and c 3 each), then 3 of a in
			// each: 36 in 10 epochs, or 11 when one epoch of a's is lost.
			const epochs = 11
			written := func() int { got, _ := r.sink.perEpoch(epochStart.Unix()); return sum(got) }
			for i := range epochs {
				if i > 0 {
					// The buffer's clock after the forwarder's: a read it
					// ends (its timeout, messages back) is in the new epoch.
					r.clk.Advance(time.Second)
					bclk.Advance(time.Second)
				}
				want := min(9+3*i, len(keys))
				runtest.WaitFor(t, fmt.Sprintf("%d messages written in epoch %d", want, i),
					func() bool { return written() >= want }, runtest.Within(2*time.Second), runtest.Soft())
				if written() == len(keys) {
					break
				}
			}
			r.stop(t)
			got, byKey := r.sink.perEpoch(epochStart.Unix())
			if sum(got) != len(keys) {
				t.Fatalf("written per epoch %v: %d in %d epochs; want all %d", got, sum(got), epochs, len(keys))
			}
			if got[0] != 9 {
				t.Fatalf("written per epoch %v; want 9 in the first", got)
			}
			for e, n := range byKey {
				if n["a"] > 3 || n["b"] > 3 || n["c"] > 3 {
					t.Fatalf("epoch %d wrote %v; want at most 3 of a key", e-epochStart.Unix(), n)
				}
			}
			if first := byKey[epochStart.Unix()]; first["b"] != 3 || first["c"] != 3 {
				t.Fatalf("first epoch %v; want b and c in full behind the hot key", first)
			}
			seen := map[string]bool{}
			for _, w := range r.sink.writes {
				if seen[w.value] {
					t.Fatalf("message %s written twice", w.value)
				}
				seen[w.value] = true
			}
			if n := testutil.ToFloat64(r.metrics.HandedBackTotal); n == 0 {
				t.Fatal("no message handed back; want the full hold to make room")
			}
			if s := in.Stats(); s.Acked != uint64(len(keys)) {
				t.Fatalf("source %+v; want all %d acked", s, len(keys))
			}
		})
	}
}

package forward

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
)

// nackOnce is a function that nacks each message the first time it sees it
// and passes it through after.
type nackOnce struct {
	mu   sync.Mutex
	seen map[string]int
	opts isb.NackOptions
}

func (f *nackOnce) Map(_ context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range in {
		f.seen[string(m.Value)]++
		if f.seen[string(m.Value)] == 1 {
			opts := f.opts
			out = append(out, isb.Message{ID: m.ID, Origin: m.Origin, Nack: &opts})
			continue
		}
		out = append(out, m)
	}
	return out, 0, nil
}

// nackSink nacks the odd messages the first nacks times it sees each, and
// every message in always, and writes the rest to out.
type nackSink struct {
	mu     sync.Mutex
	seen   map[string]int
	nacks  int
	always map[string]bool
	opts   isb.NackOptions
	out    *memory.Buffer
}

func (s *nackSink) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ok []isb.Message
	for i, m := range msgs {
		v := string(m.Value)
		n, _ := strconv.Atoi(v)
		s.seen[v]++
		if s.always[v] || (n%2 == 1 && s.seen[v] <= s.nacks) {
			errs[i] = &isb.NackError{Options: s.opts}
			continue
		}
		errs[i] = nil
		ok = append(ok, m)
	}
	return s.out.Write(ctx, ok, make([]error, len(ok)))
}

// optionsReader is a memory buffer as a source that takes nack options, and
// records them.
type optionsReader struct {
	*memory.Buffer
	mu   sync.Mutex
	opts []isb.NackOptions
}

func (r *optionsReader) NackOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	r.mu.Lock()
	for range msgs {
		r.opts = append(r.opts, opts)
	}
	r.mu.Unlock()
	return r.Nack(ctx, msgs, opts.Delay)
}

// checkOnce checks that out holds the values 0 to n-1, each once.
func checkOnce(t *testing.T, out []isb.Message, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range out {
		seen[string(m.Value)]++
	}
	for i := range n {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("message %d written %d times; want once", i, c)
		}
	}
	if len(out) != n {
		t.Errorf("sink has %d messages; want %d", len(out), n)
	}
}

func TestNackedByTheFunctionComesBackOnce(t *testing.T) { testNackedByTheFunctionComesBackOnce(t) }

func testNackedByTheFunctionComesBackOnce(t *testing.T, modes ...func(*Options)) {
	for _, c := range []struct {
		name   string
		reader func(*memory.Buffer) isb.Reader
	}{
		{"reader nacks", func(b *memory.Buffer) isb.Reader { return b }},
		{"forwarder redelivers", func(b *memory.Buffer) isb.Reader { return ackOnly{b} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := filledBuffer(t, 45)
			lim := &countingLimiter{}
			h := start(t, Deps{Reader: c.reader(in), Mapper: &nackOnce{seen: map[string]int{}}, Throttle: &throttle.Throttle{Limiter: lim}}, Options{}, modes...)
			h.waitAcked(t, 45)
			h.stop(t)
			checkOnce(t, h.out.Messages(), 45)
			// A message delivered again takes a token again, whoever delivers it.
			if n := lim.used(); n != 90 {
				t.Errorf("%d tokens used for 45 messages each delivered twice; want 90", n)
			}
			if n := testutil.ToFloat64(h.m.Nacked); n != 45 {
				t.Errorf("nack metric %v; want 45", n)
			}
			if n := testutil.ToFloat64(h.m.Written); n != 45 {
				t.Errorf("write metric %v; want 45", n)
			}
			if s := in.Stats(); s.InFlight != 0 || s.Pending != 0 || s.Acked != 45 {
				t.Errorf("source %+v; want 45 acked, nothing left", s)
			}
		})
	}
}

func TestNackedByTheSinkComesBackOnce(t *testing.T) { testNackedByTheSinkComesBackOnce(t) }

func testNackedByTheSinkComesBackOnce(t *testing.T, modes ...func(*Options)) {
	for _, c := range []struct {
		name   string
		reader func(*memory.Buffer) isb.Reader
	}{
		{"reader nacks", func(b *memory.Buffer) isb.Reader { return b }},
		{"forwarder redelivers", func(b *memory.Buffer) isb.Reader { return ackOnly{b} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := filledBuffer(t, 50)
			sink := &nackSink{seen: map[string]int{}, nacks: 1, out: memory.New("sink", 1<<20, time.Millisecond, nil)}
			h := start(t, Deps{Reader: c.reader(in), Sink: sink}, Options{}, modes...)
			h.waitAcked(t, 50)
			h.stop(t)
			checkOnce(t, sink.out.Messages(), 50)
			if n := testutil.ToFloat64(h.m.Nacked); n != 25 {
				t.Errorf("nack metric %v; want the 25 odd messages", n)
			}
			if e := testutil.ToFloat64(h.m.Errors.WithLabelValues(StageWrite)); e != 0 {
				t.Errorf("write errors %v; a nack is not a failure", e)
			}
		})
	}
}

func TestNackOptionsReachTheSource(t *testing.T) { testNackOptionsReachTheSource(t) }

func testNackOptionsReachTheSource(t *testing.T, modes ...func(*Options)) {
	in := &optionsReader{Buffer: filledBuffer(t, 10)}
	opts := isb.NackOptions{Reason: "later", Delay: time.Millisecond, MaxDeliveries: 3, Values: map[string]string{"k": "v"}}
	f := &nackOnce{seen: map[string]int{}, opts: opts}
	h := start(t, Deps{Reader: in, Mapper: f}, Options{}, modes...)
	h.waitAcked(t, 10)
	h.stop(t)
	checkOnce(t, h.out.Messages(), 10)
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.opts) != 10 {
		t.Fatalf("source got %d nacks; want 10", len(in.opts))
	}
	for _, o := range in.opts {
		if !sameNack(&o, &opts) {
			t.Fatalf("source got %+v; want %+v", o, opts)
		}
	}
}

func TestMaxDeliveriesDropsWhenTheForwarderRedelivers(t *testing.T) {
	testMaxDeliveriesDropsWhenTheForwarderRedelivers(t)
}

func testMaxDeliveriesDropsWhenTheForwarderRedelivers(t *testing.T, modes ...func(*Options)) {
	in := filledBuffer(t, 10)
	sink := &nackSink{seen: map[string]int{}, always: map[string]bool{"4": true},
		opts: isb.NackOptions{MaxDeliveries: 3}, out: memory.New("sink", 1<<20, time.Millisecond, nil)}
	h := start(t, Deps{Reader: ackOnly{in}, Sink: sink}, Options{}, modes...)
	h.waitAcked(t, 10)
	h.stop(t)
	if n := len(sink.out.Messages()); n != 9 {
		t.Errorf("sink has %d messages; want every one but 4", n)
	}
	sink.mu.Lock()
	if n := sink.seen["4"]; n != 3 {
		t.Errorf("message 4 delivered %d times; want maxDeliveries, 3", n)
	}
	sink.mu.Unlock()
	if n := testutil.ToFloat64(h.m.Dropped); n != 1 {
		t.Errorf("drop metric %v; want 1", n)
	}
}

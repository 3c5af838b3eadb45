package reduce

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
)

// watermark is a watermark the test sets.
type watermark struct {
	mu sync.Mutex
	wm time.Time
}

func (w *watermark) set(sec int64) { w.mu.Lock(); w.wm = time.Unix(sec, 0); w.mu.Unlock() }
func (w *watermark) get() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wm, !w.wm.IsZero()
}

// flaky fails every other write of the messages it is given.
type flaky struct {
	isb.Writer
	mu sync.Mutex
	n  int
}

func (f *flaky) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	f.mu.Lock()
	f.n++
	fail := f.n%2 == 1
	f.mu.Unlock()
	if fail {
		return context.DeadlineExceeded
	}
	return f.Writer.Write(ctx, msgs, errs)
}

// TestLoopOnBuffers reads a keyed stream from a buffer, acks it once it is
// in the log, and writes each window's counts when the watermark closes it,
// through a sink that fails every other write.
func TestLoopOnBuffers(t *testing.T) {
	in := memory.New("in", 100, 5*time.Millisecond, clock.Real())
	out := memory.New("out", 100, 5*time.Millisecond, clock.Real())
	l, err := wal.Open(t.TempDir(), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := newCounter(t, l)
	if _, err := p.Recover(); err != nil {
		t.Fatal(err)
	}
	var wm watermark
	metrics := NewMetrics(prometheus.NewRegistry())
	loop := &Loop{Reader: in, Writer: &flaky{Writer: out}, Processor: p, Watermark: wm.get,
		Limiter: throttle.Noop{}, BatchSize: 4, RetryInterval: time.Millisecond, Metrics: metrics}
	run := runtest.Start(t, loop)
	var msgs []isb.Message
	for i, k := range []string{"a", "b", "a", "c", "a", "b"} {
		msgs = append(msgs, msg(k+string(rune('0'+i)), k, int64(100+i)))
	}
	msgs = append(msgs, msg("late-window", "a", 115))
	errs := make([]error, len(msgs))
	if err := in.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "every message acked", func() bool { return in.Stats().Pending == 0 })
	wm.set(110)
	runtest.WaitFor(t, "the window's results", func() bool { return len(out.Messages()) == 3 })
	var got []string
	for _, m := range out.Messages() {
		got = append(got, strings.Join(m.Keys, ",")+"="+string(m.Value))
	}
	slices.Sort(got)
	if strings.Join(got, " ") != "a=3 b=2 c=1" {
		t.Errorf("results %v", got)
	}
	if err := run.Stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if p.Open() != 1 {
		t.Errorf("%d windows open; want the one of 115", p.Open())
	}
	for _, c := range []struct {
		name string
		c    prometheus.Counter
		want float64
	}{{"read", metrics.Read, 7}, {"late", metrics.Late, 0}, {"closed", metrics.Closed, 1}, {"results", metrics.Results, 3}} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLoopNeedsItsParts(t *testing.T) {
	if err := (&Loop{}).Run(context.Background()); err == nil {
		t.Error("a Loop without its parts ran")
	}
	p := newCounter(t, nil)
	in := memory.New("in", 1, time.Millisecond, clock.Real())
	l := &Loop{Reader: in, Writer: in, Processor: p, Watermark: (&watermark{}).get, Limiter: throttle.Noop{}}
	if err := l.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "BatchSize (0)") {
		t.Errorf("BatchSize 0: %v", err)
	}
}

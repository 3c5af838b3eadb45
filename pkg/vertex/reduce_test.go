package vertex_test

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
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/reduce"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// settable is a watermark the test moves.
type settable struct {
	mu sync.Mutex
	wm time.Time
}

func (s *settable) set(sec int64) { s.mu.Lock(); s.wm = time.Unix(sec, 0); s.mu.Unlock() }
func (s *settable) get() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wm, !s.wm.IsZero()
}

// reduceSpec is a keyed count over fixed windows of ten seconds, from two
// partitions to out, its windows logged under dir, under a rate limit.
func reduceSpec(in []isb.Reader, out isb.Writer, dir string, wm *settable) vertex.Spec {
	s, _ := window.Fixed(10 * time.Second)
	return vertex.Spec{Name: "counts", Inputs: in,
		Limits: vertex.Limits{ReadBatchSize: 10, ReadTimeout: 5 * time.Millisecond,
			RateLimit: &vertex.RateLimit{Config: ratelimit.Config{Max: 1000, Min: 1000}}},
		Output: func() (isb.Writer, error) { return out, nil },
		Reduce: &vertex.Reduce{Strategy: s, Keyed: true, Dir: dir, Watermark: wm.get,
			Reducer: func(vertex.Env) (reduce.Reducer, error) { return reduce.Builtin("count", nil) }},
	}
}

func counts(out *memory.Buffer) string {
	var got []string
	for _, m := range out.Messages() {
		got = append(got, m.Keys[0]+"="+string(m.Value)+"@"+m.EventTime.UTC().Format("05.000"))
	}
	slices.Sort(got)
	return strings.Join(got, " ")
}

// TestReduceVertex runs a reduce vertex over two partitions, stops it with
// windows open, and starts it again on the same log: the counts of the
// windows it closes afterwards include what it read before the restart.
func TestReduceVertex(t *testing.T) {
	dir := t.TempDir()
	in := []*memory.Buffer{memory.New("p0", 100, 5*time.Millisecond, clock.Real()), memory.New("p1", 100, 5*time.Millisecond, clock.Real())}
	readers := []isb.Reader{in[0], in[1]}
	out := memory.New("out", 100, 5*time.Millisecond, clock.Real())
	write := func(b *memory.Buffer, msgs ...isb.Message) {
		t.Helper()
		if err := b.Write(context.Background(), msgs, make([]error, len(msgs))); err != nil {
			t.Fatal(err)
		}
	}
	m := func(key string, sec int64) isb.Message {
		return isb.Message{Keys: []string{key}, Value: []byte("x"), EventTime: time.Unix(sec, 0)}
	}
	var wm settable
	v, err := vertex.New(reduceSpec(readers, out, dir, &wm))
	if err != nil {
		t.Fatal(err)
	}
	run := runtest.Start(t, v)
	write(in[0], m("a", 101), m("a", 102), m("a", 115))
	write(in[1], m("b", 103))
	runtest.WaitFor(t, "the first messages acked", func() bool { return in[0].Stats().Pending == 0 && in[1].Stats().Pending == 0 })
	if err := run.Stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := counts(out); got != "" {
		t.Fatalf("results before any watermark: %s", got)
	}

	// The restarted vertex recovers [100,110) and [110,120) from its log.
	reg := prometheus.NewRegistry()
	v, err = vertex.New(reduceSpec(readers, out, dir, &wm), vertex.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	run = runtest.Start(t, v)
	write(in[0], m("a", 108))
	runtest.WaitFor(t, "the message after the restart acked", func() bool { return in[0].Stats().Pending == 0 })
	wm.set(110)
	runtest.WaitFor(t, "the first window's counts", func() bool { return len(out.Messages()) == 2 })
	if got := counts(out); got != "a=3@49.999 b=1@49.999" {
		t.Errorf("results %s", got)
	}
	wm.set(120)
	runtest.WaitFor(t, "the second window's count", func() bool { return len(out.Messages()) == 3 })
	const want = `# HELP sluice_reduce_results_total Results written downstream: of closed windows, and a reduce streamer's as its functions send them.
# TYPE sluice_reduce_results_total counter
sluice_reduce_results_total{replica="0",vertex="counts"} 3
# HELP sluice_reduce_windows_closed_total Windows the watermark closed and the reduce reduced.
# TYPE sluice_reduce_windows_closed_total counter
sluice_reduce_windows_closed_total{replica="0",vertex="counts"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_reduce_results_total", "sluice_reduce_windows_closed_total"); err != nil {
		t.Error(err)
	}
	if err := run.Stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestReduceVertexNeeds(t *testing.T) {
	var wm settable
	out := memory.New("out", 1, time.Millisecond, clock.Real())
	spec := reduceSpec([]isb.Reader{out}, out, "", &wm)
	spec.Reduce.Watermark = nil
	if _, err := vertex.New(spec); err == nil || !strings.Contains(err.Error(), "needs a Reducer, and a Watermark") {
		t.Errorf("New without a watermark: %v", err)
	}
}

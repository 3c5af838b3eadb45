package bench_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/bench"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

func TestMonoVertex(t *testing.T) {
	f, err := vertexconfig.Load("../../config/examples/monovertex.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tg := bench.NewTarget(f)
	if !tg.RateLimited() {
		t.Fatal("not rate limited")
	}
	for _, on := range []bool{false, true} {
		m := tg.Config(on).MonoVertex
		if m.Spec.Sink.Blackhole == nil || (m.Spec.Limits.GetRateLimit() != nil) != on {
			t.Fatalf("on=%v: sink %+v, rate limit %v", on, m.Spec.Sink, m.Spec.Limits.GetRateLimit())
		}
	}
	if f.MonoVertex.Spec.Sink.Log == nil || f.MonoVertex.Spec.Limits.GetRateLimit() == nil {
		t.Fatal("the loaded config was changed")
	}
	n, elapsed, err := bench.Measure(func() (bench.Runner, error) { return tg.Build(context.Background(), true) }, 100*time.Millisecond)
	// 5 messages in the first second, 8 in the next: 100ms sees at most one
	// boundary.
	if err != nil || n > 8 || elapsed < 100*time.Millisecond {
		t.Fatalf("Measure = %v, %v, %v", n, elapsed, err)
	}
}

func TestPipeline(t *testing.T) {
	f, err := vertexconfig.Load("../../config/examples/bench-pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tg := bench.NewTarget(f)
	off := tg.Config(false).Pipeline
	for _, v := range off.Spec.Vertices {
		if rl, _ := off.VertexRateLimit(v.Name); rl != nil {
			t.Fatalf("vertex %s keeps a rate limit when off", v.Name)
		}
	}
	n, _, err := bench.Measure(func() (bench.Runner, error) { return tg.Build(context.Background(), false) }, 100*time.Millisecond)
	if err != nil || n == 0 {
		t.Fatalf("Measure = %v, %v", n, err)
	}
	if m := bench.Median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Fatalf("Median = %v", m)
	}
}

// TestCompare measures a MonoVertex whose source never runs dry off and on,
// alternating, and reports each side's runs: its rate limit of 100 a second
// holds the runs that are on far below those that are off.
func TestCompare(t *testing.T) {
	f, err := vertexconfig.Parse([]byte(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: compare
spec:
  limits:
    rateLimit: {max: 100, min: 100, rampUpDuration: 0s}
  source:
    generator: {rpu: 1000000000000, duration: 1s, msgSize: 8}
  sink:
    log: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	off, on, err := bench.NewTarget(f).Compare(context.Background(), 2, 100*time.Millisecond, func(run int, on bool) {
		calls = append(calls, fmt.Sprint(run, on))
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1 false", "2 true", "3 false", "4 true"}; !slices.Equal(calls, want) {
		t.Errorf("progress calls %q; want %q", calls, want)
	}
	// 100ms sees at most one epoch boundary: 200 messages a run.
	if len(off.Rates) != 2 || len(on.Rates) != 2 || on.Messages > 400 || off.Messages <= on.Messages {
		t.Fatalf("off %+v, on %+v", off, on)
	}
	if off.Median() <= on.Median() {
		t.Errorf("median off %v, on %v; want off above on", off.Median(), on.Median())
	}
}

// fastVertex returns a MonoVertex named name whose generator and limit
// allow a billion messages a second, for a second.
func fastVertex(t *testing.T, name string) *config.File {
	t.Helper()
	f, err := vertexconfig.Parse([]byte(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata: {name: ` + name + `}
spec:
  limits:
    rateLimit: {max: 1000000000, min: 1000000000, rampUpDuration: 0s}
  source: {generator: {rpu: 1000000000, duration: 1s, msgSize: 8}}
  sink: {log: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCompareVariants measures a MonoVertex off, on and with a variant of
// its rate limit in one comparison, and each side writes.
func TestCompareVariants(t *testing.T) {
	f := fastVertex(t, "variants")
	tg := bench.NewTarget(f)
	cost := "len(payload)"
	v := tg.Variant("cost", func(rl *config.RateLimit) { rl.Cost = &cost })
	if f.MonoVertex.Spec.Limits.RateLimit.Cost != nil {
		t.Fatal("Variant changed the target's config")
	}
	runs, err := tg.CompareVariants(context.Background(), 1, 100*time.Millisecond, []bench.Variant{v}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("%d sides; want off, on and cost", len(runs))
	}
	for i, r := range runs {
		if r.Messages == 0 {
			t.Errorf("side %d wrote nothing", i)
		}
	}
}

// TestPageVariant measures a MonoVertex with its status page open: the
// variant writes, and /status/live answered at least the poll at the start
// of each run.
func TestPageVariant(t *testing.T) {
	f := fastVertex(t, "live")
	tg := bench.NewTarget(f)
	runs, err := tg.CompareVariants(context.Background(), 2, 100*time.Millisecond, []bench.Variant{tg.PageVariant("live")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if live := runs[2]; live.Messages == 0 || live.Polls < 2 || runs[0].Polls != 0 || runs[1].Polls != 0 {
		t.Errorf("off %+v, on %+v, live %+v; want live to write and read /status/live in each of its 2 runs, and the others never", runs[0], runs[1], live)
	}
}

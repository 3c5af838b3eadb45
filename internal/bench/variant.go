package bench

import (
	"context"
	"io"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// Variant is the target with its rate limits on, each rateLimit block
// changed by change (on a copy), to be measured beside it by
// [Target.CompareVariants]: the same vertex with a byte limit, or a cost.
type Variant struct {
	Name string
	file *config.File
	// open, when set, starts what runs beside each run once it is built
	// (the page variant's polling), and its close stops it and returns
	// the count for Runs.Polls.
	open func(Runner) (close func() int, err error)
}

// Variant returns the variant name of t whose rateLimit blocks change
// makes.
func (t *Target) Variant(name string, change func(*config.RateLimit)) Variant {
	f := *t.on
	with := func(rl *config.RateLimit) *config.RateLimit {
		if rl == nil {
			return nil
		}
		c := *rl
		change(&c)
		return &c
	}
	if m := f.MonoVertex; m != nil {
		mv := *m
		if l := mv.Spec.Limits; l != nil {
			lc := *l
			lc.RateLimit = with(l.RateLimit)
			mv.Spec.Limits = &lc
		}
		f.MonoVertex = &mv
		return Variant{Name: name, file: &f}
	}
	p := *f.Pipeline
	if l := p.Spec.Limits; l != nil {
		lc := *l
		lc.RateLimit = with(l.RateLimit)
		p.Spec.Limits = &lc
	}
	for i := range p.Spec.Vertices {
		v := &p.Spec.Vertices[i]
		if l := v.Limits; l != nil {
			lc := *l
			lc.RateLimit = with(l.RateLimit)
			v.Limits = &lc
		}
	}
	f.Pipeline = &p
	return Variant{Name: name, file: &f}
}

// build builds the variant of t.
func (t *Target) build(ctx context.Context, f *config.File) (Runner, error) {
	if m := f.MonoVertex; m != nil {
		return vertex.New(vertexconfig.FromMonoVertex(m), append([]vertex.Option{vertex.WithSocketDir(t.SocketDir)}, t.VertexOptions...)...)
	}
	return pipeline.NewFromConfig(ctx, f.Pipeline, pipeline.WithSocketDir(t.SocketDir), pipeline.WithVertexOptions(vertex.WithLogSink(sink.NewLog(io.Discard))))
}

// CompareVariants measures t with its rate limits off, on and each of
// variants, runs times each for each long, one of each in turn, in that
// order, and returns their Runs in that order. Before each run, progress,
// when not nil, is called with the run's number, from 1, and the name of
// what it measures ("off" and "on" for t itself).
func (t *Target) CompareVariants(ctx context.Context, runs int, each time.Duration, variants []Variant, progress func(run int, name string)) ([]Runs, error) {
	sides := append([]Variant{{Name: "off", file: t.off}, {Name: "on", file: t.on}}, variants...)
	out := make([]Runs, len(sides))
	for i := range runs * len(sides) {
		s := sides[i%len(sides)]
		if progress != nil {
			progress(i+1, s.Name)
		}
		closeSide := func() int { return 0 }
		n, elapsed, err := Measure(func() (Runner, error) {
			r, err := t.build(ctx, s.file)
			if err != nil || s.open == nil {
				return r, err
			}
			closeSide, err = s.open(r)
			return r, err
		}, each)
		polls := closeSide()
		if err != nil {
			return nil, err
		}
		r := &out[i%len(sides)]
		r.Polls += polls
		r.Rates = append(r.Rates, n/elapsed.Seconds())
		r.Messages += n
	}
	return out, nil
}

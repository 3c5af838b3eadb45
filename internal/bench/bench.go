// Package bench measures the throughput of a MonoVertex or of a whole Pipeline
// in one process, with its rate limit off and on, as `vertex bench` does.
//
// A [Target] is the config with every sink a blackhole; [Target.Build] builds
// it with or without its rate limits, and [Measure] runs what was built and
// counts the messages its sinks write once it is warm. [Target.Compare]
// measures it off and on in alternating runs and gives each side's [Runs],
// whose median decides.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// Runner is what is measured: a [*vertex.Vertex] or a [*pipeline.Pipeline].
type Runner interface {
	Run(ctx context.Context) error
	// Written is what the sinks have written so far.
	Written() float64
}

// Target is a MonoVertex or Pipeline in which every sink is a blackhole, to be
// measured with its rate limits off and on.
type Target struct {
	off, on *config.File
	// OnJetStream runs a pipeline on JetStream, its buffers emptied before
	// each run, instead of on in-memory buffers.
	OnJetStream bool
	// SocketDir is where the user-defined containers have their sockets
	// (default /var/run/numaflow); a pipeline's vertices each have a
	// directory of their own in it, [pipeline.SocketDir].
	SocketDir string
	// VertexOptions are added to a MonoVertex's options.
	VertexOptions []vertex.Option
}

// NewTarget returns the target of a validated config.
func NewTarget(f *config.File) *Target {
	return &Target{off: withBlackholes(f, false), on: withBlackholes(f, true)}
}

// Config returns the config as measured: every sink a blackhole, with its rate
// limits when on.
func (t *Target) Config(on bool) *config.File {
	if on {
		return t.on
	}
	return t.off
}

// RateLimited reports whether any vertex has a rate limit.
func (t *Target) RateLimited() bool {
	if m := t.on.MonoVertex; m != nil {
		return m.Spec.Limits.GetRateLimit() != nil
	}
	for _, v := range t.on.Pipeline.Spec.Vertices {
		if rl, _ := t.on.Pipeline.VertexRateLimit(v.Name); rl != nil {
			return true
		}
	}
	return false
}

// Build builds the target with its rate limits (on) or without them.
func (t *Target) Build(ctx context.Context, on bool) (Runner, error) {
	f := t.Config(on)
	if m := f.MonoVertex; m != nil {
		return vertex.New(vertexconfig.FromMonoVertex(m), append([]vertex.Option{vertex.WithSocketDir(t.SocketDir)}, t.VertexOptions...)...)
	}
	opts := []pipeline.Option{pipeline.WithSocketDir(t.SocketDir), pipeline.WithVertexOptions(vertex.WithLogSink(sink.NewLog(io.Discard)))}
	if t.OnJetStream {
		js, err := pipeline.OpenJetStream(ctx, f.Pipeline, nil)
		if err != nil {
			return nil, err
		}
		err = js.Reset(ctx, pipeline.NewGraph(f.Pipeline))
		if js.Close(); err != nil {
			return nil, err
		}
		opts = append(opts, pipeline.WithBackend(pipeline.OnJetStream))
	}
	return pipeline.NewFromConfig(ctx, f.Pipeline, opts...)
}

// withBlackholes returns a copy of f in which every sink is a blackhole, with
// its rate limits when on and without them when not.
func withBlackholes(f *config.File, on bool) *config.File {
	out := *f
	blackhole := &config.Sink{AbstractSink: config.AbstractSink{Blackhole: &struct{}{}}}
	if m := f.MonoVertex; m != nil {
		mv := *m
		mv.Spec.Sink = blackhole
		if l := mv.Spec.Limits; l != nil && !on {
			lc := *l
			lc.RateLimit = nil
			mv.Spec.Limits = &lc
		}
		out.MonoVertex = &mv
		return &out
	}
	p := *f.Pipeline
	p.Spec.Vertices = slices.Clone(p.Spec.Vertices)
	p.Spec.Limits = withoutRateLimit(p.Spec.Limits, on)
	for i := range p.Spec.Vertices {
		v := &p.Spec.Vertices[i]
		if v.Sink != nil {
			v.Sink = blackhole
		}
		v.Limits = withoutRateLimit(v.Limits, on)
	}
	out.Pipeline = &p
	return &out
}

// withoutRateLimit returns a copy of l without its rate limit, or l when keep.
func withoutRateLimit(l *config.PipelineLimits, keep bool) *config.PipelineLimits {
	if l == nil || keep {
		return l
	}
	c := *l
	c.RateLimit = nil
	return &c
}

// WarmUp is how long a run goes on after its first write before it is
// measured, so that runs are measured warm.
const WarmUp = 500 * time.Millisecond

// firstWriteTimeout bounds how long Measure waits for a first write.
const firstWriteTimeout = 10 * time.Second

// Measure builds what is measured, runs it and returns the messages it wrote
// in d, counted from [WarmUp] after its first write, and the time that took.
// Start-up is left out: a replica joining the replicas takes no tokens before the
// next second, and while it waits the runtime hands memory back to the
// system, which the first moments of the run then take again.
func Measure(build func() (Runner, error), d time.Duration) (float64, time.Duration, error) {
	runtime.GC()
	r, err := build()
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	if err := firstWrite(r, done); err != nil {
		cancel()
		return 0, 0, errors.Join(err, <-done)
	}
	time.Sleep(WarmUp)
	from, start := r.Written(), time.Now()
	time.Sleep(d)
	msgs, elapsed := r.Written()-from, time.Since(start)
	cancel()
	return msgs, elapsed, <-done
}

// firstWrite waits until r has written, or stopped.
func firstWrite(r Runner, done chan error) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(firstWriteTimeout)
	for r.Written() == 0 {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("stopped before writing: %v", err)
		case <-deadline:
			return fmt.Errorf("nothing written in %v", firstWriteTimeout)
		case <-tick.C:
		}
	}
	return nil
}

// Median returns the median of xs, which must not be empty.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// ErrNoVertex is matched by the error of a vertex name the pipeline does not
// have.
var ErrNoVertex = errors.New("no vertex")

// Pipeline is the vertices of a Pipeline that run in this process, one
// replica each, with their buffers: every vertex on in-memory buffers, every
// vertex on JetStream, or one vertex on JetStream ([WithVertex]).
//
// Create one with [New] and run it with [Pipeline.Run]; Status and Ready may be
// called at any time, from any goroutine. The zero value is not usable.
type Pipeline struct {
	g                    Graph
	o                    options
	p                    *config.Pipeline // the config it was made from, nil for a Spec
	mem                  *Memory          // nil on JetStream
	sources, others, all []*vertex.Vertex
	allNames             []string // of all's vertices

	mu      sync.Mutex
	closers closers

	si *sideInputs // nil without side inputs in this process
}

// New builds the vertices of s, declared in Go, and their buffers, in
// memory: every vertex runs in this process. A Spec that cannot run is an
// error matching [ErrInvalidSpec]. [NewFromConfig] builds a Pipeline's YAML
// this way, and on JetStream.
func New(ctx context.Context, s Spec, opts ...Option) (*Pipeline, error) {
	o, err := buildOptions(s.Name, opts)
	if err != nil {
		return nil, err
	}
	if o.backend != OnMemory {
		return nil, fmt.Errorf("pipeline: a Spec runs on in-memory buffers, not on %s: JetStream's connection is a Pipeline's spec.isb (NewFromConfig)", o.backend)
	}
	return build(ctx, s, o, nil)
}

// NewFromConfig builds the vertices of p, which must be valid, and their
// buffers: it makes p's [Spec] and builds it as [New] does, on in-memory
// buffers (the default) or on JetStream, with p's side inputs. On JetStream
// it connects (waiting, until ctx ends, for a server that is not up) and
// creates the buffers that are missing. A problem with a field of p that
// shows only now is a [*config.FieldError]; a vertex p does not have matches
// [ErrNoVertex].
func NewFromConfig(ctx context.Context, p *config.Pipeline, opts ...Option) (*Pipeline, error) {
	o, err := buildOptions(p.Metadata.Name, opts)
	if err != nil {
		return nil, err
	}
	g := NewGraph(p)
	names, err := runHere(g, o, func(name string) bool {
		v := p.Vertex(name)
		return v != nil && v.UDF != nil && v.UDF.GroupBy != nil
	})
	if err != nil {
		return nil, err
	}
	s, err := specOf(p, o, names)
	if err != nil {
		return nil, err
	}
	return build(ctx, s, o, p)
}

// build builds the vertices of s that run in this process, on the buffers o
// says; p is the config s was made from, nil for a Spec declared in Go.
func build(ctx context.Context, s Spec, o options, p *config.Pipeline) (_ *Pipeline, err error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	pl := &Pipeline{g: s.graph(), o: o, p: p}
	defer func() {
		if err != nil {
			pl.Close()
		}
	}()
	names, err := runHere(pl.g, o, func(name string) bool { return s.vertex(name).Spec.Reduce != nil })
	if err != nil {
		return nil, err
	}
	if o.backend == OnMemory {
		if pl.mem, err = NewMemory(pl.g); err != nil {
			return nil, err
		}
		pl.closers = append(pl.closers, pl.mem.Close)
	}
	// With every vertex in this process, so is the side inputs' manager.
	if p != nil {
		if pl.si, err = newSideInputs(ctx, p, o, o.only == "", names, &pl.closers); err != nil {
			return nil, err
		}
	}
	for _, name := range names {
		if err := pl.addVertex(ctx, s.vertex(name)); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// vertex returns the vertex of s called name, which s has.
func (s Spec) vertex(name string) Vertex {
	for _, v := range s.Vertices {
		if v.Name == name {
			return v
		}
	}
	return Vertex{}
}

// runHere lists the vertices of g that run in this process; reduce says
// whether a vertex is a reduce.
func runHere(g Graph, o options, reduce func(name string) bool) ([]string, error) {
	if only := o.only; only != "" {
		if err := g.has(only); err != nil {
			return nil, err
		}
		if n := g.Partitions(only); reduce(only) && o.replica >= n {
			return nil, fmt.Errorf("vertex %s: replica %d: a reduce vertex has a replica per partition, and it has %d", only, o.replica, n)
		}
		if n := g.Partitions(only); g.Ordered(only) && o.replica >= n {
			return nil, fmt.Errorf("vertex %s: replica %d: an ordered vertex has a replica per partition, and it has %d", only, o.replica, n)
		}
		return []string{only}, nil
	}
	return g.Vertices(), nil
}

// addVertex builds vertex v.
func (pl *Pipeline) addVertex(ctx context.Context, v Vertex) error {
	name := v.Name
	var b Buffers
	if pl.mem != nil {
		b = pl.mem
	} else {
		// A connection per vertex, as when each runs in a process of its own:
		// the server works through each connection in turn.
		js, err := OpenJetStream(ctx, pl.p, pl.o.log)
		if err != nil {
			return err
		}
		pl.closers = append(pl.closers, js.Close)
		b = js
	}
	spec, err := pl.g.vertexSpec(ctx, v, b, pl.o, &pl.closers)
	if err != nil {
		return err
	}
	opts := append(slices.Clip(pl.o.vertexOpts), vertex.WithSocketDir(pl.o.socketDir))
	opts = append(opts, v.Options...)
	if pl.p != nil {
		opts = append(opts, pl.si.gate(pl.p.Vertex(name))...)
	}
	vx, err := vertex.New(spec, opts...)
	if err != nil {
		return err
	}
	if spec.Source != nil {
		pl.sources = append(pl.sources, vx)
	} else {
		pl.others = append(pl.others, vx)
	}
	pl.all = append(pl.all, vx)
	pl.allNames = append(pl.allNames, name)
	return nil
}

// UpdateRateLimits changes the rate limits of the vertices that run in this
// process to those of p while they run (see [vertex.Vertex.UpdateRateLimit]).
// p must be a validated config of the same pipeline that differs from the
// running one only in what can change live ([vertexconfig.LiveChange]).
func (pl *Pipeline) UpdateRateLimits(p *config.Pipeline) error {
	var errs []error
	for i, v := range pl.all {
		rl, err := p.VertexRateLimit(pl.allNames[i])
		if err == nil && rl != nil {
			cfg := vertexconfig.LimiterConfig(rl)
			if err = v.UpdateRateLimit(&cfg); err == nil {
				err = v.UpdateByteLimit(vertexconfig.ByteConfig(rl))
			}
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run runs every vertex until ctx ends. Then the sources stop first; on
// in-memory buffers the other vertices go on until the buffers are empty (for
// at most the drain timeout), so that nothing read is lost, and then stop. A
// vertex that fails stops them all. Run closes the pipeline when it returns.
func (pl *Pipeline) Run(ctx context.Context) error {
	defer pl.Close()
	grp, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	restCtx, stopRest := context.WithCancel(gctx)
	defer stopRest()
	srcCtx, stopSources := context.WithCancel(gctx)
	defer stopSources()
	stopWatch := context.AfterFunc(ctx, stopSources)
	defer stopWatch()

	srcDone := make(chan struct{})
	var srcs errgroup.Group
	for _, v := range pl.sources {
		srcs.Go(func() error { return v.Run(srcCtx) })
	}
	grp.Go(func() error {
		defer close(srcDone)
		return srcs.Wait()
	})
	for _, v := range pl.others {
		grp.Go(func() error { return v.Run(restCtx) })
	}
	if si := pl.si; si != nil {
		grp.Go(func() error { return si.run(restCtx) })
	}
	grp.Go(func() error {
		for _, done := range []<-chan struct{}{ctx.Done(), srcDone} {
			select {
			case <-done:
			case <-gctx.Done():
				return nil
			}
		}
		if pl.mem != nil {
			pl.drain(gctx)
		}
		stopRest()
		return nil
	})
	return grp.Wait()
}

// drainPoll is how often drain looks at the buffers.
const drainPoll = 10 * time.Millisecond

// drain waits, at most the drain timeout, until the in-memory buffers are
// empty.
func (pl *Pipeline) drain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, pl.o.drainTimeout)
	defer cancel()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for pl.mem.Left() > 0 {
		select {
		case <-ctx.Done():
			if left := pl.mem.Left(); left > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				pl.o.log.Warn("buffers not drained before the timeout; their messages are lost", zap.Int("messages", left),
					zap.Duration("timeout", pl.o.drainTimeout))
			}
			return
		case <-tick.C:
		}
	}
}

// Vertices returns the pipeline's vertices that run in this process, in the
// config's order.
func (pl *Pipeline) Vertices() []*vertex.Vertex { return pl.all }

// Ready reports whether every vertex is ready.
func (pl *Pipeline) Ready() error {
	var errs []error
	for _, v := range pl.all {
		errs = append(errs, v.Ready())
	}
	if si := pl.si; si != nil {
		errs = append(errs, si.ready())
	}
	return errors.Join(errs...)
}

// Status returns the status of every vertex.
func (pl *Pipeline) Status() []vertex.Status {
	out := make([]vertex.Status, len(pl.all))
	for i, v := range pl.all {
		out[i] = v.Status()
	}
	return out
}

// PageView returns the JSON of /status/live: every vertex's [vertex.PageVertex] with
// the epochs after since, each in its column of the graph, with the
// vertices it writes to.
func (pl *Pipeline) PageView(since int64) vertex.PageView {
	cols := pl.g.Columns()
	out := vertex.PageView{Pipeline: pl.g.name, Vertices: make([]vertex.PageVertex, len(pl.all))}
	for i, v := range pl.all {
		lv := v.PageVertex(since)
		lv.Column = cols[pl.allNames[i]]
		for _, e := range pl.g.OutEdges(pl.allNames[i]) {
			lv.To = append(lv.To, e.To)
		}
		out.Vertices[i] = lv
	}
	return out
}

// Written is what the sink vertices have written.
func (pl *Pipeline) Written() float64 {
	var n float64
	for _, v := range pl.all {
		if v.IsSink() {
			n += v.Written()
		}
	}
	return n
}

// Close closes every vertex (those that ran closed themselves already), then
// the buffers' readers and writers, then the buffers. It is for a pipeline
// that never runs, and is safe to call more than once.
func (pl *Pipeline) Close() error {
	var errs []error
	for _, v := range pl.all {
		errs = append(errs, v.Close())
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.closers.closeAll()
	return errors.Join(errs...)
}

package pipeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/route"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// closers is what a pipeline closes, in reverse order, once its vertices are
// done: the readers and writers of its buffers, then the buffers.
type closers []func() error

func (c *closers) add(x any) {
	if cl, ok := x.(isb.Closer); ok {
		*c = append(*c, cl.Close)
	}
}

func (c *closers) closeAll() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}

// vertexSpec returns the [vertex.Spec] of the vertex called name, reading and
// writing buffers b, a reduce keeping its windows under o's state directory;
// the metrics of its edges go to o's registerer. What it opens of b is added
// to cl. A reduce vertex running alone ([WithVertex]) reads the partition of
// its replica ([WithReplica]); otherwise a vertex reads every partition of
// its input buffer.
func (g Graph) vertexSpec(ctx context.Context, name string, b Buffers, o options, cl *closers) (vertex.Spec, error) {
	v, _, err := g.vertex(name)
	if err != nil {
		return vertex.Spec{}, err
	}
	limits, err := g.p.VertexLimits(name)
	if err != nil {
		return vertex.Spec{}, err
	}
	s, err := vertexconfig.PipelineVertex(g.p, name, o.stateDir)
	if err != nil {
		return vertex.Spec{}, err
	}
	var ws *vertex.Watermark
	if wc := vertexconfig.WatermarkConfig(g.p.Spec.Watermark); !wc.Disabled {
		ws = &vertex.Watermark{Source: wc}
		s.Watermark = ws
	}
	if v.Source == nil {
		if err := g.inputs(ctx, name, o.replica, o.only != "" && s.Reduce != nil, b, limits, &s, cl); err != nil {
			return vertex.Spec{}, err
		}
	}
	if v.Sink == nil {
		metrics := newRouteMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"vertex": name}, o.registerer))
		var outs []vertex.WatermarkOutput
		s.Output = func() (isb.Writer, error) { return g.output(ctx, name, limits, b, metrics, cl, &outs) }
		if ws != nil {
			ws.Outputs = func() []vertex.WatermarkOutput { return outs }
		}
	}
	return s, nil
}

// inputs adds to s the readers of vertex name's input buffer, with their
// watermark fetchers when s has watermarks: every partition, or replica's
// alone.
func (g Graph) inputs(ctx context.Context, name string, replica int, one bool, b Buffers, limits *config.PipelineLimits, s *vertex.Spec, cl *closers) error {
	parts := g.Inputs(name)
	first := 0
	if one { // New checked the replica
		parts, first = parts[replica:replica+1], replica
		s.Reduce.FirstPartition = first
	}
	var store watermark.Store
	if s.Watermark != nil {
		var err error
		if store, err = b.Marks(ctx, g.MarksName(name)); err != nil {
			return err
		}
	}
	for i, in := range parts {
		r, err := b.Reader(ctx, in, limits.GetReadTimeout())
		if err != nil {
			return err
		}
		cl.add(r)
		s.Inputs = append(s.Inputs, r)
		if store != nil {
			f, err := watermark.NewFetcher(store, int32(first+i))
			if err != nil {
				return err
			}
			s.Watermark.Inputs = append(s.Watermark.Inputs, f)
		}
	}
	return nil
}

// output returns a writer along the edges leaving vertex name, and adds
// where it publishes its watermark to outs.
func (g Graph) output(ctx context.Context, name string, limits *config.PipelineLimits, b Buffers, m *routeMetrics, cl *closers, outs *[]vertex.WatermarkOutput) (isb.Writer, error) {
	var edges []route.Edge
	for _, e := range g.OutEdges(name) {
		re := routeEdge(e)
		store, err := b.Marks(ctx, g.MarksName(e.To))
		if err != nil {
			return nil, err
		}
		for i, out := range g.Inputs(e.To) {
			w, err := b.Writer(ctx, out, name, limits.GetBufferMaxLength(), limits.GetBufferUsageLimit())
			if err != nil {
				return nil, err
			}
			cl.add(w)
			re.Partitions = append(re.Partitions, w)
			if ow, ok := w.(isb.OffsetWriter); ok {
				*outs = append(*outs, vertex.WatermarkOutput{Store: store, Partition: int32(i), Writer: ow})
			}
		}
		edges = append(edges, re)
	}
	w, err := route.New(edges, m.counts())
	if err != nil {
		return nil, fmt.Errorf("vertex %s: %w", name, err)
	}
	return w, nil
}

// routeEdge returns edge e with its conditions, and no partitions yet.
func routeEdge(e config.Edge) route.Edge {
	re := route.Edge{To: e.To, OnFull: vertexconfig.OnFull(&e)}
	if c := e.Conditions; c != nil && c.Tags != nil {
		re.Condition = route.Condition{Operator: vertexconfig.Operator(c.Tags), Values: slices.Clone(c.Tags.Values)}
	}
	return re
}

// routeMetrics count what a vertex's edges did with its output.
type routeMetrics struct {
	written, discarded *prometheus.CounterVec
	unrouted           prometheus.Counter
}

func newRouteMetrics(reg prometheus.Registerer) *routeMetrics {
	m := &routeMetrics{
		written: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_isb_written_total",
			Help: "Messages written to the buffer of the vertex an edge leads to."}, []string{"to"}),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_isb_discarded_total",
			Help: "Messages an edge gave up because its buffer was full (onFull: discardLatest)."}, []string{"to"}),
		unrouted: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_isb_unrouted_total",
			Help: "Messages no edge took: their tags met no edge's conditions."}),
	}
	reg.MustRegister(m.written, m.discarded, m.unrouted)
	return m
}

func (m *routeMetrics) counts() route.Counts {
	return route.Counts{
		Routed:    func(to string, n int) { m.written.WithLabelValues(to).Add(float64(n)) },
		Discarded: func(to string, n int) { m.discarded.WithLabelValues(to).Add(float64(n)) },
		Unrouted:  func(n int) { m.unrouted.Add(float64(n)) },
	}
}

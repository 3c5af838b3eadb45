package pipeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/route"
	"github.com/sluiceflow/sluice/pkg/vertex"
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

// vertexSpec returns the [vertex.Spec] of v, reading and writing buffers
// b; the metrics of its edges go to o's registerer. What it opens of b is
// added to cl. A reduce or ordered vertex running alone ([WithVertex])
// reads the partition of its replica ([WithReplica]); otherwise a vertex
// reads every partition of its input buffer, a forwarder each.
func (g Graph) vertexSpec(ctx context.Context, v Vertex, b Buffers, o options, cl *closers) (vertex.Spec, error) {
	name, s := v.Name, v.Spec
	lim := g.find(name).buffers
	if w := s.Watermark; w != nil {
		c := *w
		s.Watermark = &c
	}
	if r := s.Reduce; r != nil {
		c := *r
		s.Reduce = &c
	}
	ws := s.Watermark
	s.Ordered = v.Ordered
	if s.Source == nil {
		if err := g.inputs(ctx, name, o.replica, o.only != "" && (s.Reduce != nil || s.Ordered), b, lim, &s, cl); err != nil {
			return vertex.Spec{}, err
		}
	}
	if s.Sink == nil {
		metrics := newRouteMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"vertex": name}, o.registerer))
		var outs []vertex.WatermarkOutput
		s.Output = func() (isb.Writer, error) { return g.output(ctx, name, lim, b, metrics, cl, &outs) }
		if ws != nil {
			ws.Outputs = func() []vertex.WatermarkOutput { return outs }
		}
	}
	return s, nil
}

// inputs adds to s the readers of vertex name's input buffer, with their
// watermark fetchers when s has watermarks: every partition, or replica's
// alone.
func (g Graph) inputs(ctx context.Context, name string, replica int, one bool, b Buffers, limits BufferLimits, s *vertex.Spec, cl *closers) error {
	parts := g.Inputs(name)
	first := 0
	if one { // New checked the replica
		parts, first = parts[replica:replica+1], replica
		if s.Reduce != nil {
			s.Reduce.FirstPartition = first
		}
	}
	var store watermark.Store
	if s.Watermark != nil {
		var err error
		if store, err = b.Marks(ctx, g.MarksName(name)); err != nil {
			return err
		}
	}
	for i, in := range parts {
		r, err := b.Reader(ctx, in, limits.ReadTimeout)
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
func (g Graph) output(ctx context.Context, name string, limits BufferLimits, b Buffers, m *routeMetrics, cl *closers, outs *[]vertex.WatermarkOutput) (isb.Writer, error) {
	var edges []route.Edge
	for _, e := range g.OutEdges(name) {
		re := g.routeEdge(e)
		store, err := b.Marks(ctx, g.MarksName(e.To))
		if err != nil {
			return nil, err
		}
		for i, out := range g.Inputs(e.To) {
			w, err := b.Writer(ctx, out, name, limits.MaxLength, limits.UsageLimit)
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

// routeEdge returns edge e with its condition, ordered when it leads to an
// ordered vertex, and no partitions yet.
func (g Graph) routeEdge(e Edge) route.Edge {
	return route.Edge{To: e.To, OnFull: e.OnFull, Ordered: g.Ordered(e.To), Condition: route.Condition{Operator: e.Condition.Operator, Values: slices.Clone(e.Condition.Values)}}
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

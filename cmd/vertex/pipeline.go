package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/route"
)

// bufferSpec is one partition of a vertex's input buffer, as a writer sees it:
// its name, the most messages it holds, and the usage (a percentage of that)
// at which the writer counts it full.
type bufferSpec struct {
	name       string
	maxLength  int
	usageLimit int
}

// isbBackend holds a pipeline's buffers: the memory ISB of one process, or
// JetStream.
type isbBackend interface {
	// reader returns a reader of buffer b for a vertex reading with
	// readTimeout, and what closes it.
	reader(ctx context.Context, b bufferSpec, readTimeout time.Duration) (isb.Reader, func() error, error)
	// writer returns a writer to buffer b for vertex from, which counts it
	// full at usageLimit percent of maxLength (its own limits), and what
	// closes it.
	writer(ctx context.Context, b bufferSpec, from string, maxLength, usageLimit int) (isb.Writer, func() error, error)
	close() error
}

// graph is a pipeline's vertices and edges, with its buffers' specs worked
// out from the vertices' limits.
type graph struct {
	p *config.Pipeline
}

// bufferName is the name of partition i of vertex's input buffer: the same
// in every process, so that writers and readers meet.
func (g graph) bufferName(vertex string, i int) string {
	return g.p.Metadata.Name + "-" + vertex + "-" + strconv.Itoa(i)
}

// partitions is the number of partitions of vertex's input buffer.
func (g graph) partitions(vertex string) int {
	if v := g.p.Vertex(vertex); v != nil && v.Partitions != nil && *v.Partitions > 1 {
		return int(*v.Partitions)
	}
	return 1
}

// inputs returns the partitions of vertex's input buffer, as created: the
// most messages any of its writers allows (bufferMaxLength of the vertex
// writing, as in Numaflow), and the usage limit of that writer.
func (g graph) inputs(vertex string) []bufferSpec {
	var maxLen, usage int
	for _, e := range g.p.Spec.Edges {
		if e.To != vertex {
			continue
		}
		l, err := g.p.VertexLimits(e.From)
		if err != nil {
			continue // validation reports unknown vertices
		}
		if n := l.GetBufferMaxLength(); n > maxLen {
			maxLen, usage = n, l.GetBufferUsageLimit()
		}
	}
	if maxLen == 0 {
		return nil // a source: no input buffer
	}
	specs := make([]bufferSpec, g.partitions(vertex))
	for i := range specs {
		specs[i] = bufferSpec{name: g.bufferName(vertex, i), maxLength: maxLen, usageLimit: usage}
	}
	return specs
}

// outEdges returns the edges leaving vertex, in the config's order.
func (g graph) outEdges(vertex string) []config.Edge {
	var out []config.Edge
	for _, e := range g.p.Spec.Edges {
		if e.From == vertex {
			out = append(out, e)
		}
	}
	return out
}

// allBuffers returns every buffer of the pipeline.
func (g graph) allBuffers() []bufferSpec {
	var out []bufferSpec
	for _, v := range g.p.Spec.Vertices {
		out = append(out, g.inputs(v.Name)...)
	}
	return out
}

// vertexNames lists the pipeline's vertices, for messages.
func (g graph) vertexNames() string {
	var names []string
	for _, v := range g.p.Spec.Vertices {
		names = append(names, v.Name)
	}
	return strings.Join(names, ", ")
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

// pipelineVertexSpec is the spec of one vertex of the pipeline, reading from and
// writing to buffers of backend.
func pipelineVertexSpec(ctx context.Context, g graph, name string, backend isbBackend, reg prometheus.Registerer, closers *[]func() error) (*vertexSpec, error) {
	v := g.p.Vertex(name)
	if v == nil {
		return nil, usagef("--vertex %q: no such vertex in pipeline %q (vertices: %s)", name, g.p.Metadata.Name, g.vertexNames())
	}
	limits, err := g.p.VertexLimits(name)
	if err != nil {
		return nil, err
	}
	s := &vertexSpec{
		name: name, storeKey: g.p.Metadata.Name + "-" + name,
		batchSize: limits.GetReadBatchSize(), readTimeout: limits.GetReadTimeout(), rateLimit: limits.GetRateLimit(),
		source: v.Source, udf: v.UDF, sink: v.Sink,
	}
	if v.Source == nil {
		for _, b := range g.inputs(name) {
			r, closeR, err := backend.reader(ctx, b, s.readTimeout)
			if err != nil {
				return nil, err
			}
			*closers = append(*closers, closeR)
			s.inputs = append(s.inputs, r)
		}
	}
	if v.Sink != nil {
		return s, nil
	}
	edges := g.outEdges(name)
	metrics := newRouteMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"vertex": name}, reg))
	s.output = func(closers *[]func() error) (isb.Writer, error) {
		var out []route.Edge
		for _, e := range edges {
			re := route.Edge{To: e.To, OnFull: e.GetOnFull()}
			if c := e.Conditions; c != nil && c.Tags != nil {
				re.Condition = route.Condition{Operator: c.Tags.GetOperator(), Values: slices.Clone(c.Tags.Values)}
			}
			for _, b := range g.inputs(e.To) {
				w, closeW, err := backend.writer(ctx, b, name, limits.GetBufferMaxLength(), limits.GetBufferUsageLimit())
				if err != nil {
					return nil, err
				}
				*closers = append(*closers, closeW)
				re.Partitions = append(re.Partitions, w)
			}
			out = append(out, re)
		}
		w, err := route.New(out, metrics.counts())
		if err != nil {
			return nil, fmt.Errorf("vertex %s: %w", name, err)
		}
		return w, nil
	}
	return s, nil
}

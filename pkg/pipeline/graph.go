package pipeline

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluiceflow/sluice/config"
)

// Graph is a pipeline's vertices and edges, with its buffers worked out
// from the vertices' limits: every vertex but a source reads an input
// buffer of its own, in one or more partitions, that the vertices with
// edges to it write.
type Graph struct {
	name     string
	vertices []graphVertex
	edges    []Edge
}

// graphVertex is what a Graph knows of a vertex.
type graphVertex struct {
	name       string
	partitions int
	ordered    bool
	buffers    BufferLimits // with defaults
}

// NewGraph returns the graph of p, which must be valid.
func NewGraph(p *config.Pipeline) Graph {
	s, _ := specOf(p, options{}, nil) // with no vertex spec to make, only limits: valid p has them
	return s.graph()
}

// graph returns the graph of s.
func (s Spec) graph() Graph {
	g := Graph{name: s.Name, edges: s.Edges}
	for _, v := range s.Vertices {
		g.vertices = append(g.vertices, graphVertex{name: v.Name, partitions: max(1, v.Partitions), ordered: v.Ordered,
			buffers: v.Buffers.withDefaults()})
	}
	return g
}

// BufferSpec is one partition of a vertex's input buffer: its name, the most
// messages it holds, and the usage (a percentage of that) at which writers
// count it full.
type BufferSpec struct {
	Name       string
	MaxLength  int
	UsageLimit int
	// Ordered is set for the buffer of an ordered vertex, read one message
	// at a time.
	Ordered bool
}

// BufferName is the name of partition i of vertex's input buffer,
// <pipeline>-<vertex>-<i>: the same in every process, so that writers and
// readers meet.
func (g Graph) BufferName(vertex string, i int) string {
	return g.name + "-" + vertex + "-" + strconv.Itoa(i)
}

// MarksName is the name of the watermark store of vertex's input buffer,
// <pipeline>-<vertex>-wm: the processors writing to the buffer publish
// their watermarks there, for every partition.
func (g Graph) MarksName(vertex string) string {
	return g.name + "-" + vertex + "-wm"
}

// Partitions is the number of partitions of vertex's input buffer.
func (g Graph) Partitions(vertex string) int {
	if v := g.find(vertex); v != nil {
		return v.partitions
	}
	return 1
}

// Ordered reports whether vertex has ordered processing.
func (g Graph) Ordered(vertex string) bool {
	v := g.find(vertex)
	return v != nil && v.ordered
}

// find returns the vertex called name, or nil.
func (g Graph) find(name string) *graphVertex {
	for i := range g.vertices {
		if g.vertices[i].name == name {
			return &g.vertices[i]
		}
	}
	return nil
}

// Inputs returns the partitions of vertex's input buffer, as created: the most
// messages any of its writers allows (bufferMaxLength of the vertex writing, as
// in Numaflow), with that writer's usage limit. A source has none.
func (g Graph) Inputs(vertex string) []BufferSpec {
	var maxLen, usage int
	for _, e := range g.edges {
		if e.To != vertex {
			continue
		}
		from := g.find(e.From)
		if from == nil {
			continue // validation reports unknown vertices
		}
		if n := from.buffers.MaxLength; n > maxLen {
			maxLen, usage = n, from.buffers.UsageLimit
		}
	}
	if maxLen == 0 {
		return nil
	}
	specs := make([]BufferSpec, g.Partitions(vertex))
	for i := range specs {
		specs[i] = BufferSpec{Name: g.BufferName(vertex, i), MaxLength: maxLen, UsageLimit: usage, Ordered: g.Ordered(vertex)}
	}
	return specs
}

// OutEdges returns the edges leaving vertex, in the order of the pipeline's.
func (g Graph) OutEdges(vertex string) []Edge {
	var out []Edge
	for _, e := range g.edges {
		if e.From == vertex {
			out = append(out, e)
		}
	}
	return out
}

// Buffers returns every buffer partition of the pipeline.
func (g Graph) Buffers() []BufferSpec {
	var out []BufferSpec
	for _, v := range g.vertices {
		out = append(out, g.Inputs(v.name)...)
	}
	return out
}

// has returns an error listing the pipeline's vertices when it has no vertex
// called name.
func (g Graph) has(name string) error {
	if g.find(name) == nil {
		return fmt.Errorf("%w %q in pipeline %q (vertices: %s)", ErrNoVertex, name, g.name, strings.Join(g.Vertices(), ", "))
	}
	return nil
}

// Vertices returns the names of the pipeline's vertices, in the pipeline's order.
func (g Graph) Vertices() []string {
	names := make([]string, len(g.vertices))
	for i, v := range g.vertices {
		names[i] = v.name
	}
	return names
}

// Columns returns each vertex's column when the graph is drawn from left to
// right: 0 for the sources, and for every other vertex one more than the
// largest column of the vertices with edges to it. A vertex on a cycle
// counts each edge of the cycle once at most.
func (g Graph) Columns() map[string]int {
	n := len(g.vertices)
	cols := make(map[string]int, n)
	for _, v := range g.vertices {
		cols[v.name] = 0
	}
	// A longest path visits each vertex once: len(vertices) rounds settle
	// every acyclic graph, and bound a cyclic one.
	for range n {
		moved := false
		for _, e := range g.edges {
			if e.From == e.To {
				continue
			}
			if c := cols[e.From] + 1; c > cols[e.To] && c < n {
				cols[e.To], moved = c, true
			}
		}
		if !moved {
			break
		}
	}
	return cols
}

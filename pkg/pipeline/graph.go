package pipeline

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluiceflow/sluice/config"
)

// Graph is a validated Pipeline's vertices and edges, with its buffers worked
// out from the vertices' limits: every vertex but a source reads an input
// buffer of its own, in one or more partitions, that the vertices with edges
// to it write.
type Graph struct {
	p *config.Pipeline
}

// NewGraph returns the graph of p, which must be valid.
func NewGraph(p *config.Pipeline) Graph { return Graph{p: p} }

// Pipeline returns the graph's pipeline.
func (g Graph) Pipeline() *config.Pipeline { return g.p }

// BufferSpec is one partition of a vertex's input buffer: its name, the most
// messages it holds, and the usage (a percentage of that) at which writers
// count it full.
type BufferSpec struct {
	Name       string
	MaxLength  int
	UsageLimit int
}

// BufferName is the name of partition i of vertex's input buffer,
// <pipeline>-<vertex>-<i>: the same in every process, so that writers and
// readers meet.
func (g Graph) BufferName(vertex string, i int) string {
	return g.p.Metadata.Name + "-" + vertex + "-" + strconv.Itoa(i)
}

// MarksName is the name of the watermark store of vertex's input buffer,
// <pipeline>-<vertex>-wm: the processors writing to the buffer publish
// their watermarks there, for every partition.
func (g Graph) MarksName(vertex string) string {
	return g.p.Metadata.Name + "-" + vertex + "-wm"
}

// Partitions is the number of partitions of vertex's input buffer.
func (g Graph) Partitions(vertex string) int {
	if v := g.p.Vertex(vertex); v != nil && v.Partitions != nil && *v.Partitions > 1 {
		return int(*v.Partitions)
	}
	return 1
}

// Inputs returns the partitions of vertex's input buffer, as created: the most
// messages any of its writers allows (bufferMaxLength of the vertex writing, as
// in Numaflow), with that writer's usage limit. A source has none.
func (g Graph) Inputs(vertex string) []BufferSpec {
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
		return nil
	}
	specs := make([]BufferSpec, g.Partitions(vertex))
	for i := range specs {
		specs[i] = BufferSpec{Name: g.BufferName(vertex, i), MaxLength: maxLen, UsageLimit: usage}
	}
	return specs
}

// OutEdges returns the edges leaving vertex, in the config's order.
func (g Graph) OutEdges(vertex string) []config.Edge {
	var out []config.Edge
	for _, e := range g.p.Spec.Edges {
		if e.From == vertex {
			out = append(out, e)
		}
	}
	return out
}

// Buffers returns every buffer partition of the pipeline.
func (g Graph) Buffers() []BufferSpec {
	var out []BufferSpec
	for _, v := range g.p.Spec.Vertices {
		out = append(out, g.Inputs(v.Name)...)
	}
	return out
}

// vertex returns the vertex called name and its index, or an error listing the
// pipeline's vertices.
func (g Graph) vertex(name string) (*config.Vertex, int, error) {
	for i := range g.p.Spec.Vertices {
		if v := &g.p.Spec.Vertices[i]; v.Name == name {
			return v, i, nil
		}
	}
	return nil, 0, fmt.Errorf("%w %q in pipeline %q (vertices: %s)", ErrNoVertex, name, g.p.Metadata.Name, strings.Join(g.Vertices(), ", "))
}

// Vertices returns the names of the pipeline's vertices, in the config's order.
func (g Graph) Vertices() []string {
	names := make([]string, len(g.p.Spec.Vertices))
	for i, v := range g.p.Spec.Vertices {
		names[i] = v.Name
	}
	return names
}

// Columns returns each vertex's column when the graph is drawn from left to
// right: 0 for the sources, and for every other vertex one more than the
// largest column of the vertices with edges to it. A vertex on a cycle
// counts each edge of the cycle once at most.
func (g Graph) Columns() map[string]int {
	cols := make(map[string]int, len(g.p.Spec.Vertices))
	for _, v := range g.p.Spec.Vertices {
		cols[v.Name] = 0
	}
	// A longest path visits each vertex once: len(vertices) rounds settle
	// every acyclic graph, and bound a cyclic one.
	for range len(g.p.Spec.Vertices) {
		moved := false
		for _, e := range g.p.Spec.Edges {
			if e.From == e.To {
				continue
			}
			if c := cols[e.From] + 1; c > cols[e.To] && c < len(g.p.Spec.Vertices) {
				cols[e.To], moved = c, true
			}
		}
		if !moved {
			break
		}
	}
	return cols
}

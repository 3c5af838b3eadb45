package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/isb/route"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// Spec is a pipeline declared in Go: its vertices and the edges between
// them. [New] runs it; [NewFromConfig] makes one from a Pipeline's YAML and
// runs it the same way.
type Spec struct {
	// Name names the pipeline's buffers: <name>-<vertex>-<partition>.
	Name string
	// Vertices are the pipeline's vertices, in the order [Pipeline.Vertices]
	// and [Pipeline.Status] list them.
	Vertices []Vertex
	// Edges say where each vertex writes: a vertex with edges to another
	// writes its input buffer, along the edge's condition.
	Edges []Edge
}

// Vertex is one vertex of a [Spec].
type Vertex struct {
	// Name is the vertex's name in edges and buffers.
	Name string
	// Spec is the vertex, as [vertex.New] takes it, but for its Inputs and
	// Output, which must be unset: the pipeline makes them from the edges,
	// the readers of the vertex's input buffer (for a vertex that is not a
	// source) and a writer along its edges (for a vertex that is not a
	// sink). A Watermark, when set, gets its Inputs and Outputs likewise; a
	// Reduce reads every partition of the input buffer.
	Spec vertex.Spec
	// Options are the vertex's own options, after the pipeline's
	// ([WithVertexOptions]).
	Options []vertex.Option
	// Partitions is the number of partitions of the vertex's input buffer;
	// 0 is 1.
	Partitions int
	// Ordered is ordered processing (a map or sink vertex's, see
	// config.Pipeline.VertexOrdered): the vertices writing to it pick its
	// partitions by route.OrderedPartition, a replica running alone
	// ([WithVertex], [WithReplica]) reads the partition of its index, and
	// every forwarder forwards one message at a time (vertex.Spec.Ordered).
	Ordered bool
	// Buffers are the limits of the buffers the vertex writes, and its
	// read timeout.
	Buffers BufferLimits
}

// BufferLimits are a vertex's limits on buffers, Numaflow's
// limits.bufferMaxLength, bufferUsageLimit and readTimeout. A zero field
// takes the default of a Pipeline's YAML (config.DefaultBufferMaxLength,
// DefaultBufferUsageLimit, DefaultReadTimeout).
type BufferLimits struct {
	// MaxLength is the most messages a buffer the vertex writes holds; a
	// buffer is created with the largest of its writers'.
	MaxLength int
	// UsageLimit is the percentage of MaxLength at which the vertex counts
	// a buffer it writes full.
	UsageLimit int
	// ReadTimeout is how long the vertex waits on its input buffer for a
	// read batch to fill.
	ReadTimeout time.Duration
}

func (b BufferLimits) withDefaults() BufferLimits {
	if b.MaxLength <= 0 {
		b.MaxLength = config.DefaultBufferMaxLength
	}
	if b.UsageLimit <= 0 {
		b.UsageLimit = config.DefaultBufferUsageLimit
	}
	if b.ReadTimeout <= 0 {
		b.ReadTimeout = config.DefaultReadTimeout
	}
	return b
}

// Edge is an edge of a [Spec]: From writes To's input buffer the messages
// that meet Condition (every message, when it has no values), and does as
// OnFull says when that buffer is full.
type Edge struct {
	From, To  string
	Condition route.Condition
	OnFull    route.OnFull
}

// ErrInvalidSpec is matched by the error of a [Spec] that cannot run.
var ErrInvalidSpec = errors.New("pipeline: invalid spec")

// validate reports every problem of s together, each matching
// [ErrInvalidSpec].
func (s Spec) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(format, args...)))
	}
	if s.Name == "" {
		bad("the pipeline has no name")
	}
	if len(s.Vertices) == 0 {
		bad("pipeline %q has no vertex", s.Name)
	}
	seen := map[string]bool{}
	sources := map[string]bool{}
	for i, v := range s.Vertices {
		switch {
		case v.Name == "":
			bad("vertex %d has no name", i)
		case seen[v.Name]:
			bad("vertex %q is listed twice", v.Name)
		}
		seen[v.Name] = true
		sources[v.Name] = v.Spec.Source != nil
		if v.Spec.Inputs != nil || v.Spec.Output != nil {
			bad("vertex %q sets its Spec's Inputs or Output: the pipeline makes them from the edges", v.Name)
		}
		if v.Partitions < 0 {
			bad("vertex %q: partitions (%d) must not be negative", v.Name, v.Partitions)
		}
		if v.Ordered && (v.Spec.Source != nil || v.Spec.Reduce != nil) {
			bad("vertex %q: ordered processing is for map and sink vertices, not a source or a reduce", v.Name)
		}
	}
	for _, e := range s.Edges {
		for _, end := range []string{e.From, e.To} {
			if !seen[end] {
				bad("edge %s -> %s: no vertex %q", e.From, e.To, end)
			}
		}
		if sources[e.To] {
			bad("edge %s -> %s: %s is a source, which reads no buffer", e.From, e.To, e.To)
		}
	}
	return errors.Join(errs...)
}

// specOf returns the Spec of p, a validated Pipeline: every vertex's name,
// partitions, buffer limits and edges, and the vertex specs of those that
// run in this process (names), made as o says (state directory, socket
// directories).
func specOf(p *config.Pipeline, o options, names []string) (Spec, error) {
	s := Spec{Name: p.Metadata.Name}
	dirs := SocketDirs(p, o.socketDir, o.only)
	wc := vertexconfig.WatermarkConfig(p.Spec.Watermark)
	for _, cv := range p.Spec.Vertices {
		l, err := p.VertexLimits(cv.Name)
		if err != nil {
			return Spec{}, err
		}
		v := Vertex{Name: cv.Name, Buffers: BufferLimits{MaxLength: l.GetBufferMaxLength(),
			UsageLimit: l.GetBufferUsageLimit(), ReadTimeout: l.GetReadTimeout()}}
		if cv.Partitions != nil {
			v.Partitions = int(*cv.Partitions)
		}
		v.Ordered = p.VertexOrdered(cv.Name)
		if slices.Contains(names, cv.Name) {
			if v.Spec, err = vertexconfig.PipelineVertex(p, cv.Name, o.stateDir); err != nil {
				return Spec{}, err
			}
			if !wc.Disabled {
				v.Spec.Watermark = &vertex.Watermark{Source: wc}
			}
			if dir, ok := dirs[cv.Name]; ok {
				v.Options = append(v.Options, vertex.WithSocketDir(dir))
			}
			if len(dirs) > 1 {
				v.Options = append(v.Options, vertex.WithSocketDirHint(sharedSocketDirHint))
			}
		}
		s.Vertices = append(s.Vertices, v)
	}
	for i := range p.Spec.Edges {
		e := &p.Spec.Edges[i]
		pe := Edge{From: e.From, To: e.To, OnFull: vertexconfig.OnFull(e)}
		if c := e.Conditions; c != nil && c.Tags != nil {
			pe.Condition = route.Condition{Operator: vertexconfig.Operator(c.Tags), Values: slices.Clone(c.Tags.Values)}
		}
		s.Edges = append(s.Edges, pe)
	}
	return s, nil
}

package vertex

import (
	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// Spec is what one replica of a vertex is built from: the parts of a validated
// MonoVertex, or of a pipeline vertex whose ends may be inter-step buffers.
// [FromMonoVertex] makes the Spec of a MonoVertex; package pipeline makes those
// of a pipeline's vertices.
//
// A vertex reads from Source or, without one, from each of Inputs, and writes to
// Sink or, without one, to the writers Output returns.
type Spec struct {
	// Name names the vertex in metrics, logs and /status.
	Name string
	// StoreKey keys the rate limiter's state in its store (default Name). The
	// key of a pipeline vertex includes the pipeline's name.
	StoreKey string
	// Path is where the vertex sits in its YAML, for errors: "spec" for a
	// MonoVertex (the default), "spec.vertices[1]" for a pipeline vertex.
	Path string
	// RateLimitPath is where the rate limit sits in the YAML (default
	// Path+".limits.rateLimit"); a pipeline vertex may inherit the pipeline's.
	RateLimitPath string
	// Limits are readBatchSize, readTimeout and rateLimit, with config's
	// defaults where unset; nil takes every default and no rate limit.
	Limits *config.Limits
	// Streaming overlaps reads with the mapping, writing and acking of the
	// messages before (a MonoVertex's spec.streaming).
	Streaming bool

	// Source is the vertex's source; nil for a vertex that reads Inputs.
	Source *config.Source
	// Inputs are the partitions of the vertex's input buffer, each read by a
	// forwarder of its own. The vertex does not close them.
	Inputs []isb.Reader
	// UDF is the vertex's map function, if any.
	UDF *config.UDF
	// Sink is the vertex's sink; nil for a vertex that writes Output.
	Sink *config.Sink
	// Output returns a writer along the vertex's edges for one forwarder; it is
	// called once per input. The vertex does not close what it returns.
	Output func() (isb.Writer, error)
}

// FromMonoVertex returns the Spec of a validated MonoVertex.
func FromMonoVertex(m *config.MonoVertex) Spec {
	return Spec{
		Name: m.Metadata.Name, Path: "spec", Limits: m.Spec.Limits,
		Source: m.Spec.Source, UDF: m.Spec.UDF, Sink: m.Spec.Sink,
		Streaming: m.Spec.Streaming != nil && *m.Spec.Streaming,
	}
}

// withDefaults fills StoreKey, Path and RateLimitPath.
func (s Spec) withDefaults() Spec {
	if s.StoreKey == "" {
		s.StoreKey = s.Name
	}
	if s.Path == "" {
		s.Path = "spec"
	}
	if s.RateLimitPath == "" {
		s.RateLimitPath = s.Path + ".limits.rateLimit"
	}
	return s
}

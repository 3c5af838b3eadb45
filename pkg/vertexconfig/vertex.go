package vertexconfig

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb/route"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// FromMonoVertex returns the Spec of a validated MonoVertex: its limits and
// rate limit as Go values, and the constructors of its source, functions and
// sinks. A constructor's error names the field of the config at fault, as a
// [*config.FieldError] when the field is valid and what it names fails (a
// secret that cannot be read, credentials Redis refuses).
func FromMonoVertex(m *config.MonoVertex) vertex.Spec {
	s := &m.Spec
	spec := parts("spec", s.Source, s.UDF, s.Sink)
	spec.Name = m.Metadata.Name
	spec.Bypass = Bypass(s.Bypass)
	spec.Limits = limits(s.Limits, "spec.limits.rateLimit")
	spec.Streaming = s.Streaming != nil && *s.Streaming
	scale := Autoscale(s.Scale)
	spec.Scale = &scale
	return spec
}

// PipelineVertex returns the Spec of the vertex called name of a validated
// pipeline, without its Inputs and Output: package pipeline sets those to
// the vertex's buffers. A reduce vertex (udf.groupBy) gets a Reduce, as
// [Reduce] makes it: its windows are kept in [StateDir](stateDir, name)
// unless its storage is no_store.
func PipelineVertex(p *config.Pipeline, name, stateDir string) (vertex.Spec, error) {
	i := vertexIndex(p, name)
	if i < 0 {
		return vertex.Spec{}, fmt.Errorf("no vertex %q in pipeline %q", name, p.Metadata.Name)
	}
	v := &p.Spec.Vertices[i]
	l, err := p.VertexLimits(name)
	if err != nil {
		return vertex.Spec{}, err
	}
	path := fmt.Sprintf("spec.vertices[%d]", i)
	spec := parts(path, v.Source, v.UDF, v.Sink)
	spec.Name, spec.StoreKey = name, p.Metadata.Name+"-"+name
	spec.Limits = limits(&l.Limits, rateLimitPath(p, v, path))
	spec.Ordered = p.VertexOrdered(name)
	scale := Autoscale(v.Scale)
	spec.Scale = &scale
	if u := v.UDF; u != nil && u.GroupBy != nil {
		if spec.Reduce, err = Reduce(path+".udf", u, name, stateDir); err != nil {
			return vertex.Spec{}, err
		}
	}
	return spec, nil
}

func vertexIndex(p *config.Pipeline, name string) int {
	for i := range p.Spec.Vertices {
		if p.Spec.Vertices[i].Name == name {
			return i
		}
	}
	return -1
}

// rateLimitPath is where the rate limit of pipeline vertex v (at path) is
// set, for errors: its own limits, unless it takes the store from the
// pipeline's.
func rateLimitPath(p *config.Pipeline, v *config.Vertex, path string) string {
	var pipe *config.RateLimit
	if l := p.Spec.Limits; l != nil {
		pipe = l.RateLimit
	}
	if v.Limits == nil || v.Limits.RateLimit == nil {
		return "spec.limits.rateLimit"
	}
	if own := v.Limits.RateLimit; own.Store == nil && pipe != nil && pipe.Store != nil {
		return "spec.limits.rateLimit"
	}
	return path + ".limits.rateLimit"
}

// parts returns a Spec with the constructors of a vertex's source, functions
// and sinks, and its retry policy; the vertex sits at path in the YAML.
func parts(path string, src *config.Source, u *config.UDF, sink *config.Sink) vertex.Spec {
	var s vertex.Spec
	if src != nil {
		s.Source = sourceFunc(path+".source", src)
		if t := src.Transformer; t != nil {
			s.Transformer = transformerFunc(path+".source.transformer", t)
		}
	}
	if u != nil && u.GroupBy == nil {
		s.Map = mapFunc(path+".udf", u)
	}
	if sink != nil {
		s.Sink = sinkFunc(path+".sink", &sink.AbstractSink, udf.KindSink)
		if fb := sink.Fallback; fb != nil {
			s.Fallback = sinkFunc(path+".sink.fallback", fb, udf.KindFallbackSink)
		}
		if ons := sink.OnSuccess; ons != nil {
			s.OnSuccess = sinkFunc(path+".sink.onSuccess", ons, udf.KindOnSuccessSink)
		}
		s.Retry = RetryPolicy(sink)
	}
	if src != nil && src.Transformer != nil {
		s.TransformRetry = FunctionRetry(src.Transformer.RetryStrategy)
	}
	if u != nil && u.GroupBy == nil {
		s.MapRetry = FunctionRetry(u.RetryStrategy)
	}
	return s
}

// limits returns a vertex's limits, with the defaults of what l leaves out;
// its rate limit sits at rlPath in the YAML.
func limits(l *config.Limits, rlPath string) vertex.Limits {
	out := vertex.Limits{ReadBatchSize: l.GetReadBatchSize(), ReadTimeout: l.GetReadTimeout(), Concurrency: l.GetConcurrency(),
		UDFTimeout: l.GetUDFTimeout()}
	if rl := l.GetRateLimit(); rl != nil {
		out.RateLimit = RateLimit(rl, rlPath, out.ReadBatchSize)
	}
	return out
}

// RateLimit returns the vertex's rate limit of a validated rateLimit block
// at path in the YAML, for a vertex that reads readBatchSize messages at once.
func RateLimit(rl *config.RateLimit, path string, readBatchSize int) *vertex.RateLimit {
	out := &vertex.RateLimit{Config: LimiterConfig(rl), Store: storeFunc(rl, path),
		ExcludeDropped: rl.ExcludeDropped != nil && *rl.ExcludeDropped}
	if rl.SyncInterval != nil {
		out.SyncInterval = rl.SyncInterval.Duration
	}
	if rl.Adaptive != nil {
		out.Signals = SignalKinds(rl.Adaptive)
	}
	out.Bytes = ByteConfig(rl)
	out.Cost, _ = Cost(rl) // valid: Check compiled it
	if pk := rl.PerKey; pk != nil {
		out.PerKey = &vertex.PerKey{Config: KeyConfig(rl), Keys: KeyMode(pk), MaxHeld: pk.GetMaxHeld(readBatchSize)}
	}
	for _, g := range rl.Groups {
		out.Groups = append(out.Groups, vertex.Group{Name: g.Name, Config: GroupConfig(&g)})
	}
	if r := rl.Regions; r != nil {
		out.Regions = &vertex.Regions{Proportions: map[string]int{}, ReservePercentage: reserve(r.ReservePercentage)}
		for name, w := range r.Proportions {
			out.Regions.Proportions[name] = clampInt(w)
		}
	}
	return out
}

// defaultFallbackSteps is how many writes a message gets before it goes to the
// fallback sink, when there is one and retryStrategy does not say.
const defaultFallbackSteps = 10

// RetryPolicy maps a sink's retryStrategy to the forwarder's, whose defaults
// fill what it leaves unset. sluice retries until the sink takes the message,
// or, when a fallback sink is configured, for 10 attempts before writing it
// there. A vertex writing to buffers (s nil) retries until they take it.
func RetryPolicy(s *config.Sink) forward.RetryPolicy {
	if s == nil {
		return forward.RetryPolicy{}
	}
	r := s.RetryStrategy
	p := policy(r)
	if s.Fallback != nil && (r == nil || r.OnFailure == nil) {
		p.OnFailure = forward.Fallback
		if r == nil || r.Backoff == nil || r.Backoff.Steps == nil {
			p.Steps = defaultFallbackSteps
		}
	}
	return p
}

// FunctionRetry maps the retryStrategy of a map or a transformer (r, which
// may be nil) to how the forwarder retries the inputs the function fails: as
// a sink's backoff, and, with onFailure drop, dropped once retried
// backoff.steps times (Numaflow's default steps when unset). Unset, a failed
// input is retried until the function takes it.
func FunctionRetry(r *config.RetryStrategy) forward.RetryPolicy {
	p := policy(r)
	if p.OnFailure == forward.Drop && p.Steps == 0 {
		p.Steps = DefaultFunctionSteps
	}
	return p
}

// DefaultFunctionSteps is how often a map or transformer with onFailure drop
// and no backoff.steps retries an input before dropping it: Numaflow's
// default, the most its retry counter holds.
const DefaultFunctionSteps = 65535

// policy is the forwarder's retry policy of a retryStrategy (nil: none),
// with 0 for each thing it leaves unset: the forwarder's defaults.
func policy(r *config.RetryStrategy) forward.RetryPolicy {
	var p forward.RetryPolicy
	if r == nil {
		return p
	}
	if b := r.Backoff; b != nil {
		if b.Interval != nil {
			p.Interval = b.Interval.Duration
		}
		if b.Cap != nil {
			p.MaxInterval = b.Cap.Duration
		}
		if b.Steps != nil {
			p.Steps = int(min(*b.Steps, math.MaxInt32))
		}
		if b.Factor != nil {
			p.Factor = *b.Factor
		}
	}
	p.OnFailure, _ = OnFailure(r)
	return p
}

// Bypass returns the forwarder's bypass of a validated MonoVertex's
// spec.bypass; nil for none.
func Bypass(b *config.Bypass) *forward.Bypass {
	if b == nil {
		return nil
	}
	cond := func(e *config.EdgeConditions) *route.Condition {
		if e == nil || e.Tags == nil {
			return nil
		}
		return &route.Condition{Operator: Operator(e.Tags), Values: slices.Clone(e.Tags.Values)}
	}
	return &forward.Bypass{Sink: cond(b.Sink), Fallback: cond(b.Fallback), OnSuccess: cond(b.OnSuccess)}
}

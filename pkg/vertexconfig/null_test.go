package vertexconfig

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// TestNullSetsNothing loads the configs written as Numaflow writes them, with
// null on unset fields, and checks that each null left its field unset.
func TestNullSetsNothing(t *testing.T) {
	t.Run("monovertex", func(t *testing.T) {
		f := mustLoad(t, "../../config/testdata/good/monovertex-numaflow-nulls.yaml")
		s := f.MonoVertex.Spec
		m := f.MonoVertex.Metadata
		if m.Labels != nil || m.Annotations != nil || m.Namespace != "payments" {
			t.Errorf("metadata = %+v", m)
		}
		if s.Replicas != nil || (s.Bypass != nil) {
			t.Errorf("replicas %v, bypass %v; want neither set", s.Replicas, (s.Bypass != nil))
		}
		src := s.Source
		if src.UDSource == nil || src.Generator != nil || src.HTTP != nil || src.Kafka != nil || src.SQS != nil {
			t.Errorf("source = %+v; want udsource alone", src)
		}
		if c := src.UDSource.Container; c.Command != nil || c.Args != nil || c.Env != nil {
			t.Errorf("source container = %+v; want no command, args or env", c)
		}
		if tr := src.Transformer; tr.Builtin != nil || tr.RetryStrategy != nil || len(tr.Container.Env) != 1 || tr.Container.Env[0].Value != "info" {
			t.Errorf("transformer = %+v", tr)
		}
		if u := s.UDF; u.GroupBy != nil || u.Builtin != nil || u.RetryStrategy != nil || u.Container == nil {
			t.Errorf("udf = %+v; want a map container, no reduce", u)
		}
		sink := s.Sink
		if sink.UDSink == nil || sink.Log != nil || sink.Blackhole != nil || sink.OnSuccess != nil ||
			sink.Fallback.Log == nil || sink.Fallback.UDSink != nil || sink.Fallback.Blackhole != nil {
			t.Errorf("sink = %+v, fallback %+v", sink, sink.Fallback)
		}
		if b := sink.RetryStrategy.Backoff; b.Factor != nil || b.Cap != nil || b.Jitter != nil || *b.Steps != 3 {
			t.Errorf("backoff = %+v", b)
		}
		l := s.Limits
		if l.GetReadBatchSize() != 100 || l.ReadTimeout != nil || l.GetReadTimeout() != time.Second || l.Concurrency != nil {
			t.Errorf("limits = %+v", l)
		}
		r := l.GetRateLimit()
		if got := LimiterConfig(r); got != ratelimit.DefaultConfig(100) {
			t.Errorf("rate limit %+v; want the defaults of max 100", got)
		}
		if r.Store == nil || r.Store.RedisStore != nil || r.Store.InMemoryStore != nil || r.TTL != nil || r.ResumedRampUp != nil {
			t.Errorf("rate limit = %+v, store %+v", r, r.Store)
		}
		// The containers' resources are read (a container engine applies
		// their limits), not ignored; those given null are not there.
		checkIgnored(t, f.Ignored, nil)
	})
	t.Run("pipeline", func(t *testing.T) {
		f := mustLoad(t, "../../config/testdata/good/pipeline-numaflow-nulls.yaml")
		s := f.Pipeline.Spec
		if s.ISB != nil || s.SideInputs != nil || s.Ordered != nil || s.InterStepBufferServiceName != "" || f.Pipeline.Metadata.Namespace != "" {
			t.Errorf("spec = %+v", s)
		}
		if l := s.Limits; l.GetReadBatchSize() != 100 || l.BufferMaxLength != nil || l.BufferUsageLimit != nil || l.RateLimit != nil {
			t.Errorf("pipeline limits = %+v", l)
		}
		in, cat, out := s.Vertices[0], s.Vertices[1], s.Vertices[2]
		if g := in.Source.Generator; g.RPU == nil || *g.RPU != 10 || g.Duration != nil || g.MsgSize != nil || g.KeyCount != nil || g.ValueBlob != nil {
			t.Errorf("generator = %+v", g)
		}
		if in.UDF != nil || in.Sink != nil || in.Limits != nil || in.Partitions != nil || in.Source.Transformer != nil || in.SideInputs != nil {
			t.Errorf("vertex in = %+v", in)
		}
		if cat.UDF.GroupBy != nil || cat.UDF.Builtin != nil || cat.UDF.Container.Args != nil || cat.SideInputs != nil {
			t.Errorf("vertex cat udf = %+v", cat.UDF)
		}
		rl, err := f.Pipeline.VertexRateLimit("cat")
		if err != nil {
			t.Fatal(err)
		}
		want := ratelimit.DefaultConfig(50)
		want.Mode, want.ThresholdPercentage = ratelimit.GoBackN, 60
		if got := LimiterConfig(rl); got != want {
			t.Errorf("cat rate limit %+v; want %+v", got, want)
		}
		if st := cat.Limits.RateLimit.Store; st.InMemoryStore != nil || st.RedisStore != nil {
			t.Errorf("cat store = %+v; want neither store set", st)
		}
		if out.Sink.Log == nil || out.Sink.Fallback != nil || out.Sink.RetryStrategy.Backoff != nil || out.Sink.RetryStrategy.OnFailure != nil {
			t.Errorf("vertex out sink = %+v", out.Sink)
		}
		if e := s.Edges[0]; e.Conditions != nil || e.OnFull != nil {
			t.Errorf("edge 0 = %+v", e)
		}
		if tags := s.Edges[1].Conditions.Tags; tags.Operator != nil || Operator(tags).String() != "or" || len(tags.Values) != 1 {
			t.Errorf("edge 1 tags = %+v", tags)
		}
		checkIgnored(t, f.Ignored, nil)
	})
}

// TestNullForms checks that each spelling of null sets nothing, for fields of
// every kind and at several depths.
func TestNullForms(t *testing.T) {
	for _, null := range []string{"null", "~", "", "Null", "NULL"} {
		for i, field := range []string{
			"  replicas: %s\n",                      // a scalar
			"  udf: %s\n",                           // an object
			"  limits:\n    rateLimit: %s\n",        // an object, deeper
			"  limits:\n    readTimeout: %s\n",      // a duration
			"  metadata: %s\n",                      // a Kubernetes-only field
			"  bypass: %s\n",                        // a MonoVertex-only object
			"  sink:\n    log: {}\n    kafka: %s\n", // one of several kinds
			"  udf:\n    container:\n      image: x\n      command: %s\n      env: [{name: A, value: %s}]\n", // a list, a list item's field
		} {
			yaml := strings.Replace(minimalMonoVertex, "  sink:\n    log: {}\n", "", 1)
			if !strings.Contains(field, "sink:") {
				yaml += "  sink:\n    log: {}\n"
			}
			yaml += strings.ReplaceAll(field, "%s", null)
			t.Run(fmt.Sprintf("%q/%d", null, i), func(t *testing.T) {
				f := mustParse(t, yaml)
				s := f.MonoVertex.Spec
				if u := s.UDF; u != nil && (u.Container.Command != nil || len(u.Container.Env) != 1 || u.Container.Env[0] != config.EnvVar{Name: "A"}) {
					t.Errorf("null set something: udf container %+v", u.Container)
				}
				if s.Replicas != nil || (s.UDF != nil && s.UDF.Container.Image != "x") || (s.Bypass != nil) || s.Sink.Kafka != nil || len(f.Ignored) != 0 ||
					s.Limits.GetRateLimit() != nil || s.Limits.GetReadTimeout() != time.Second {
					t.Errorf("null set something: %+v, ignored %q", s, f.Ignored)
				}
			})
		}
	}
}

// TestNullExplained: a field given null is not set, and when that leaves
// something required missing the problem says that null sets nothing.
func TestNullExplained(t *testing.T) {
	for _, tt := range []struct{ name, spec, want string }{
		{"a sink kind", "  source:\n    generator: {}\n  sink:\n    log:\n",
			"spec.sink: set one sink: log, blackhole, kafka, http, sqs or udsink; log: null sets nothing (write log: {})"},
		{"a source", "  source: null\n  sink:\n    log: {}\n", "spec.source: is required; null sets nothing"},
		{"a source kind", "  source:\n    generator: ~\n  sink:\n    log: {}\n",
			"spec.source: set one source: generator, http, kafka, nats, jetstream, sqs or udsource; generator: null sets nothing (write generator: {})"},
		{"the max", "  source:\n    generator: {}\n  sink:\n    log: {}\n  limits:\n    rateLimit:\n      max: null\n",
			"spec.limits.rateLimit.max: is required; null sets nothing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			yaml := "apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: n\nspec:\n" + tt.spec
			f, err := Parse([]byte(yaml))
			problems := problemsOf(t, f, err)
			if len(problems) != 1 || !strings.HasPrefix(problems[0].String(), tt.want) {
				t.Errorf("problems %q; want one: %s", problems, tt.want)
			}
		})
	}
}

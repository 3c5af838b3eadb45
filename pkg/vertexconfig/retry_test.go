package vertexconfig

import (
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/forward"
)

func TestRetryPolicy(t *testing.T) {
	logSink := config.AbstractSink{Log: &struct{}{}}
	steps, interval, fallback, drop := uint32(3), config.Duration{Duration: 5 * time.Millisecond}, "fallback", "drop"
	factor := 1.5
	tests := []struct {
		name string
		sink *config.Sink
		want forward.RetryPolicy
	}{
		{"buffers", nil, forward.RetryPolicy{}},
		{"sink", &config.Sink{AbstractSink: logSink}, forward.RetryPolicy{}},
		{"fallback sink", &config.Sink{AbstractSink: logSink, Fallback: &logSink},
			forward.RetryPolicy{Steps: defaultFallbackSteps, OnFailure: forward.Fallback}},
		{"backoff", &config.Sink{AbstractSink: logSink, RetryStrategy: &config.RetryStrategy{
			Backoff: &config.Backoff{Interval: &interval, Cap: &interval, Steps: &steps}, OnFailure: &drop}},
			forward.RetryPolicy{Interval: interval.Duration, MaxInterval: interval.Duration, Steps: 3, OnFailure: forward.Drop}},
		{"factor", &config.Sink{AbstractSink: logSink, RetryStrategy: &config.RetryStrategy{
			Backoff: &config.Backoff{Factor: &factor}}},
			forward.RetryPolicy{Factor: 1.5}},
		{"fallback sink, steps", &config.Sink{AbstractSink: logSink, Fallback: &logSink, RetryStrategy: &config.RetryStrategy{
			Backoff: &config.Backoff{Steps: &steps}}},
			forward.RetryPolicy{Steps: 3, OnFailure: forward.Fallback}},
		{"fallback on failure", &config.Sink{AbstractSink: logSink, Fallback: &logSink, RetryStrategy: &config.RetryStrategy{
			Backoff: &config.Backoff{Steps: &steps}, OnFailure: &fallback}},
			forward.RetryPolicy{Steps: 3, OnFailure: forward.Fallback}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryPolicy(tt.sink); got != tt.want {
				t.Fatalf("RetryPolicy = %+v; want %+v", got, tt.want)
			}
		})
	}
}

// TestFunctionRetry: a map's or transformer's retryStrategy is parsed as a
// sink's; unset, a failed input is retried until it succeeds, and onFailure
// drop without steps takes Numaflow's default steps.
func TestFunctionRetry(t *testing.T) {
	steps, interval, capped, factor, retry, drop := uint32(4), config.Duration{Duration: 10 * time.Millisecond},
		config.Duration{Duration: time.Second}, 1.0, "retry", "drop"
	tests := []struct {
		name string
		r    *config.RetryStrategy
		want forward.RetryPolicy
	}{
		{"unset", nil, forward.RetryPolicy{}},
		{"retry", &config.RetryStrategy{OnFailure: &retry}, forward.RetryPolicy{}},
		{"drop", &config.RetryStrategy{OnFailure: &drop}, forward.RetryPolicy{Steps: DefaultFunctionSteps, OnFailure: forward.Drop}},
		{"backoff", &config.RetryStrategy{Backoff: &config.Backoff{Interval: &interval, Cap: &capped, Factor: &factor, Steps: &steps},
			OnFailure: &drop}, forward.RetryPolicy{Interval: interval.Duration, MaxInterval: time.Second, Factor: 1, Steps: 4, OnFailure: forward.Drop}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FunctionRetry(tt.r); got != tt.want {
				t.Fatalf("FunctionRetry = %+v; want %+v", got, tt.want)
			}
		})
	}
}

// TestSpecCarriesFunctionRetry: a MonoVertex's transformer and udf
// retryStrategy reach the vertex's Spec.
func TestSpecCarriesFunctionRetry(t *testing.T) {
	steps, drop := uint32(2), "drop"
	r := &config.RetryStrategy{Backoff: &config.Backoff{Steps: &steps}, OnFailure: &drop}
	m := &config.MonoVertex{Spec: config.MonoVertexSpec{
		Source: &config.Source{Generator: &config.Generator{}, Transformer: &config.Transformer{Builtin: &config.Builtin{Name: "filter"}, RetryStrategy: r}},
		UDF:    &config.UDF{Builtin: &config.Builtin{Name: "cat"}, RetryStrategy: r},
		Sink:   &config.Sink{AbstractSink: config.AbstractSink{Log: &struct{}{}}},
	}}
	s := FromMonoVertex(m)
	want := forward.RetryPolicy{Steps: 2, OnFailure: forward.Drop}
	if s.TransformRetry != want || s.MapRetry != want || s.Retry != (forward.RetryPolicy{}) {
		t.Fatalf("transform %+v, map %+v, sink %+v; want %+v for the functions, none for the sink", s.TransformRetry, s.MapRetry, s.Retry, want)
	}
}

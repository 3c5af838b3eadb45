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

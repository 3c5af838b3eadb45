package config

import (
	"errors"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tt := range []struct {
		in       string
		want     time.Duration
		outRange bool // the error matches ErrDurationRange
		bad      bool // any other error
	}{
		{in: "0", want: 0},
		{in: "1m30s", want: 90 * time.Second},
		{in: "-1.5h", want: -90 * time.Minute},
		{in: "2562047h47m16.854775807s", want: 1<<63 - 1},
		{in: "9000000h", outRange: true},
		{in: "-9000000h", outRange: true},
		{in: "2562047h47m17s", outRange: true},
		{in: "99999999999999999999ns", outRange: true},
		{in: "1h1000000000000000000s", outRange: true},
		{in: "30 seconds", bad: true},
		{in: "5", bad: true},
		{in: "", bad: true},
		{in: "1d", bad: true},
	} {
		got, err := ParseDuration(tt.in)
		switch {
		case errors.Is(err, ErrDurationRange) != tt.outRange:
			t.Errorf("ParseDuration(%q) = %v, %v; out of range: %v", tt.in, got, err, tt.outRange)
		case (err != nil && !tt.outRange) != tt.bad:
			t.Errorf("ParseDuration(%q) = %v, %v; want an error: %v", tt.in, got, err, tt.bad)
		case err == nil && got != tt.want:
			t.Errorf("ParseDuration(%q) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

// TestDurationFields checks the durations of a config: one out of range says
// so, with its path and value, in any duration field; one that is not a
// duration says how to write one; and the rules of the durations that
// Numaflow checks beside each other.
func TestDurationFields(t *testing.T) {
	const gen, log = "  source:\n    generator: {}\n", "  sink:\n    log: {}\n"
	rateLimit := func(fields string) string {
		return monoVertex("  limits:\n    rateLimit:\n      max: 10\n" + fields + gen + log)
	}
	pipeline := func(spec, sink string) string {
		return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
` + spec + `  vertices:
    - {name: in, source: {generator: {}}}
    - name: out
      sink:
        log: {}
` + sink + `  edges:
    - {from: in, to: out}
`
	}
	const outOfRange = "is out of range: a duration is at most 2562047h47m16s either way"
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"rampUpDuration out of range", rateLimit("      rampUpDuration: 9000000h\n"),
			[]string{`spec.limits.rateLimit.rampUpDuration ("9000000h") ` + outOfRange + ` (line 9)`}},
		{"ttl out of range, below", rateLimit("      ttl: -9000000h\n"),
			[]string{`spec.limits.rateLimit.ttl ("-9000000h") ` + outOfRange}},
		{"readTimeout out of range", monoVertex("  limits:\n    readTimeout: 99999999999999999999ns\n" + gen + log),
			[]string{`spec.limits.readTimeout ("99999999999999999999ns") ` + outOfRange}},
		{"generator duration out of range", monoVertex("  source:\n    generator: {duration: 3000000h}\n" + log),
			[]string{`spec.source.generator.duration ("3000000h") ` + outOfRange}},
		{"not a duration", rateLimit("      rampUpDuration: 30 seconds\n"),
			[]string{`spec.limits.rateLimit.rampUpDuration: "30 seconds" is not a duration (write it like 1s, 500ms or 1m30s)`}},
		{"the longest duration", rateLimit("      rampUpDuration: 2562047h47m16s\n"), nil},
		{"backoff cap below the default interval", pipeline("", "        retryStrategy: {backoff: {cap: -1s}}\n"),
			[]string{"spec.vertices[1].sink.retryStrategy.backoff.cap (-1s) < the default interval (1ms)"}},
		{"backoff cap", pipeline("", "        retryStrategy: {backoff: {cap: 1ms}}\n"), nil},
		{"idle source threshold below a step", pipeline("  watermark: {idleSource: {threshold: 1s, incrementBy: 2s}}\n", ""),
			[]string{"spec.watermark.idleSource.threshold (1s) must be at least incrementBy (2s)"}},
		{"idle source initSourceDelay negative", pipeline("  watermark: {idleSource: {threshold: 1s, incrementBy: 1s, initSourceDelay: -1s}}\n", ""),
			[]string{"spec.watermark.idleSource.initSourceDelay (-1s) must be positive"}},
		{"idle source initSourceDelay below the threshold", pipeline("  watermark: {idleSource: {threshold: 5s, incrementBy: 1s, initSourceDelay: 2s}}\n", ""),
			[]string{"spec.watermark.idleSource.initSourceDelay (2s) must be at least the threshold (5s)"}},
		{"idle source", pipeline("  watermark: {idleSource: {threshold: 5s, stepInterval: 1s, incrementBy: 5s, initSourceDelay: 10s}}\n", ""), nil},
		{"side input every out of range", pipeline("  sideInputs:\n    - {name: s, container: {image: s:v1}, trigger: {schedule: \"@every 9000000h\"}}\n", ""),
			[]string{`spec.sideInputs[0].trigger.schedule ("@every 9000000h"): the interval ` + outOfRange}},
		{"side input every negative", pipeline("  sideInputs:\n    - {name: s, container: {image: s:v1}, trigger: {schedule: \"@every -5s\"}}\n", ""),
			[]string{`spec.sideInputs[0].trigger.schedule ("@every -5s"): the interval must be positive`}},
		{"side input every", pipeline("  sideInputs:\n    - {name: s, container: {image: s:v1}, trigger: {schedule: \"@every 30s\"}}\n", ""), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantProblems(t, problems(t, tt.yaml), tt.want)
		})
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateSummary checks the line vertex validate prints for a valid
// config: every step in order, built-ins by name and each user-defined
// container (source, transformer, map, sink, fallback sink) by its image, or by
// its command when it has none.
func TestValidateSummary(t *testing.T) {
	const head = "apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: mv\nspec:\n"
	for _, tt := range []struct{ name, yaml, want string }{
		{
			"built-ins",
			head + `  source:
    generator: {}
    transformer:
      builtin:
        name: eventTimeExtractor
        kwargs: {expression: json(payload).ts}
  udf:
    builtin: {name: cat}
  sink:
    log: {}
    fallback:
      blackhole: {}
`,
			`MonoVertex "mv" is valid (generator → eventTimeExtractor → cat → log, fallback blackhole)`,
		},
		{
			"containers by image",
			head + `  limits:
    rateLimit: {max: 20, min: 5, rampUpDuration: 5s}
  source:
    udsource:
      container: {image: my/source:v1}
    transformer:
      container: {image: my/transformer:v1, command: [bin/transformer]}
  udf:
    container: {image: my/map:v1}
  sink:
    udsink:
      container: {image: my/sink:v1}
    fallback:
      udsink:
        container: {image: my/fallback:v1}
`,
			`MonoVertex "mv" is valid (udsource my/source:v1 → transformer my/transformer:v1 → udf my/map:v1 → ` +
				`udsink my/sink:v1, fallback udsink my/fallback:v1; rate limit 20/s from 5 over 5s, relaxed)`,
		},
		{
			"containers by command",
			head + `  source:
    udsource:
      container: {command: [bin/source]}
  udf:
    container: {command: [bin/map, --keys], args: [even odd]}
  sink:
    udsink:
      container: {command: [/usr/bin/sink]}
`,
			`MonoVertex "mv" is valid (udsource bin/source → udf "bin/map --keys even odd" → udsink /usr/bin/sink)`,
		},
		{
			"shadow",
			head + `  limits:
    rateLimit: {max: 300, min: 300, rampUpDuration: 0s, shadow: true}
  source:
    generator: {}
  sink:
    blackhole: {}
`,
			`MonoVertex "mv" is valid (generator → blackhole; rate limit 300/s from 300 over 0s, relaxed, shadow)`,
		},
		{
			"per key",
			head + `  limits:
    rateLimit: {max: 1000, min: 1000, rampUpDuration: 0s, perKey: {max: 50}}
  source:
    generator: {keys: [a, b]}
  sink:
    blackhole: {}
`,
			`MonoVertex "mv" is valid (generator → blackhole; rate limit 1000/s from 1000 over 0s, relaxed, per key 50/s)`,
		},
		{
			"per key of all keys",
			head + `  limits:
    rateLimit: {max: 1000, perKey: {max: 50, keys: all}}
  source:
    generator: {}
  sink:
    blackhole: {}
`,
			`MonoVertex "mv" is valid (generator → blackhole; rate limit 1000/s from 1 over 1s, relaxed, per key 50/s of all keys)`,
		},
		{
			"streaming",
			head + `  streaming: true
  limits: {readBatchSize: 100, concurrency: 400}
  source:
    generator: {}
  sink:
    blackhole: {}
`,
			`MonoVertex "mv" is valid (generator → blackhole; streaming, 400 in flight)`,
		},
		{
			"pipeline",
			`apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
  vertices:
    - name: in
      source:
        udsource:
          container: {image: my/source:v1}
        transformer:
          container: {image: my/transformer:v1}
    - name: even
      udf:
        container: {image: my/map:v1}
    - name: odd
      udf:
        builtin: {name: cat}
    - name: out
      sink:
        udsink:
          container: {command: [bin/sink]}
        fallback:
          log: {}
  edges:
    - {from: in, to: even}
    - {from: in, to: odd}
    - {from: even, to: out}
    - {from: odd, to: out}
`,
			`Pipeline "p" is valid (4 vertices, 4 edges; in: udsource my/source:v1 → transformer my/transformer:v1; ` +
				`even: udf my/map:v1; odd: cat; out: udsink bin/sink, fallback log)`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runVertex(t, "validate", "-f", path)
			if want := path + ": " + tt.want + "\n"; code != 0 || out != want {
				t.Errorf("exit %d, %q (stderr %q)\nwant %q", code, out, errOut, want)
			}
		})
	}
}

// TestValidateLiveFrom checks a change of a config as vertex run would take
// it on: live, or the first field that needs a restart, exit 2.
func TestValidateLiveFrom(t *testing.T) {
	dir := t.TempDir()
	write := func(name, rateLimit string) string {
		path := filepath.Join(dir, name)
		yaml := "apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: mv\nspec:\n  limits:\n    rateLimit:\n" +
			rateLimit + "  source:\n    generator:\n      rpu: 10\n  sink:\n    log: {}\n"
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	running := write("running.yaml", "      max: 300\n")
	raised := write("raised.yaml", "      max: 600\n      shadow: true\n")
	paced := write("paced.yaml", "      max: 300\n      pacing: 100ms\n")
	code, stdout, stderr := runVertex(t, "validate", "-f", raised, "--live-from", running)
	if code != 0 || !strings.Contains(stdout, "is valid, a live change from "+running) {
		t.Fatalf("a live change: exit %d, %q %q", code, stdout, stderr)
	}
	code, _, stderr = runVertex(t, "validate", "-f", paced, "--live-from", running)
	if code != 2 || !strings.Contains(stderr, "spec.limits.rateLimit.pacing was added: needs a restart") {
		t.Fatalf("a change of pacing: exit %d, %q; want 2 naming the field", code, stderr)
	}
	code, _, stderr = runVertex(t, "validate", "-f", paced, "--live-from", filepath.Join(dir, "none.yaml"))
	if code != 2 || !strings.Contains(stderr, "--live-from") {
		t.Fatalf("a missing --live-from: exit %d, %q; want 2 naming the flag", code, stderr)
	}
}

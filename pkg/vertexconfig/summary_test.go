package vertexconfig_test

import (
	"fmt"
	"testing"

	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// TestSummary checks the description of a valid config: every step in order,
// built-ins by name, each user-defined container (source, transformer, map,
// sink, fallback sink) by its image, or by its command when it has none, and
// the rate limit with its mode, shadow and per-key limit.
func TestSummary(t *testing.T) {
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
			"generator → eventTimeExtractor → cat → log, fallback blackhole",
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
			"udsource my/source:v1 → transformer my/transformer:v1 → udf my/map:v1 → " +
				"udsink my/sink:v1, fallback udsink my/fallback:v1; rate limit 20/s from 5 over 5s, relaxed",
		},
		{
			"bytes and cost",
			head + `  limits:
    rateLimit: {max: 100, bytes: {max: 50000}, cost: "len(payload)"}
  source:
    generator: {}
  sink:
    log: {}
`,
			"generator → log; rate limit 100/s from 1 over 1s, relaxed, bytes 50000/s from 500, cost len(payload)",
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
			`udsource bin/source → udf "bin/map --keys even odd" → udsink /usr/bin/sink`,
		},
		{
			"connectors",
			head + `  source:
    http: {}
  sink:
    http: {url: "http://localhost:8080/in"}
`,
			"http → http http://localhost:8080/in",
		},
		{
			"mode and shadow",
			head + `  limits:
    rateLimit: {max: 300, min: 30, rampUpDuration: 10s, shadow: true, modes: {scheduled: {}}}
  source:
    generator: {}
  sink:
    blackhole: {}
`,
			"generator → blackhole; rate limit 300/s from 30 over 10s, scheduled, shadow",
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
			"generator → blackhole; rate limit 1000/s from 1000 over 0s, relaxed, per key 50/s",
		},
		{
			"groups and regions",
			head + `  limits:
    rateLimit:
      max: 1000
      groups: [{name: partner-api, max: 300}]
      regions: {proportions: {us: 40, eu: 60}}
  source:
    generator: {}
  sink:
    blackhole: {}
`,
			"generator → blackhole; rate limit 1000/s from 1 over 1s, relaxed, regions eu 60, us 40, in group partner-api 300/s",
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
			"generator → blackhole; rate limit 1000/s from 1 over 1s, relaxed, per key 50/s of all keys",
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
			"generator → blackhole; streaming, 400 in flight",
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
			"4 vertices, 4 edges; in: udsource my/source:v1 → transformer my/transformer:v1; " +
				"even: udf my/map:v1; odd: cat; out: udsink bin/sink, fallback log",
		},
		{
			"reduce",
			`apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
  vertices:
    - {name: in, source: {http: {}}}
    - name: sum
      partitions: 2
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {sliding: {length: 60s, slide: 10s}}, keyed: true, storage: {emptyDir: {}}}
    - name: count
      udf:
        builtin: {name: count}
        groupBy: {window: {fixed: {length: 1m}}, allowedLateness: 5s, storage: {no_store: {}}}
    - {name: out, sink: {log: {}}}
  edges:
    - {from: in, to: sum}
    - {from: sum, to: count}
    - {from: count, to: out}
`,
			"4 vertices, 3 edges; in: http; sum: reduce my/sum:v1 (sliding 1m0s every 10s, keyed); " +
				"count: reduce count (fixed 1m0s, late 5s, no_store); out: log",
		},
		{
			"side inputs",
			"apiVersion: numaflow.numaproj.io/v1alpha1\nkind: Pipeline\nmetadata:\n  name: p\nspec:\n" + `  sideInputs:
    - {name: ticker, container: {image: my/ticker:v1}, trigger: {schedule: "*/5 * * * *", timezone: Europe/Paris}}
  vertices:
    - {name: in, source: {generator: {}}}
    - {name: tag, sideInputs: [ticker], udf: {container: {image: my/map:v1}}}
    - {name: out, sink: {log: {}}}
  edges:
    - {from: in, to: tag}
    - {from: tag, to: out}
`,
			"3 vertices, 2 edges; in: generator; tag: udf my/map:v1 (side inputs ticker); out: log; " +
				`side input ticker: container my/ticker:v1 on "*/5 * * * *" in Europe/Paris`,
		},
		{
			"ordered",
			"apiVersion: numaflow.numaproj.io/v1alpha1\nkind: Pipeline\nmetadata:\n  name: p\nspec:\n" + `  ordered: {enabled: true}
  vertices:
    - {name: in, source: {http: {}}}
    - {name: cat, partitions: 3, udf: {builtin: {name: cat}}}
    - {name: fast, ordered: {enabled: false}, udf: {builtin: {name: cat}}}
    - {name: out, sink: {log: {}}}
  edges:
    - {from: in, to: cat}
    - {from: cat, to: fast}
    - {from: fast, to: out}
`,
			"4 vertices, 3 edges; in: http; cat: cat (ordered, 3 partitions); fast: cat; out: log (ordered, 1 partition)",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := vertexconfig.Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if got := vertexconfig.Summary(f); got != tt.want {
				t.Errorf("Summary() = %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestSummaryIgnored checks that the Kubernetes-only fields a config sets are
// no part of its summary: they are in File.Ignored.
func TestSummaryIgnored(t *testing.T) {
	f, err := vertexconfig.Parse([]byte(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: mv
  uid: 6f1c
spec:
  source:
    generator: {}
  sink:
    log: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := vertexconfig.Summary(f); len(f.Ignored) != 1 || got != "generator → log" {
		t.Errorf("Summary() = %q, Ignored %q; want %q and one field", got, f.Ignored, "generator → log")
	}
}

func ExampleSummary() {
	f, err := vertexconfig.Parse([]byte(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: orders
spec:
  limits:
    rateLimit: {max: 20, min: 5, rampUpDuration: 5s}
  source:
    generator: {}
  udf:
    container: {image: my/map:v1}
  sink:
    log: {}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(vertexconfig.Summary(f))
	// Output: generator → udf my/map:v1 → log; rate limit 20/s from 5 over 5s, relaxed
}

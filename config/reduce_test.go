package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// reducePipeline is in → a reduce vertex → out, the reduce vertex being
// vertex (indented as a list item of spec.vertices).
func reducePipeline(vertex string) string {
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: r
spec:
  vertices:
    - {name: in, source: {generator: {}}}
` + vertex + `    - {name: out, sink: {log: {}}}
  edges:
    - {from: in, to: sum}
    - {from: sum, to: out}
`
}

// TestGroupBy checks a reduce vertex's groupBy by the schema's rules: the
// problems, by path and message, or none.
func TestGroupBy(t *testing.T) {
	for _, tt := range []struct {
		name   string
		vertex string
		want   []string
	}{
		{"fixed", `    - name: sum
      udf:
        builtin: {name: count}
        groupBy: {window: {fixed: {length: 60s}}, storage: {emptyDir: {}}}
`, nil},
		{"sliding keyed with partitions and lateness", `    - name: sum
      partitions: 3
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {sliding: {length: 60s, slide: 10s, streaming: true}}, keyed: true, allowedLateness: 5s, storage: {no_store: {}}}
`, nil},
		{"slide equal to length", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {sliding: {length: 10s, slide: 10s}}, storage: {persistentVolumeClaim: {volumeSize: 1Gi}}}
`, nil},
		{"slide longer than length", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {sliding: {length: 10s, slide: 20s}}, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.window.sliding.slide (20s) must be at most the length (10s)"}},
		{"zero slide", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {sliding: {length: 10s, slide: 0s}}, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.window.sliding.slide (0s) must be positive"}},
		{"no slide", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {sliding: {length: 10s}}, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.window.sliding.slide: is required"}},
		{"no window", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.window: set one window: fixed, sliding, session or accumulator"}},
		{"session", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {session: {timeout: 10s}}, keyed: true, allowedLateness: 2s, storage: {emptyDir: {}}}
`, nil},
		{"session, built-in", `    - name: sum
      udf:
        builtin: {name: count}
        groupBy: {window: {session: {timeout: 10s}}, keyed: true, storage: {no_store: {}}}
`, nil},
		{"session not keyed", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {session: {timeout: 10s}}, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.keyed: must be true with a session window: sessions are per key"}},
		{"session without a timeout", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {session: {timeout: 0s}}, keyed: true, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.window.session.timeout (0s) must be positive"}},
		{"accumulator", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {accumulator: {timeout: 0s}}, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.window.accumulator.timeout (0s) must be positive"}},
		{"accumulator without timeout", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {accumulator: {}}, keyed: true, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.window.accumulator.timeout: is required"}},
		{"accumulator builtin", `    - name: sum
      udf:
        builtin: {name: count}
        groupBy: {window: {accumulator: {timeout: 10s}}, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.window.accumulator: needs an accumulator container; a built-in reduces whole windows"}},
		{"negative lateness", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {fixed: {length: 10s}}, allowedLateness: -1s, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.allowedLateness (-1s) must not be negative"}},
		{"no storage", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {fixed: {length: 10s}}}
`, []string{"spec.vertices[1].udf.groupBy.storage: is required (persistentVolumeClaim, emptyDir or no_store)"}},
		{"null storage", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {fixed: {length: 10s}}, storage: null}
`, []string{"spec.vertices[1].udf.groupBy.storage: is required (persistentVolumeClaim, emptyDir or no_store); null sets nothing"}},
		{"a typo in a volume", `    - name: sum
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {fixed: {length: 10s}}, storage: {persistentVolumeClaim: {volumSize: 1Gi}}}
`, []string{`spec.vertices[1].udf.groupBy.storage.persistentVolumeClaim.volumSize: unknown field "volumSize"; did you mean "volumeSize"?`}},
		{"no function", `    - name: sum
      udf:
        groupBy: {window: {fixed: {length: 10s}}, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf: set container or builtin"}},
		{"a streaming built-in", `    - name: sum
      udf:
        builtin: {name: count}
        groupBy: {window: {fixed: {length: 10s, streaming: true}}, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].udf.groupBy.window.fixed.streaming (true) needs a reduce streamer container"}},
		{"partitions not keyed", `    - name: sum
      partitions: 2
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {fixed: {length: 10s}}, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1].partitions (2) must be 1 for a reduce that is not keyed"}},
		{"one partition not keyed", `    - name: sum
      partitions: 1
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {fixed: {length: 10s}}, keyed: false, storage: {emptyDir: {}}}
`, nil},
		{"a reduce and a source", `    - name: sum
      source: {generator: {}}
      udf:
        container: {image: my/sum:v1}
        groupBy: {window: {fixed: {length: 10s}}, storage: {emptyDir: {}}}
`, []string{"spec.vertices[1]: set exactly one of source, udf and sink"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(reducePipeline(tt.vertex)), nil)
			var ce *Error
			switch {
			case err == nil && len(tt.want) == 0:
				if slices.ContainsFunc(f.Ignored, func(p string) bool { return strings.HasSuffix(p, "Dir") }) {
					t.Errorf("Ignored %q: the storage is used, only its volume's settings are ignored", f.Ignored)
				}
				return
			case err == nil:
				t.Fatalf("valid; want %q", tt.want)
			case !errors.As(err, &ce):
				t.Fatalf("Parse = %v; want an *Error", err)
			}
			var got []string
			for _, p := range ce.Problems {
				got = append(got, p.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d: %q; want it to start with %q", i, got[i], w)
				}
			}
		})
	}
}

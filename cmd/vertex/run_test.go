package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunStateDir checks --state-dir: a MonoVertex, which has no reduce,
// refuses it; a pipeline with a reduce vertex takes it and stops at start,
// naming the vertex, since its vertices get no watermark.
func TestRunStateDir(t *testing.T) {
	dir := t.TempDir()
	reduce := filepath.Join(dir, "reduce.yaml")
	if err := os.WriteFile(reduce, []byte(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: r
spec:
  vertices:
    - {name: in, source: {generator: {}}}
    - name: sum
      udf:
        builtin: {name: count}
        groupBy: {window: {fixed: {length: 10s}}, keyed: true, storage: {emptyDir: {}}}
    - {name: out, sink: {log: {}}}
  edges:
    - {from: in, to: sum}
    - {from: sum, to: out}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runVertex(t, "run", "-f", "../../config/examples/monovertex.yaml", "--state-dir", dir)
	if code != 2 || !strings.Contains(stderr, `--state-dir "`+dir+`": ../../config/examples/monovertex.yaml is a MonoVertex, which has no reduce`) {
		t.Errorf("a MonoVertex with --state-dir: exit %d, %q; want 2 naming the flag", code, stderr)
	}
	code, _, stderr = runVertex(t, "run", "-f", reduce, "--state-dir", dir, "--metrics-addr", "", "--log-level", "error")
	if code == 0 || !strings.Contains(stderr, "vertex: reduce vertex sum: watermarks are not wired") {
		t.Errorf("a reduce: exit %d, %q; want an error naming the vertex", code, stderr)
	}
}

package main

import (
	"strings"
	"testing"
)

// TestRunStateDir checks that a MonoVertex, which has no reduce, refuses
// --state-dir, naming the flag. The end-to-end reduce tests run pipelines
// with it.
func TestRunStateDir(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runVertex(t, "run", "-f", "../../config/examples/monovertex.yaml", "--state-dir", dir)
	if code != 2 || !strings.Contains(stderr, `--state-dir "`+dir+`": ../../config/examples/monovertex.yaml is a MonoVertex, which has no reduce`) {
		t.Errorf("a MonoVertex with --state-dir: exit %d, %q; want 2 naming the flag", code, stderr)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateSummary checks the line vertex validate prints for a valid
// config: its path, its kind and name, and its summary in parentheses
// (vertexconfig's TestSummary checks what a summary says of each part).
func TestValidateSummary(t *testing.T) {
	const head = "apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: mv\nspec:\n"
	for _, tt := range []struct{ name, yaml, want string }{
		{
			"monovertex",
			head + `  source:
    generator: {}
  sink:
    log: {}
`,
			`MonoVertex "mv" is valid (generator → log)`,
		},
		{
			"pipeline",
			`apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
  vertices:
    - {name: in, source: {generator: {}}}
    - {name: out, sink: {log: {}}}
  edges:
    - {from: in, to: out}
`,
			`Pipeline "p" is valid (2 vertices, 1 edges; in: generator; out: log)`,
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

// TestValidateNumaflowReduce runs vertex validate over Numaflow's own reduce
// pipelines (its examples and e2e testdata, copied unchanged), with fixed,
// sliding, session and accumulator windows: each is valid.
func TestValidateNumaflowReduce(t *testing.T) {
	files, err := filepath.Glob("../../config/testdata/numaflow/reduce/*.yaml")
	if err != nil || len(files) < 16 {
		t.Fatalf("Numaflow's reduce pipelines: %d files, %v", len(files), err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			code, out, errOut := runVertex(t, "validate", "-f", path)
			if code != 0 || !strings.Contains(out, " is valid (") {
				t.Errorf("exit %d, %q (stderr %q); want valid", code, out, errOut)
			}
		})
	}
}

// TestValidateNumaflowTree runs vertex validate over every MonoVertex and
// Pipeline among the YAMLs of Numaflow's examples/ and test/ in the source
// tree $NUMAFLOW_DIR names (skipped without it): each is valid. Files of
// other kinds (an InterStepBufferService, a ServingPipeline, a Secret,
// Kubernetes manifests) are not vertices and are left out.
func TestValidateNumaflowTree(t *testing.T) {
	dir := os.Getenv("NUMAFLOW_DIR")
	if dir == "" {
		t.Skip("NUMAFLOW_DIR is not set: Numaflow's YAMLs are not validated (set it to Numaflow's source tree)")
	}
	var files []string
	for _, sub := range []string{"examples", "test"} {
		err := filepath.WalkDir(filepath.Join(dir, sub), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(data), "\n") {
				if kind, ok := strings.CutPrefix(line, "kind: "); ok {
					if k := strings.TrimSpace(kind); k == "MonoVertex" || k == "Pipeline" {
						files = append(files, path)
					}
					break
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("NUMAFLOW_DIR=%s: %v", dir, err)
		}
	}
	if len(files) == 0 {
		t.Fatalf("NUMAFLOW_DIR=%s: no MonoVertex or Pipeline YAML under examples/ or test/", dir)
	}
	t.Logf("%d MonoVertex and Pipeline YAMLs", len(files))
	for _, path := range files {
		rel, _ := filepath.Rel(dir, path)
		t.Run(rel, func(t *testing.T) {
			code, out, errOut := runVertex(t, "validate", "-f", path)
			if code != 0 || !strings.Contains(out, " is valid (") {
				t.Errorf("exit %d, %q (stderr %q); want valid", code, out, errOut)
			}
		})
	}
}

// TestValidateRefuses checks that bad input that vertex run could not run is
// refused by vertex validate, exit 2, with one line naming the field and its
// value; and that what Numaflow accepts but is likely a mistake is a warning
// on stderr beside the summary, exit 0.
func TestValidateRefuses(t *testing.T) {
	const mv = "apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: mv\nspec:\n"
	const pipeline = "apiVersion: numaflow.numaproj.io/v1alpha1\nkind: Pipeline\nmetadata:\n  name: p\nspec:\n  vertices:\n" +
		"    - {name: in, source: {generator: {}}}\n    - {name: a, udf: {builtin: {name: cat}}}\n" +
		"    - {name: b, udf: {builtin: {name: cat}}}\n    - {name: out, sink: {log: {}}}\n" +
		"  edges:\n    - {from: in, to: out}\n    - {from: a, to: b}\n    - {from: b, to: a}\n"
	for _, tt := range []struct {
		name, yaml string
		code       int
		stderr     string // the line of the problem, or of the warning
	}{
		{"a redis url with port 99999", mv + "  limits:\n    rateLimit:\n      max: 10\n      store:\n        redisStore: {mode: single, url: \"redis://127.0.0.1:99999\"}\n" +
			"  source:\n    generator: {}\n  sink:\n    log: {}\n", 2,
			`: spec.limits.rateLimit.store.redisStore.url ("redis://127.0.0.1:99999"): port 99999 is out of range: a port to connect to is 1 to 65535 (line 10)`},
		{"a ramp up out of range", mv + "  limits:\n    rateLimit: {max: 10, rampUpDuration: 9000000h}\n  source:\n    generator: {}\n  sink:\n    log: {}\n", 2,
			`: spec.limits.rateLimit.rampUpDuration ("9000000h") is out of range: a duration is at most 2562047h47m16s either way (line 7)`},
		{"a cycle no edge joins", pipeline, 2,
			`: spec.vertices[1]: vertices "a" and "b" are joined by no edge to the graph of vertex "in": a pipeline is one connected graph, as Numaflow requires`},
		{"a cycle no source reaches", pipeline + "    - {from: b, to: out}\n", 0,
			`vertex: warning: `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runVertex(t, "validate", "-f", path)
			if code != tt.code || !strings.Contains(errOut, tt.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut, tt.code, tt.stderr)
			}
			if tt.code == 2 && strings.Count(errOut, "\n") != 2 {
				t.Errorf("stderr %q; want one problem after the count", errOut)
			}
			if tt.code == 0 {
				want := "vertex: warning: " + path + `: spec.vertices[1]: no source reaches vertices "a" and "b": they never get a message (Numaflow accepts such a pipeline) (line 8)` + "\n"
				if errOut != want || !strings.Contains(out, " is valid (") {
					t.Errorf("stdout %q, stderr %q; want the summary and %q", out, errOut, want)
				}
			}
		})
	}
}

package spawn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/config"
)

// twoVertices is a pipeline whose vertices a and b have a container with a
// command each, and c one with an image alone; a names a side input.
func twoVertices() *config.File {
	cmd := func() *config.UDF { return &config.UDF{Container: &config.Container{Command: []string{"true"}}} }
	return &config.File{Pipeline: &config.Pipeline{Metadata: config.Metadata{Name: "p"}, Spec: config.PipelineSpec{Vertices: []config.Vertex{
		{Name: "a", UDF: cmd(), SideInputs: []string{"s"}}, {Name: "b", UDF: cmd()},
		{Name: "c", UDF: &config.UDF{Container: &config.Container{Image: "example:1"}}},
		{Name: "d"},
	}}}}
}

func TestChoose(t *testing.T) {
	ctx := context.Background()
	noNamespaces := errors.New("no namespaces here")
	isolated := func() error { return nil }
	notIsolated := func() error { return noNamespaces }
	fixed := filepath.Join(t.TempDir(), "numaflow")
	f := twoVertices()

	// Nothing to start: the servers are expected in the fixed directory.
	p, err := choose(ctx, f, Choice{Engine: "none"}, isolated, fixed)
	if err != nil || p.Start || p.Dir != fixed {
		t.Fatalf("no --spawn, no engine: %+v, %v; want nothing started, %s", p, err, fixed)
	}
	// --spawn with namespaces: a private directory, and one for side inputs.
	p, err = choose(ctx, f, Choice{Commands: true, Engine: "none"}, isolated, fixed)
	if err != nil || !p.Start || !p.Deps.Isolate || p.Dir == fixed || p.SideInputsDir == "" {
		t.Fatalf("--spawn, namespaces: %+v, %v; want a private directory, isolated", p, err)
	}
	for _, d := range []string{p.Dir, p.SideInputsDir} {
		if _, err := os.Stat(d); err != nil {
			t.Fatal(err)
		}
	}
	p.Release()
	if _, err := os.Stat(p.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Release left %s: %v", p.Dir, err)
	}
	// Without namespaces, a and b would share the fixed directory.
	_, err = choose(ctx, f, Choice{Commands: true, Engine: "none"}, notIsolated, fixed)
	var se *SharedDirError
	if !errors.As(err, &se) || strings.Join(se.Vertices, ",") != "a,b" || !errors.Is(err, noNamespaces) ||
		!strings.Contains(err.Error(), "--uds-dir") {
		t.Fatalf("--spawn, no namespaces: %v; want a SharedDirError naming a and b, why, and what to do", err)
	}
	// ... unless --uds-dir is given, or one vertex runs alone, which gets the
	// fixed directory, locked: a second process is refused.
	if p, err = choose(ctx, f, Choice{Commands: true, Engine: "none", Dir: "/given"}, notIsolated, fixed); err != nil || p.Dir != "/given" {
		t.Fatalf("--uds-dir: %+v, %v", p, err)
	}
	p, err = choose(ctx, f, Choice{Only: "a", Commands: true, Engine: "none"}, notIsolated, fixed)
	if err != nil || p.Dir != fixed {
		t.Fatalf("--vertex a, no namespaces: %+v, %v; want %s", p, err, fixed)
	}
	_, err = choose(ctx, f, Choice{Only: "b", Commands: true, Engine: "none"}, notIsolated, fixed)
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "another sluice process") {
		t.Fatalf("a second process, no namespaces: %v; want a SharedDirError saying another process holds it", err)
	}
	p.Release()
	// An engine that is named must be able to run containers.
	if _, err := choose(ctx, f, Choice{Only: "c", Engine: "nosuch"}, isolated, fixed); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Fatalf("--containers nosuch: %v", err)
	}
}

// Package kubetest renders kustomizations with `kubectl kustomize` (offline)
// for tests, and reads the objects they make: generically, as maps that keep
// every field, or decoded into the small typed subsets below.
//
// kubectl must be on PATH; if it is not, Render skips the test with one line.
package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// renderTimeout bounds one kubectl kustomize.
const renderTimeout = time.Minute

// Object is one rendered Kubernetes object, every field kept.
type Object map[string]any

// Kind returns the object's kind.
func (o Object) Kind() string { s, _ := o["kind"].(string); return s }

// Name returns the object's metadata.name.
func (o Object) Name() string { s, _ := Map(o, "metadata")["name"].(string); return s }

// Decode decodes the object into v (a typed subset such as *Deployment).
func (o Object) Decode(t testing.TB, v any) {
	t.Helper()
	b, err := yaml.Marshal(map[string]any(o))
	if err != nil {
		t.Fatalf("%s %s: %v", o.Kind(), o.Name(), err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s %s: %v", o.Kind(), o.Name(), err)
	}
}

// Objects are the objects of a rendering, in its order.
type Objects []Object

// Get returns the object of that kind and name, failing the test without it.
func (objs Objects) Get(t testing.TB, kind, name string) Object {
	t.Helper()
	for _, o := range objs {
		if o.Kind() == kind && o.Name() == name {
			return o
		}
	}
	t.Fatalf("no %s %q among the rendered objects (%s)", kind, name, objs)
	return nil
}

// OfKind returns the objects of a kind.
func (objs Objects) OfKind(kind string) Objects {
	var out Objects
	for _, o := range objs {
		if o.Kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// String lists the objects as kind/name.
func (objs Objects) String() string {
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.Kind() + "/" + o.Name()
	}
	return strings.Join(names, ", ")
}

// Render runs `kubectl kustomize dir` and returns the objects it renders.
func Render(t testing.TB, dir string) Objects {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed: kubectl kustomize renders the manifests offline; install kubectl to run this test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), renderTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	objs, err := Parse(stdout.Bytes())
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return objs
}

// Parse reads the objects of a multi-document YAML stream.
func Parse(data []byte) (Objects, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var objs Objects
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", len(objs)+1, err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
}

// Marshal writes objects as a multi-document YAML stream.
func Marshal(objs ...Object) ([]byte, error) {
	var buf bytes.Buffer
	for _, o := range objs {
		b, err := yaml.Marshal(map[string]any(o))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.Kind(), o.Name(), err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// Map returns the map at path under m, or nil.
func Map(m map[string]any, path ...string) map[string]any {
	for _, k := range path {
		m, _ = m[k].(map[string]any)
	}
	return m
}

// List returns the list at path under m, as maps (what is not a map is left
// out), or nil.
func List(m map[string]any, path ...string) []map[string]any {
	last := path[len(path)-1]
	items, _ := Map(m, path[:len(path)-1]...)[last].([]any)
	var out []map[string]any
	for _, it := range items {
		if im, ok := it.(map[string]any); ok {
			out = append(out, im)
		}
	}
	return out
}

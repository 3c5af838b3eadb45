package podmantest

import (
	"context"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/numaflowgo"
)

// NumaflowGoImages builds, once per process, the images of numaflow-go's
// examples that Numaflow's YAML names, from the numaflow-go source tree src,
// and returns each image's ID by its name. An image is named as the
// example's Makefile names it, with the Makefile's default tag
// (quay.io/numaio/numaflow-go/map-even-odd:stable for examples/mapper/even_odd),
// so that a pipeline that names it runs it unchanged, without a registry:
// podman run --pull=never, missing or newer uses it (--pull=always, which
// imagePullPolicy: Always means to podman kube play, asks the registry and
// fails without one).
//
// Each image holds the example built as a static binary against src
// (numaflowgo.Build, -s -w), as its entrypoint /bin/server, run with no
// arguments as user 65532, FROM scratch (Containerfile.binary, built by
// scripts/image.sh). A directory mounted at /var/run/numaflow must let 65532
// create its socket and server-info file there (mode 0777, or owned by 65532).
//
// Main removes the images by ID. The names are not this process's own:
// another process on the machine that builds the same name takes it over,
// and the returned IDs stay this process's builds.
func (p *Podman) NumaflowGoImages(t testing.TB, src string, images ...string) map[string]string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	var examples map[string]string // image → example
	for _, image := range images {
		if _, ok := p.nfgo[image]; ok {
			continue
		}
		if examples == nil {
			if examples, err = numaflowgo.Images(src); err != nil {
				t.Fatal(err)
			}
		}
		example, ok := examples[image]
		if !ok {
			t.Fatalf("no example of numaflow-go's %s builds the image %s; its Makefiles name %s",
				src, image, strings.Join(slices.Sorted(maps.Keys(examples)), ", "))
		}
		p.nfgo[image] = p.numaflowGoImage(t, src, example, image)
	}
	out := map[string]string{}
	for _, image := range images {
		out[image] = p.nfgo[image]
	}
	return out
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// numaflowGoImage builds numaflow-go's example into the image name, and
// returns the image's ID.
func (p *Podman) numaflowGoImage(t testing.TB, src, example, name string) string {
	t.Helper()
	bin := filepath.Join(p.dir, "numaflow-go", unsafeName.ReplaceAllString(name, "_"))
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	start := time.Now()
	if err := numaflowgo.Build(ctx, src, example, bin, "-ldflags=-s -w"); err != nil {
		t.Fatal(err)
	}
	built := time.Now()
	out := p.imageScript(t, name+"="+bin)
	id := strings.TrimSpace(p.Run(t, "image", "inspect", "--format", "{{.Id}}", name))
	t.Logf("built %s from examples/%s in %v (go build %v, image %v): %s", name, example,
		time.Since(start).Round(100*time.Millisecond), built.Sub(start).Round(100*time.Millisecond),
		time.Since(built).Round(100*time.Millisecond), out)
	return id
}

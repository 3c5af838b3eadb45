package numaflowgo

import (
	"context"
	"debug/elf"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestImages(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string // under examples/
		want  map[string]string
		err   string
	}{
		{
			name: "tags and quotes",
			files: map[string]string{
				"mapper/cat/go.mod":       "module cat\n",
				"mapper/cat/Makefile":     "TAG ?= stable\nPUSH ?= false\nIMAGE_REGISTRY = quay.io/numaio/numaflow-go/map-cat:${TAG}\n",
				"sinker/redis/go.mod":     "module redis\n",
				"sinker/redis/Makefile":   "TAG ?= v1\nIMAGE_REGISTRY = \"quay.io/numaio/numaflow-go/redis-sink:$(TAG)\"\n",
				"sinker/nomod/Makefile":   "TAG ?= stable\nIMAGE_REGISTRY = quay.io/numaio/numaflow-go/nomod:${TAG}\n",
				"sinker/noimage/go.mod":   "module noimage\n",
				"sinker/noimage/Makefile": "build:\n\tgo build .\n",
			},
			want: map[string]string{
				"quay.io/numaio/numaflow-go/map-cat:stable": "mapper/cat",
				"quay.io/numaio/numaflow-go/redis-sink:v1":  "sinker/redis",
			},
		},
		{
			name: "one image twice",
			files: map[string]string{
				"a/go.mod": "module a\n", "a/Makefile": "TAG ?= stable\nIMAGE_REGISTRY = x/y:${TAG}\n",
				"b/go.mod": "module b\n", "b/Makefile": "TAG ?= stable\nIMAGE_REGISTRY = x/y:${TAG}\n",
			},
			err: "numaflow-go: examples a and b both build the image x/y:stable",
		},
		{
			name:  "no image",
			files: map[string]string{"a/go.mod": "module a\n"},
			err:   "no Makefile under",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			for name, text := range tt.files {
				path := filepath.Join(src, "examples", name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Images(src)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Images: %v; want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("Images = %v; want %v", got, tt.want)
			}
		})
	}
}

// TestSourceTree checks the images of the numaflow-go tree NUMAFLOW_GO_DIR
// names that Numaflow's example pipelines run, and builds one of them.
func TestSourceTree(t *testing.T) {
	src := os.Getenv(EnvDir)
	if src == "" {
		t.Skipf("%s is not set: numaflow-go's examples are not built (set it to a numaflow-go source tree)", EnvDir)
	}
	images, err := Images(src)
	if err != nil {
		t.Fatal(err)
	}
	for image, example := range map[string]string{
		"quay.io/numaio/numaflow-go/map-even-odd:stable":      "mapper/even_odd",
		"quay.io/numaio/numaflow-go/map-cat:stable":           "mapper/cat",
		"quay.io/numaio/numaflow-go/reduce-sum:stable":        "reducer/sum",
		"quay.io/numaio/numaflow-go/reduce-stream-sum:stable": "reducestreamer/sum",
		"quay.io/numaio/numaflow-go/session-counter:stable":   "sessionreducer/counter",
		"quay.io/numaio/numaflow-go/fb-sink-log:stable":       "sinker/fallback",
	} {
		if images[image] != example {
			t.Errorf("%s is built from %q; want %s", image, images[image], example)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "cat")
	if err := Build(ctx, src, "mapper/cat", bin, "-ldflags=-s -w"); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: it is not static", bin)
		}
	}
	if err := Build(ctx, src, "mapper/none", bin); !errors.Is(err, ErrNoExample) {
		t.Errorf("Build of mapper/none: %v; want ErrNoExample", err)
	}
}

// Package numaflowgo builds the example programs of a numaflow-go source tree
// (Numaflow's Go SDK) for tests, each as it is, against that tree, and names
// the container image each example's Makefile gives it.
//
// An example is built as a static binary (CGO_ENABLED=0, -trimpath): its
// directory examples/<name> is copied to a module of its own whose go.mod
// replaces github.com/numaproj/numaflow-go with the source tree, and built
// there with GOWORK=off and GOFLAGS=-mod=mod, so that neither a workspace nor
// the example's own replace line decides which numaflow-go it is built
// against.
//
//	bin := filepath.Join(dir, "cat")
//	err := numaflowgo.Build(ctx, src, "mapper/cat", bin)
package numaflowgo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// EnvDir is the environment variable that names a numaflow-go source tree in
// the tests that build its examples; they are skipped without it.
const EnvDir = "NUMAFLOW_GO_DIR"

// ErrNoExample is returned, wrapped with the name, for an example that the
// source tree does not hold, and for an image no example's Makefile names.
var ErrNoExample = errors.New("numaflow-go: no such example")

var replaceLine = regexp.MustCompile(`(?m)^replace github.com/numaproj/numaflow-go => .*$`)

// Build builds the example examples/<name> of the numaflow-go source tree src
// (an absolute path, or one relative to the working directory) into the
// static binary out. flags are added to go build's command line
// (-ldflags=-s -w). The go command runs in ctx.
func Build(ctx context.Context, src, name, out string, flags ...string) error {
	src, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	exampleDir := filepath.Join(src, "examples", filepath.FromSlash(name))
	if _, err := os.Stat(filepath.Join(exampleDir, "go.mod")); err != nil {
		return fmt.Errorf("%w: %s holds no examples/%s/go.mod", ErrNoExample, src, name)
	}
	tmp, err := os.MkdirTemp("", "numaflowgo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	mod := filepath.Join(tmp, "example")
	if err := os.CopyFS(mod, os.DirFS(exampleDir)); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(mod, "go.mod"))
	if err != nil {
		return err
	}
	line := []byte("replace github.com/numaproj/numaflow-go => " + src)
	if replaceLine.Match(gomod) {
		gomod = replaceLine.ReplaceAll(gomod, line)
	} else {
		gomod = append(append(gomod, '\n'), line...)
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), gomod, 0o644); err != nil {
		return err
	}
	out, err = filepath.Abs(out)
	if err != nil {
		return err
	}
	args := append(append([]string{"build", "-trimpath", "-o", out}, flags...), ".")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building numaflow-go's %s example: %w\n%s", name, err, b)
	}
	return nil
}

var (
	makeTag   = regexp.MustCompile(`^TAG\s*\?=\s*(\S+)\s*$`)
	makeImage = regexp.MustCompile(`^IMAGE_REGISTRY\s*=\s*"?([^"\s]+)"?\s*$`)
)

// Images maps the container images that the examples of the source tree src
// are published as, named as their Makefiles name them with the Makefile's
// default tag (quay.io/numaio/numaflow-go/map-even-odd:stable), to the
// examples, by their directory under examples/ (mapper/even_odd). Only
// examples with a go.mod are listed; two examples with one image name are an
// error.
func Images(src string) (map[string]string, error) {
	root := filepath.Join(src, "examples")
	images := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "Makefile" {
			return err
		}
		dir := filepath.Dir(path)
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		image, ok := makefileImage(b)
		if !ok {
			return nil
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if other, dup := images[image]; dup {
			return fmt.Errorf("numaflow-go: examples %s and %s both build the image %s", other, name, image)
		}
		images[image] = name
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(images) == 0 {
		return nil, fmt.Errorf("%w: no Makefile under %s names an image (IMAGE_REGISTRY = ...)", ErrNoExample, root)
	}
	return images, nil
}

// makefileImage is the image a numaflow-go example's Makefile builds: its
// IMAGE_REGISTRY with ${TAG} (or $(TAG)) replaced by TAG's default.
func makefileImage(makefile []byte) (string, bool) {
	var tag, image string
	s := bufio.NewScanner(bytes.NewReader(makefile))
	for s.Scan() {
		if m := makeTag.FindStringSubmatch(s.Text()); m != nil && tag == "" {
			tag = m[1]
		}
		if m := makeImage.FindStringSubmatch(s.Text()); m != nil && image == "" {
			image = m[1]
		}
	}
	if image == "" {
		return "", false
	}
	image = strings.NewReplacer("${TAG}", tag, "$(TAG)", tag).Replace(image)
	return image, !strings.Contains(image, "$")
}

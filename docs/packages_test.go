package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPackageMap checks that go-api.md's map of the tree names every
// package directory of pkg/ and internal/ (those of sdk/ and apis/ through
// their parent), and no directory that is not there.
func TestPackageMap(t *testing.T) {
	data, err := os.ReadFile("go-api.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "## Packages")
	if start < 0 {
		t.Fatal("go-api.md has no Packages section")
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^((?:pkg|internal|cmd)/[a-z0-9/]+/)`).FindAllStringSubmatch(text[start:], -1) {
		listed[strings.TrimSuffix(m[1], "/")] = true
	}
	covered := func(dir string) bool {
		for d := dir; d != "."; d = filepath.Dir(d) {
			if listed[d] {
				return d == dir || strings.HasPrefix(dir, "pkg/sdk/") || strings.HasPrefix(dir, "pkg/apis/")
			}
		}
		return false
	}
	seen := map[string]bool{}
	for _, root := range []string{"pkg", "internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join("..", root), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || d.Name() == "testdata" {
				return err
			}
			goFiles, _ := filepath.Glob(filepath.Join(path, "*.go"))
			if len(goFiles) == 0 {
				return nil
			}
			dir, _ := filepath.Rel("..", path)
			seen[dir] = true
			if !covered(dir) {
				t.Errorf("go-api.md's package map does not name %s/", dir)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for dir := range listed {
		if !seen[dir] {
			if _, err := os.Stat(filepath.Join("..", dir)); err != nil {
				t.Errorf("go-api.md's package map names %s/, which is not in the tree", dir)
			}
		}
	}
}

// TestPkgTopLevel keeps pkg/'s top level a list of the runtime's parts:
// connectors, clients and stores group under a parent rather than adding
// to it.
func TestPkgTopLevel(t *testing.T) {
	const most = 15
	entries, err := os.ReadDir(filepath.Join("..", "pkg"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) > most {
		t.Errorf("pkg/ has %d entries, at most %d: %s", len(names), most, strings.Join(names, " "))
	}
}

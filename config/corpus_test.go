package config

import (
	"path/filepath"
	"testing"
)

// TestGoodConfigsSchemaOnly: every good config of the corpus and every
// example passes the schema's checks alone (package vertexconfig's tests run
// the whole corpus, good and bad, with the runtime's check too).
func TestGoodConfigsSchemaOnly(t *testing.T) {
	var files []string
	for _, pattern := range []string{"testdata/good/*.yaml", "examples/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: %v, %d files", pattern, err, len(m))
		}
		files = append(files, m...)
	}
	for _, path := range files {
		t.Run(path, func(t *testing.T) {
			f, err := Load(path, nil)
			if err != nil {
				t.Fatalf("does not load:\n%v", err)
			}
			if f.Name() == "" {
				t.Error("Name() is empty")
			}
		})
	}
}

package serve

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/internal/cli"
)

const monoVertex = `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: mv
spec:
  source:
    generator: {}
  sink:
    log: {}
`

// TestCommandErrors: every bad flag is one usage error naming it, before
// any role runs.
func TestCommandErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mv.yaml")
	if err := os.WriteFile(path, []byte(monoVertex), 0o644); err != nil {
		t.Fatal(err)
	}
	ran := false
	roles["test"] = Role{Name: "test", Help: "a role of the test", Run: func(context.Context, Options) error { ran = true; return nil }}
	t.Cleanup(func() { delete(roles, "test") })
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no role", []string{"-f", path}, "serve: --role is required"},
		{"a role that is not one", []string{"--role", "reduce", "-f", path}, `serve: --role ("reduce") is not a role`},
		{"no file", []string{"--role", "test"}, "serve: -f is required"},
		{"forward beside another role", []string{"--role", "test", "-f", path, "--forward", "/tmp/x.sock"}, "serve: --forward is for --role map, not test"},
		{"map mode beside another role", []string{"--role", "test", "-f", path, "--map-mode", "batch-map"}, "serve: --map-mode is for --role map, not test"},
		{"a map mode that is not one", []string{"--role", "map", "-f", path, "--map-mode", "flat-map"}, `serve: --map-mode ("flat-map") is not a map mode (unary-map, batch-map, stream-map)`},
		{"a vertex of a MonoVertex", []string{"--role", "test", "-f", path, "--vertex", "v"}, "serve: --vertex is for Pipelines"},
		{"a bad log level", []string{"--role", "test", "-f", path, "--log-level", "loud"}, "serve: --log-level"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := Command(tt.args, &out, &errOut)
			if err == nil || !cli.IsUsage(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v; want a usage error containing %q", err, tt.want)
			}
		})
	}
	if ran {
		t.Fatal("a role ran despite a bad flag")
	}
	var out bytes.Buffer
	if err := Command([]string{"--role", "test", "-f", path}, &out, &out); err != nil || !ran {
		t.Fatalf("good flags: %v, ran %v", err, ran)
	}
}

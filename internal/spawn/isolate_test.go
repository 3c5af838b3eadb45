package spawn

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/pipeline/sideinputs"
)

func TestMain(m *testing.M) {
	Isolated()
	os.Exit(m.Run())
}

// Two vertices whose containers each write a file to /var/run/numaflow, and
// read one from /var/numaflow/side-inputs, in namespaces of their own: each
// file lands in its vertex's directory, each reads its vertex's side input,
// and the host's /var/run/numaflow gets neither.
func TestIsolatedVerticesHaveTheirOwnDirectories(t *testing.T) {
	if err := Isolation(); err != nil {
		t.Skipf("containers cannot have mount namespaces here: %v", err)
	}
	base := shortDir(t)
	sdir := filepath.Join(base, "side-inputs")
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sdir, "answer"), []byte("42"), 0o644); err != nil {
		t.Fatal(err)
	}
	mark := "isolation-" + strings.ReplaceAll(t.Name(), "/", "-")
	vertex := func(name string) config.Vertex {
		script := `cat ` + sideinputs.DefaultDir + `/answer > ` + serverinfo.DefaultDir + `/` + mark + `.tmp && echo " $NUMAFLOW_MONO_VERTEX_NAME" >> ` +
			serverinfo.DefaultDir + `/` + mark + `.tmp && mv ` + serverinfo.DefaultDir + `/` + mark + `.tmp ` + serverinfo.DefaultDir + `/` + mark + ` && exec sleep 60`
		return config.Vertex{Name: name, SideInputs: []string{"answer"},
			UDF: &config.UDF{Container: &config.Container{Command: []string{"/bin/sh", "-c", script}}}}
	}
	f := &config.File{Pipeline: &config.Pipeline{Metadata: config.Metadata{Name: "iso"},
		Spec: config.PipelineSpec{Vertices: []config.Vertex{vertex("a"), vertex("b")}}}}
	var out lockedBuffer
	g, err := Start(f, base, Deps{Commands: true, Isolate: true, Stdout: &out, Stderr: &out, SideInputsDir: sdir})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	for _, v := range []string{"a", "b"} {
		path := filepath.Join(base, v, mark)
		var got []byte
		for deadline := time.Now().Add(spawnWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if got, err = os.ReadFile(path); err == nil {
				break
			}
		}
		if want := "42 " + v + "\n"; string(got) != want {
			t.Fatalf("vertex %s's container wrote %q to /var/run/numaflow/%s, want %q in %s\nthe containers wrote:\n%s", v, got, mark, want, path, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(serverinfo.DefaultDir, mark)); err == nil {
		t.Errorf("the host's %s got the file too", serverinfo.DefaultDir)
	}
}

// BenchmarkStart is the cost of isolation on a container's start: a command
// (/bin/true) run as a child process, and run in a mount namespace of its
// own with its two mounts (a re-exec of the binary that mounts, then execs).
func BenchmarkStart(b *testing.B) {
	dir := b.TempDir()
	for _, isolated := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "isolated"}[isolated]
		b.Run(name, func(b *testing.B) {
			if isolated {
				if err := Isolation(); err != nil {
					b.Skipf("no mount namespaces here: %v", err)
				}
			}
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				cmd.Env = os.Environ()
				if isolated {
					var err error
					if cmd, err = isolatedCommand(cmd, namespaceMounts(dir, dir)); err != nil {
						b.Fatal(err)
					}
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
		})
	}
}

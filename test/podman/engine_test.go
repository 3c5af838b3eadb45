package podman

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/podmantest"
	"github.com/sluiceflow/sluice/internal/runtest"
)

// vertexBinary builds the vertex binary of this tree once per test.
func vertexBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "vertex")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/vertex").CombinedOutput(); err != nil {
		t.Fatalf("building vertex: %v\n%s", err, out)
	}
	return bin
}

// engineMonoVertex is a MonoVertex whose map has an image alone.
func engineMonoVertex(t *testing.T, image, policy string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mv.yaml")
	yaml := `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: engine
spec:
  source:
    generator: {rpu: 20, duration: 100ms, msgSize: 8}
  udf:
    container:
      image: ` + image + `
      imagePullPolicy: ` + policy + `
      resources: {limits: {cpu: 500m, memory: 64Mi}}
  sink:
    log: {}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// vertex run runs the map's image with podman, by default: the messages
// reach the sink through sluice's cat example in a container, which podman
// removes when the vertex stops on SIGTERM.
func TestPodmanEngineRunsImages(t *testing.T) {
	p := podmantest.New(t)
	imgs := p.Images(t, "cat")
	bin := vertexBinary(t)
	cmd := exec.Command(bin, "run", "-f", engineMonoVertex(t, imgs["cat"], "Never"), "--metrics-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), p.EngineEnv(t)...)
	var stderr runtest.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var first time.Duration
	for n := 0; n < 50; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("vertex exited before 50 messages; stderr:\n%s", stderr.String())
			}
			if strings.HasPrefix(l, "Payload - ") {
				if n == 0 {
					first = time.Since(start)
				}
				n++
			}
		case <-time.After(90 * time.Second):
			t.Fatalf("no 50 messages in 90s; stderr:\n%s", stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), `"how":"images with podman"`) {
		t.Errorf("the vertex did not say it runs the image with podman; stderr:\n%s", stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("vertex exited with %v on SIGTERM; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("vertex did not exit within 30s of SIGTERM")
	}
	if left := p.Run(t, "ps", "--all", "--filter", "label=io.sluiceflow.pid", "--format", "{{.Names}}"); strings.Contains(left, "sluice-engine-") {
		t.Errorf("containers left after the vertex stopped: %s", left)
	}
	t.Logf("the first message reached the sink %v after vertex run started", first.Round(10*time.Millisecond))
}

// An image podman does not have and may not pull, and one it cannot pull,
// stop vertex run at once, exit 2, with one error naming the vertex, the
// container and the image.
func TestPodmanEngineImageMissing(t *testing.T) {
	p := podmantest.New(t)
	bin := vertexBinary(t)
	for _, c := range []struct{ policy, want string }{
		{"Never", "vertex engine: the udf container: image localhost/sluice-absent:1 (imagePullPolicy Never): not present in podman's images, and the policy forbids a pull"},
		{"IfNotPresent", "vertex engine: the udf container: image localhost/sluice-absent:1 (imagePullPolicy IfNotPresent): not present in podman's images, and `podman pull` failed: "},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, "run", "--log-level", "error", "-f", engineMonoVertex(t, "localhost/sluice-absent:1", c.policy), "--metrics-addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), p.EngineEnv(t)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit %d (%v), stderr %q; want 2 and %q", c.policy, code, err, stderr.String(), c.want)
		}
	}
}

package podman

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/kubetest"
	"github.com/sluiceflow/sluice/internal/podmantest"
)

// TestPodmanNumaflowPod plays the pod Numaflow's controller builds for a
// MonoVertex replica (test/testdata/numaflow-monovertex-pod.yaml: the numa
// container running /bin/numaflow-rs processor with the MonoVertex in
// NUMAFLOW_MONO_VERTEX_OBJECT, the user-defined containers as native
// sidecars, both volumes, the full env) with sluice's images: the probes'
// paths answer over HTTPS, monovtx_read_total rises at the MonoVertex's limit
// (20 a second after a ramp from 5 over 5s), no epoch exceeds it, and SIGTERM
// stops the vertex with exit code 0.
func TestPodmanNumaflowPod(t *testing.T) {
	p := podmantest.New(t)
	imgs := p.Images(t, "simplesource", "eventtime", "cat", "logsink")
	data, err := os.ReadFile("../testdata/numaflow-monovertex-pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kubetest.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	pod := objs.Get(t, "Pod", "simple-mono-vertex-mv-0-x7k2q")
	// ForPodman plays a Deployment's template: the fixture's pod is one.
	asDeployment := kubetest.Object{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "numaflow-pod"},
		"spec":     map[string]any{"template": map[string]any{"metadata": pod["metadata"], "spec": pod["spec"]}}}
	name := "nfpod-" + p.Tag()
	played := podmantest.ForPodman(t, kubetest.Objects{asDeployment}, "numaflow-pod", podmantest.PodOptions{
		Name: name,
		Images: map[string]string{"sluice": imgs["sluice"], "sluice-example-simplesource": imgs["simplesource"],
			"sluice-example-eventtime": imgs["eventtime"], "sluice-example-cat": imgs["cat"], "sluice-example-logsink": imgs["logsink"]},
	})
	numa := podmantest.Container(t, played[len(played)-1], "numa")
	if cmd := fmt.Sprint(numa["command"], numa["args"]); cmd != "[/bin/numaflow-rs] [processor]" {
		t.Fatalf("the fixture's numa container runs %s; want Numaflow's /bin/numaflow-rs processor", cmd)
	}
	// Port 2469 is fixed in Numaflow's pods; on the host's network the test
	// takes a free one, and asks for the debug log of each epoch.
	port := freePort(t)
	numa["args"] = []any{"processor", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port)}
	numa["env"] = append(numa["env"].([]any), map[string]any{"name": "NUMAFLOW_DEBUG", "value": "true"})

	pl := p.Play(t, played)
	addr := fmt.Sprintf("https://127.0.0.1:%d", port)
	waitStatus(t, addr+"/readyz", http.StatusOK, readyTimeout)
	for _, path := range []string{"/livez", "/sidecar-livez"} {
		if code, body := get(t, addr+path); code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	if code, _ := get(t, strings.Replace(addr, "https", "http", 1)+"/readyz"); code == http.StatusOK {
		t.Error("/readyz answered plain HTTP; Numaflow's probes use HTTPS")
	}
	const limit = 20
	// Past the 5s ramp, the reads per epoch.
	time.Sleep(6 * time.Second)
	rate := perEpoch(func() float64 { return counter(t, addr, "monovtx_read_total") })
	pl.Stop(t, stopTimeout)
	container := name + "-numa"
	if code := p.Inspect(t, container, "{{.State.ExitCode}}"); code != "0" {
		_, stderr := p.Logs(t, container)
		t.Errorf("the vertex exited with code %s on SIGTERM; stderr:\n%s", code, tail(stderr, 20))
	}
	_, stderr := p.Logs(t, container)
	defer logOnFailure(t, container, stderr)
	full := checkEpochs(t, limit, epochs(t, stderr))
	if rate < 0.9*limit || rate > limit {
		t.Errorf("monovtx_read_total rose %.1f a second; want the limit, %d", rate, limit)
	}
	t.Logf("monovtx_read_total rose %.1f a second (limit %d), %d epochs at the limit", rate, limit, full)
}

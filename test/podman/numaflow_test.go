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

// TestPodmanNumaflowPod plays the pods Numaflow's controller builds for a
// MonoVertex replica, v1.8's (test/testdata/numaflow-monovertex-pod.yaml,
// with its monitor sidecar) and the main branch's
// (numaflow-monovertex-pod-main.yaml, without), each with the numa container
// running /bin/numaflow-rs processor with the MonoVertex in
// NUMAFLOW_MONO_VERTEX_OBJECT, the user-defined containers as native
// sidecars, both volumes and the full env, with sluice's images: the numa
// container's probes answer over HTTPS on the port they name, and its named
// ports serve their routes (metrics: /metrics; runtime, on main:
// /runtime/errors, GET and HEAD); in the v1.8 pod the pod serves
// /runtime/errors on 2470 all the same, from whichever of the monitor and
// numa took the port first. monovtx_read_total rises at the MonoVertex's
// limit (20 a second after a ramp from 5 over 5s), no epoch exceeds it, and
// SIGTERM stops the vertex with exit code 0.
func TestPodmanNumaflowPod(t *testing.T) {
	p := podmantest.New(t)
	imgs := p.Images(t, "simplesource", "eventtime", "cat", "logsink")
	for _, tt := range []struct {
		name, file, pod string
		monitor         bool // the pod has the monitor sidecar
	}{
		{"v1.8", "../testdata/numaflow-monovertex-pod.yaml", "simple-mono-vertex-mv-0-x7k2q", true},
		{"main", "../testdata/numaflow-monovertex-pod-main.yaml", "simple-mono-vertex-mv-0-q9w4m", false},
	} {
		t.Run(tt.name, func(t *testing.T) { playNumaflowPod(t, p, imgs, tt.file, tt.pod, tt.monitor) })
	}
}

func playNumaflowPod(t *testing.T, p *podmantest.Podman, imgs map[string]string, file, podName string, monitor bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kubetest.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	pod := objs.Get(t, "Pod", podName)
	// The numa container's ports by name, and its probes, as the fixture has them.
	fixtureNuma := podmantest.Container(t, pod, "numa")
	ports := map[string]int{}
	for _, port := range kubetest.List(fixtureNuma, "ports") {
		ports[port["name"].(string)] = asInt(t, port["containerPort"])
	}
	probes := map[string]string{} // path: port name
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		get := kubetest.Map(fixtureNuma, probe, "httpGet")
		if get["scheme"] != "HTTPS" {
			t.Errorf("numa %s: scheme %v; want HTTPS", probe, get["scheme"])
		}
		for name, n := range ports {
			if n == asInt(t, get["port"]) {
				probes[get["path"].(string)] = name
			}
		}
	}
	if len(probes) != 2 {
		t.Fatalf("numa probes on %v; want both on a port the container names (%v)", probes, ports)
	}

	// ForPodman plays a Deployment's template: the fixture's pod is one.
	asDeployment := kubetest.Object{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "numaflow-pod"},
		"spec":     map[string]any{"template": map[string]any{"metadata": pod["metadata"], "spec": pod["spec"]}}}
	name := "nfpod-" + strings.ReplaceAll(strings.ToLower(t.Name()[len("TestPodmanNumaflowPod/"):]), ".", "") + "-" + p.Tag()
	played := podmantest.ForPodman(t, kubetest.Objects{asDeployment}, "numaflow-pod", podmantest.PodOptions{
		Name: name,
		Images: map[string]string{"sluice": imgs["sluice"], "sluice-example-simplesource": imgs["simplesource"],
			"sluice-example-eventtime": imgs["eventtime"], "sluice-example-cat": imgs["cat"], "sluice-example-logsink": imgs["logsink"]},
	})
	numa := podmantest.Container(t, played[len(played)-1], "numa")
	if cmd := fmt.Sprint(numa["command"], numa["args"]); cmd != "[/bin/numaflow-rs] [processor]" {
		t.Fatalf("the fixture's numa container runs %s; want Numaflow's /bin/numaflow-rs processor", cmd)
	}
	// Ports 2469 and 2470 are fixed in Numaflow's pods; on the host's network
	// the test takes free ones (the same for the monitor as for numa), and
	// asks for the debug log of each epoch.
	addrs := map[int]string{2469: fmt.Sprintf("127.0.0.1:%d", freePort(t)), 2470: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	numa["args"] = []any{"processor", "--metrics-addr", addrs[2469], "--runtime-addr", addrs[2470]}
	numa["env"] = append(numa["env"].([]any), map[string]any{"name": "NUMAFLOW_DEBUG", "value": "true"})
	if monitor {
		mon := podmantest.Container(t, played[len(played)-1], "monitor")
		if cmd := fmt.Sprint(mon["command"], mon["args"]); cmd != "[/bin/numaflow-rs] [monitor]" {
			t.Fatalf("the fixture's monitor container runs %s; want Numaflow's /bin/numaflow-rs monitor", cmd)
		}
		mon["args"] = []any{"monitor", "--addr", addrs[2470]}
	}

	pl := p.Play(t, played)
	base := func(port string) string { return "https://" + addrs[ports[port]] }
	for path, port := range probes {
		waitStatus(t, base(port)+path, http.StatusOK, readyTimeout)
	}
	if code, _ := get(t, "http://"+addrs[2469]+"/readyz"); code == http.StatusOK {
		t.Error("/readyz answered plain HTTP; Numaflow's probes use HTTPS")
	}
	for _, path := range []string{"/sidecar-livez", "/metrics"} {
		if code, body := get(t, base("metrics")+path); code != http.StatusOK {
			t.Errorf("metrics port %s: %d %.200s", path, code, body)
		}
	}
	// The runtime errors: on the numa container's port named runtime (main),
	// or on the pod's 2470 (v1.8, the monitor's or numa's).
	if _, ok := ports["runtime"]; ok == monitor {
		t.Errorf("numa ports %v; want runtime 2470 exactly when there is no monitor sidecar", ports)
	}
	runtimeURL := "https://" + addrs[2470] + "/runtime/errors"
	waitStatus(t, runtimeURL, http.StatusOK, readyTimeout)
	if code, body := get(t, runtimeURL); !strings.HasPrefix(body, `{"errorMessage":null,"data":[`) {
		t.Errorf("GET /runtime/errors: %d %.200s", code, body)
	}
	if resp, err := client.Head(runtimeURL); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /runtime/errors: %v, %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	const limit = 20
	// Past the 5s ramp, the reads per epoch.
	time.Sleep(6 * time.Second)
	rate := perEpoch(func() float64 { return counter(t, "https://"+addrs[2469], "monovtx_read_total") })
	pl.Stop(t, stopTimeout)
	container := name + "-numa"
	if code := p.Inspect(t, container, "{{.State.ExitCode}}"); code != "0" {
		_, stderr := p.Logs(t, container)
		t.Errorf("the vertex exited with code %s on SIGTERM; stderr:\n%s", code, tail(stderr, 20))
	}
	_, stderr := p.Logs(t, container)
	defer logOnFailure(t, container, stderr)
	serves := strings.Contains(stderr, `"msg":"serving runtime errors"`)
	if monitor {
		_, monStderr := p.Logs(t, name+"-monitor")
		defer logOnFailure(t, name+"-monitor", monStderr)
		if code := p.Inspect(t, name+"-monitor", "{{.State.ExitCode}}"); code != "0" {
			t.Errorf("the monitor exited with code %s on SIGTERM", code)
		}
		if byMonitor := strings.Contains(monStderr, `"msg":"serving runtime errors"`); serves == byMonitor {
			t.Errorf("the runtime errors served by numa %v, by the monitor %v; want one of them", serves, byMonitor)
		}
		t.Logf("in the v1.8 pod the runtime errors were served by the monitor: %v", !serves)
	} else if !serves {
		t.Error("the numa container does not say it serves the runtime errors")
	}
	full := checkEpochs(t, limit, epochs(t, stderr))
	if rate < 0.9*limit || rate > limit {
		t.Errorf("monovtx_read_total rose %.1f a second; want the limit, %d", rate, limit)
	}
	t.Logf("monovtx_read_total rose %.1f a second (limit %d), %d epochs at the limit", rate, limit, full)
}

// asInt is a number of a parsed manifest.
func asInt(t *testing.T, v any) int {
	t.Helper()
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	t.Fatalf("%v (%T) is not a number", v, v)
	return 0
}

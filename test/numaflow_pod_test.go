package test

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strconv"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// The pods Numaflow's controller builds for a MonoVertex's replica, with
// sluice's image in the numa container: v1.8's, with its monitor sidecar,
// and the main branch's, without.
const (
	numaflowPodFile     = "testdata/numaflow-monovertex-pod.yaml"
	numaflowMainPodFile = "testdata/numaflow-monovertex-pod-main.yaml"
)

// The parts of a Kubernetes Pod the fixture's test looks at.
type (
	k8sPod struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name        string            `yaml:"name"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
		Spec struct {
			HostNetwork bool `yaml:"hostNetwork"`
			Volumes     []struct {
				Name     string `yaml:"name"`
				EmptyDir *struct {
					Medium    string `yaml:"medium"`
					SizeLimit string `yaml:"sizeLimit"`
				} `yaml:"emptyDir"`
			} `yaml:"volumes"`
			InitContainers []k8sContainer `yaml:"initContainers"`
			Containers     []k8sContainer `yaml:"containers"`
		} `yaml:"spec"`
	}
	k8sContainer struct {
		Name          string   `yaml:"name"`
		Image         string   `yaml:"image"`
		Command       []string `yaml:"command"`
		Args          []string `yaml:"args"`
		RestartPolicy string   `yaml:"restartPolicy"`
		Env           []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				FieldRef *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
				ResourceFieldRef *struct {
					Resource string `yaml:"resource"`
				} `yaml:"resourceFieldRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
		ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
		LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	}
	k8sProbe struct {
		HTTPGet struct {
			Path   string `yaml:"path"`
			Port   int    `yaml:"port"`
			Scheme string `yaml:"scheme"`
		} `yaml:"httpGet"`
		InitialDelaySeconds int `yaml:"initialDelaySeconds"`
		PeriodSeconds       int `yaml:"periodSeconds"`
		TimeoutSeconds      int `yaml:"timeoutSeconds"`
		FailureThreshold    int `yaml:"failureThreshold"`
	}
)

// env returns the value of the container's variable name, and whether it is set.
func (c k8sContainer) env(name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// envNames returns the names of the container's variables in order.
func (c k8sContainer) envNames() []string {
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
	}
	return names
}

// The environment Numaflow's controller gives every container of the pod.
var numaflowCommonEnv = []string{"NUMAFLOW_NAMESPACE", "NUMAFLOW_POD", "NUMAFLOW_REPLICA", "NUMAFLOW_MONO_VERTEX_NAME",
	"NUMAFLOW_CPU_LIMIT", "NUMAFLOW_CPU_REQUEST", "NUMAFLOW_MEMORY_LIMIT", "NUMAFLOW_MEMORY_REQUEST"}

// checkProbe checks an HTTPS probe on port 2469.
func checkProbe(t *testing.T, what string, p *k8sProbe, path string, timing [4]int) {
	t.Helper()
	if p == nil {
		t.Errorf("%s: no probe", what)
		return
	}
	got := [4]int{p.InitialDelaySeconds, p.PeriodSeconds, p.TimeoutSeconds, p.FailureThreshold}
	if p.HTTPGet.Path != path || p.HTTPGet.Port != 2469 || p.HTTPGet.Scheme != "HTTPS" || got != timing {
		t.Errorf("%s: probe %+v; want GET %s on 2469 over HTTPS, initial delay, period, timeout, failures %v", what, p, path, timing)
	}
}

// TestNumaflowPodFixture checks the fixtures against the pods Numaflow's
// controller builds for a MonoVertex, and decodes and validates their
// NUMAFLOW_MONO_VERTEX_OBJECT as the processor does: v1.8's pod has the
// monitor sidecar first and port 2469 alone on the numa container; the main
// branch's has no monitor, and port 2470 named runtime on the numa container.
func TestNumaflowPodFixture(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		monitor    bool           // the pod has the monitor sidecar
		ports      map[string]int // of the numa container
	}{
		{"v1.8", numaflowPodFile, true, map[string]int{"metrics": 2469}},
		{"main", numaflowMainPodFile, false, map[string]int{"metrics": 2469, "runtime": 2470}},
	} {
		t.Run(tt.name, func(t *testing.T) { checkNumaflowPod(t, tt.file, tt.monitor, tt.ports) })
	}
}

// checkNumaflowPod checks the pod of file; see TestNumaflowPodFixture.
func checkNumaflowPod(t *testing.T, file string, monitor bool, wantPorts map[string]int) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var pod k8sPod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.APIVersion != "v1" || pod.Kind != "Pod" || pod.Spec.HostNetwork {
		t.Errorf("apiVersion %q, kind %q, hostNetwork %v; want a plain v1 Pod", pod.APIVersion, pod.Kind, pod.Spec.HostNetwork)
	}
	if pod.Metadata.Annotations["numaflow.numaproj.io/replica"] != "0" ||
		pod.Metadata.Labels["app.kubernetes.io/component"] != "mono-vertex" ||
		pod.Metadata.Labels["numaflow.numaproj.io/mono-vertex-name"] != "simple-mono-vertex" {
		t.Errorf("metadata %+v", pod.Metadata)
	}

	// Volumes, mounted in every container.
	vols := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			vols[v.Name] = v.EmptyDir.Medium + "|" + v.EmptyDir.SizeLimit
		}
	}
	if vols["var-run-numaflow"] != "Memory|" || vols["runtime-vol"] != "|20Mi" || len(pod.Spec.Volumes) != 2 {
		t.Errorf("volumes %+v; want var-run-numaflow (emptyDir in memory) and runtime-vol (emptyDir of 20Mi)", pod.Spec.Volumes)
	}
	all := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	for _, c := range all {
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		if c.Name == "monitor" { // the runtime volume alone, as Numaflow mounts it
			if len(mounts) != 1 || mounts["runtime-vol"] != "/var/numaflow/runtime" {
				t.Errorf("monitor mounts %v; want runtime-vol alone", mounts)
			}
			continue
		}
		if mounts["var-run-numaflow"] != "/var/run/numaflow" || mounts["runtime-vol"] != "/var/numaflow/runtime" {
			t.Errorf("%s mounts %v; want both volumes", c.Name, mounts)
		}
	}

	// The numa container.
	if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != "numa" {
		t.Fatalf("containers %+v; want numa alone", pod.Spec.Containers)
	}
	numa := pod.Spec.Containers[0]
	if numa.Image != "sluice:dev" || !slices.Equal(numa.Command, []string{"/bin/numaflow-rs"}) || !slices.Equal(numa.Args, []string{"processor"}) {
		t.Errorf("numa runs %s %v %v; want sluice:dev /bin/numaflow-rs processor", numa.Image, numa.Command, numa.Args)
	}
	ports := map[string]int{}
	for _, p := range numa.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if !maps.Equal(ports, wantPorts) {
		t.Errorf("numa ports %v; want %v", ports, wantPorts)
	}
	checkProbe(t, "numa readiness", numa.ReadinessProbe, "/readyz", [4]int{5, 10, 30, 6})
	checkProbe(t, "numa liveness", numa.LivenessProbe, "/livez", [4]int{20, 60, 30, 5})
	wantEnv := append([]string{"NUMAFLOW_MONO_VERTEX_OBJECT", "NUMAFLOW_READ_AHEAD"}, numaflowCommonEnv...)
	if got := numa.envNames(); !slices.Equal(got, wantEnv) {
		t.Errorf("numa env %v; want %v", got, wantEnv)
	}
	if v, _ := numa.env("NUMAFLOW_READ_AHEAD"); v != "false" {
		t.Errorf("NUMAFLOW_READ_AHEAD = %q; want false", v)
	}
	for _, e := range numa.Env {
		if e.Name == "NUMAFLOW_REPLICA" && (e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
			e.ValueFrom.FieldRef.FieldPath != "metadata.annotations['numaflow.numaproj.io/replica']") {
			t.Errorf("NUMAFLOW_REPLICA is not the replica annotation: %+v", e)
		}
	}

	// The user-defined containers: native sidecars in Numaflow's order.
	images := map[string]string{}
	var names []string
	if i := slices.IndexFunc(pod.Spec.InitContainers, func(c k8sContainer) bool { return c.Name == "monitor" }); monitor != (i == 0) {
		t.Errorf("the monitor sidecar is init container %d; want it first: %v", i, monitor)
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == "monitor" {
			checkMonitor(t, c)
			continue
		}
		names = append(names, c.Name)
		images[c.Name] = c.Image
		if c.RestartPolicy != "Always" {
			t.Errorf("%s restartPolicy %q; want Always (a native sidecar)", c.Name, c.RestartPolicy)
		}
		checkProbe(t, c.Name+" liveness", c.LivenessProbe, "/sidecar-livez", [4]int{30, 60, 30, 5})
		want := append([]string{"NUMAFLOW_UD_CONTAINER_TYPE"}, numaflowCommonEnv...)
		if c.Name == "udsource" {
			want = append(want, "NUMAFLOW_READ_BATCH_SIZE", "NUMAFLOW_READ_TIMEOUT_MS")
		}
		if got := c.envNames(); !slices.Equal(got, want) {
			t.Errorf("%s env %v; want %v", c.Name, got, want)
		}
		if v, _ := c.env("NUMAFLOW_UD_CONTAINER_TYPE"); v != c.Name {
			t.Errorf("%s: NUMAFLOW_UD_CONTAINER_TYPE = %q", c.Name, v)
		}
	}
	if want := []string{"udsource", "udf", "transformer", "udsink"}; !slices.Equal(names, want) {
		t.Errorf("sidecars %v; want %v", names, want)
	}

	// The MonoVertex object: JSON as Numaflow serialises it, which the
	// processor's decoder takes.
	value, _ := numa.env("NUMAFLOW_MONO_VERTEX_OBJECT")
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		t.Fatalf("NUMAFLOW_MONO_VERTEX_OBJECT is not standard base64: %v", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("NUMAFLOW_MONO_VERTEX_OBJECT is not JSON: %v", err)
	}
	if _, ok := obj["apiVersion"]; ok {
		t.Error("the object has an apiVersion; Numaflow's has none")
	}
	if _, ok := obj["kind"]; ok {
		t.Error("the object has a kind; Numaflow's has none")
	}
	if _, ok := obj["status"]; !ok {
		t.Error("the object has no status block")
	}
	if udf := obj["spec"].(map[string]any)["udf"].(map[string]any); udf["groupBy"] != nil {
		t.Errorf("udf.groupBy = %v; want null", udf["groupBy"])
	} else if _, ok := udf["groupBy"]; !ok {
		t.Error("udf.groupBy is missing; Numaflow writes null")
	}
	f, err := vertexconfig.ParseMonoVertexObject(raw)
	if err != nil {
		t.Fatalf("the object does not validate:\n%v", err)
	}
	m := f.MonoVertex
	if name, _ := numa.env("NUMAFLOW_MONO_VERTEX_NAME"); m.Metadata.Name != name {
		t.Errorf("object name %q; NUMAFLOW_MONO_VERTEX_NAME %q", m.Metadata.Name, name)
	}
	for ctr, image := range map[string]string{
		"udsource":    m.Spec.Source.UDSource.Container.Image,
		"transformer": m.Spec.Source.Transformer.Container.Image,
		"udf":         m.Spec.UDF.Container.Image,
		"udsink":      m.Spec.Sink.UDSink.Container.Image,
	} {
		if images[ctr] != image {
			t.Errorf("sidecar %s runs %q; the object says %q", ctr, images[ctr], image)
		}
	}
	src := pod.Spec.InitContainers[slices.IndexFunc(pod.Spec.InitContainers, func(c k8sContainer) bool { return c.Name == "udsource" })]
	batch, _ := src.env("NUMAFLOW_READ_BATCH_SIZE")
	timeout, _ := src.env("NUMAFLOW_READ_TIMEOUT_MS")
	if batch != strconv.Itoa(m.Spec.Limits.GetReadBatchSize()) || timeout != strconv.FormatInt(m.Spec.Limits.GetReadTimeout().Milliseconds(), 10) {
		t.Errorf("udsource read batch %q, timeout %q ms; the object says %d, %v", batch, timeout,
			m.Spec.Limits.GetReadBatchSize(), m.Spec.Limits.GetReadTimeout())
	}
	if m.Spec.Limits.GetRateLimit() == nil {
		t.Error("the object has no rate limit")
	}
}

// checkMonitor checks the monitor sidecar as Numaflow's controller builds it,
// with sluice's image: numaflow-rs monitor, a native sidecar with the runtime
// volume, no probes.
func checkMonitor(t *testing.T, c k8sContainer) {
	t.Helper()
	if c.Image != "sluice:dev" || !slices.Equal(c.Command, []string{"/bin/numaflow-rs"}) || !slices.Equal(c.Args, []string{"monitor"}) {
		t.Errorf("monitor runs %s %v %v; want sluice:dev /bin/numaflow-rs monitor", c.Image, c.Command, c.Args)
	}
	if c.RestartPolicy != "Always" || c.LivenessProbe != nil || c.ReadinessProbe != nil {
		t.Errorf("monitor: restartPolicy %q, probes %v %v; want a native sidecar without probes", c.RestartPolicy, c.LivenessProbe, c.ReadinessProbe)
	}
}

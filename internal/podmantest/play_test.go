package podmantest

import (
	"testing"

	"github.com/sluiceflow/sluice/internal/kubetest"
)

// TestForPodman checks what ForPodman makes of the Redis overlay's
// Deployment: one Pod of the given name with the annotation set, host
// networking, its native sidecars first among its containers, no init
// containers left, images replaced, ports dropped and probes numbered, its
// emptyDir and ConfigMaps renamed after the pod, and its Secret a ConfigMap
// with the decoded data.
func TestForPodman(t *testing.T) {
	objs := kubetest.Render(t, "../../deploy/overlays/monovertex-redis")
	out := ForPodman(t, objs, "rate-limited", PodOptions{
		Name:        "p1",
		Annotations: map[string]string{"numaflow.numaproj.io/replica": "1"},
		Images:      map[string]string{"sluice": "localhost/sluice:t", "sluice-example-cat": "localhost/cat:t"},
	})
	if len(out) == 0 || out[len(out)-1].Kind() != "Pod" {
		t.Fatalf("ForPodman made %s; want ConfigMaps, then the Pod", out)
	}
	var pod struct {
		Metadata kubetest.ObjectMeta
		Spec     kubetest.PodSpec
	}
	out[len(out)-1].Decode(t, &pod)
	if pod.Metadata.Name != "p1" || pod.Metadata.Annotations["numaflow.numaproj.io/replica"] != "1" ||
		pod.Metadata.Annotations["prometheus.io/scrape"] != "true" {
		t.Errorf("metadata %+v; want name p1, the replica annotation over the template's", pod.Metadata)
	}
	if !pod.Spec.HostNetwork || len(pod.Spec.InitContainers) != 0 {
		t.Errorf("hostNetwork %v, %d init containers; want host networking and none", pod.Spec.HostNetwork, len(pod.Spec.InitContainers))
	}
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
		if c.RestartPolicy != "" || len(c.Ports) != 0 {
			t.Errorf("container %s: restartPolicy %q, ports %v; want neither", c.Name, c.RestartPolicy, c.Ports)
		}
		if c.MountOf("p1-var-run-numaflow") != "/var/run/numaflow" {
			t.Errorf("container %s does not mount p1-var-run-numaflow at /var/run/numaflow", c.Name)
		}
	}
	if len(names) != 3 || names[0] != "udsource" || names[1] != "udf" || names[2] != "numa" {
		t.Errorf("containers %v; want the sidecars first: udsource, udf, numa", names)
	}
	for c, want := range map[string]string{"numa": "localhost/sluice:t", "udf": "localhost/cat:t", "udsource": "sluice-example-simplesource:dev"} {
		if got := pod.Spec.Container(c).Image; got != want {
			t.Errorf("container %s runs %s; want %s", c, got, want)
		}
	}
	numa := pod.Spec.Container("numa")
	if numa.ReadinessProbe.HTTPGet.Port != 2469 || numa.LivenessProbe.HTTPGet.Port != 2469 {
		t.Errorf("probe ports %v, %v; want 2469 for the port named metrics", numa.ReadinessProbe.HTTPGet.Port, numa.LivenessProbe.HTTPGet.Port)
	}
	secret := pod.Spec.Volume("redis-auth")
	if secret == nil || secret.Secret != nil || secret.ConfigMap == nil {
		t.Fatalf("volume redis-auth is %+v; want a ConfigMap", secret)
	}
	var cm kubetest.ConfigMap
	out.Get(t, "ConfigMap", secret.ConfigMap.Name).Decode(t, &cm)
	if cm.Data["password"] != "change-me" {
		t.Errorf("the Secret's ConfigMap holds %v; want the decoded password", cm.Data)
	}
	config := pod.Spec.Volume("config")
	if config == nil || config.ConfigMap == nil || config.ConfigMap.Name[:3] != "p1-" {
		t.Fatalf("volume config is %+v; want a ConfigMap named after the pod", config)
	}
	out.Get(t, "ConfigMap", config.ConfigMap.Name)
}

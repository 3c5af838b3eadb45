package deploy_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/kubetest"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale/keda"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// The kustomizations KEDA scales a vertex in: the overlay, its ScaledObject,
// and the vertex that ScaledObject's trigger names.
var kedaCases = []struct {
	dir, scaledObject, vertex string
}{
	{"overlays/monovertex-keda", "rate-limited", "rate-limited"},
	{"overlays/pipeline-keda", "even-odd-in", "in"},
}

// scaledObject is the subset of a keda.sh/v1alpha1 ScaledObject checked here.
type scaledObject struct {
	Spec struct {
		ScaleTargetRef struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicaCount *int `yaml:"minReplicaCount"`
		MaxReplicaCount *int `yaml:"maxReplicaCount"`
		Advanced        struct {
			HPA struct {
				Behavior map[string]struct {
					StabilizationWindowSeconds *int `yaml:"stabilizationWindowSeconds"`
				} `yaml:"behavior"`
			} `yaml:"horizontalPodAutoscalerConfig"`
		} `yaml:"advanced"`
		Triggers []struct {
			Type       string            `yaml:"type"`
			MetricType string            `yaml:"metricType"`
			Metadata   map[string]string `yaml:"metadata"`
		} `yaml:"triggers"`
	} `yaml:"spec"`
}

// service is a Service with its clusterIP.
type service struct {
	Spec struct {
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []struct {
			Port       int `yaml:"port"`
			TargetPort any `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// TestKEDAKustomizationsRender renders the bases of the KEDA scalers alone.
func TestKEDAKustomizationsRender(t *testing.T) {
	for _, dir := range []string{"base/keda-monovertex", "base/keda-pipeline", "overlays/monovertex-keda", "overlays/pipeline-keda"} {
		t.Run(dir, func(t *testing.T) {
			if objs := kubetest.Render(t, dir); len(objs) == 0 {
				t.Fatalf("kubectl kustomize %s rendered no objects", dir)
			}
		})
	}
}

// TestKEDAScaledObjects checks each ScaledObject: it scales the vertex's
// Deployment; its external trigger reaches the scaler's Service on the
// port vertex scaler serves; the scaler reads the file the vertex runs and
// reads its replicas through a headless Service that selects exactly the
// vertex's pods on their metrics port; the trigger names a vertex the
// scaler serves; its replica bounds are the vertex's scale.min and max, the
// HPA's windows 0; the vertex's replicas share its limit through Redis.
func TestKEDAScaledObjects(t *testing.T) {
	for _, tc := range kedaCases {
		t.Run(tc.dir, func(t *testing.T) {
			objs := kubetest.Render(t, tc.dir)
			var so scaledObject
			objs.Get(t, "ScaledObject", tc.scaledObject).Decode(t, &so)
			if so.Spec.ScaleTargetRef.Kind != "Deployment" {
				t.Fatalf("scaleTargetRef.kind %q; want Deployment", so.Spec.ScaleTargetRef.Kind)
			}
			var target kubetest.Deployment
			objs.Get(t, "Deployment", so.Spec.ScaleTargetRef.Name).Decode(t, &target)
			if target.Spec.Replicas != nil {
				t.Errorf("Deployment %s sets replicas: %d; the HPA KEDA makes owns the count", target.Metadata.Name, *target.Spec.Replicas)
			}
			numa := target.Spec.Template.Spec.Container("numa")
			if numa == nil || !kubetest.HasArgs(numa.Args, "run", "-f") {
				t.Fatalf("Deployment %s runs no vertex run -f", target.Metadata.Name)
			}
			if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "external" || so.Spec.Triggers[0].MetricType != "AverageValue" {
				t.Fatalf("triggers %+v; want one external trigger, metricType AverageValue", so.Spec.Triggers)
			}
			md := so.Spec.Triggers[0].Metadata
			if md[keda.MetadataVertex] != tc.vertex {
				t.Errorf("trigger metadata vertex %q; want %q", md[keda.MetadataVertex], tc.vertex)
			}
			for _, dir := range []string{"scaleUp", "scaleDown"} {
				if w := so.Spec.Advanced.HPA.Behavior[dir].StabilizationWindowSeconds; w == nil || *w != 0 {
					t.Errorf("the HPA's %s stabilizationWindowSeconds is %v; want 0, the rule's cool-downs being the only ones", dir, w)
				}
			}

			scaler, sc := serviceBackend(t, objs, md["scalerAddress"])
			if !kubetest.HasArgs(sc.Args, "scaler", "-f") {
				t.Fatalf("the scaler's container %s runs %q, not vertex scaler -f", sc.Name, sc.Args)
			}
			if kubetest.Selects(target.Spec.Selector.MatchLabels, scaler.Spec.Template.Metadata.Labels) ||
				kubetest.Selects(scaler.Spec.Selector.MatchLabels, target.Spec.Template.Metadata.Labels) {
				t.Errorf("the selectors of %s and %s overlap", target.Metadata.Name, scaler.Metadata.Name)
			}
			file := flagValue(sc.Args, "-f")
			f := mountedFile(t, objs, &scaler.Spec.Template.Spec, sc, file)
			if vfile := numa.Args[2]; vfile != file || mountedConfigMap(t, &target.Spec.Template.Spec, numa, vfile) != mountedConfigMap(t, &scaler.Spec.Template.Spec, sc, file) {
				t.Errorf("the scaler reads %s of its ConfigMap, the vertex %s of its", file, vfile)
			}
			vertices, err := keda.Vertices(f, []string{flagValue(sc.Args, "--status")}, nil)
			if err != nil {
				t.Fatalf("vertex scaler's flags: %v", err)
			}
			if len(vertices) != 1 || vertices[0].Name != tc.vertex {
				t.Fatalf("the scaler serves %+v; want vertex %s", vertices, tc.vertex)
			}
			for _, addr := range vertices[0].Status {
				host, port, _ := net.SplitHostPort(addr)
				var svc service
				objs.Get(t, "Service", host).Decode(t, &svc)
				if svc.Spec.ClusterIP != "None" {
					t.Errorf("Service %s: clusterIP %q; want None (headless), one address a replica", host, svc.Spec.ClusterIP)
				}
				if !kubetest.Selects(svc.Spec.Selector, target.Spec.Template.Metadata.Labels) || kubetest.Selects(svc.Spec.Selector, scaler.Spec.Template.Metadata.Labels) {
					t.Errorf("Service %s selects %v: not the pods of %s alone", host, svc.Spec.Selector, target.Metadata.Name)
				}
				ok := false
				for _, p := range svc.Spec.Ports {
					ok = ok || strconv.Itoa(p.Port) == port && numa.PortNumber(p.TargetPort) == mvMetricsPort
				}
				if !ok {
					t.Errorf("Service %s: no port %s to the vertex's metrics port %d", host, port, mvMetricsPort)
				}
			}
			scale, rl := vertexScale(t, f, tc.vertex)
			if c := vertexconfig.Autoscale(scale); so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount != c.Min ||
				so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount != c.Max {
				t.Errorf("replica counts %v..%v; want the vertex's scale.min %d and max %d", so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount, c.Min, c.Max)
			}
			if rl == nil || rl.Store == nil || rl.Store.RedisStore == nil {
				t.Errorf("vertex %s keeps its limit in memory; its replicas would each take the whole limit", tc.vertex)
			}
		})
	}
}

// serviceBackend returns the Deployment and container that serve the
// Service at a host:port address, checking that the port reaches the
// container's --addr.
func serviceBackend(t *testing.T, objs kubetest.Objects, addr string) (kubetest.Deployment, *kubetest.Container) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("scalerAddress %q: %v", addr, err)
	}
	var svc kubetest.Service
	objs.Get(t, "Service", host).Decode(t, &svc)
	for _, o := range objs.OfKind("Deployment") {
		var d kubetest.Deployment
		o.Decode(t, &d)
		if !kubetest.Selects(svc.Spec.Selector, d.Spec.Template.Metadata.Labels) {
			continue
		}
		for i := range d.Spec.Template.Spec.Containers {
			c := &d.Spec.Template.Spec.Containers[i]
			for _, p := range svc.Spec.Ports {
				if strconv.Itoa(p.Port) != port {
					continue
				}
				n := c.PortNumber(p.TargetPort)
				if n != 0 && strings.HasSuffix(flagValue(c.Args, "--addr"), ":"+strconv.Itoa(n)) {
					return d, c
				}
			}
		}
	}
	t.Fatalf("scalerAddress %s: no container serves --addr on Service %s's port %s", addr, host, port)
	return kubetest.Deployment{}, nil
}

// flagValue returns the value after flag in args, "" if absent.
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// mountedConfigMap returns the ConfigMap c mounts file from.
func mountedConfigMap(t *testing.T, pod *kubetest.PodSpec, c *kubetest.Container, file string) string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath == filepath.Dir(file) {
			if v := pod.Volume(m.Name); v != nil && v.ConfigMap != nil {
				return v.ConfigMap.Name
			}
		}
	}
	t.Fatalf("container %s mounts no ConfigMap at %s", c.Name, filepath.Dir(file))
	return ""
}

// mountedFile loads and validates the file c reads from its ConfigMap.
func mountedFile(t *testing.T, objs kubetest.Objects, pod *kubetest.PodSpec, c *kubetest.Container, file string) *config.File {
	t.Helper()
	var cm kubetest.ConfigMap
	objs.Get(t, "ConfigMap", mountedConfigMap(t, pod, c, file)).Decode(t, &cm)
	data, ok := cm.Data[filepath.Base(file)]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cm.Metadata.Name, filepath.Base(file))
	}
	path := filepath.Join(t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := vertexconfig.Load(path)
	if err != nil {
		t.Fatalf("%s of ConfigMap %s does not pass validation: %v", file, cm.Metadata.Name, err)
	}
	return f
}

// vertexScale returns a vertex's scale block and rate limit.
func vertexScale(t *testing.T, f *config.File, name string) (*config.Scale, *config.RateLimit) {
	t.Helper()
	if f.MonoVertex != nil {
		return f.MonoVertex.Spec.Scale, f.MonoVertex.Spec.Limits.GetRateLimit()
	}
	v := f.Pipeline.Vertex(name)
	if v == nil {
		t.Fatalf("the pipeline has no vertex %s", name)
	}
	rl, err := f.Pipeline.VertexRateLimit(name)
	if err != nil {
		t.Fatal(err)
	}
	return v.Scale, rl
}

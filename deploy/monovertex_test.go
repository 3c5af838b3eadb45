package deploy_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/kubetest"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// The kustomizations of a MonoVertex on Kubernetes.
const (
	monoVertexBase    = "base/monovertex"
	redisBase         = "base/redis"
	monoVertexOverlay = "overlays/monovertex-redis"
)

// What a MonoVertex's pod and sluice agree on.
const (
	mvDeployment  = "rate-limited"
	mvMetricsPort = 2469                        // vertex run's --metrics-addr default
	mvSocketDir   = "/var/run/numaflow"         // where vertex run finds the sidecars' servers
	mvSecretsDir  = "/var/numaflow/secrets"     // where sluice reads a SecretKeySelector
	mvStopGrace   = 5*time.Second + time.Second // pkg/vertex's shutdownGrace, then the streams' second
)

// TestMonoVertexKustomizationsRender renders each kustomization of the
// MonoVertex on Kubernetes.
func TestMonoVertexKustomizationsRender(t *testing.T) {
	for _, dir := range []string{monoVertexBase, redisBase, monoVertexOverlay} {
		t.Run(dir, func(t *testing.T) {
			if objs := kubetest.Render(t, dir); len(objs) == 0 {
				t.Fatalf("kubectl kustomize %s rendered no objects", dir)
			}
		})
	}
}

// TestMonoVertexDeployment checks the MonoVertex's pod in the base and in the
// Redis overlay: sluice runs the MonoVertex of the ConfigMap it mounts, which
// passes sluice's validation; every user-defined container of the MonoVertex
// is a native sidecar with its image and container type; all share the
// in-memory socket directory; probes, scrape annotations, resources and the
// termination grace period fit what vertex run serves and needs; a
// PodDisruptionBudget covers the pods.
func TestMonoVertexDeployment(t *testing.T) {
	for _, dir := range []string{monoVertexBase, monoVertexOverlay} {
		t.Run(dir, func(t *testing.T) {
			objs := kubetest.Render(t, dir)
			var d kubetest.Deployment
			objs.Get(t, "Deployment", mvDeployment).Decode(t, &d)
			pod := &d.Spec.Template.Spec
			numa := pod.Container("numa")
			if numa == nil {
				t.Fatalf("Deployment %s has no container numa", mvDeployment)
			}
			if !strings.HasPrefix(numa.Image, "sluice:") {
				t.Errorf("numa's image is %q; want sluice:<tag>", numa.Image)
			}
			if !kubetest.HasArgs(numa.Args, "run", "-f") {
				t.Fatalf("numa's args %q do not start vertex run -f", numa.Args)
			}
			mv := mountedMonoVertex(t, objs, pod, numa)
			if !kubetest.Selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) {
				t.Errorf("the selector %v does not select the pods %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels)
			}
			checkSidecars(t, pod, mv)
			checkObservability(t, d.Spec.Template.Metadata.Annotations, numa)
			checkShutdown(t, pod, mv)
			for _, c := range append(pod.InitContainers, pod.Containers...) {
				if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
					t.Errorf("container %s requests no cpu or no memory: %v", c.Name, c.Resources.Requests)
				}
			}
			budgets := 0
			for _, o := range objs.OfKind("PodDisruptionBudget") {
				var pdb kubetest.PodDisruptionBudget
				o.Decode(t, &pdb)
				if kubetest.Selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Metadata.Labels) {
					budgets++
					if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
						t.Errorf("PodDisruptionBudget %s sets neither maxUnavailable nor minAvailable", pdb.Metadata.Name)
					}
				}
			}
			if budgets != 1 {
				t.Errorf("%d PodDisruptionBudgets select the pods; want 1", budgets)
			}
		})
	}
}

// mountedMonoVertex returns the MonoVertex that numa's -f names, read from the
// ConfigMap mounted there, after checking that it passes sluice's validation.
func mountedMonoVertex(t *testing.T, objs kubetest.Objects, pod *kubetest.PodSpec, numa *kubetest.Container) *config.MonoVertex {
	t.Helper()
	file := numa.Args[2]
	for _, m := range numa.VolumeMounts {
		if filepath.Dir(file) != m.MountPath {
			continue
		}
		v := pod.Volume(m.Name)
		if v == nil || v.ConfigMap == nil {
			t.Fatalf("%s: volume %s is not a ConfigMap", m.MountPath, m.Name)
		}
		var cm kubetest.ConfigMap
		objs.Get(t, "ConfigMap", v.ConfigMap.Name).Decode(t, &cm)
		data, ok := cm.Data[filepath.Base(file)]
		if !ok {
			t.Fatalf("ConfigMap %s has no key %s for %s", cm.Metadata.Name, filepath.Base(file), file)
		}
		path := filepath.Join(t.TempDir(), filepath.Base(file))
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := vertexconfig.Load(path)
		if err != nil {
			t.Fatalf("the MonoVertex in ConfigMap %s does not pass validation: %v", cm.Metadata.Name, err)
		}
		if f.MonoVertex == nil {
			t.Fatalf("ConfigMap %s holds a %s, not a MonoVertex", cm.Metadata.Name, f.Kind)
		}
		return f.MonoVertex
	}
	t.Fatalf("numa mounts nothing at %s, where -f %s is", filepath.Dir(file), file)
	return nil
}

// udContainers returns the MonoVertex's user-defined containers by the
// container type Numaflow gives each (udsource, transformer, udf, udsink,
// fb-udsink).
func udContainers(mv *config.MonoVertex) map[string]*config.Container {
	out := map[string]*config.Container{}
	s := mv.Spec
	if s.Source != nil && s.Source.UDSource != nil {
		out["udsource"] = s.Source.UDSource.Container
	}
	if s.Source != nil && s.Source.Transformer != nil && s.Source.Transformer.Container != nil {
		out["transformer"] = s.Source.Transformer.Container
	}
	if s.UDF != nil && s.UDF.Container != nil {
		out["udf"] = s.UDF.Container
	}
	if s.Sink != nil && s.Sink.UDSink != nil {
		out["udsink"] = s.Sink.UDSink.Container
	}
	if s.Sink != nil && s.Sink.Fallback != nil && s.Sink.Fallback.UDSink != nil {
		out["fb-udsink"] = s.Sink.Fallback.UDSink.Container
	}
	return out
}

// checkSidecars checks that each user-defined container of mv is a native
// sidecar of the pod, and that it and numa share the in-memory socket
// directory.
func checkSidecars(t *testing.T, pod *kubetest.PodSpec, mv *config.MonoVertex) {
	t.Helper()
	uds := udContainers(mv)
	if len(uds) == 0 {
		t.Fatal("the MonoVertex has no user-defined container")
	}
	for typ, want := range uds {
		c := pod.Container(typ)
		switch {
		case c == nil:
			t.Errorf("the MonoVertex's %s (%s) has no container %s in the pod", typ, want.Image, typ)
			continue
		case !isInit(pod, typ) || c.RestartPolicy != "Always":
			t.Errorf("container %s: want a native sidecar, an initContainer with restartPolicy: Always", typ)
		case c.Image != want.Image:
			t.Errorf("container %s runs %s; the MonoVertex says %s", typ, c.Image, want.Image)
		}
		if e := c.EnvVar("NUMAFLOW_UD_CONTAINER_TYPE"); e == nil || e.Value != typ {
			t.Errorf("container %s: NUMAFLOW_UD_CONTAINER_TYPE is %v; want %s", typ, e, typ)
		}
	}
	for _, c := range pod.InitContainers {
		if _, ok := uds[c.Name]; !ok {
			t.Errorf("init container %s is none of the MonoVertex's user-defined containers", c.Name)
		}
	}
	var shared string
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == mvSocketDir {
				if shared != "" && m.Name != shared {
					t.Errorf("container %s mounts volume %s at %s, the others %s", c.Name, m.Name, mvSocketDir, shared)
				}
				shared = m.Name
			}
		}
		if c.MountOf(shared) != mvSocketDir {
			t.Errorf("container %s does not mount %s", c.Name, mvSocketDir)
		}
	}
	if v := pod.Volume(shared); v == nil || v.EmptyDir == nil || v.EmptyDir.Medium != "Memory" {
		t.Errorf("volume %q at %s is not an in-memory emptyDir: %+v", shared, mvSocketDir, v)
	}
}

// isInit reports whether the pod's container of that name is an init container.
func isInit(pod *kubetest.PodSpec, name string) bool {
	for _, c := range pod.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// checkObservability checks that the probes and the scrape annotations point
// at what vertex run serves on its metrics address.
func checkObservability(t *testing.T, annotations map[string]string, numa *kubetest.Container) {
	t.Helper()
	port := mvMetricsPort
	for i, a := range numa.Args {
		if a == "--metrics-addr" && i+1 < len(numa.Args) {
			_, p, _ := strings.Cut(numa.Args[i+1], ":")
			port, _ = strconv.Atoi(p)
		}
	}
	for _, p := range []struct {
		name, path string
		probe      *kubetest.Probe
	}{{"readinessProbe", "/readyz", numa.ReadinessProbe}, {"livenessProbe", "/healthz", numa.LivenessProbe}} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			t.Errorf("numa has no HTTP %s", p.name)
		case p.probe.HTTPGet.Path != p.path:
			t.Errorf("numa's %s gets %s; want %s", p.name, p.probe.HTTPGet.Path, p.path)
		case numa.PortNumber(p.probe.HTTPGet.Port) != port:
			t.Errorf("numa's %s asks port %v; vertex run serves on %d", p.name, p.probe.HTTPGet.Port, port)
		}
	}
	want := map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": strconv.Itoa(port), "prometheus.io/path": "/metrics"}
	for k, v := range want {
		if annotations[k] != v {
			t.Errorf("pod annotation %s is %q; want %q", k, annotations[k], v)
		}
	}
}

// checkShutdown checks that the pod gives the vertex time to stop cleanly.
func checkShutdown(t *testing.T, pod *kubetest.PodSpec, mv *config.MonoVertex) {
	t.Helper()
	grace := 30 * time.Second // Kubernetes's default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	if need := mv.Spec.Limits.GetReadTimeout() + mvStopGrace; grace <= need {
		t.Errorf("terminationGracePeriodSeconds %v is not above the %v a replica may take to stop", grace, need)
	}
}

// TestMonoVertexReplicas checks how the replicas share the limit: in the base,
// replicaCountStore with NUMAFLOW_REPLICAS equal to the Deployment's one
// replica, replaced with no overlap (Recreate), and the replica index from
// Numaflow's annotation; in the overlay, the Redis store at the Service of
// deploy/base/redis, with the password of its Secret mounted where the
// MonoVertex's redisAuth reads it.
func TestMonoVertexReplicas(t *testing.T) {
	t.Run(monoVertexBase, func(t *testing.T) {
		objs := kubetest.Render(t, monoVertexBase)
		d, numa, mv := monoVertexPod(t, objs)
		rl := mv.Spec.Limits.GetRateLimit()
		if rl == nil || rl.Store == nil || rl.Store.ReplicaCountStore == nil {
			t.Fatal("the base's MonoVertex does not use replicaCountStore")
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		if rl.Store.ReplicaCountStore.Replicas != nil {
			t.Errorf("replicaCountStore.replicas is set (%d); the Deployment's NUMAFLOW_REPLICAS should say it", *rl.Store.ReplicaCountStore.Replicas)
		}
		if e := numa.EnvVar("NUMAFLOW_REPLICAS"); e == nil || e.Value != strconv.Itoa(int(replicas)) {
			t.Errorf("NUMAFLOW_REPLICAS is %+v; want %d, the Deployment's replicas", e, replicas)
		}
		if replicas != 1 || d.Spec.Strategy.Type != "Recreate" {
			t.Errorf("%d replicas, strategy %q: a Deployment's pods have no index, so replicaCountStore holds only for one replica at a time (Recreate)", replicas, d.Spec.Strategy.Type)
		}
		e := numa.EnvVar("NUMAFLOW_REPLICA")
		if e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
			e.ValueFrom.FieldRef.FieldPath != "metadata.annotations['numaflow.numaproj.io/replica']" {
			t.Errorf("NUMAFLOW_REPLICA is %+v; want it from the annotation numaflow.numaproj.io/replica", e)
		} else if v := d.Spec.Template.Metadata.Annotations["numaflow.numaproj.io/replica"]; v != "0" {
			t.Errorf("annotation numaflow.numaproj.io/replica is %q; want 0", v)
		}
	})
	t.Run(monoVertexOverlay, func(t *testing.T) {
		objs := kubetest.Render(t, monoVertexOverlay)
		d, numa, mv := monoVertexPod(t, objs)
		rl := mv.Spec.Limits.GetRateLimit()
		if rl == nil || rl.Store == nil || rl.Store.RedisStore == nil || rl.Store.RedisStore.URL == nil {
			t.Fatal("the overlay's MonoVertex does not use a redisStore with a url")
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("replicas %v; want several sharing the limit", d.Spec.Replicas)
		}
		if e := numa.EnvVar("NUMAFLOW_REPLICAS"); e != nil {
			t.Errorf("NUMAFLOW_REPLICAS is set (%q) beside a Redis store, which counts the replicas itself", e.Value)
		}
		u, err := url.Parse(*rl.Store.RedisStore.URL)
		if err != nil {
			t.Fatalf("redisStore.url: %v", err)
		}
		checkRedisService(t, objs, u.Hostname(), u.Port())
		auth := rl.Store.RedisStore.RedisAuth
		if auth == nil || auth.Password == nil || auth.Password.Name == "" {
			t.Fatal("redisStore.redisAuth.password names no secret")
		}
		pod := &d.Spec.Template.Spec
		dir := mvSecretsDir + "/" + auth.Password.Name
		var secret kubetest.Secret
		for _, m := range numa.VolumeMounts {
			if m.MountPath == dir {
				v := pod.Volume(m.Name)
				if v == nil || v.Secret == nil {
					t.Fatalf("%s: volume %s is not a Secret", dir, m.Name)
				}
				objs.Get(t, "Secret", v.Secret.SecretName).Decode(t, &secret)
			}
		}
		if secret.Metadata.Name == "" {
			t.Fatalf("numa mounts no Secret at %s, where redisAuth.password is read", dir)
		}
		password, ok := secret.Value(t, auth.Password.Key)
		if !ok {
			t.Fatalf("Secret %s has no key %s", secret.Metadata.Name, auth.Password.Key)
		}
		var redis kubetest.Deployment
		objs.Get(t, "Deployment", "redis").Decode(t, &redis)
		server := redis.Spec.Template.Spec.Container("redis")
		e := server.EnvVar("REDIS_PASSWORD")
		if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
			e.ValueFrom.SecretKeyRef.Name != secret.Metadata.Name || e.ValueFrom.SecretKeyRef.Key != auth.Password.Key {
			t.Errorf("Redis's REDIS_PASSWORD is %+v; want the vertex's Secret %s, key %s", e, secret.Metadata.Name, auth.Password.Key)
		}
		if password == "" {
			t.Error("the Redis password is empty")
		}
	})
}

// monoVertexPod returns the MonoVertex's Deployment, its numa container and
// its MonoVertex.
func monoVertexPod(t *testing.T, objs kubetest.Objects) (*kubetest.Deployment, *kubetest.Container, *config.MonoVertex) {
	t.Helper()
	var d kubetest.Deployment
	objs.Get(t, "Deployment", mvDeployment).Decode(t, &d)
	numa := d.Spec.Template.Spec.Container("numa")
	if numa == nil || len(numa.Args) < 3 {
		t.Fatalf("Deployment %s has no container numa running vertex run -f FILE", mvDeployment)
	}
	return &d, numa, mountedMonoVertex(t, objs, &d.Spec.Template.Spec, numa)
}

// checkRedisService checks that host:port is a Service that selects the
// Redis Deployment's pods and reaches its container's port.
func checkRedisService(t *testing.T, objs kubetest.Objects, host, port string) {
	t.Helper()
	var svc kubetest.Service
	objs.Get(t, "Service", host).Decode(t, &svc)
	var redis kubetest.Deployment
	objs.Get(t, "Deployment", "redis").Decode(t, &redis)
	if !kubetest.Selects(svc.Spec.Selector, redis.Spec.Template.Metadata.Labels) {
		t.Errorf("Service %s selects %v, not the Redis pods %v", host, svc.Spec.Selector, redis.Spec.Template.Metadata.Labels)
	}
	server := redis.Spec.Template.Spec.Container("redis")
	if server == nil {
		t.Fatal("the Redis Deployment has no container redis")
	}
	if port == "" {
		port = "6379"
	}
	for _, p := range svc.Spec.Ports {
		if strconv.Itoa(p.Port) == port {
			if n := server.PortNumber(p.TargetPort); n != 6379 {
				t.Errorf("Service %s port %s goes to %v, not Redis's 6379", host, port, p.TargetPort)
			}
			if !kubetest.HasArgs(server.Args, "--requirepass", "$(REDIS_PASSWORD)") {
				t.Errorf("redis-server's args %q do not require the password", server.Args)
			}
			return
		}
	}
	t.Errorf("Service %s has no port %s", host, port)
}

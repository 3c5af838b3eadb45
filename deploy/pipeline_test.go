// Package deploy's tests render the Kubernetes manifests under deploy/ with
// `kubectl kustomize` and check what the vertices need of them.
package deploy

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// The kustomizations of the Pipeline on Kubernetes.
const (
	natsBase        = "base/nats"
	pipelineBase    = "base/pipeline"
	pipelineOverlay = "overlays/pipeline"
)

// The contract between a vertex's pod and sluice.
const (
	metricsPort = 2469                // vertex run's --metrics-addr default
	socketDir   = "/var/run/numaflow" // where vertex run waits for the sidecars' servers
	// shutdownGrace is pkg/vertex's: how long beyond its readTimeout the
	// batch in flight may take once a replica is told to stop.
	shutdownGrace = 5 * time.Second
	// podIndexField is where the downward API finds a StatefulSet pod's
	// ordinal: the label the StatefulSet controller sets (Kubernetes 1.28
	// and later).
	podIndexField = "metadata.labels['apps.kubernetes.io/pod-index']"
)

// TestPipelineKustomizationsRender renders each kustomization of the
// Pipeline on Kubernetes and finds objects in each.
func TestPipelineKustomizationsRender(t *testing.T) {
	for _, dir := range []string{natsBase, pipelineBase, pipelineOverlay} {
		t.Run(dir, func(t *testing.T) {
			objs := renderManifests(t, dir)
			if len(objs.all) == 0 {
				t.Fatalf("kubectl kustomize %s rendered no objects", dir)
			}
		})
	}
}

// TestPipelineVertexWorkloads checks that every vertex of the pipeline in the
// ConfigMap runs as exactly one workload of `vertex run --vertex NAME`, with
// its user-defined containers as native sidecars beside it: a Deployment, or
// for a reduce vertex a StatefulSet of a replica and a volume per partition.
func TestPipelineVertexWorkloads(t *testing.T) {
	for _, dir := range []string{pipelineBase, pipelineOverlay} {
		t.Run(dir, func(t *testing.T) {
			objs := renderManifests(t, dir)
			p := pipelineConfig(t, objs)
			byVertex := map[string]workload{}
			for _, w := range vertexWorkloads(objs) {
				v := vertexArg(t, w)
				if other, dup := byVertex[v]; dup {
					t.Errorf("%s and %s both run vertex %q", other.id(), w.id(), v)
				}
				byVertex[v] = w
			}
			for _, v := range p.Spec.Vertices {
				w, ok := byVertex[v.Name]
				if !ok {
					t.Errorf("vertex %q of pipeline %q has no workload running --vertex %s", v.Name, p.Metadata.Name, v.Name)
					continue
				}
				delete(byVertex, v.Name)
				t.Run(v.Name, func(t *testing.T) {
					checkVertexPod(t, objs, p, v, w)
					if v.UDF != nil && v.UDF.GroupBy != nil {
						checkReduceWorkload(t, objs, v, w)
					} else if w.Kind != "Deployment" {
						t.Errorf("%s: a vertex that is not a reduce runs as a Deployment (its replicas are alike)", w.id())
					}
				})
			}
			for v, w := range byVertex {
				t.Errorf("%s runs --vertex %s, which pipeline %q does not have", w.id(), v, p.Metadata.Name)
			}
		})
	}
}

// TestPipelineValidates checks that the pipeline YAML in the ConfigMap passes
// vertex validate's checks.
func TestPipelineValidates(t *testing.T) {
	objs := renderManifests(t, pipelineOverlay)
	key, data := pipelineData(t, objs)
	if _, err := vertexconfig.Parse([]byte(data)); err != nil {
		t.Fatalf("ConfigMap %s: %v", key, err)
	}
}

// TestPipelineDisruptionBudgets checks that each vertex workload has a
// PodDisruptionBudget of its own, and that no workload selects another's
// pods.
func TestPipelineDisruptionBudgets(t *testing.T) {
	objs := renderManifests(t, pipelineOverlay)
	all := slices.Concat(slices.Collect(maps.Values(objs.deployments)), slices.Collect(maps.Values(objs.statefulSets)))
	for _, d := range vertexWorkloads(objs) {
		name := d.id()
		labels := d.Spec.Template.Metadata.Labels
		if !selects(d.Spec.Selector.MatchLabels, labels) {
			t.Errorf("%s: selector %v does not select its own pods %v", name, d.Spec.Selector.MatchLabels, labels)
		}
		var budgets []string
		for pname, p := range objs.pdbs {
			if selects(p.Spec.Selector.MatchLabels, labels) {
				budgets = append(budgets, pname)
				if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
					t.Errorf("PodDisruptionBudget %s sets neither maxUnavailable nor minAvailable", pname)
				}
			}
		}
		if len(budgets) != 1 {
			t.Errorf("%s: %d PodDisruptionBudgets select its pods (%v); want 1", name, len(budgets), budgets)
		}
		for _, o := range all {
			if o.id() != name && selects(d.Spec.Selector.MatchLabels, o.Spec.Template.Metadata.Labels) {
				t.Errorf("%s's selector %v also selects the pods of %s", name, d.Spec.Selector.MatchLabels, o.id())
			}
		}
	}
}

// TestPipelineNATS checks the NATS JetStream StatefulSet: its store on a
// volume claim, its config from a ConfigMap with JetStream on (valid for
// nats-server, when it is installed), and its headless Service.
func TestPipelineNATS(t *testing.T) {
	for _, dir := range []string{natsBase, pipelineOverlay} {
		t.Run(dir, func(t *testing.T) {
			objs := renderManifests(t, dir)
			n := natsServer(t, objs)
			gov, ok := objs.services[n.set.Spec.ServiceName]
			switch {
			case !ok:
				t.Errorf("StatefulSet %s: serviceName %q is not a Service here", n.set.Metadata.Name, n.set.Spec.ServiceName)
			case gov.Spec.ClusterIP != "None":
				t.Errorf("Service %s governs StatefulSet %s but is not headless (clusterIP %q)", gov.Metadata.Name, n.set.Metadata.Name, gov.Spec.ClusterIP)
			case !selects(gov.Spec.Selector, n.set.Spec.Template.Metadata.Labels):
				t.Errorf("headless Service %s does not select the NATS pods", gov.Metadata.Name)
			}
			storeDir := confValue(n.conf, "store_dir")
			if !regexp.MustCompile(`(?m)^\s*jetstream\s*\{`).MatchString(n.conf) || storeDir == "" {
				t.Fatalf("%s has no jetstream block with a store_dir:\n%s", n.confPath, n.conf)
			}
			if claim := mountedAt(n.container, storeDir); !slices.ContainsFunc(n.set.Spec.VolumeClaimTemplates, func(c claimTemplate) bool { return c.Metadata.Name == claim }) {
				t.Errorf("JetStream's store_dir %s is not on a volumeClaimTemplate of StatefulSet %s (mounted: %q)", storeDir, n.set.Metadata.Name, claim)
			}
			checkNATSConf(t, n.conf)
		})
	}
}

// TestPipelineNATSURL checks that spec.isb.jetstream.url of the pipeline
// reaches the NATS server: a Service of the same namespace, on its port,
// selecting the NATS pods and sending to the port nats-server listens on.
func TestPipelineNATSURL(t *testing.T) {
	objs := renderManifests(t, pipelineOverlay)
	p := pipelineConfig(t, objs)
	n := natsServer(t, objs)
	u, err := url.Parse(p.Spec.ISB.JetStream.URL)
	if err != nil || u.Scheme != "nats" {
		t.Fatalf("spec.isb.jetstream.url %q: want nats://SERVICE:PORT (%v)", p.Spec.ISB.JetStream.URL, err)
	}
	host, portName := u.Hostname(), u.Port()
	if portName == "" {
		portName = "4222"
	}
	cm := objs.configMaps[pipelineConfigMapName(t, objs)]
	svcName, ns, _ := strings.Cut(host, ".")
	if ns != "" && !slices.Contains([]string{
		cm.Metadata.Namespace, cm.Metadata.Namespace + ".svc", cm.Metadata.Namespace + ".svc.cluster.local"}, ns) {
		t.Errorf("spec.isb.jetstream.url %q: %q is not the pipeline's namespace %q", u, ns, cm.Metadata.Namespace)
	}
	svc, ok := objs.services[svcName]
	if !ok {
		t.Fatalf("spec.isb.jetstream.url %q: no Service %q (Services: %v)", u, svcName, slices.Sorted(maps.Keys(objs.services)))
	}
	if svc.Metadata.Namespace != cm.Metadata.Namespace {
		t.Errorf("Service %s is in namespace %q, the pipeline in %q", svcName, svc.Metadata.Namespace, cm.Metadata.Namespace)
	}
	if svc.Spec.ClusterIP == "None" {
		t.Errorf("spec.isb.jetstream.url %q names the headless Service %s; use the client Service", u, svcName)
	}
	if !selects(svc.Spec.Selector, n.set.Spec.Template.Metadata.Labels) {
		t.Errorf("Service %s (selector %v) does not select the NATS pods of StatefulSet %s", svcName, svc.Spec.Selector, n.set.Metadata.Name)
	}
	_, listen, err := net.SplitHostPort(confValue(n.conf, "listen"))
	if err != nil {
		t.Fatalf("nats.conf: listen %q: %v", confValue(n.conf, "listen"), err)
	}
	var found bool
	for _, sp := range svc.Spec.Ports {
		if strconv.Itoa(sp.Port) != portName {
			continue
		}
		found = true
		if target := containerPort(t, n.container, sp.TargetPort, sp.Port); strconv.Itoa(target) != listen {
			t.Errorf("Service %s port %d goes to container port %d; nats-server listens on %s", svcName, sp.Port, target, listen)
		}
	}
	if !found {
		t.Errorf("spec.isb.jetstream.url %q: Service %s has no port %s", u, svcName, portName)
	}
}

// TestPipelineOverlay checks what the overlay adds: one namespace for every
// object, its common labels on every object and pod, and an images entry,
// with its tag applied, for every container's image.
func TestPipelineOverlay(t *testing.T) {
	objs := renderManifests(t, pipelineOverlay)
	var k struct {
		Namespace string
		Labels    []struct {
			Pairs            map[string]string
			IncludeTemplates bool `yaml:"includeTemplates"`
		}
		Images []struct {
			Name    string
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		}
	}
	readYAML(t, filepath.Join(pipelineOverlay, "kustomization.yaml"), &k)
	if k.Namespace == "" {
		t.Fatal("the overlay sets no namespace")
	}
	common := map[string]string{}
	for _, l := range k.Labels {
		if !l.IncludeTemplates {
			t.Errorf("labels %v: includeTemplates is false; the pods would not carry them", l.Pairs)
		}
		for name, v := range l.Pairs {
			common[name] = v
		}
	}
	if len(common) == 0 {
		t.Error("the overlay sets no common labels")
	}
	hasNamespace := false
	for _, o := range objs.all {
		id := o.Kind + " " + o.Metadata.Name
		if o.Kind == "Namespace" {
			hasNamespace = hasNamespace || o.Metadata.Name == k.Namespace
		} else if o.Metadata.Namespace != k.Namespace {
			t.Errorf("%s: namespace %q; want %q", id, o.Metadata.Namespace, k.Namespace)
		}
		if !selects(common, o.Metadata.Labels) {
			t.Errorf("%s: labels %v lack the overlay's %v", id, o.Metadata.Labels, common)
		}
	}
	if !hasNamespace {
		t.Errorf("the overlay does not create its namespace %q", k.Namespace)
	}
	tags := map[string]string{}
	for _, img := range k.Images {
		tags[cmp.Or(img.NewName, img.Name)] = img.NewTag
	}
	for _, w := range slices.Concat(slices.Collect(maps.Values(objs.deployments)), slices.Collect(maps.Values(objs.statefulSets))) {
		if !selects(common, w.Spec.Template.Metadata.Labels) {
			t.Errorf("%s: pod labels %v lack the overlay's %v", w.Metadata.Name, w.Spec.Template.Metadata.Labels, common)
		}
		for _, c := range slices.Concat(w.Spec.Template.Spec.InitContainers, w.Spec.Template.Spec.Containers) {
			repo, tag := splitImage(c.Image)
			want, ok := tags[repo]
			switch {
			case !ok:
				t.Errorf("%s/%s: image %s has no entry in the overlay's images", w.Metadata.Name, c.Name, c.Image)
			case tag != want:
				t.Errorf("%s/%s: image %s; the overlay's images say tag %q", w.Metadata.Name, c.Name, c.Image, want)
			}
		}
	}
}

// checkVertexPod checks the pod template of workload d, which runs vertex v of
// pipeline p.
func checkVertexPod(t *testing.T, objs manifests, p *config.Pipeline, v config.Vertex, d workload) {
	pod := d.Spec.Template
	numa := vertexContainer(t, d)

	// The pipeline file, from the ConfigMap.
	file := flagValue(numa.Args, "-f")
	vol := mountedAt(numa, path.Dir(file))
	cm := volumeNamed(pod.Spec, vol).ConfigMap
	if cm == nil {
		t.Fatalf("-f %s: %s is not a ConfigMap volume of the pod", file, path.Dir(file))
	}
	if _, ok := objs.configMaps[cm.Name].Data[path.Base(file)]; !ok {
		t.Errorf("-f %s: ConfigMap %q has no key %s", file, cm.Name, path.Base(file))
	}

	// The user-defined containers: native sidecars, named as in a Numaflow
	// pod, of the image in the pipeline, sharing the socket directory.
	want := udContainers(v)
	sockets := mountedAt(numa, socketDir)
	if sv := volumeNamed(pod.Spec, sockets); sv.EmptyDir == nil || sv.EmptyDir.Medium != "Memory" {
		t.Errorf("container %s: %s is not an in-memory emptyDir (volume %q)", numa.Name, socketDir, sockets)
	}
	for _, c := range pod.Spec.InitContainers {
		img, ok := want[c.Name]
		if !ok {
			t.Errorf("init container %s is none of the vertex's user-defined containers %v", c.Name, slices.Sorted(maps.Keys(want)))
			continue
		}
		delete(want, c.Name)
		if c.RestartPolicy != "Always" {
			t.Errorf("init container %s: restartPolicy %q; a native sidecar has Always", c.Name, c.RestartPolicy)
		}
		if got := envValue(c, "NUMAFLOW_UD_CONTAINER_TYPE"); got != c.Name {
			t.Errorf("container %s: NUMAFLOW_UD_CONTAINER_TYPE %q; want %q", c.Name, got, c.Name)
		}
		if repo, _ := splitImage(c.Image); repo != img {
			t.Errorf("container %s: image %s; the pipeline names %s", c.Name, c.Image, img)
		}
		if got := mountedAt(c, socketDir); got != sockets {
			t.Errorf("container %s: %s is volume %q; the vertex's is %q", c.Name, socketDir, got, sockets)
		}
	}
	for name := range want {
		t.Errorf("no sidecar %s for the vertex's user-defined container", name)
	}

	// Probes, metrics, resources, graceful stop.
	for probe, want := range map[string]*probe{"/readyz": numa.ReadinessProbe, "/healthz": numa.LivenessProbe} {
		if want == nil || want.HTTPGet == nil || want.HTTPGet.Path != probe {
			t.Errorf("container %s: no httpGet probe on %s", numa.Name, probe)
		} else if port := containerPort(t, numa, want.HTTPGet.Port, 0); port != metricsPort {
			t.Errorf("container %s: probe %s on port %d; vertex run serves it on %d", numa.Name, probe, port, metricsPort)
		}
	}
	for k, want := range map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": strconv.Itoa(metricsPort), "prometheus.io/path": "/metrics"} {
		if got := pod.Metadata.Annotations[k]; got != want {
			t.Errorf("pod annotation %s: %q; want %q", k, got, want)
		}
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
			t.Errorf("container %s requests %v; want cpu and memory", c.Name, c.Resources.Requests)
		}
	}
	limits, err := p.VertexLimits(v.Name)
	if err != nil {
		t.Fatal(err)
	}
	stop := max(limits.GetReadTimeout()+shutdownGrace, pipeline.DefaultDrainTimeout)
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= stop {
		t.Errorf("terminationGracePeriodSeconds %v; want more than %v", deref(g), stop)
	}
}

// checkReduceWorkload checks what reduce vertex v needs of its workload w:
// a StatefulSet of one replica per partition, started in parallel, with a
// headless governing Service; each replica's index from its pod's ordinal;
// and its state directory (--state-dir) on a volume of the kind
// groupBy.storage names, for a persistentVolumeClaim one claim per replica
// that agrees with the pipeline's accessMode and volumeSize.
func checkReduceWorkload(t *testing.T, objs manifests, v config.Vertex, w workload) {
	if w.Kind != "StatefulSet" {
		t.Fatalf("%s: a reduce vertex runs as a StatefulSet, whose pods have an index and volumes of their own", w.id())
	}
	partitions := int32(1)
	if v.Partitions != nil {
		partitions = *v.Partitions
	}
	if got := cmp.Or(deref(w.Spec.Replicas), "1"); got != strconv.Itoa(int(partitions)) {
		t.Errorf("%s: replicas %s; want one per partition, %d", w.id(), got, partitions)
	}
	if w.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("%s: podManagementPolicy %q; want Parallel (the replicas wait for none of each other)", w.id(), w.Spec.PodManagementPolicy)
	}
	if w.Spec.Ordinals != nil && w.Spec.Ordinals.Start != 0 {
		t.Errorf("%s: ordinals start at %d; replica i reads partition i, from 0", w.id(), w.Spec.Ordinals.Start)
	}
	gov, ok := objs.services[w.Spec.ServiceName]
	switch {
	case !ok:
		t.Errorf("%s: serviceName %q is not a Service here", w.id(), w.Spec.ServiceName)
	case gov.Spec.ClusterIP != "None":
		t.Errorf("Service %s governs %s but is not headless (clusterIP %q)", gov.Metadata.Name, w.id(), gov.Spec.ClusterIP)
	case !selects(gov.Spec.Selector, w.Spec.Template.Metadata.Labels):
		t.Errorf("headless Service %s does not select the pods of %s", gov.Metadata.Name, w.id())
	}

	// The replica index: the pod's ordinal, not a fixed --replica.
	numa := vertexContainer(t, w)
	if r := flagValue(numa.Args, "--replica"); r != "" {
		t.Errorf("container %s: --replica %s gives every replica one index; take it from the pod's ordinal", numa.Name, r)
	}
	if e := envEntry(numa, "NUMAFLOW_REPLICA"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != podIndexField {
		t.Errorf("container %s: NUMAFLOW_REPLICA is not the pod's ordinal (fieldRef %s)", numa.Name, podIndexField)
	}

	// The state directory, on a volume of the storage's kind.
	dir := flagValue(numa.Args, "--state-dir")
	if dir == "" {
		t.Fatalf("container %s: no --state-dir DIR", numa.Name)
	}
	vol := mountedAt(numa, dir)
	st := v.UDF.GroupBy.Storage
	switch {
	case st != nil && st.PersistentVolumeClaim != nil:
		i := slices.IndexFunc(w.Spec.VolumeClaimTemplates, func(c claimTemplate) bool { return c.Metadata.Name == vol })
		if i < 0 {
			t.Fatalf("--state-dir %s is not on a volumeClaimTemplate of %s (mounted: %q)", dir, w.id(), vol)
		}
		checkClaim(t, objs, v.Name, w.Spec.VolumeClaimTemplates[i])
	case st != nil && st.EmptyDir != nil:
		if volumeNamed(w.Spec.Template.Spec, vol).EmptyDir == nil {
			t.Errorf("--state-dir %s is not on an emptyDir volume (mounted: %q), as groupBy.storage says", dir, vol)
		}
	}
}

// checkClaim checks that claim template c agrees with what the pipeline's
// groupBy.storage.persistentVolumeClaim of vertex says (fields that concern
// Kubernetes alone, which sluice's config does not keep).
func checkClaim(t *testing.T, objs manifests, vertex string, c claimTemplate) {
	_, data := pipelineData(t, objs)
	var raw struct {
		Spec struct {
			Vertices []struct {
				Name string
				UDF  struct {
					GroupBy struct {
						Storage struct {
							PersistentVolumeClaim struct {
								StorageClassName string `yaml:"storageClassName"`
								AccessMode       string `yaml:"accessMode"`
								VolumeSize       string `yaml:"volumeSize"`
							} `yaml:"persistentVolumeClaim"`
						}
					} `yaml:"groupBy"`
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(data), &raw); err != nil {
		t.Fatal(err)
	}
	for _, v := range raw.Spec.Vertices {
		if v.Name != vertex {
			continue
		}
		want := v.UDF.GroupBy.Storage.PersistentVolumeClaim
		if want.AccessMode != "" && !slices.Equal(c.Spec.AccessModes, []string{want.AccessMode}) {
			t.Errorf("volumeClaimTemplate %s: accessModes %v; the pipeline says %s", c.Metadata.Name, c.Spec.AccessModes, want.AccessMode)
		}
		if got := c.Spec.Resources.Requests["storage"]; want.VolumeSize != "" && got != want.VolumeSize {
			t.Errorf("volumeClaimTemplate %s: requests storage %q; the pipeline's volumeSize is %s", c.Metadata.Name, got, want.VolumeSize)
		}
		if got := deref(c.Spec.StorageClassName); want.StorageClassName != "" && got != want.StorageClassName {
			t.Errorf("volumeClaimTemplate %s: storageClassName %s; the pipeline says %s", c.Metadata.Name, got, want.StorageClassName)
		}
	}
}

// udContainers returns the user-defined containers of v by the name their
// sidecar has in a Numaflow pod, with the image repository of each.
func udContainers(v config.Vertex) map[string]string {
	out := map[string]string{}
	add := func(name string, c *config.Container) {
		if c != nil {
			out[name], _ = splitImage(c.Image)
		}
	}
	if s := v.Source; s != nil {
		if s.UDSource != nil {
			add("udsource", s.UDSource.Container)
		}
		if s.Transformer != nil {
			add("transformer", s.Transformer.Container)
		}
	}
	if v.UDF != nil {
		add("udf", v.UDF.Container)
	}
	if s := v.Sink; s != nil {
		if s.UDSink != nil {
			add("udsink", s.UDSink.Container)
		}
		if s.Fallback != nil && s.Fallback.UDSink != nil {
			add("fb-udsink", s.Fallback.UDSink.Container)
		}
	}
	return out
}

// pipelineConfig returns the pipeline in the ConfigMap the vertices mount,
// decoded into sluice's config types; TestPipelineValidates validates it.
func pipelineConfig(t *testing.T, objs manifests) *config.Pipeline {
	t.Helper()
	key, data := pipelineData(t, objs)
	f, err := config.Parse([]byte(data), nil)
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", key, err)
	}
	if f.Pipeline == nil {
		t.Fatalf("ConfigMap %s: a %s, not a Pipeline", key, f.Kind)
	}
	p := f.Pipeline
	if p.Spec.ISB == nil || p.Spec.ISB.JetStream == nil {
		t.Fatalf("ConfigMap %s: no spec.isb.jetstream, which vertex run --vertex needs", key)
	}
	return p
}

// pipelineData returns the one key of the ConfigMap the vertices mount, as
// "CONFIGMAP/KEY", and its pipeline YAML.
func pipelineData(t *testing.T, objs manifests) (key, data string) {
	t.Helper()
	cm := objs.configMaps[pipelineConfigMapName(t, objs)]
	if len(cm.Data) != 1 {
		t.Fatalf("ConfigMap %s has keys %v; want the pipeline alone", cm.Metadata.Name, slices.Sorted(maps.Keys(cm.Data)))
	}
	for k, d := range cm.Data {
		return cm.Metadata.Name + "/" + k, d
	}
	panic("unreachable")
}

// pipelineConfigMapName returns the one ConfigMap that the vertices' -f
// names.
func pipelineConfigMapName(t *testing.T, objs manifests) string {
	t.Helper()
	names := map[string]bool{}
	for _, d := range vertexWorkloads(objs) {
		numa := vertexContainer(t, d)
		dir := path.Dir(flagValue(numa.Args, "-f"))
		if cm := volumeNamed(d.Spec.Template.Spec, mountedAt(numa, dir)).ConfigMap; cm != nil {
			names[cm.Name] = true
		}
	}
	if len(names) != 1 {
		t.Fatalf("the vertices read their pipeline from %d ConfigMaps %v; want 1", len(names), slices.Sorted(maps.Keys(names)))
	}
	for name := range names {
		if _, ok := objs.configMaps[name]; !ok {
			t.Fatalf("the vertices mount ConfigMap %q, which is not rendered", name)
		}
		return name
	}
	panic("unreachable")
}

// vertexWorkloads returns the Deployments and StatefulSets that run `vertex
// run`, in the order of their kind and name.
func vertexWorkloads(objs manifests) []workload {
	var out []workload
	for _, set := range []map[string]workload{objs.deployments, objs.statefulSets} {
		for _, name := range slices.Sorted(maps.Keys(set)) {
			if _, ok := runContainer(set[name]); ok {
				out = append(out, set[name])
			}
		}
	}
	return out
}

// runContainer returns the container of d that runs `vertex run`, if any.
func runContainer(d workload) (container, bool) {
	for _, c := range d.Spec.Template.Spec.Containers {
		if len(c.Args) > 0 && c.Args[0] == "run" {
			return c, true
		}
	}
	return container{}, false
}

// vertexContainer returns the container of d that runs `vertex run`.
func vertexContainer(t *testing.T, d workload) container {
	t.Helper()
	c, ok := runContainer(d)
	if !ok {
		t.Fatalf("%s: no container runs `vertex run` (args starting with run)", d.id())
	}
	return c
}

// vertexArg returns the --vertex of d's vertex container.
func vertexArg(t *testing.T, d workload) string {
	t.Helper()
	v := flagValue(vertexContainer(t, d).Args, "--vertex")
	if v == "" {
		t.Fatalf("%s: vertex run without --vertex NAME", d.id())
	}
	return v
}

// natsPod is the NATS server of the manifests.
type natsPod struct {
	set       workload
	container container
	confPath  string
	conf      string
}

// natsServer finds the one StatefulSet with a container run with --config
// FILE (nats-server's), and the config file, from its ConfigMap.
func natsServer(t *testing.T, objs manifests) natsPod {
	t.Helper()
	var servers []natsPod
	for _, name := range slices.Sorted(maps.Keys(objs.statefulSets)) {
		s := objs.statefulSets[name]
		for _, c := range s.Spec.Template.Spec.Containers {
			if p := flagValue(c.Args, "--config"); p != "" {
				servers = append(servers, natsPod{set: s, container: c, confPath: p})
			}
		}
	}
	if len(servers) != 1 {
		t.Fatalf("%d StatefulSets run a container with --config FILE; want the NATS server's alone", len(servers))
	}
	n := servers[0]
	if len(n.set.Spec.VolumeClaimTemplates) == 0 {
		t.Errorf("StatefulSet %s has no volumeClaimTemplates: JetStream's store would not outlive the pod", n.set.Metadata.Name)
	}
	cm := volumeNamed(n.set.Spec.Template.Spec, mountedAt(n.container, path.Dir(n.confPath))).ConfigMap
	if cm == nil {
		t.Fatalf("--config %s: %s is not a ConfigMap volume", n.confPath, path.Dir(n.confPath))
	}
	conf, ok := objs.configMaps[cm.Name].Data[path.Base(n.confPath)]
	if !ok {
		t.Fatalf("--config %s: ConfigMap %q has no key %s", n.confPath, cm.Name, path.Base(n.confPath))
	}
	n.conf = conf
	return n
}

// confValue returns the value of key in a nats-server config (the first
// "key: value" or "key = value" line).
func confValue(conf, key string) string {
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(key) + `\s*[:=]\s*"?([^"\s#]+)`).FindStringSubmatch(conf)
	if m == nil {
		return ""
	}
	return m[1]
}

// checkNATSConf has nats-server test the config, when nats-server is
// installed.
func checkNATSConf(t *testing.T, conf string) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if bin = "/usr/sbin/nats-server"; !isExecutable(bin) {
			t.Log("nats-server not installed: the config is not tested with nats-server -t")
			return
		}
	}
	file := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-t", "-c", file)
	cmd.Env = append(os.Environ(), "POD_NAME=nats-0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("nats-server -t: %v\n%s", err, out)
	}
}

func isExecutable(file string) bool {
	fi, err := os.Stat(file)
	return err == nil && fi.Mode()&0o111 != 0
}

// The objects rendered, by kind and name.
type manifests struct {
	all          []object
	deployments  map[string]workload
	statefulSets map[string]workload
	services     map[string]service
	pdbs         map[string]disruptionBudget
	configMaps   map[string]configMap
}

type object struct {
	Kind     string
	Metadata objectMeta
}

type objectMeta struct {
	Name, Namespace string
	Labels          map[string]string
	Annotations     map[string]string
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

// workload is a Deployment or a StatefulSet.
type workload struct {
	Kind     string
	Metadata objectMeta
	Spec     struct {
		Replicas            *int32
		ServiceName         string `yaml:"serviceName"`
		PodManagementPolicy string `yaml:"podManagementPolicy"`
		Ordinals            *struct {
			Start int32
		}
		Selector             labelSelector
		Template             podTemplate
		VolumeClaimTemplates []claimTemplate `yaml:"volumeClaimTemplates"`
	}
}

// id names the workload in messages: "Deployment NAME".
func (w workload) id() string { return w.Kind + " " + w.Metadata.Name }

type claimTemplate struct {
	Metadata objectMeta
	Spec     struct {
		AccessModes      []string `yaml:"accessModes"`
		StorageClassName *string  `yaml:"storageClassName"`
		Resources        struct{ Requests map[string]string }
	}
}

type podTemplate struct {
	Metadata objectMeta
	Spec     podSpec
}

type podSpec struct {
	TerminationGracePeriodSeconds *int64      `yaml:"terminationGracePeriodSeconds"`
	InitContainers                []container `yaml:"initContainers"`
	Containers                    []container
	Volumes                       []volume
}

type container struct {
	Name          string
	Image         string
	RestartPolicy string `yaml:"restartPolicy"`
	Args          []string
	Env           []envVar
	Ports         []struct {
		Name          string
		ContainerPort int `yaml:"containerPort"`
	}
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct{ Requests map[string]string }
	VolumeMounts   []struct {
		Name      string
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type envVar struct {
	Name, Value string
	ValueFrom   *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet *struct {
		Path string
		Port any
	} `yaml:"httpGet"`
}

type volume struct {
	Name     string
	EmptyDir *struct{ Medium string } `yaml:"emptyDir"`
	// ConfigMap is set for a ConfigMap volume.
	ConfigMap *struct{ Name string } `yaml:"configMap"`
}

type service struct {
	Metadata objectMeta
	Spec     struct {
		ClusterIP string `yaml:"clusterIP"`
		Selector  map[string]string
		Ports     []struct {
			Name       string
			Port       int
			TargetPort any `yaml:"targetPort"`
		}
	}
}

type disruptionBudget struct {
	Metadata objectMeta
	Spec     struct {
		Selector       labelSelector
		MaxUnavailable any `yaml:"maxUnavailable"`
		MinAvailable   any `yaml:"minAvailable"`
	}
}

type configMap struct {
	Metadata objectMeta
	Data     map[string]string
}

// renderManifests runs `kubectl kustomize dir` and decodes what it prints. It
// skips the test when kubectl is not installed.
func renderManifests(t *testing.T, dir string) manifests {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed: the manifests are not rendered")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.Bytes())
	}
	m := manifests{deployments: map[string]workload{}, statefulSets: map[string]workload{},
		services: map[string]service{}, pdbs: map[string]disruptionBudget{}, configMaps: map[string]configMap{}}
	dec := yaml.NewDecoder(&stdout)
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		var o object
		decodeNode(t, &doc, &o)
		m.all = append(m.all, o)
		switch o.Kind {
		case "Deployment":
			m.deployments[o.Metadata.Name] = decodeAs[workload](t, &doc)
		case "StatefulSet":
			m.statefulSets[o.Metadata.Name] = decodeAs[workload](t, &doc)
		case "Service":
			m.services[o.Metadata.Name] = decodeAs[service](t, &doc)
		case "PodDisruptionBudget":
			m.pdbs[o.Metadata.Name] = decodeAs[disruptionBudget](t, &doc)
		case "ConfigMap":
			m.configMaps[o.Metadata.Name] = decodeAs[configMap](t, &doc)
		}
	}
	return m
}

func decodeAs[T any](t *testing.T, n *yaml.Node) T {
	t.Helper()
	var v T
	decodeNode(t, n, &v)
	return v
}

func decodeNode(t *testing.T, n *yaml.Node, v any) {
	t.Helper()
	if err := n.Decode(v); err != nil {
		t.Fatalf("decoding line %d: %v", n.Line, err)
	}
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// selects reports whether every label of selector is in labels; an empty
// selector selects nothing.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// flagValue returns the argument after flag in args, or "".
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// mountedAt returns the name of the volume c mounts at dir, or "".
func mountedAt(c container, dir string) string {
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) == path.Clean(dir) {
			return m.Name
		}
	}
	return ""
}

// volumeNamed returns the pod's volume called name, or a zero volume.
func volumeNamed(s podSpec, name string) volume {
	for _, v := range s.Volumes {
		if v.Name == name {
			return v
		}
	}
	return volume{}
}

// containerPort resolves a port given by number or by name in c (a
// Service's missing targetPort is its port, def).
func containerPort(t *testing.T, c container, port any, def int) int {
	t.Helper()
	switch p := port.(type) {
	case nil:
		return def
	case int:
		return p
	case string:
		for _, cp := range c.Ports {
			if cp.Name == p {
				return cp.ContainerPort
			}
		}
		t.Errorf("container %s has no port named %q", c.Name, p)
		return 0
	}
	t.Errorf("port %v (%T): neither a number nor a name", port, port)
	return 0
}

func envValue(c container, name string) string {
	if e := envEntry(c, name); e != nil {
		return e.Value
	}
	return ""
}

// envEntry returns c's env entry of that name, or nil.
func envEntry(c container, name string) *envVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// splitImage splits an image reference into repository and tag.
func splitImage(image string) (repo, tag string) {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i], image[i+1:]
	}
	return image, ""
}

func deref[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

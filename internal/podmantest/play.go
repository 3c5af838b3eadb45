package podmantest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/kubetest"
)

// PodOptions say how ForPodman turns a Deployment into a Pod.
type PodOptions struct {
	// Name is the pod's name. Its containers are <Name>-<container> in
	// podman, and its ConfigMaps are renamed <Name>-<ConfigMap>.
	Name string
	// Annotations are set on the pod, over the template's (the replica's
	// index in numaflow.numaproj.io/replica, for example).
	Annotations map[string]string
	// Images maps an image's name without its tag (sluice,
	// sluice-example-cat) to the image to run instead.
	Images map[string]string
}

// ForPodman turns the Deployment of that name among objs into what `podman
// kube play` (4.3) runs on these machines: one Pod from its template, with the
// ConfigMaps and Secrets it mounts. Podman 4.3 differs from Kubernetes in
// ways the result works around:
//
//   - It runs initContainers to completion before the containers, whatever
//     their restartPolicy, so native sidecars (restartPolicy: Always) would
//     keep the pod from starting: they become its first containers.
//   - It panics on secret volumes: Secrets become ConfigMaps with the same
//     data, mounted the same way.
//   - It resolves metadata.annotations fieldRefs for a Pod, not for a
//     Deployment's template.
//   - It makes each emptyDir a named volume of the volume's name, shared by
//     every pod that names one alike and kept after the pod: emptyDirs are
//     renamed <Name>-<volume>, and Down removes them.
//   - It turns containerPorts into port mappings, which host networking
//     refuses: they are dropped, and probes that name a port get its number.
//   - It refuses env fieldRefs to metadata.namespace: they become the
//     namespace's value (the Deployment's or its template's, else default).
//
// The pod gets hostNetwork: true, so that its servers sit on the host's
// loopback, and images are replaced as o.Images says.
func ForPodman(t testing.TB, objs kubetest.Objects, deployment string, o PodOptions) kubetest.Objects {
	t.Helper()
	d := objs.Get(t, "Deployment", deployment)
	tmpl := kubetest.Map(d, "spec", "template")
	meta := map[string]any{"name": o.Name}
	if l := kubetest.Map(tmpl, "metadata", "labels"); l != nil {
		meta["labels"] = l
	}
	annotations := map[string]any{}
	for k, v := range kubetest.Map(tmpl, "metadata", "annotations") {
		annotations[k] = v
	}
	for k, v := range o.Annotations {
		annotations[k] = v
	}
	meta["annotations"] = annotations
	spec := deepCopy(kubetest.Map(tmpl, "spec"))
	spec["hostNetwork"] = true

	var sidecars, inits []any
	for _, c := range kubetest.List(spec, "initContainers") {
		if c["restartPolicy"] == "Always" {
			delete(c, "restartPolicy")
			sidecars = append(sidecars, c)
		} else {
			inits = append(inits, c)
		}
	}
	delete(spec, "initContainers")
	if len(inits) > 0 {
		spec["initContainers"] = inits
	}
	containers, _ := spec["containers"].([]any)
	spec["containers"] = append(sidecars, containers...)
	namespace := "default"
	for _, m := range []map[string]any{kubetest.Map(d, "metadata"), kubetest.Map(tmpl, "metadata")} {
		if ns, ok := m["namespace"].(string); ok && ns != "" {
			namespace = ns
		}
	}
	for _, list := range []string{"initContainers", "containers"} {
		for _, c := range kubetest.List(spec, list) {
			for _, env := range kubetest.List(c, "env") {
				if kubetest.Map(env, "valueFrom", "fieldRef")["fieldPath"] == "metadata.namespace" {
					delete(env, "valueFrom")
					env["value"] = namespace
				}
			}
			image, _ := c["image"].(string)
			repo, _, _ := strings.Cut(image, ":")
			if to, ok := o.Images[repo]; ok {
				c["image"] = to
			}
			numberPorts(c)
		}
	}

	out := kubetest.Objects{}
	for _, v := range kubetest.List(spec, "volumes") {
		switch {
		case v["emptyDir"] != nil:
			renameVolume(spec, v["name"].(string), o.Name+"-"+v["name"].(string))
		case v["configMap"] != nil:
			cm := kubetest.Map(v, "configMap")
			src := objs.Get(t, "ConfigMap", cm["name"].(string))
			cm["name"] = o.Name + "-" + src.Name()
			out = append(out, kubetest.Object{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": cm["name"]}, "data": deepCopy(kubetest.Map(src, "data"))})
		case v["secret"] != nil:
			var s kubetest.Secret
			objs.Get(t, "Secret", kubetest.Map(v, "secret")["secretName"].(string)).Decode(t, &s)
			data := map[string]any{}
			for k := range s.Data {
				data[k], _ = s.Value(t, k)
			}
			for k, val := range s.StringData {
				data[k] = val
			}
			name := o.Name + "-" + s.Metadata.Name
			delete(v, "secret")
			v["configMap"] = map[string]any{"name": name}
			out = append(out, kubetest.Object{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": name}, "data": data})
		}
	}
	return append(out, kubetest.Object{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

// renameVolume renames a pod's volume, and its mounts.
func renameVolume(spec map[string]any, from, to string) {
	for _, v := range kubetest.List(spec, "volumes") {
		if v["name"] == from {
			v["name"] = to
		}
	}
	for _, list := range []string{"initContainers", "containers"} {
		for _, c := range kubetest.List(spec, list) {
			for _, m := range kubetest.List(c, "volumeMounts") {
				if m["name"] == from {
					m["name"] = to
				}
			}
		}
	}
}

// numberPorts drops a container's ports, giving its probes the numbers of
// the ports they name.
func numberPorts(c map[string]any) {
	byName := map[string]any{}
	for _, p := range kubetest.List(c, "ports") {
		if name, ok := p["name"].(string); ok {
			byName[name] = p["containerPort"]
		}
	}
	delete(c, "ports")
	for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		for _, kind := range []string{"httpGet", "tcpSocket"} {
			action := kubetest.Map(c, probe, kind)
			if name, ok := action["port"].(string); ok && byName[name] != nil {
				action["port"] = byName[name]
			}
		}
	}
}

// Container returns the container of that name of a Pod made by ForPodman,
// to change, or fails the test.
func Container(t testing.TB, pod kubetest.Object, name string) map[string]any {
	t.Helper()
	for _, c := range kubetest.List(pod, "spec", "containers") {
		if c["name"] == name {
			return c
		}
	}
	t.Fatalf("pod %s has no container %s", pod.Name(), name)
	return nil
}

// Play is YAML that `podman kube play` runs.
type Play struct {
	p       *Podman
	file    string
	pods    []string
	volumes []string // of ConfigMaps and emptyDirs, which kube down may leave behind
	played  bool     // kube play succeeded
	down    sync.Once
}

var plays atomic.Int64

// Play runs the objects (Pods or single-replica Deployments, and the
// ConfigMaps they mount) with `podman kube play`, and removes them with Down
// when the test ends.
func (p *Podman) Play(t testing.TB, objs kubetest.Objects) *Play {
	t.Helper()
	data, err := kubetest.Marshal(objs...)
	if err != nil {
		t.Fatal(err)
	}
	pl := &Play{p: p, file: filepath.Join(p.dir, "play-"+p.tag+"-"+itoa(plays.Add(1))+".yaml")}
	for _, o := range objs {
		switch o.Kind() {
		case "ConfigMap":
			pl.volumes = append(pl.volumes, o.Name())
		case "Pod":
			pl.pods = append(pl.pods, o.Name())
			for _, v := range kubetest.List(o, "spec", "volumes") {
				if v["emptyDir"] != nil {
					pl.volumes = append(pl.volumes, v["name"].(string))
				}
			}
		}
	}
	if err := os.WriteFile(pl.file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Down(t) })
	if out, err := p.Output(context.Background(), "kube", "play", pl.file); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pl.played = true
	return pl
}

// Stop stops the pods (SIGTERM to every container, SIGKILL after timeout)
// and waits for them, leaving the containers to inspect.
func (pl *Play) Stop(t testing.TB, timeout time.Duration) {
	t.Helper()
	for _, pod := range pl.pods {
		pl.p.Run(t, "pod", "stop", "--time", itoa(int64(timeout/time.Second)), pod)
	}
}

// Down removes what Play made: `podman kube down`, then the ConfigMaps'
// volumes. It is safe to call more than once.
func (pl *Play) Down(t testing.TB) {
	t.Helper()
	pl.down.Do(func() {
		// After a failed play, whatever it made goes, and nothing else is said.
		if out, err := pl.p.Output(context.Background(), "kube", "down", pl.file); err != nil && pl.played {
			t.Errorf("%v\n%s", err, out)
		}
		for _, v := range pl.volumes {
			pl.p.Output(context.Background(), "volume", "rm", "--force", v)
		}
	})
}

// Logs returns what a container wrote on stdout and on stderr so far.
func (p *Podman) Logs(t testing.TB, container string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	var out, errOut strings.Builder
	cmd := p.Command(ctx, "logs", container)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman logs %s: %v\n%s", container, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// Inspect returns a container's field by Go template, e.g. {{.State.ExitCode}}.
func (p *Podman) Inspect(t testing.TB, container, format string) string {
	t.Helper()
	return strings.TrimSpace(p.Run(t, "inspect", "--format", format, container))
}

func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return deepCopy(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

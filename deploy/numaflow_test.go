package deploy

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// numaflowMap is the kustomization of a Numaflow Pipeline whose map vertex
// runs `vertex serve --role map` as its udf container.
const numaflowMap = "numaflow"

// nfContainer is a container of a Numaflow vertex, as far as the test
// reads it.
type nfContainer struct {
	Name         string
	Image        string
	Args         []string
	Env          []struct{ Name, Value string }
	VolumeMounts []struct {
		Name      string
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// mount returns where c mounts the volume name, or "".
func (c nfContainer) mount(name string) string {
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			return m.MountPath
		}
	}
	return ""
}

// flag returns the value of c's --name=value argument, or "".
func (c nfContainer) flag(name string) string {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

type nfPipeline struct {
	Kind string
	Spec struct{ Vertices []nfVertex }
}

// nfVertex is a vertex of a Numaflow Pipeline, as far as the test reads it.
type nfVertex struct {
	Name     string
	UDF      *struct{ Container *nfContainer } `yaml:"udf"`
	Sidecars []nfContainer
	Volumes  []struct {
		Name      string
		ConfigMap *struct{ Name string } `yaml:"configMap"`
		Secret    *struct {
			SecretName string `yaml:"secretName"`
		}
		EmptyDir any `yaml:"emptyDir"`
	}
}

// TestNumaflowMapPipeline renders deploy/numaflow and checks what the map
// role needs of it: the vertex cat's udf container is sluice serving its
// map (-f in the mounted ConfigMap, whose YAML validates and gives the
// vertex a rate limit stored in the Redis the kustomization runs, with the
// password mounted where sluice reads it), and its --forward socket is in
// a volume the user's map sidecar serves in.
func TestNumaflowMapPipeline(t *testing.T) {
	objs := renderManifests(t, numaflowMap)
	if _, ok := objs.services["redis"]; !ok {
		t.Fatal("no Service redis for the store")
	}
	p := renderPipeline(t, numaflowMap)
	i := slices.IndexFunc(p.Spec.Vertices, func(v nfVertex) bool {
		return v.UDF != nil && v.UDF.Container != nil && slices.Contains(v.UDF.Container.Args, "serve")
	})
	if i < 0 {
		t.Fatal("no vertex whose udf container runs vertex serve")
	}
	v := p.Spec.Vertices[i]
	c := *v.UDF.Container
	if !strings.HasPrefix(c.Image, "sluice:") || c.flag("--role") != "map" {
		t.Fatalf("udf container %s %v; want sluice's image serving --role=map", c.Image, c.Args)
	}
	volume := func(name string) (cm, secret string, empty bool) {
		for _, vol := range v.Volumes {
			if vol.Name == name {
				if vol.ConfigMap != nil {
					cm = vol.ConfigMap.Name
				}
				if vol.Secret != nil {
					secret = vol.Secret.SecretName
				}
				return cm, secret, vol.EmptyDir != nil
			}
		}
		t.Fatalf("vertex %s has no volume %s", v.Name, name)
		return
	}
	file := c.flag("-f")
	var cmName string
	for _, m := range c.VolumeMounts {
		if m.MountPath == path.Dir(file) {
			cmName, _, _ = volume(m.Name)
		}
	}
	data, ok := objs.configMaps[cmName].Data[path.Base(file)]
	if !ok {
		t.Fatalf("-f %s is not a key of a mounted ConfigMap (%q)", file, cmName)
	}
	f, err := vertexconfig.Parse([]byte(data))
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", cmName, err)
	}
	l, err := f.Pipeline.VertexLimits(c.flag("--vertex"))
	if err != nil {
		t.Fatalf("--vertex %q: %v", c.flag("--vertex"), err)
	}
	rl := l.Limits.GetRateLimit()
	if rl == nil || rl.Store == nil || rl.Store.RedisStore == nil || rl.Store.RedisStore.URL == nil ||
		!strings.HasPrefix(*rl.Store.RedisStore.URL, "redis://redis:") {
		t.Fatalf("vertex %s of %s has no rate limit stored in the Service redis", c.flag("--vertex"), cmName)
	}
	if dir := c.mount("redis-auth"); dir != "/var/numaflow/secrets/redis-auth" {
		t.Fatalf("redis-auth mounted at %q; want /var/numaflow/secrets/redis-auth", dir)
	}
	if _, secret, _ := volume("redis-auth"); !strings.HasPrefix(secret, "redis-auth") {
		t.Fatalf("volume redis-auth is the Secret %q", secret)
	}
	fwd := path.Dir(c.flag("--forward"))
	if path.Base(c.flag("--forward")) != "map.sock" || fwd == socketDir {
		t.Fatalf("--forward %q: want a map.sock outside %s", c.flag("--forward"), socketDir)
	}
	served := false
	for _, s := range v.Sidecars {
		for _, m := range s.VolumeMounts {
			if m.MountPath != fwd || c.mount(m.Name) != fwd {
				continue
			}
			if _, _, empty := volume(m.Name); !empty {
				t.Fatalf("volume %s of the forward socket is not an emptyDir", m.Name)
			}
			served = slices.ContainsFunc(s.Env, func(e struct{ Name, Value string }) bool {
				return e.Name == "SLUICE_UDS_DIR" && e.Value == fwd
			})
		}
	}
	if !served {
		t.Fatalf("no sidecar serves its map in %s, the --forward socket's directory, shared with the udf container", fwd)
	}
}

// renderPipeline runs `kubectl kustomize dir` and decodes the Numaflow
// Pipeline it prints.
func renderPipeline(t *testing.T, dir string) nfPipeline {
	t.Helper()
	out, err := exec.Command("kubectl", "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		var p nfPipeline
		decodeNode(t, &doc, &p)
		if p.Kind == "Pipeline" {
			return p
		}
	}
	t.Fatalf("kubectl kustomize %s rendered no Pipeline", dir)
	return nfPipeline{}
}

package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluiceflow/sluice/internal/kubetest"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// sinkPipeline is the Numaflow Pipeline whose sink vertex runs sluice's
// sink role.
const sinkPipeline = "numaflow"

// TestSinkPipelineServesSluice renders deploy/numaflow and checks that the
// Pipeline passes vertex validate's checks, that its vertex out runs
// `vertex serve --role sink` as its udsink container on a file its ConfigMap
// mounts, that the file validates, has a sink and shares its limit through
// the Redis Service beside it, whose password the container mounts where
// the file reads it.
func TestSinkPipelineServesSluice(t *testing.T) {
	objs := kubetest.Render(t, sinkPipeline)
	pl := objs.Get(t, "Pipeline", "sluice-sink")
	data, err := yaml.Marshal(map[string]any(pl))
	if err != nil {
		t.Fatal(err)
	}
	f, err := vertexconfig.Parse(data)
	if err != nil {
		t.Fatalf("Pipeline sluice-sink: %v", err)
	}
	var spec struct {
		Spec struct{ Vertices []sinkVertex }
	}
	pl.Decode(t, &spec)
	i := slices.IndexFunc(spec.Spec.Vertices, func(v sinkVertex) bool {
		return v.Name == "out"
	})
	if i < 0 || f.Pipeline.Vertex("out") == nil {
		t.Fatal("no vertex out")
	}
	v := spec.Spec.Vertices[i]
	c := v.Sink.UDSink.Container
	want := []string{"serve", "--role", "sink", "-f", "/etc/sluice/sink.yaml"}
	if !slices.Equal(c.Args, want) {
		t.Fatalf("out's udsink args %v; want %v", c.Args, want)
	}
	if c.Image != "sluice:dev" {
		t.Errorf("out's udsink image %q; want sluice:dev, sluice's image", c.Image)
	}
	mounted := map[string]string{} // mount path → ConfigMap or Secret
	for _, m := range c.VolumeMounts {
		for _, vol := range v.Volumes {
			if vol.Name == m.Name {
				mounted[m.MountPath] = vol.ConfigMap.Name + vol.Secret.SecretName
			}
		}
	}
	cmName := mounted["/etc/sluice"]
	if cmName == "" {
		t.Fatalf("out's udsink mounts no ConfigMap at /etc/sluice: %v", mounted)
	}
	// The Secret is base/redis's redis-auth, under the name with the hash
	// kustomize gives it.
	if secret := mounted["/var/numaflow/secrets/redis-auth"]; !strings.HasPrefix(secret, "redis-auth") {
		t.Errorf("out's udsink does not mount the Secret redis-auth at /var/numaflow/secrets/redis-auth: %v", mounted)
	} else {
		objs.Get(t, "Secret", secret)
	}
	var cm struct{ Data map[string]string }
	objs.Get(t, "ConfigMap", cmName).Decode(t, &cm)
	path := filepath.Join(t.TempDir(), "sink.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["sink.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	served, err := vertexconfig.Load(path)
	if err != nil {
		t.Fatalf("sink.yaml of ConfigMap %s: %v", cmName, err)
	}
	m := served.MonoVertex
	if m == nil || m.Spec.Sink == nil {
		t.Fatal("sink.yaml has no MonoVertex with a sink")
	}
	rl := m.Spec.Limits.GetRateLimit()
	if rl == nil || rl.Store == nil || rl.Store.RedisStore == nil || rl.Store.RedisStore.URL == nil || *rl.Store.RedisStore.URL != "redis://redis:6379" {
		t.Fatalf("sink.yaml's rate limit does not share through redis://redis:6379")
	}
	objs.Get(t, "Service", "redis")
	objs.Get(t, "Deployment", "redis")
}

// sinkVertex is what TestSinkPipelineServesSluice reads of a vertex.
type sinkVertex struct {
	Name    string
	Volumes []struct {
		Name      string
		ConfigMap struct{ Name string } `yaml:"configMap"`
		Secret    struct {
			SecretName string `yaml:"secretName"`
		}
	}
	Sink struct {
		UDSink struct {
			Container struct {
				Image        string
				Args         []string
				VolumeMounts []struct {
					Name      string
					MountPath string `yaml:"mountPath"`
				} `yaml:"volumeMounts"`
			}
		} `yaml:"udsink"`
	}
}

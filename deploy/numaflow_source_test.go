package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// TestNumaflowSourcePipeline checks deploy/numaflow/source-pipeline.yaml:
// the vertex "in" runs sluice's image as its udsource container, serving
// with `vertex serve --role source` a file that its volumes mount from the
// ConfigMap beside it; that file is valid sluice YAML whose source the role
// serves, its limit kept in Redis with the password of the mounted Secret.
func TestNumaflowSourcePipeline(t *testing.T) {
	data, err := os.ReadFile("numaflow/source-pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type mount struct {
		Name      string
		MountPath string `yaml:"mountPath"`
	}
	type volume struct {
		Name      string
		ConfigMap *struct{ Name string } `yaml:"configMap"`
		Secret    *struct {
			SecretName string `yaml:"secretName"`
		}
	}
	type doc struct {
		Kind     string
		Metadata struct{ Name string }
		Data     map[string]string
		Spec     struct {
			Vertices []struct {
				Name    string
				Volumes []volume
				Source  *struct {
					UDSource *struct {
						Container struct {
							Image        string
							Args         []string
							VolumeMounts []mount `yaml:"volumeMounts"`
						}
					} `yaml:"udsource"`
				}
			}
		}
	}
	var docs []doc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d doc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	if _, err := vertexconfig.Parse(pipelineDoc(t, data)); err != nil {
		t.Fatalf("the Pipeline is not valid sluice YAML: %v", err)
	}
	i := slices.IndexFunc(docs, func(d doc) bool { return d.Kind == "Pipeline" })
	if i < 0 || len(docs[i].Spec.Vertices) == 0 {
		t.Fatal("no Pipeline with vertices")
	}
	v := docs[i].Spec.Vertices[0]
	if v.Source == nil || v.Source.UDSource == nil {
		t.Fatalf("vertex %s has no udsource", v.Name)
	}
	c := v.Source.UDSource.Container
	if c.Image != "sluice:dev" || len(c.Args) != 5 || !slices.Equal(c.Args[:4], []string{"serve", "--role", "source", "-f"}) {
		t.Fatalf("udsource container %s %v; want sluice:dev serve --role source -f FILE", c.Image, c.Args)
	}
	file := c.Args[4]
	mountOf := func(dir string) *volume {
		for _, m := range c.VolumeMounts {
			if m.MountPath == dir {
				for _, vol := range v.Volumes {
					if vol.Name == m.Name {
						return &vol
					}
				}
			}
		}
		return nil
	}
	vol := mountOf(path.Dir(file))
	if vol == nil || vol.ConfigMap == nil {
		t.Fatalf("no ConfigMap volume mounted at %s", path.Dir(file))
	}
	j := slices.IndexFunc(docs, func(d doc) bool { return d.Kind == "ConfigMap" && d.Metadata.Name == vol.ConfigMap.Name })
	if j < 0 {
		t.Fatalf("no ConfigMap %s in the file", vol.ConfigMap.Name)
	}
	served, ok := docs[j].Data[path.Base(file)]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", vol.ConfigMap.Name, path.Base(file))
	}
	f, err := vertexconfig.Parse([]byte(served))
	if err != nil {
		t.Fatalf("the served file: %v", err)
	}
	m := f.MonoVertex
	if m == nil || m.Spec.Source == nil || m.Spec.Source.UDSource != nil {
		t.Fatal("the served file has no source the source role serves")
	}
	rl := m.Spec.Limits.RateLimit
	if rl == nil || rl.Store == nil || rl.Store.RedisStore == nil || rl.Store.RedisStore.URL == nil || *rl.Store.RedisStore.URL != "redis://redis:6379" {
		t.Fatal("the served file's limit is not kept in the Redis of deploy/base/redis (redis://redis:6379)")
	}
	if s := mountOf("/var/numaflow/secrets/redis-auth"); s == nil || s.Secret == nil || s.Secret.SecretName != "redis-auth" {
		t.Fatal("the Secret redis-auth is not mounted where sluice reads secrets")
	}
}

// pipelineDoc returns the Pipeline document of a multi-document file.
func pipelineDoc(t *testing.T, data []byte) []byte {
	for _, d := range bytes.Split(data, []byte("\n---\n")) {
		if bytes.Contains(d, []byte("kind: Pipeline")) {
			return d
		}
	}
	t.Fatal("no Pipeline document")
	return nil
}

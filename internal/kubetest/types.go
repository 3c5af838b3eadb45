package kubetest

import (
	"encoding/base64"
	"slices"
	"testing"
)

// The typed subsets below hold the fields tests check, with Kubernetes's
// names; decode an Object into one with Object.Decode.

// ObjectMeta is an object's metadata.
type ObjectMeta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// Deployment is an apps/v1 Deployment.
type Deployment struct {
	Metadata ObjectMeta `yaml:"metadata"`
	Spec     struct {
		Replicas *int32 `yaml:"replicas"`
		Strategy struct {
			Type string `yaml:"type"`
		} `yaml:"strategy"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata ObjectMeta `yaml:"metadata"`
			Spec     PodSpec    `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// PodSpec is a pod's spec.
type PodSpec struct {
	TerminationGracePeriodSeconds *int64      `yaml:"terminationGracePeriodSeconds"`
	HostNetwork                   bool        `yaml:"hostNetwork"`
	InitContainers                []Container `yaml:"initContainers"`
	Containers                    []Container `yaml:"containers"`
	Volumes                       []Volume    `yaml:"volumes"`
}

// Container returns the container (or init container) of that name, or nil.
func (s *PodSpec) Container(name string) *Container {
	for _, list := range [][]Container{s.InitContainers, s.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// Volume returns the volume of that name, or nil.
func (s *PodSpec) Volume(name string) *Volume {
	for i := range s.Volumes {
		if s.Volumes[i].Name == name {
			return &s.Volumes[i]
		}
	}
	return nil
}

// Container is a pod's container or init container.
type Container struct {
	Name          string   `yaml:"name"`
	Image         string   `yaml:"image"`
	Command       []string `yaml:"command"`
	Args          []string `yaml:"args"`
	RestartPolicy string   `yaml:"restartPolicy"`
	Env           []EnvVar `yaml:"env"`
	Ports         []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *Probe `yaml:"readinessProbe"`
	LivenessProbe  *Probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// EnvVar is a container's environment variable.
type EnvVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

// EnvVar returns the env entry of that name, or nil.
func (c *Container) EnvVar(name string) *EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// MountOf returns where the container mounts the volume, or "".
func (c *Container) MountOf(volume string) string {
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	return ""
}

// PortNumber resolves a probe's port (a number or a port's name) among the
// container's ports; 0 when it names no port.
func (c *Container) PortNumber(port any) int {
	switch p := port.(type) {
	case int:
		return p
	case string:
		for _, cp := range c.Ports {
			if cp.Name == p {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

// Probe is a container's probe.
type Probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
	TCPSocket *struct {
		Port any `yaml:"port"`
	} `yaml:"tcpSocket"`
}

// Volume is a pod's volume.
type Volume struct {
	Name     string `yaml:"name"`
	EmptyDir *struct {
		Medium string `yaml:"medium"`
	} `yaml:"emptyDir"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
	} `yaml:"secret"`
}

// ConfigMap is a v1 ConfigMap.
type ConfigMap struct {
	Metadata ObjectMeta        `yaml:"metadata"`
	Data     map[string]string `yaml:"data"`
}

// Secret is a v1 Secret.
type Secret struct {
	Metadata   ObjectMeta        `yaml:"metadata"`
	Data       map[string]string `yaml:"data"` // base64
	StringData map[string]string `yaml:"stringData"`
}

// Value returns the decoded value of a key of the secret, and whether it has
// the key.
func (s *Secret) Value(t testing.TB, key string) (string, bool) {
	t.Helper()
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	v, ok := s.Data[key]
	if !ok {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		t.Fatalf("Secret %s: data.%s is not base64: %v", s.Metadata.Name, key, err)
	}
	return string(b), true
}

// Service is a v1 Service.
type Service struct {
	Metadata ObjectMeta `yaml:"metadata"`
	Spec     struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// PodDisruptionBudget is a policy/v1 PodDisruptionBudget.
type PodDisruptionBudget struct {
	Metadata ObjectMeta `yaml:"metadata"`
	Spec     struct {
		MaxUnavailable any `yaml:"maxUnavailable"`
		MinAvailable   any `yaml:"minAvailable"`
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
	} `yaml:"spec"`
}

// Selects reports whether a selector's labels are all among labels (an empty
// selector selects nothing here: none of ours is meant to).
func Selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// HasArgs reports whether args contain want in order, next to each other.
func HasArgs(args []string, want ...string) bool {
	for i := range args {
		if len(args)-i >= len(want) && slices.Equal(args[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

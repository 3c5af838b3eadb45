package deploy_test

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluiceflow/sluice/internal/kubetest"
)

// monoVertexHPA is the kustomization of the MonoVertex scaled by a
// HorizontalPodAutoscaler on sluice_desired_replicas.
const monoVertexHPA = "overlays/monovertex-hpa"

// hpa is what the test reads of an autoscaling/v2 HorizontalPodAutoscaler.
type hpa struct {
	APIVersion string              `yaml:"apiVersion"`
	Metadata   kubetest.ObjectMeta `yaml:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Name       string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas *int64 `yaml:"minReplicas"`
		MaxReplicas int64  `yaml:"maxReplicas"`
		Metrics     []struct {
			Type     string `yaml:"type"`
			External *struct {
				Metric struct {
					Name     string `yaml:"name"`
					Selector struct {
						MatchLabels map[string]string `yaml:"matchLabels"`
					} `yaml:"selector"`
				} `yaml:"metric"`
				Target struct {
					Type         string `yaml:"type"`
					AverageValue string `yaml:"averageValue"`
				} `yaml:"target"`
			} `yaml:"external"`
		} `yaml:"metrics"`
	} `yaml:"spec"`
}

// adapterRules is what the test reads of prometheus-adapter's config.yaml.
type adapterRules struct {
	ExternalRules []struct {
		SeriesQuery string `yaml:"seriesQuery"`
		Resources   struct {
			Overrides map[string]struct {
				Resource string `yaml:"resource"`
			} `yaml:"overrides"`
		} `yaml:"resources"`
		Name struct {
			As string `yaml:"as"`
		} `yaml:"name"`
		MetricsQuery string `yaml:"metricsQuery"`
	} `yaml:"externalRules"`
}

// TestMonoVertexHPA checks the HPA overlay: the MonoVertex its pods run
// passes sluice's validation and has a scale block whose min and max are the
// HPA's; the HPA scales the Deployment that runs it, which leaves its replica
// count to the HPA, on the External metric sluice_desired_replicas of that
// vertex with a target average value of 1 (ceil(value / 1) replicas); and
// prometheus-adapter's rules serve that metric as the max over the
// vertex's replicas, by namespace.
func TestMonoVertexHPA(t *testing.T) {
	objs := kubetest.Render(t, monoVertexHPA)
	var d kubetest.Deployment
	objs.Get(t, "Deployment", mvDeployment).Decode(t, &d)
	pod := &d.Spec.Template.Spec
	numa := pod.Container("numa")
	if numa == nil {
		t.Fatalf("Deployment %s has no container numa", mvDeployment)
	}
	mv := mountedMonoVertex(t, objs, pod, numa)
	if mv.Spec.Scale == nil {
		t.Fatal("the MonoVertex has no scale block: its replicas would scale by Numaflow's defaults")
	}
	if rl := mv.Spec.Limits.GetRateLimit(); rl == nil || rl.Store == nil {
		t.Error("the MonoVertex's rate limit has no store: the replicas would not know how many they are")
	}
	if d.Spec.Replicas != nil {
		t.Errorf("the Deployment sets replicas: %d; the HPA owns the count", *d.Spec.Replicas)
	}

	var h hpa
	objs.Get(t, "HorizontalPodAutoscaler", mvDeployment).Decode(t, &h)
	if h.APIVersion != "autoscaling/v2" {
		t.Errorf("HPA apiVersion %q; want autoscaling/v2", h.APIVersion)
	}
	ref := h.Spec.ScaleTargetRef
	if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != d.Metadata.Name {
		t.Errorf("HPA scales %s %s/%s; want the Deployment %s", ref.APIVersion, ref.Kind, ref.Name, d.Metadata.Name)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas != max(mv.Spec.Scale.GetMin(), 1) || h.Spec.MaxReplicas != mv.Spec.Scale.GetMax() {
		t.Errorf("HPA replicas %v to %d; want the MonoVertex's scale.min %d (at least 1) to scale.max %d",
			h.Spec.MinReplicas, h.Spec.MaxReplicas, mv.Spec.Scale.GetMin(), mv.Spec.Scale.GetMax())
	}
	if len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Type != "External" || h.Spec.Metrics[0].External == nil {
		t.Fatalf("HPA metrics %+v; want one External metric", h.Spec.Metrics)
	}
	ext := h.Spec.Metrics[0].External
	if ext.Metric.Name != "sluice_desired_replicas" || len(ext.Metric.Selector.MatchLabels) != 1 ||
		ext.Metric.Selector.MatchLabels["vertex"] != mv.Metadata.Name {
		t.Errorf("HPA metric %s %v; want sluice_desired_replicas of vertex %s", ext.Metric.Name, ext.Metric.Selector.MatchLabels, mv.Metadata.Name)
	}
	if ext.Target.Type != "AverageValue" || ext.Target.AverageValue != "1" {
		t.Errorf("HPA target %+v; want an averageValue of 1, so that the HPA runs the count the metric says", ext.Target)
	}

	var cm kubetest.ConfigMap
	objs.Get(t, "ConfigMap", "sluice-adapter-rules").Decode(t, &cm)
	var rules adapterRules
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &rules); err != nil {
		t.Fatalf("sluice-adapter-rules config.yaml: %v", err)
	}
	if len(rules.ExternalRules) != 1 {
		t.Fatalf("%d external rules; want 1", len(rules.ExternalRules))
	}
	r := rules.ExternalRules[0]
	switch {
	case !strings.HasPrefix(r.SeriesQuery, "sluice_desired_replicas{") || !strings.Contains(r.SeriesQuery, `vertex!=""`):
		t.Errorf("seriesQuery %q; want sluice_desired_replicas with a vertex", r.SeriesQuery)
	case r.Name.As != ext.Metric.Name:
		t.Errorf("the rule serves %q; the HPA reads %q", r.Name.As, ext.Metric.Name)
	case r.Resources.Overrides["namespace"].Resource != "namespace":
		t.Errorf("overrides %v; want the label namespace as the namespace", r.Resources.Overrides)
	case r.MetricsQuery != "max(<<.Series>>{<<.LabelMatchers>>}) by (vertex)":
		t.Errorf("metricsQuery %q; want the max over the vertex's replicas", r.MetricsQuery)
	}
}

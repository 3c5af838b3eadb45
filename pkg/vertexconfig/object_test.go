package vertexconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
)

// readObject returns the MonoVertex object of testdata/numaflow compacted to
// one line, as Numaflow's controller writes it.
func readObject(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("../../config/testdata/numaflow/monovertex-object.json")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestParseMonoVertexObject reads a MonoVertex as Numaflow's controller puts it
// in its pods' env: no apiVersion or kind, nulls, Numaflow's defaults and a
// status block.
func TestParseMonoVertexObject(t *testing.T) {
	f, err := ParseMonoVertexObject(readObject(t))
	if err != nil {
		t.Fatal(err)
	}
	m := f.MonoVertex
	if f.Kind != config.KindMonoVertex || m.Kind != config.KindMonoVertex || m.APIVersion != config.APIVersion {
		t.Errorf("kind %q/%q, apiVersion %q; want those of a MonoVertex filled in", f.Kind, m.Kind, m.APIVersion)
	}
	if m.Metadata.Name != "orders" || m.Metadata.Namespace != "payments" || f.Name() != "orders" {
		t.Errorf("metadata = %+v", m.Metadata)
	}
	s := m.Spec
	if s.Replicas == nil || *s.Replicas != 0 {
		t.Errorf("replicas = %v; want 0", s.Replicas)
	}
	if c := s.Source.UDSource.Container; c.Image != "my/source:v1" || len(c.Env) != 1 || c.Env[0].Value != "info" {
		t.Errorf("udsource container = %+v", c)
	}
	if tr := s.Source.Transformer; tr.Container == nil || tr.Container.Image != "my/transformer:v1" {
		t.Errorf("transformer = %+v", tr)
	}
	if u := s.UDF; u.GroupBy != nil || u.Container == nil || u.Container.Image != "my/map:v1" {
		t.Errorf("udf = %+v; want a map container: groupBy null is no reduce", u)
	}
	if sk := s.Sink; sk.UDSink == nil || sk.Fallback == nil || sk.Fallback.Log == nil || sk.RetryStrategy == nil ||
		sk.RetryStrategy.Backoff != nil || sk.RetryStrategy.OnFailure != nil {
		t.Errorf("sink = %+v; want udsink, a log fallback and an empty retryStrategy", sk)
	}
	l := s.Limits
	if l.GetReadBatchSize() != 500 || l.GetReadTimeout() != time.Second || l.Concurrency == nil || *l.Concurrency != 500 {
		t.Errorf("limits = %+v", l)
	}
	if r := l.GetRateLimit(); r == nil || *r.Max != 100 || *r.Min != 10 || r.RampUpDuration.Duration != 10*time.Second ||
		r.Store.InMemoryStore == nil || r.Modes.Relaxed == nil {
		t.Errorf("rate limit = %+v", r)
	}
	if got := s.Scale.GetLookbackSeconds(); got != 120 {
		t.Errorf("scale.lookbackSeconds = %d, want 120", got)
	}
	checkIgnored(t, f.Ignored, []string{
		"spec.containerTemplate", "spec.updateStrategy", "spec.lifecycle", "status",
	})
}

// TestParseMonoVertexObjectHeader accepts apiVersion and kind when they are a
// MonoVertex's, and rejects any other kind or apiVersion.
func TestParseMonoVertexObjectHeader(t *testing.T) {
	obj := readObject(t)
	with := func(header string) []byte {
		return append([]byte("{"+header+","), obj[1:]...)
	}
	if _, err := ParseMonoVertexObject(with(`"apiVersion":"numaflow.numaproj.io/v1alpha1","kind":"MonoVertex"`)); err != nil {
		t.Errorf("with a MonoVertex's apiVersion and kind: %v", err)
	}
	for _, tt := range []struct{ header, want string }{
		{`"kind":"Pipeline"`, `kind ("Pipeline") must be MonoVertex`},
		{`"apiVersion":"v1"`, `apiVersion ("v1") must be numaflow.numaproj.io/v1alpha1`},
	} {
		_, err := ParseMonoVertexObject(with(tt.header))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("with %s: error %v; want %q", tt.header, err, tt.want)
		}
	}
}

// TestParseMonoVertexObjectErrors gets one clear error for each kind of bad
// object, without line numbers.
func TestParseMonoVertexObjectErrors(t *testing.T) {
	tests := []struct {
		name, data string
		want       []string
	}{
		{"empty", ``, []string{"not valid JSON: unexpected end of JSON input"}},
		{"YAML, not JSON", "metadata:\n  name: x\n", []string{"not valid JSON: invalid character 'm'"}},
		{"truncated", `{"metadata":{"name":"x"}`, []string{"not valid JSON"}},
		{"array", `[1,2]`, []string{"want a JSON object (a MonoVertex), got an array"}},
		{"null", `null`, []string{"want a JSON object (a MonoVertex), got null"}},
		{"no spec", `{"metadata":{"name":"x"},"status":{}}`, []string{"spec.source: is required", "spec.sink: is required"}},
		{"null sink", `{"metadata":{"name":"x"},"spec":{"source":{"generator":{}},"sink":null}}`,
			[]string{"spec.sink: is required; null sets nothing"}},
		{"bad field", `{"metadata":{"name":"x"},"spec":{"source":{"generator":{"rpu":"many"}},"sink":{"log":{}}}}`,
			[]string{`spec.source.generator.rpu: "many" is not a whole number`}},
		{"unknown field", `{"metadata":{"name":"x"},"spec":{"source":{"generatr":{}},"sink":{"log":{}}}}`,
			[]string{`unknown field "generatr"; did you mean "generator"?`}},
		{"bad name", `{"metadata":{"name":"X_1"},"spec":{"source":{"generator":{}},"sink":{"log":{}}}}`,
			[]string{`metadata.name ("X_1") must be lowercase`}},
		{"reduce", `{"metadata":{"name":"x"},"spec":{"source":{"generator":{}},"udf":{"container":{"image":"r"},"groupBy":{"window":{"fixed":{"length":"60s"}}}},"sink":{"log":{}}}}`,
			[]string{"spec.udf.groupBy: a MonoVertex has no reduce"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMonoVertexObject([]byte(tt.data))
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T); want a *config.Error", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "(line ") {
				t.Errorf("error %q names a line of a one-line object", err)
			}
		})
	}
}

package vertexconfig_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestParseMonoVertexEnv decodes the value of NUMAFLOW_MONO_VERTEX_OBJECT, and
// names the variable in every error, which wraps what went wrong.
func TestParseMonoVertexEnv(t *testing.T) {
	const object = `{"metadata":{"name":"gen"},"spec":{"source":{"generator":{"rpu":100}},"sink":{"log":{}},` +
		`"limits":{"rateLimit":{"max":20}},"scale":{"lookbackSeconds":120}},"status":{"replicas":0}}`
	for _, value := range []string{b64(object), " " + b64(object) + "\n"} {
		f, err := vertexconfig.ParseMonoVertexEnv(value)
		if err != nil {
			t.Fatalf("%q: %v", value, err)
		}
		if m := f.MonoVertex; f.Name() != "gen" || m.Spec.Source.Generator == nil || *m.Spec.Limits.GetRateLimit().Max != 20 {
			t.Errorf("%q: MonoVertex = %+v", value, m)
		}
	}

	var ce *config.Error
	var be base64.CorruptInputError
	for _, tt := range []struct {
		name, value string
		want        string
		as          any
	}{
		{"not base64", "not base64!",
			`NUMAFLOW_MONO_VERTEX_OBJECT ("not base64!") is not standard base64: illegal base64 data at input byte 3`, &be},
		{"URL base64", base64.URLEncoding.EncodeToString([]byte(`{"a":"?>?>"}`)),
			`NUMAFLOW_MONO_VERTEX_OBJECT ("eyJhIjoiPz4_PiJ9") is not standard base64: illegal base64 data at input byte 11`, &be},
		{"long value cut", b64(strings.Repeat("x", 100)),
			`NUMAFLOW_MONO_VERTEX_OBJECT ("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"...) is not a MonoVertex once base64-decoded: not valid JSON: invalid character 'x' looking for beginning of value`, &ce},
		{"not an object", b64(`"gen"`),
			`NUMAFLOW_MONO_VERTEX_OBJECT ("\"gen\"") is not a MonoVertex once base64-decoded: want a JSON object (a MonoVertex), got a string`, &ce},
		{"invalid spec", b64(`{"metadata":{"name":"gen"},"spec":{"source":{"generator":{"rpu":0}},"sink":null},"status":{}}`),
			"NUMAFLOW_MONO_VERTEX_OBJECT: 2 problem(s) in the MonoVertex:\n" +
				"spec.source.generator.rpu (0) must be at least 1\nspec.sink: is required; null sets nothing", &ce},
		{"a pipeline", b64(`{"kind":"Pipeline","metadata":{"name":"p"},"spec":{}}`),
			"NUMAFLOW_MONO_VERTEX_OBJECT: 3 problem(s) in the MonoVertex:\n" +
				`kind ("Pipeline") must be MonoVertex` + "\nspec.source: is required\nspec.sink: is required", &ce},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := vertexconfig.ParseMonoVertexEnv(tt.value)
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tt.want {
				t.Errorf("error %q\nwant %q", err, tt.want)
			}
			if !errors.As(err, tt.as) {
				t.Errorf("error %v does not wrap a %T", err, tt.as)
			}
		})
	}
}

package main

import (
	"bytes"
	"encoding/base64"
	"os"
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// numaflowObject is a MonoVertex as Numaflow's controller serialises it for
// its pods: no apiVersion or kind, null on unset fields without omitempty,
// its defaults filled in, an empty status.
const numaflowObject = `{"metadata":{"name":"gen","namespace":"default","creationTimestamp":null},` +
	`"spec":{"replicas":0,"source":{"generator":{"rpu":100,"duration":"1s","msgSize":8}},` +
	`"sink":{"log":{},"retryStrategy":{}},` +
	`"udf":{"container":{"image":"quay.io/numaio/numaflow-go/map-cat:stable","resources":{}},"groupBy":null},` +
	`"limits":{"readBatchSize":500,"readTimeout":"1s","rateLimit":{"max":20,"min":5,"rampUpDuration":"5s"},"concurrency":500},` +
	`"scale":{"lookbackSeconds":120},"updateStrategy":{},"lifecycle":{}},` +
	`"status":{"replicas":0,"desiredReplicas":0,"lastUpdated":null,"lastScaledAt":null}}`

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestMonoVertexFromEnv decodes the env of a MonoVertex pod, and names the
// variable in every error, which is the user's to fix (exit code 2).
func TestMonoVertexFromEnv(t *testing.T) {
	f, err := monoVertexFromEnv(b64(numaflowObject))
	if err != nil {
		t.Fatal(err)
	}
	m := f.MonoVertex
	if m.Metadata.Name != "gen" || m.Spec.Source.Generator == nil || m.Spec.UDF.Container == nil || m.Spec.UDF.GroupBy != nil ||
		m.Spec.Sink.Log == nil || *m.Spec.Limits.GetRateLimit().Max != 20 {
		t.Errorf("MonoVertex = %+v", m)
	}
	// Whitespace around the value, as a hand-written manifest may leave, is not
	// part of it.
	if _, err := monoVertexFromEnv(" " + b64(numaflowObject) + "\n"); err != nil {
		t.Errorf("with whitespace around: %v", err)
	}

	tests := []struct {
		name, value string
		want        []string
	}{
		{"missing", "", []string{"NUMAFLOW_MONO_VERTEX_OBJECT is not set", "vertex run -f FILE"}},
		{"not base64", "not base64!", []string{`NUMAFLOW_MONO_VERTEX_OBJECT ("not base64!") is not standard base64: illegal base64 data at input byte 3`}},
		{"URL base64", base64.URLEncoding.EncodeToString([]byte(`{"a":"?>?>"}`)), []string{"is not standard base64"}},
		{"not JSON", b64("metadata:\n  name: gen\n"), []string{
			`NUMAFLOW_MONO_VERTEX_OBJECT ("metadata:\n  name: gen\n") is not a MonoVertex once base64-decoded: not valid JSON: invalid character 'm'`}},
		{"long value cut", b64(strings.Repeat("x", 100)), []string{`("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"...) is not a MonoVertex`}},
		{"not an object", b64(`"gen"`), []string{"NUMAFLOW_MONO_VERTEX_OBJECT", `want a JSON object (a MonoVertex), got a string`}},
		{"invalid spec", b64(`{"metadata":{"name":"gen"},"spec":{"source":{"generator":{"rpu":0}},"sink":null},"status":{}}`), []string{
			"NUMAFLOW_MONO_VERTEX_OBJECT: 2 problem(s) in the MonoVertex:",
			"spec.source.generator.rpu (0) must be at least 1", "spec.sink: is required; null sets nothing"}},
		{"a pipeline", b64(`{"kind":"Pipeline","metadata":{"name":"p"},"spec":{}}`), []string{
			"NUMAFLOW_MONO_VERTEX_OBJECT", `kind ("Pipeline") must be MonoVertex`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := monoVertexFromEnv(tt.value)
			if err == nil {
				t.Fatal("no error")
			}
			if !cli.IsUsage(err) {
				t.Errorf("%v is not a usage error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestProcessorCommandLine runs `processor` with a bad or missing env and bad
// flags: exit code 2 and one message that names what to fix.
func TestProcessorCommandLine(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantCode  int
		wantError string
	}{
		{"no env", nil, nil, 2, "NUMAFLOW_MONO_VERTEX_OBJECT is not set"},
		{"bad base64", map[string]string{vertexconfig.EnvMonoVertexObject: "%%%"}, nil, 2, `NUMAFLOW_MONO_VERTEX_OBJECT ("%%%") is not standard base64`},
		{"a pipeline vertex's pod", map[string]string{vertexconfig.EnvVertexObject: b64(`{}`)}, []string{"--type=source", "--isbsvc-type=jetstream"}, 2,
			"NUMAFLOW_MONO_VERTEX_OBJECT is not set and NUMAFLOW_VERTEX_OBJECT is: this is the pod of a pipeline's vertex"},
		{"bad replica", map[string]string{vertexconfig.EnvMonoVertexObject: b64(numaflowObject), "NUMAFLOW_REPLICA": "one"}, nil, 2,
			`NUMAFLOW_REPLICA ("one") must be a whole number`},
		{"bad read-ahead", map[string]string{vertexconfig.EnvMonoVertexObject: b64(numaflowObject), vertexconfig.EnvReadAhead: "maybe"},
			[]string{"--runtime-addr", "127.0.0.1:0", "--runtime-errors-dir", os.TempDir()}, 2,
			`NUMAFLOW_READ_AHEAD ("maybe"): want true or false`},
		{"unknown flag", map[string]string{vertexconfig.EnvMonoVertexObject: b64(numaflowObject)}, []string{"--type=source"}, 2,
			"processor: flag provided but not defined: -type"},
		{"bad log level", map[string]string{vertexconfig.EnvMonoVertexObject: b64(numaflowObject)}, []string{"--log-level", "loud"}, 2,
			`--log-level ("loud") must be debug, info, warn or error`},
		{"help", nil, []string{"-h"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(vertexconfig.EnvMonoVertexObject, "")
			t.Setenv(vertexconfig.EnvVertexObject, "")
			t.Setenv("NUMAFLOW_REPLICA", "")
			t.Setenv(vertexconfig.EnvReadAhead, "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var out, errOut bytes.Buffer
			code := run(append([]string{"processor"}, tt.args...), &out, &errOut)
			if code != tt.wantCode {
				t.Fatalf("exit code %d; want %d; stderr:\n%s", code, tt.wantCode, errOut.String())
			}
			if tt.wantError != "" && !strings.Contains(errOut.String(), tt.wantError) {
				t.Errorf("stderr %q; want it to contain %q", errOut.String(), tt.wantError)
			}
			if tt.wantCode == 0 && !strings.Contains(out.String(), "usage: numaflow-rs processor") {
				t.Errorf("help %q", out.String())
			}
		})
	}
}

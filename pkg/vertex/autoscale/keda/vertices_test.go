package keda_test

import (
	"strings"
	"testing"

	"github.com/sluiceflow/sluice/pkg/vertex/autoscale/keda"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

func TestVertices(t *testing.T) {
	mono, err := vertexconfig.Load("../../../../config/examples/monovertex.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := vertexconfig.Load("../../../../config/examples/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vs, err := keda.Vertices(mono, []string{"a:1,b:2", "c:3"}, []string{"25"})
	if err != nil || len(vs) != 1 || strings.Join(vs[0].Status, " ") != "a:1 b:2 c:3" || vs[0].Scale.ReplicaRate != 25 {
		t.Fatalf("Vertices of a MonoVertex: %+v, %v", vs, err)
	}
	vs, err = keda.Vertices(pipe, []string{"in=a:1", "out=b:2"}, []string{"out=7"})
	if err != nil || len(vs) != 2 || vs[0].Name != "in" || vs[1].Name != "out" || vs[1].Scale.ReplicaRate != 7 || vs[0].Scale.ReplicaRate != 0 {
		t.Fatalf("Vertices of a pipeline: %+v, %v", vs, err)
	}
	for _, tc := range []struct {
		name          string
		pipeline      bool
		status, rates []string
		want          string
	}{
		{"no status", false, nil, nil, "--status is required"},
		{"no port", false, []string{"a"}, nil, `--status ("a"): "a" is not HOST:PORT`},
		{"empty host", false, []string{":1"}, nil, `":1" is not HOST:PORT`},
		{"pipeline without vertex", true, []string{"a:1"}, nil, `--status ("a:1") needs VERTEX= for a pipeline (vertices: in, even, out)`},
		{"unknown vertex", true, []string{"x=a:1"}, nil, `"x" is not a vertex of the file`},
		{"rate zero", false, []string{"a:1"}, []string{"0"}, `--replica-rate ("0"): "0" must be a number`},
		{"rate text", false, []string{"a:1"}, []string{"fast"}, `--replica-rate ("fast")`},
		{"rate of a vertex without status", true, []string{"in=a:1"}, []string{"out=3"}, `vertex "out" has no --status`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mono
			if tc.pipeline {
				f = pipe
			}
			_, err := keda.Vertices(f, tc.status, tc.rates)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Vertices: %v; want %q", err, tc.want)
			}
		})
	}
}

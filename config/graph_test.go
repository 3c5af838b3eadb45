package config

import (
	"strings"
	"testing"
)

// TestOneGraph checks the shape of a pipeline's graph as Numaflow's
// controller does: vertices that no edge joins to the rest are a problem,
// one for each group of them; vertices joined to the rest that no source
// reaches, which Numaflow accepts, are one warning.
func TestOneGraph(t *testing.T) {
	pipeline := func(vertices, edges string) string {
		return "apiVersion: numaflow.numaproj.io/v1alpha1\nkind: Pipeline\nmetadata:\n  name: p\nspec:\n  vertices:\n" + vertices + "  edges:\n" + edges
	}
	const (
		in  = "    - {name: in, source: {generator: {}}}\n"
		out = "    - {name: out, sink: {log: {}}}\n"
	)
	udf := func(name string) string { return "    - {name: " + name + ", udf: {builtin: {name: cat}}}\n" }
	edge := func(from, to string) string { return "    - {from: " + from + ", to: " + to + "}\n" }
	for _, tt := range []struct {
		name, yaml     string
		want, warnings []string
	}{
		{"a cycle", pipeline(in+udf("m")+out, edge("in", "m")+edge("m", "m")+edge("m", "out")), nil, nil},
		{"a cycle no edge joins", pipeline(in+udf("a")+udf("b")+out, edge("in", "out")+edge("a", "b")+edge("b", "a")),
			[]string{`spec.vertices[1]: vertices "a" and "b" are joined by no edge to the graph of vertex "in": a pipeline is one connected graph, ` +
				`as Numaflow requires; join them by an edge, or give them a pipeline of their own (line 8)`}, nil},
		{"a loop no edge joins", pipeline(in+udf("a")+out, edge("in", "out")+edge("a", "a")),
			[]string{`spec.vertices[1]: vertex "a" is joined by no edge to the graph of vertex "in"`}, nil},
		{"two pipelines in one", pipeline(in+out+"    - {name: in2, source: {generator: {}}}\n    - {name: out2, sink: {log: {}}}\n",
			edge("in", "out")+edge("in2", "out2")),
			[]string{`spec.vertices[2]: vertices "in2" and "out2" are joined by no edge to the graph of vertex "in"`}, nil},
		{"two groups no edge joins", pipeline(in+udf("a")+out+udf("b")+udf("c"), edge("in", "out")+edge("a", "a")+edge("b", "c")+edge("c", "b")),
			[]string{`spec.vertices[1]: vertex "a" is joined by no edge`, `spec.vertices[3]: vertices "b" and "c" are joined by no edge`}, nil},
		{"a cycle no source reaches", pipeline(in+udf("m")+udf("a")+udf("b")+out, edge("in", "m")+edge("m", "out")+edge("a", "b")+edge("b", "a")+edge("a", "m")),
			nil, []string{`spec.vertices[2]: no source reaches vertices "a" and "b": they never get a message (Numaflow accepts such a pipeline) (line 9)`}},
		{"a loop no source reaches", pipeline(in+udf("a")+out, edge("in", "out")+edge("a", "a")+edge("a", "out")),
			nil, []string{`spec.vertices[1]: no source reaches vertex "a": it never gets a message (Numaflow accepts such a pipeline)`}},
		{"a vertex without edges", pipeline(udf("x")+in+out, edge("in", "out")),
			[]string{`spec.vertices[0]: udf "x" needs incoming and outgoing edges`}, nil},
		{"an edge to no vertex", pipeline(in+udf("a")+out, edge("in", "out")+edge("a", "nowhere")),
			[]string{`spec.vertices[1]: udf "a" needs incoming and outgoing edges`, `spec.edges[1].to ("nowhere") is not a vertex of the pipeline`}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantProblems(t, problems(t, tt.yaml), tt.want)
			if tt.want != nil {
				return
			}
			f, err := Parse([]byte(tt.yaml), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range f.Warnings {
				got = append(got, w.String())
			}
			if len(got) != len(tt.warnings) {
				t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.warnings, "\n"))
			}
			for i, w := range tt.warnings {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("warning %d: %q; want it to start with %q", i, got[i], w)
				}
			}
		})
	}
}

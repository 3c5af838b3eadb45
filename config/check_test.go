package config

import (
	"errors"
	"strings"
	"testing"
)

const checkedMonoVertex = `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: checked
spec:
  source:
    generator: {}
  udf:
    builtin:
      name: no-such-function
  sink:
    log: {}
`

// TestChecksRunAfterTheSchema: Parse checks the schema alone, and reports
// the problems of the checks it is given at their path and line, in line
// order with the schema's.
func TestChecksRunAfterTheSchema(t *testing.T) {
	if _, err := Parse([]byte(checkedMonoVertex), nil); err != nil {
		t.Fatalf("the schema alone: %v", err)
	}
	check := func(f *File, r Reporter) {
		r.Add("spec.udf.builtin.name", "(%q) is not a built-in", f.MonoVertex.Spec.UDF.Builtin.Name)
		r.Add("spec.source", "says the check")
	}
	bad := strings.Replace(checkedMonoVertex, "name: checked", "name: Checked", 1)
	_, err := Parse([]byte(bad), check)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse = %v; want an *Error", err)
	}
	var got []string
	for _, p := range ce.Problems {
		got = append(got, p.String())
	}
	want := []string{
		`metadata.name ("Checked") must be lowercase letters, digits and '-', start with a letter and be at most 63 characters (line 4)`,
		`spec.source: says the check (line 6)`,
		`spec.udf.builtin.name ("no-such-function") is not a built-in (line 10)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

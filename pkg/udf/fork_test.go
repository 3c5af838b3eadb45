package udf_test

import (
	"testing"

	"github.com/sluiceflow/sluice/pkg/udf"
)

func TestBuiltinsFork(t *testing.T) {
	var ms []udf.Mapper
	for name, args := range map[string]map[string]string{"cat": nil, "filter": {"expression": "payload != 'x'"}} {
		m, err := udf.NewBuiltin(name, args, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ms = append(ms, m)
	}
	for name, args := range map[string]map[string]string{
		"eventTimeExtractor":   {"expression": "payload"},
		"timeExtractionFilter": {"filterExpr": "payload != 'x'", "eventTimeExpr": "payload"},
	} {
		m, err := udf.NewBuiltinTransformer(name, args, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		f, ok := m.(udf.Forker)
		if !ok || f.Fork() == nil {
			t.Fatalf("built-in %T does not fork", m)
		}
	}
}

package config

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ParseMonoVertexObject decodes and validates a MonoVertex as Numaflow's
// controller hands it to the pods of a MonoVertex (in NUMAFLOW_MONO_VERTEX_OBJECT,
// once base64-decoded): JSON with metadata, spec and status, without
// apiVersion and kind, with null on the fields Numaflow leaves unset
// ("groupBy": null) and its defaults filled in (replicas 0, readTimeout "1s",
// concurrency, scale.lookbackSeconds, empty updateStrategy and lifecycle).
//
// apiVersion and kind, when present, must be a MonoVertex's. The status and
// every Kubernetes-only field are accepted and listed in File.Ignored, as
// [Parse] does, and check (nil: none) runs after the schema's. Problems carry no line: the object is one line of JSON.
func ParseMonoVertexObject(data []byte, check Check) (*File, error) {
	var probe any
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, &Error{Problems: []Problem{{Msg: "not valid JSON: " + err.Error()}}}
	}
	if _, ok := probe.(map[string]any); !ok {
		return nil, &Error{Problems: []Problem{{Msg: fmt.Sprintf("want a JSON object (a MonoVertex), got %s", jsonKind(probe))}}}
	}
	// JSON is YAML: the same decoder reads it, with the same checks and the
	// same meaning of null.
	root, err := decodeRoot(data)
	if err != nil {
		return nil, err
	}
	f := &File{Kind: KindMonoVertex, MonoVertex: &MonoVertex{}}
	problems := f.decodeInto(root, f.MonoVertex)
	m := f.MonoVertex
	switch m.Kind {
	case "":
		m.Kind = KindMonoVertex
	case KindMonoVertex:
	default:
		problems = append(problems, Problem{Path: "kind", Msg: fmt.Sprintf("(%q) must be MonoVertex", m.Kind)})
	}
	if m.APIVersion == "" {
		m.APIVersion = APIVersion
	}
	f, err = f.check(problems, check)
	var ce *Error
	if errors.As(err, &ce) {
		for i := range ce.Problems {
			ce.Problems[i].Line = 0
		}
	}
	return f, err
}

// jsonKind names the kind of a decoded JSON value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

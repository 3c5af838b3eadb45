package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// File is a loaded and validated config: a MonoVertex or a Pipeline.
type File struct {
	Kind       string
	MonoVertex *MonoVertex
	Pipeline   *Pipeline
	// Ignored lists the paths of the Kubernetes-only fields the file sets, which
	// sluice accepts and ignores.
	Ignored []string
	// Warnings are what the file allows that is likely a mistake, such as
	// vertices that no source reaches, in line order: vertex validate prints
	// them and vertex run logs them.
	Warnings []Problem

	lines map[string]int
	nulls map[string]bool
}

// Name returns the object's metadata.name.
func (f *File) Name() string {
	if f.MonoVertex != nil {
		return f.MonoVertex.Metadata.Name
	}
	return f.Pipeline.Metadata.Name
}

// Check is a validation of a decoded config beyond what its schema says, by
// a package that knows the runtime the config is for: a built-in function's
// name and arguments, a Kafka client's properties, the rate limiter's own
// rules. It reports each problem with [Reporter.Add], at the field's path;
// the problem gets the line of that path.
type Check func(f *File, r Reporter)

// Reporter collects the problems a [Check] finds.
type Reporter struct{ c *checker }

// Add records a problem at path: format and args say what is wrong. A
// message that starts with "(" is the field's value ("(50) > max (10)") and
// follows the path with a space, any other with a colon.
func (r Reporter) Add(path, format string, args ...any) { r.c.add(path, format, args...) }

// Load reads, decodes and validates the config in path, with the schema's
// checks and then check (nil: the schema's alone). Every problem is reported
// together in an [*Error].
func Load(path string, check Check) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data, check)
	var ce *Error
	if errors.As(err, &ce) {
		ce.File = path
	}
	return f, err
}

// Parse decodes and validates a config, with the schema's checks and then
// check (nil: the schema's alone). Problems are reported in line order.
//
// The schema's checks are what this package knows: required fields, ranges,
// one kind of source, a graph that connects. A caller that runs the config
// validates it with the runtime's check too: the package that turns a config
// into a vertex (pkg/vertexconfig) has a Parse and a Load that pass it.
func Parse(data []byte, check Check) (*File, error) {
	f, decodeProblems, err := decodeFile(data)
	if err != nil {
		return nil, err
	}
	return f.check(decodeProblems, check)
}

// check validates a decoded file and returns it, or every problem, the
// decoder's first, in line order.
func (f *File) check(decodeProblems []Problem, check Check) (*File, error) {
	problems := decodeProblems
	for _, p := range f.validate(check) {
		// A field that could not be decoded is reported once, not again as missing.
		if !underAny(p.Path, decodeProblems) {
			problems = append(problems, p)
		}
	}
	byLine := func(a, b Problem) int { return a.Line - b.Line }
	if len(problems) > 0 {
		slices.SortStableFunc(problems, byLine)
		return nil, &Error{Problems: problems}
	}
	slices.SortStableFunc(f.Warnings, byLine)
	return f, nil
}

func underAny(path string, problems []Problem) bool {
	for _, p := range problems {
		if path == p.Path || strings.HasPrefix(path, p.Path+".") || strings.HasPrefix(path, p.Path+"[") {
			return true
		}
	}
	return false
}

// decodeFile decodes a config without validating it. It returns the problems of
// fields it could not decode beside the file decoded from the rest, or an error
// when the file cannot be decoded at all.
func decodeFile(data []byte) (*File, []Problem, error) {
	root, err := decodeRoot(data)
	if err != nil {
		return nil, nil, err
	}
	var kind string
	kindLine := root.Line
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "kind" {
			kind, kindLine = root.Content[i+1].Value, root.Content[i].Line
		}
	}
	f := &File{Kind: kind}
	var target any
	switch kind {
	case KindMonoVertex:
		f.MonoVertex = &MonoVertex{}
		target = f.MonoVertex
	case KindPipeline:
		f.Pipeline = &Pipeline{}
		target = f.Pipeline
	case "":
		return nil, nil, &Error{Problems: []Problem{{Path: "kind", Line: kindLine, Msg: "is missing (want MonoVertex or Pipeline)"}}}
	default:
		return nil, nil, &Error{Problems: []Problem{{Path: "kind", Line: kindLine, Msg: fmt.Sprintf("(%q) must be MonoVertex or Pipeline", kind)}}}
	}
	return f, f.decodeInto(root, target), nil
}

// decodeInto decodes root into target, the file's MonoVertex or Pipeline, and
// returns the problems of the fields it could not decode.
func (f *File) decodeInto(root *yaml.Node, target any) []Problem {
	d := &decoder{lines: map[string]int{}, nulls: map[string]bool{}}
	d.decode(root, reflect.ValueOf(target).Elem(), "")
	f.Ignored, f.lines, f.nulls = d.ignored, d.lines, d.nulls
	return d.problems
}

// decodeRoot parses data as one YAML document holding an object, and returns
// that object's node.
func decodeRoot(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Problems: []Problem{{Msg: "the file is empty"}}}
		}
		return nil, &Error{Problems: []Problem{{Msg: "not valid YAML: " + trimYAMLPrefix(err.Error())}}}
	}
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &Error{Problems: []Problem{{Msg: "not valid YAML: " + trimYAMLPrefix(err.Error())}}}
		}
		if len(extra.Content) > 0 && !isNull(extra.Content[0]) {
			return nil, &Error{Problems: []Problem{{Line: extra.Line, Msg: "the file holds more than one YAML document; give one object per file"}}}
		}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{Problems: []Problem{{Line: root.Line, Msg: "want a MonoVertex or Pipeline object"}}}
	}
	return root, nil
}

func trimYAMLPrefix(s string) string {
	return string(bytes.TrimPrefix([]byte(s), []byte("yaml: ")))
}

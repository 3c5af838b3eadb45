package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a config: where, on which line, and what.
type Problem struct {
	Path string // spec.limits.rateLimit.max
	Line int    // 0 when unknown
	Msg  string
}

func (p Problem) String() string {
	s := p.Msg
	if p.Path != "" {
		s = p.Path + ": " + p.Msg
		if strings.HasPrefix(p.Msg, "(") {
			s = p.Path + " " + p.Msg
		}
	}
	if p.Line > 0 {
		s += fmt.Sprintf(" (line %d)", p.Line)
	}
	return s
}

// Error is every problem found in a config, in the order found.
type Error struct {
	File     string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		if e.File != "" {
			b.WriteString(e.File + ": ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// decoder turns a YAML node tree into config structs, checking every field name
// against the types: unknown fields are problems, Kubernetes-only ones are noted.
//
// A null value (null, ~, or nothing after the colon) sets nothing, at any depth
// and for every type: the field keeps its zero value, as when it is absent. That
// is what Kubernetes does, and Numaflow writes its unset fields that lack
// omitempty as null ("groupBy": null, "sideInputs": null), so an object read
// back from the API server loads as it was written.
type decoder struct {
	problems []Problem
	ignored  []string
	lines    map[string]int  // the line of every path decoded
	nulls    map[string]bool // the paths given null, to explain what they did not set
}

var (
	k8sType         = reflect.TypeFor[K8s]()
	unsupportedType = reflect.TypeFor[Unsupported]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.problems = append(d.problems, Problem{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// decode stores n into v, which is addressable.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if d.lines != nil {
		d.lines[path] = n.Line
	}
	if isNull(n) {
		if d.nulls != nil {
			d.nulls[path] = true
		}
		return
	}
	t := v.Type()
	switch {
	case t == k8sType:
		d.ignored = append(d.ignored, path)
		return
	case t == unsupportedType:
		v.Set(reflect.ValueOf(Unsupported{set: true}))
		return
	}
	if t.Kind() == reflect.Pointer {
		if v.IsNil() {
			// A value that fails to decode leaves the field unset rather than zero,
			// so that validation does not judge a value the file never gave.
			elem, before := reflect.New(t.Elem()), len(d.problems)
			d.decode(n, elem.Elem(), path)
			if len(d.problems) == before || (t.Elem().Kind() == reflect.Struct && !t.Implements(textType)) {
				v.Set(elem)
			}
			return
		}
		d.decode(n, v.Elem(), path)
		return
	}
	if reflect.PointerTo(t).Implements(textType) {
		d.decodeText(n, v, path)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	default:
		d.decodeScalar(n, v, path)
	}
}

// fieldIndex maps YAML names to field index paths, following inline fields.
func fieldIndex(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" {
			for k, idx := range fieldIndex(f.Type) {
				out[k] = append([]int{i}, idx...)
			}
			continue
		}
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out[name] = []int{i}
	}
	return out
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "want an object, got %s", describe(n))
		return
	}
	fields := fieldIndex(v.Type())
	seen := map[string]bool{}
	// Merge keys (<<: *anchor) come first, so that the mapping's own keys win.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, val := n.Content[i], n.Content[i+1]; k.Tag == "!!merge" {
			d.decodeMerge(val, v, path)
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		name := k.Value
		if k.Tag == "!!merge" {
			continue
		}
		fpath := join(path, name)
		if seen[name] {
			d.fail(fpath, k, "set twice")
			continue
		}
		seen[name] = true
		idx, ok := fields[name]
		if !ok {
			d.fail(fpath, k, "unknown field %q%s", name, suggest(name, fields))
			continue
		}
		d.decode(val, v.FieldByIndex(idx), fpath)
		if d.lines != nil {
			d.lines[fpath] = k.Line // report a field on its key's line
		}
	}
}

// decodeMerge decodes the mapping (or list of mappings) of a merge key into v.
func (d *decoder) decodeMerge(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch {
	case n.Kind == yaml.SequenceNode:
		for _, item := range n.Content {
			d.decodeMerge(item, v, path)
		}
	case !isNull(n):
		d.decodeStruct(n, v, path)
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.fail(path, n, "want a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode || v.Type().Key().Kind() != reflect.String {
		d.fail(path, n, "want an object, got %s", describe(n))
		return
	}
	m := reflect.MakeMap(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			d.fail(join(path, k.Value), k, "set twice")
			continue
		}
		seen[k.Value] = true
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, elem, join(path, k.Value))
		m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
	}
	v.Set(m)
}

func (d *decoder) decodeText(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(path, n, "want a value, got %s", describe(n))
		return
	}
	if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
		if _, isDuration := v.Addr().Interface().(*Duration); isDuration {
			if errors.Is(err, ErrDurationRange) {
				d.fail(path, n, "(%q) is %v", n.Value, err)
				return
			}
			d.fail(path, n, "%q is not a duration (write it like 1s, 500ms or 1m30s)", n.Value)
			return
		}
		d.fail(path, n, "(%q): %v", n.Value, err)
	}
}

func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(path, n, "want a value, got %s", describe(n))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(n.Value)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if err != nil || n.Tag != "!!bool" {
			d.fail(path, n, "%q is not true or false", n.Value)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(n.Value, 0, v.Type().Bits())
		if err != nil || n.Tag != "!!int" {
			d.fail(path, n, "%q is not a whole number%s", n.Value, rangeHint(err))
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if strings.HasPrefix(n.Value, "-") && n.Tag == "!!int" {
			d.fail(path, n, "(%s) must not be negative", n.Value)
			return
		}
		u, err := strconv.ParseUint(n.Value, 0, v.Type().Bits())
		if err != nil || n.Tag != "!!int" {
			d.fail(path, n, "%q is not a whole number%s", n.Value, rangeHint(err))
			return
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(n.Value, v.Type().Bits())
		if err != nil || (n.Tag != "!!float" && n.Tag != "!!int") {
			d.fail(path, n, "%q is not a number", n.Value)
			return
		}
		v.SetFloat(f)
	default:
		d.fail(path, n, "cannot hold %s", describe(n))
	}
}

func rangeHint(err error) string {
	var ne *strconv.NumError
	if err != nil && errors.As(err, &ne) && ne.Err == strconv.ErrRange {
		return " in range"
	}
	return ""
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	default:
		return strconv.Quote(n.Value)
	}
}

// suggest proposes the known field closest to a misspelt one.
func suggest(name string, fields map[string][]int) string {
	best, bestDist := "", 3
	for k := range fields {
		if dist := editDistance(strings.ToLower(name), strings.ToLower(k)); dist < bestDist || (dist == bestDist && best != "" && k < best) {
			best, bestDist = k, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

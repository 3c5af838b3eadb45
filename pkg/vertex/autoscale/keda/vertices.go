package keda

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// Vertices returns the vertices of a loaded, validated file that status
// gives addresses for, each with the rule's config of its scale block.
// Each of status is "[VERTEX=]ADDR[,ADDR...]" (the VERTEX may be left out
// for a MonoVertex), and each of rates "[VERTEX=]N", the messages one
// replica processes a second (left out, the rule learns it). An error
// names the flag (--status, --replica-rate) and its value.
func Vertices(f *config.File, status, rates []string) ([]Vertex, error) {
	names, scales := []string{}, map[string]*config.Scale{}
	switch {
	case f.MonoVertex != nil:
		names = append(names, f.MonoVertex.Metadata.Name)
		scales[f.MonoVertex.Metadata.Name] = f.MonoVertex.Spec.Scale
	case f.Pipeline != nil:
		for _, v := range f.Pipeline.Spec.Vertices {
			names = append(names, v.Name)
			scales[v.Name] = v.Scale
		}
	}
	if len(status) == 0 {
		return nil, fmt.Errorf("--status is required: the replicas' addresses, [VERTEX=]HOST:PORT[,HOST:PORT...]")
	}
	vertex := func(flag, value string) (string, string, error) {
		name, rest, ok := strings.Cut(value, "=")
		if !ok {
			if f.MonoVertex == nil {
				return "", "", fmt.Errorf("%s (%q) needs VERTEX= for a pipeline (vertices: %s)", flag, value, strings.Join(names, ", "))
			}
			name, rest = f.MonoVertex.Metadata.Name, value
		}
		if _, ok := scales[name]; !ok {
			return "", "", fmt.Errorf("%s (%q): %q is not a vertex of the file (vertices: %s)", flag, value, name, strings.Join(names, ", "))
		}
		return name, rest, nil
	}
	byName := map[string]*Vertex{}
	var out []*Vertex
	for _, s := range status {
		name, list, err := vertex("--status", s)
		if err != nil {
			return nil, err
		}
		v := byName[name]
		if v == nil {
			v = &Vertex{Name: name, Scale: vertexconfig.Autoscale(scales[name])}
			byName[name] = v
			out = append(out, v)
		}
		for _, a := range strings.Split(list, ",") {
			if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
				return nil, fmt.Errorf("--status (%q): %q is not HOST:PORT", s, a)
			}
			v.Status = append(v.Status, a)
		}
	}
	for _, r := range rates {
		name, n, err := vertex("--replica-rate", r)
		if err != nil {
			return nil, err
		}
		rate, err := strconv.ParseFloat(n, 64)
		if err != nil || !(rate > 0) || rate > 1e12 {
			return nil, fmt.Errorf("--replica-rate (%q): %q must be a number of messages a second, more than 0", r, n)
		}
		v := byName[name]
		if v == nil {
			return nil, fmt.Errorf("--replica-rate (%q): vertex %q has no --status", r, name)
		}
		v.Scale.ReplicaRate = rate
	}
	vs := make([]Vertex, len(out))
	for i, v := range out {
		vs[i] = *v
	}
	return vs, nil
}
